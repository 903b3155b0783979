"""Reading JSONL input files line by line, so every caller can name the line that is wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def jsonl_lines(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """The non-blank lines of ``path``: ``(line number, value, None)``, or ``(line number, None, reason)``
    for a line that is not valid JSON or not UTF-8. Callers decide whether a bad line is an error or a
    reported skip; a bad byte spoils only its own line, which is read and decoded on its own."""
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield number, None, f"not UTF-8: {err.reason} at byte {err.start + 1} of the line"
                continue
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as err:
                yield number, None, f"{err.msg} at column {err.colno}"
