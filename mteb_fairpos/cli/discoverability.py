"""``mteb-fairpos discoverability``: can every segment find its own document, at every position?"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import qdrant_common
from .options import (add_connection_arguments, add_device, add_max_length, add_model, add_output, add_quiet,
                      output_folder, positive_int)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "discoverability",
        help="recall@k and MRR of each segment's parent document, by segment position",
        description="Use every indexed segment (or the queries of --queries) as a query and report, by position, how "
        "often its document is found: calibrated vs. uncalibrated vectors, as a table, JSON and a PNG plot.",
    )
    add_connection_arguments(parser)
    add_max_length(parser)
    add_model(parser, note="here the query model, by default the one stored with the collection")
    add_device(parser)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--queries", default=None, help="JSONL of {doc_id, position, query} (default: the segments themselves)")
    source.add_argument("--input", default=None, help="the indexed documents (a JSONL or Parquet file, local or a URI "
                        "such as s3://bucket/docs.jsonl), if the collection stores no text")
    parser.add_argument("--ks", type=positive_int, nargs="+", default=[1, 5, 10], help="cut-offs for recall (default 1 5 10)")
    parser.add_argument("--depth", type=positive_int, default=None,
                        help="ranks searched for MRR, at least the largest --ks (default 100, or the largest --ks)")
    add_output(parser, default=Path("fairpos-output") / "discoverability-<collection>", what="output folder")
    add_quiet(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..integrations.qdrant import FairQdrantIndex, read_documents, read_queries

    if args.depth is not None and args.depth < max(args.ks):
        raise ValueError(f"--depth {args.depth} is below --ks {max(args.ks)}: the ranks searched must reach every cut-off.")
    depth = args.depth or max(100, *args.ks)
    out = Path(str(args.out).replace("<collection>", args.collection))
    try:  # the folder the name fills in, checked before the run as -o itself was
        output_folder(str(out))
    except argparse.ArgumentTypeError as err:
        raise ValueError(f"-o/--output: {err}.") from None
    queries = read_queries(args.queries) if args.queries else None
    documents = read_documents(args.input)[0] if args.input else None
    with qdrant_common.opened_store(args, existing=True) as opened:
        model, name = qdrant_common.model_for_collection(args, opened, documents=False)
        index = FairQdrantIndex(model, args.collection, opened, model_name=name)
        report = index.discoverability(queries=queries, documents=documents, ks=args.ks, depth=depth,
                                       show_progress=not args.quiet)
    paths = report.save(out)
    print(f"collection {report.collection!r} ({report.model}, calibration {report.calibration})")
    print(report.table())
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0
