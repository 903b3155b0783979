"""``mteb-fairpos segments``: how well each segment of one document survives in its embedding.

The papers' newspaper case study: join the segments with single spaces, embed the document
uncalibrated and calibrated, and print the cosine similarity of each document vector to each
segment's standalone (uncalibrated) vector, by position.
"""

from __future__ import annotations

import argparse
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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

    ``model`` is a :class:`~mteb_fairpos.FairSentenceTransformer`; its plain ``encode`` is the
    uncalibrated model and ``encode_document`` the calibrated one.
    """
    if len(segments) < 2:
        raise ValueError("a multi-segment document needs at least two segments.")
    if any(not s.strip() for s in segments):
        raise ValueError("segments must not be empty.")
    document = " ".join(segments)
    parts = model.encode(segments, normalize_embeddings=True)
    plain = model.encode([document], normalize_embeddings=True)[0]
    fair = model.encode_document([document], normalize_embeddings=True)[0]
    return SegmentReport(
        positions=list(range(1, len(segments) + 1)),
        uncalibrated=parts @ plain,
        calibrated=parts @ fair,
        truncated_positions=truncated_segments(model, segments),
    )


def truncated_segments(model, segments: list[str]) -> list[int]:
    """1-based positions of segments that the model's maximum length cuts, wholly or partly."""
    document = " ".join(segments)
    encoded = model.tokenizer(document, truncation=True, max_length=model.max_seq_length, return_offsets_mapping=True)
    covered = max((end for _, end in encoded["offset_mapping"]), default=0)
    cut, start = [], 0
    for position, segment in enumerate(segments, start=1):
        end = start + len(segment)
        if end > covered:
            cut.append(position)
        start = end + 1
    return cut


def format_report(report: SegmentReport) -> str:
    lines = ["position  uncalibrated  calibrated   change", "--------  ------------  ----------  -------"]
    for position, before, after in zip(report.positions, report.uncalibrated, report.calibrated):
        lines.append(f"{position:>8}  {before:>12.4f}  {after:>10.4f}  {after - before:>+7.4f}")
    spread = lambda values: float(values.min() / values.max()) if values.max() > 0 else float("nan")  # noqa: E731
    lines.append(f"min/max   {spread(report.uncalibrated):>12.4f}  {spread(report.calibrated):>10.4f}")
    if report.truncated_positions:
        lines.append(f"warning: the model's maximum length cut segment(s) {report.truncated_positions}.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..model import FairSentenceTransformer, TruncationWarning

    segments = list(args.segment) + (read_segments(args.file) if args.file else [])
    model = FairSentenceTransformer(args.model or minilm_path(), calibration_from_args(args))
    with warnings.catch_warnings():  # truncation is reported below, per segment
        warnings.simplefilter("ignore", TruncationWarning)
        report = segment_report(model, segments)
    print(f"model: {args.model or 'all-MiniLM-L6-v2 (offline)'}   calibration: {model.calibration}")
    print("cosine(document, standalone segment), segments embedded uncalibrated:")
    print(format_report(report))
    return 0
