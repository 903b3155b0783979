"""``mteb-fairpos segments``: how well each segment of one document survives in its embedding.

The papers' newspaper case study: join the segments with single spaces, embed the document
uncalibrated and calibrated, and print the cosine similarity of each document vector to each
segment's standalone (uncalibrated) vector, by position. The report is computed by
`mteb_fairpos.segment_report`; this command reads the arguments and prints it.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from ..fairness import min_max_ratio
from ..offline import minilm_path
from ..segment_report import SegmentReport, check_segments, read_segments, segment_report
from .options import add_calibration_arguments, add_device, add_max_length, add_model, calibration_from_args


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("segments", help="similarity of a multi-segment document to each segment, by position",
                                   description=__doc__)
    parser.add_argument("--segment", action="append", default=[], metavar="TEXT", help="a segment, in order (repeatable)")
    parser.add_argument("--file", type=Path, help="segments as a JSON list or JSONL lines (strings or objects with 'text')")
    add_model(parser)
    add_calibration_arguments(parser)
    add_device(parser)
    add_max_length(parser)
    parser.set_defaults(func=run)
    return parser


def format_report(report: SegmentReport) -> str:
    lines = ["position  uncalibrated  calibrated   change", "--------  ------------  ----------  -------"]
    for position, before, after in zip(report.positions, report.uncalibrated, report.calibrated):
        lines.append(f"{position:>8}  {before:>12.4f}  {after:>10.4f}  {after - before:>+7.4f}")
    before, after = min_max_ratio(report.uncalibrated), min_max_ratio(report.calibrated)
    lines.append(f"min/max   {_ratio(before):>12}  {_ratio(after):>10}")
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def run(args: argparse.Namespace) -> int:
    from ..model import FairSentenceTransformer, set_max_length

    segments = list(args.segment) + (read_segments(args.file) if args.file else [])
    check_segments(segments)  # before the model loads
    config = calibration_from_args(args)
    name = args.model or minilm_path()
    model = FairSentenceTransformer(name, config, **({"device": args.device} if args.device else {}))
    if args.max_length:
        set_max_length(model, args.max_length)
    report = segment_report(model, segments)
    print(f"model: {args.model or 'all-MiniLM-L6-v2 (offline)'}   calibration: {model.calibration}")
    print("cosine(document, standalone segment), segments embedded uncalibrated:")
    print(format_report(report))
    if report.truncated_positions:  # on stderr, as the command's other warnings
        warnings.warn(f"the model's maximum length cut segment(s) {report.truncated_positions}.", stacklevel=1)
    return 0
