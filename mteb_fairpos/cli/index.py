"""``mteb-fairpos index``: index multi-segment documents into Qdrant with position payloads."""

from __future__ import annotations

import argparse
import logging

from . import qdrant_common
from .options import (add_batch_size, add_cluster_arguments, add_connection_arguments, add_device, add_format, add_max_length,
                      add_model, add_quiet, add_report, non_negative_int, positive_int)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "index",
        help="index documents (JSONL/Parquet) into a Qdrant collection",
        description="Embed every document with calibrated (and uncalibrated) attention and upsert it into Qdrant "
        "with its segment layout. Re-running the same command writes nothing new and resumes a killed run.",
    )
    parser.add_argument("input", help="JSONL or Parquet file of documents (record format: docs/qdrant.md, section Input)")
    add_connection_arguments(parser)
    add_max_length(parser)
    add_model(parser, note="for an existing collection, the model stored with it")
    parser.add_argument("--calibration", default=None,
                        help="calibration text form, e.g. b128_lhalf_a0.5, or 'none' (default: the collection's, else the "
                        "model's own where it was saved with one, else b128_lhalf_a0.5)")
    add_device(parser)
    parser.add_argument("--no-uncalibrated", dest="uncalibrated", action="store_const", const=False, default=None,
                        help="store only the calibrated document vector (default: both, or as the collection has it)")
    parser.add_argument("--late-chunks", dest="late_chunks", action="store_const", const=True, default=None,
                        help="also store one late-chunking point per segment (mean-pooled models)")
    add_format(parser)
    parser.add_argument("--skip-invalid", action="store_true",
                        help="skip invalid records and report them instead of stopping at the first one")
    parser.add_argument("--no-store-text", dest="store_text", action="store_false", default=None,
                        help="do not store document / segment text in the payload (default: as the existing "
                        "collection does; a new one stores it)")
    add_batch_size(parser, default=32, unit="documents through the model")
    parser.add_argument("--upsert-batch-size", type=positive_int, default=256, help="points per upsert request (default 256)")
    parser.add_argument("--retries", type=non_negative_int, default=3, help="retries of a failed upsert (default 3)")
    add_cluster_arguments(parser)
    add_report(parser, what="the run's")
    add_quiet(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    logging.getLogger("mteb_fairpos.integrations.qdrant").setLevel(logging.ERROR)  # truncation is in the summary
    # validate the whole input and the calibration before connecting, loading the model or writing anything
    from ..config import CalibrationConfig
    from ..integrations.qdrant import FairQdrantIndex
    from ..integrations.qdrant.input import scan_file

    if args.calibration not in (None, "none"):
        CalibrationConfig.parse(args.calibration)
    scan = scan_file(args.input, on_error="skip" if args.skip_invalid else "raise", format=args.format)
    with qdrant_common.opened_store(args) as opened:
        model, name = qdrant_common.model_for_collection(args, opened, documents=True)
        index = FairQdrantIndex(model, args.collection, opened, model_name=name)
        report = index.index_scan(
            scan, uncalibrated=args.uncalibrated, late_chunks=args.late_chunks,
            store_text=args.store_text, batch_size=args.batch_size, upsert_batch_size=args.upsert_batch_size,
            retries=args.retries, show_progress=not args.quiet, shard_number=args.shard_number,
            replication_factor=args.replication_factor, write_consistency_factor=args.write_consistency_factor,
        )
    return qdrant_common.print_report(report, args.report)
