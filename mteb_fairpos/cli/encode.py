"""``mteb-fairpos encode``: documents -> Parquet parts of calibrated points, in this process or on Ray."""

from __future__ import annotations

import argparse

from . import qdrant_common
from .options import (add_batch_size, add_device, add_engine_arguments, add_format, add_max_length, add_model, add_output,
                      add_quiet, add_report, output_location, positive_int)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "encode",
        help="embed documents (JSONL/Parquet files or folders) into Parquet parts, locally or on a Ray cluster",
        description="Embed every document as `index` does (same ids, vectors and position payloads) and write the "
        "points as Parquet parts for `mteb-fairpos load`. Parts are the unit of work and of resumption: "
        "re-running the same command skips complete parts.",
    )
    parser.add_argument("inputs", nargs="+",
                        help="JSONL or Parquet files, or folders of them (the `index` record format); local paths or "
                        "URIs such as s3://bucket/docs/ (credentials from the environment, e.g. AWS_ACCESS_KEY_ID)")
    add_output(parser, default=None, dest="output", aliases=(), kind=output_location,
               what="folder for the parts and their manifest.json: a local path or a URI (s3://bucket/parts)")
    parser.add_argument("-c", "--collection", required=True,
                        help="the collection the points are meant for (their ids are made for this name)")
    add_model(parser)
    parser.add_argument("--calibration", default=None,
                        help="calibration text form, e.g. b128_lhalf_a0.5, or 'none' (default: the model's own where it was "
                        "saved with one, else b128_lhalf_a0.5)")
    add_max_length(parser)
    add_device(parser, note="on Ray each actor's own GPU or CPU")
    parser.add_argument("--no-uncalibrated", dest="uncalibrated", action="store_false",
                        help="store only the calibrated document vector (default: both)")
    parser.add_argument("--late-chunks", action="store_true",
                        help="also store one late-chunking point per segment (mean-pooled models)")
    parser.add_argument("--no-store-text", dest="store_text", action="store_false",
                        help="do not store document / segment text in the payload")
    add_format(parser)
    parser.add_argument("--skip-invalid", action="store_true",
                        help="leave out invalid records and later copies of duplicate ids, and report them")
    add_batch_size(parser, default=32, unit="documents through the model")
    parser.add_argument("--part-size", type=positive_int, default=1000, help="documents per part (default 1000)")
    add_engine_arguments(parser, ray_does="a Ray Data pool of model actors, one part at a time", actor="model actor")
    add_report(parser, what="the run's")
    add_quiet(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.engine == "ray":  # before the heavy imports: a wrong address is reported within seconds
        from ..integrations.ray import runtime

        args.address = runtime.checked_address(args.address)
    from ..integrations.qdrant.encode import encode_to_parts
    from ..integrations.qdrant.encoding import ModelLoader
    from ..offline import MINILM_HUB_ID

    loader = ModelLoader(args.model or MINILM_HUB_ID, args.calibration, args.max_length, args.device)
    report = encode_to_parts(
        args.inputs, args.output, loader, args.collection, engine=args.engine, actors=args.actors,
        gpus_per_actor=args.gpus_per_actor, address=args.address, batch_size=args.batch_size,
        part_size=args.part_size, uncalibrated=args.uncalibrated, late_chunks=args.late_chunks,
        store_text=args.store_text, format=args.format, on_error="skip" if args.skip_invalid else "raise",
        show_progress=not args.quiet)
    return qdrant_common.print_report(report, args.report)
