"""``mteb-fairpos load``: Parquet parts from ``encode`` -> a Qdrant server, cluster or local store."""

from __future__ import annotations

import argparse

from . import qdrant_common
from .options import (DEFAULT_STORE, add_batch_size, add_cluster_arguments, add_connection_arguments, add_quiet,
                      add_report, non_negative_int, positive_int)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "load",
        help="bulk-load the parts of `mteb-fairpos encode` into Qdrant (server, cluster or local)",
        description="Check every part and the collection before the first write, then upload the points with "
        "parallel streams and retries. Ids are deterministic: re-running a load rewrites the same points.",
    )
    parser.add_argument("parts", help="the folder `mteb-fairpos encode` wrote")
    add_connection_arguments(
        parser, collection_help="collection to load into (default: the one the parts were encoded for)")
    add_batch_size(parser, default=256, unit="points uploaded")
    parser.add_argument("--parallel", type=positive_int, default=None, help="upload streams to a server (default 1)")
    parser.add_argument("--retries", type=non_negative_int, default=3, help="retries of a failed upload batch (default 3)")
    add_cluster_arguments(parser)
    parser.add_argument("--on-disk-payload", action="store_true", default=None,
                        help="keep payloads on disk in a new collection (a server or Qdrant Edge; local mode keeps "
                             "them in memory)")
    parser.add_argument("--no-defer-indexing", dest="defer_indexing", action="store_false", default=None,
                        help="keep HNSW building on during the load (default: deferred for a collection the load creates)")
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip foreign or damaged files, files the manifest does not list and parts it lists "
                        "that are missing; report them and how much of the manifest was loaded (default: refuse)")
    parser.add_argument("--partial", action="store_true",
                        help="load a folder whose encode has not finished (no manifest.json)")
    add_report(parser, what="the load's")
    add_quiet(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..integrations.qdrant import store
    from ..integrations.qdrant.load import load_parts

    if args.on_disk_payload and args.url is None and store.embedded_backend(args.path or DEFAULT_STORE, args.backend) == "local":
        raise ValueError("--on-disk-payload: qdrant-client's local mode keeps payloads in memory; use the edge backend "
                         "or a server (--url).")
    with qdrant_common.opened_store(args) as opened:
        report = load_parts(
            args.parts, opened, args.collection, on_bad="skip" if args.skip_bad else "raise", partial=args.partial,
            batch_size=args.batch_size, parallel=args.parallel or 1, max_retries=args.retries,
            defer_indexing=args.defer_indexing, shard_number=args.shard_number,
            replication_factor=args.replication_factor, write_consistency_factor=args.write_consistency_factor,
            on_disk_payload=args.on_disk_payload, show_progress=not args.quiet)
    return qdrant_common.print_report(report, args.report)
