"""``mteb-fairpos copy``: a collection, point for point, from one embedded store into another
(by default a local-mode folder into a new Qdrant Edge one)."""

from __future__ import annotations

import argparse

from . import qdrant_common
from .options import add_batch_size, add_quiet, add_report


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "copy",
        help="copy a collection from one embedded store into another (local mode -> Qdrant Edge)",
        description="Copy every point (ids, vectors, payloads) of a collection. The target collection is created "
        "with the source's settings, or must match them; nothing is written otherwise.",
    )
    parser.add_argument("source", help="folder of the store to copy from (opened with the engine that holds it)")
    parser.add_argument("target", help="folder of the store to copy into")
    parser.add_argument("-c", "--collection", required=True, help="the collection to copy")
    parser.add_argument("--target-backend", choices=("edge", "local"), default="edge",
                        help="engine of the target store (default: edge)")
    add_batch_size(parser, default=256, unit="points written")
    add_report(parser, what="the copy's")
    add_quiet(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    import os

    from ..integrations.qdrant import store
    from ..integrations.qdrant.copy import copy_collection

    if args.target == ":memory:":  # the copy would be gone when the command ends
        raise ValueError("the target ':memory:' keeps nothing after the command; give a folder.")
    if not store.holds_store(args.source):
        raise FileNotFoundError(f"no store at {args.source!r} to copy from (a folder holding Qdrant Edge's "
                                "<collection>.collection.json or local mode's meta.json).")
    if os.path.realpath(args.source) == os.path.realpath(args.target):  # a link to the source is the source
        raise ValueError("the source and the target are the same folder; copy into a new one.")
    qdrant_common.check_collection(args.collection, args.target_backend)
    with store.open_store(args.source) as source, qdrant_common.removed_if_failed(
            args.target, lambda: store.open_store(args.target, backend=args.target_backend)) as target:
        report = copy_collection(source, target, args.collection, batch_size=args.batch_size,
                                 show_progress=not args.quiet)
    return qdrant_common.print_report(report, args.report)
