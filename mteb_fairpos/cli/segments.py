"""``mteb-fairpos segments``: how well each segment of one document survives in its embedding.

The papers' newspaper case study: join the segments with single spaces, embed the document
uncalibrated and calibrated, and print the cosine similarity of each document vector to each
segment's standalone (uncalibrated) vector, by position.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..fairness import min_max_ratio
from ..jsonl import jsonl_lines
from ..offline import minilm_path
from .common import add_model_arguments, calibration_from_args


@dataclass(frozen=True)
class SegmentReport:
    """Per-position similarities of one document to its segments."""

    positions: list[int]
    uncalibrated: np.ndarray
    calibrated: np.ndarray
    truncated_positions: list[int]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("segments", help="similarity of a multi-segment document to each segment, by position",
                                   description=__doc__)
    parser.add_argument("--segment", action="append", default=[], metavar="TEXT", help="a segment, in order (repeatable)")
    parser.add_argument("--file", type=Path, help="segments as a JSON list or JSONL lines (strings or objects with 'text')")
    add_model_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def read_segments(path: Path) -> list[str]:
    """Segments from a JSON list or JSONL file; items are strings or objects with a 'text' field."""
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a JSON or JSONL file of segments.")
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist.")
    if path.suffix == ".jsonl":
        items = []
        for number, item, malformed in jsonl_lines(path):
            if malformed:
                raise ValueError(f"{path}:{number}: not valid JSON ({malformed}).")
            items.append(item)
    else:
        items = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a JSON list of segments.")
    texts = []
    for number, item in enumerate(items, start=1):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise ValueError(f"{path}: segment {number} has no text (expected a string or an object with 'text').")
        texts.append(text)
    return texts


def segment_report(model, segments: list[str]) -> SegmentReport:
    """Cosine similarity of the document to each standalone segment, uncalibrated and calibrated.

    ``model`` is a :class:`~mteb_fairpos.FairSentenceTransformer`. Both document vectors come from
    ``encode_document`` (same prompt), once with calibration off, so the change is calibration's
    alone; the standalone segments go through the uncalibrated ``encode_document`` too. Truncation
    is judged on the exact model input, prompt and special tokens included.
    """
    from ..segmented import COVERAGE_FULL, encode_segmented

    if len(segments) < 2:
        raise ValueError("a multi-segment document needs at least two segments.")
    if any(not s.strip() for s in segments):
        raise ValueError("segments must not be empty.")
    document, spans, start = " ".join(segments), [], 0
    for segment in segments:
        spans.append((start, start + len(segment)))
        start += len(segment) + 1
    plain, fair = (encode_segmented(model, [document], [spans], calibrated=mode) for mode in (False, True))
    parts = encode_segmented(model, segments, [[(0, len(s))] for s in segments], calibrated=False).vectors
    return SegmentReport(
        positions=list(range(1, len(segments) + 1)),
        uncalibrated=_unit(parts) @ _unit(plain.vectors)[0],
        calibrated=_unit(parts) @ _unit(fair.vectors)[0],
        truncated_positions=[p for p, c in enumerate(fair.layouts[0].coverage, start=1) if c != COVERAGE_FULL],
    )


def _unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=-1, keepdims=True), 1e-12)


def format_report(report: SegmentReport) -> str:
    lines = ["position  uncalibrated  calibrated   change", "--------  ------------  ----------  -------"]
    for position, before, after in zip(report.positions, report.uncalibrated, report.calibrated):
        lines.append(f"{position:>8}  {before:>12.4f}  {after:>10.4f}  {after - before:>+7.4f}")
    before, after = min_max_ratio(report.uncalibrated), min_max_ratio(report.calibrated)
    lines.append(f"min/max   {_ratio(before):>12}  {_ratio(after):>10}")
    if report.truncated_positions:
        lines.append(f"warning: the model's maximum length cut segment(s) {report.truncated_positions}.")
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def run(args: argparse.Namespace) -> int:
    from ..model import FairSentenceTransformer

    segments = list(args.segment) + (read_segments(args.file) if args.file else [])
    model = FairSentenceTransformer(args.model or minilm_path(), calibration_from_args(args),
                                    **({"device": args.device} if args.device else {}))
    if args.max_length:
        model.max_seq_length = args.max_length
    report = segment_report(model, segments)
    print(f"model: {args.model or 'all-MiniLM-L6-v2 (offline)'}   calibration: {model.calibration}")
    print("cosine(document, standalone segment), segments embedded uncalibrated:")
    print(format_report(report))
    return 0
