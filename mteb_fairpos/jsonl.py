"""Reading JSONL input files line by line, so every caller can name the line that is wrong."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def jsonl_lines(path: Path, *, start: int = 0, first_line: int = 1,
                max_lines: int | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """The non-blank lines of ``path``: ``(line number, value, None)``, or ``(line number, None, reason)``
    for a line that is not valid JSON or not UTF-8. Callers decide whether a bad line is an error or a
    reported skip; a bad byte spoils only its own line, which is read and decoded on its own.

    ``start`` (a byte offset where line ``first_line`` begins) and ``max_lines`` read one range of a
    large file, as a worker encoding one range of it does."""
    with Path(path).open("rb") as handle:
        handle.seek(start)
        for number, _, raw in raw_lines(handle, start=start, first_line=first_line, max_lines=max_lines):
            value, reason = decode_line(raw)
            if value is not BLANK:
                yield number, value, reason


BLANK = object()
"""What `decode_line` returns for a line with nothing but whitespace (``null`` is a value)."""


def raw_lines(handle: IO[bytes], *, start: int = 0, first_line: int = 1,
              max_lines: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, raw bytes)`` of every line of a binary ``handle`` positioned at byte
    ``start``, blank ones included (any readable stream: a local file or an object-storage reader)."""
    offset = start
    for count, raw in enumerate(handle):
        if max_lines is not None and count >= max_lines:
            return
        yield first_line + count, offset, raw
        offset += len(raw)


def decode_line(raw: bytes) -> tuple[Any, str | None]:
    """``(value, None)``, ``(None, reason)`` for a bad line, or ``(BLANK, None)`` for a blank one."""
    try:
        line = raw.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark (Windows tools write one; cat keeps it)
    except UnicodeDecodeError as err:
        return None, f"not UTF-8: {err.reason} at byte {err.start + 1} of the line"
    if not line.strip():
        return BLANK, None
    try:
        return loads(line), None
    except json.JSONDecodeError as err:
        whole = " (the file looks like one JSON document over many lines; JSON Lines holds one record a line)" \
            if line.strip() in ("[", "{") else ""
        return None, f"{err.msg} at column {err.colno}{whole}"
    except DuplicateKey as err:
        return None, str(err)


class DuplicateKey(ValueError):
    """An object that gives one key twice: JSON parsers keep one of the values and drop the other unseen."""


def loads(text: str) -> Any:
    """``json.loads`` that refuses an object with a repeated key instead of keeping only its last value."""
    return json.loads(text, object_pairs_hook=_unique)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        repeated = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise DuplicateKey(f"the key {repeated!r} appears twice in one object (only one of its values would be kept)")
    return found
