"""How well each segment of one document survives in its embedding: the papers' newspaper case
study as a Python API (``mteb-fairpos segments`` prints it).

The segments are joined with single spaces (`join_segments`); the document is embedded once
uncalibrated and once calibrated, and each document vector is compared (cosine) with each
segment's standalone, uncalibrated vector, by position.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .jsonl import jsonl_lines, loads
from .spans import join_segments


@dataclass(frozen=True)
class SegmentReport:
    """Per-position similarities of one document to its segments."""

    positions: list[int]
    uncalibrated: np.ndarray
    calibrated: np.ndarray
    truncated_positions: list[int]


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
        try:
            items = loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:  # malformed JSON, or a repeated key
            raise ValueError(f"{path}: not a JSON list of segments ({err}); a file of one segment a line is .jsonl.") from None
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a JSON list of segments.")
    texts = []
    for number, item in enumerate(items, start=1):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise ValueError(f"{path}: segment {number} has no text (expected a string or an object with 'text').")
        texts.append(text)
    return texts


def check_segments(segments: list[str]) -> None:
    """Refuse what :func:`segment_report` cannot report on (before a model is loaded for it)."""
    if len(segments) < 2:
        raise ValueError(f"a multi-segment document needs at least two segments, got {len(segments)}.")
    empty = [position for position, text in enumerate(segments, start=1) if not text.strip()]
    if empty:
        raise ValueError(f"segments must not be empty: segment {', '.join(map(str, empty))} "
                         f"{'is' if len(empty) == 1 else 'are'}.")


def segment_report(model: Any, segments: list[str]) -> SegmentReport:
    """Cosine similarity of the document to each standalone segment, uncalibrated and calibrated.

    ``model`` is a :class:`~mteb_fairpos.FairSentenceTransformer`. Both document vectors come from
    ``encode_document`` (same prompt), once with calibration off, so the change is calibration's
    alone; the standalone segments go through the uncalibrated ``encode_document`` too. Truncation
    is judged on the exact model input, prompt and special tokens included.
    """
    from .segmented import COVERAGE_FULL, encode_segmented

    check_segments(segments)
    document, spans = join_segments(segments)
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
