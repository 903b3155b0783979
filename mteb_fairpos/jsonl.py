"""Reading JSONL input files line by line, so every caller can name the line that is wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def jsonl_lines(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """The non-blank lines of ``path``: ``(line number, value, None)``, or ``(line number, None, reason)``
    for a line that is not valid JSON. Callers decide whether a bad line is an error or a reported skip."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as err:
                yield number, None, f"{err.msg} at column {err.colno}"
