"""Input documents for the Qdrant index: parsing, validation and file readers.

A record is a mapping with an ``id`` and its segments in one of two forms:

* an ordered list of segments, each a string or ``{"text", "language"?, "id"?}``; the document
  text is the segments joined with a single space (docs/method.md#s2-2);
* a ``text`` plus segment character spans, either ``"segments": [{"start", "end",
  "language"?, "id"?}]`` or the shorthand ``"spans": [[start, end], ...]``; spans are
  half-open, in document order and must not overlap.

Optional top-level keys: ``language`` (default language of the segments) and ``metadata``
(a JSON object copied into the payload). The position of a segment is its 1-based index in
the list. Everything is validated before anything is embedded or written; a bad record raises
:class:`InputError` naming its line (JSONL) or row (Parquet), or with ``on_error="skip"`` is
left out and reported as a :class:`Problem`. Files are read, and ids checked, by :mod:`.input`.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...config import whole
from ...spans import join_segments

OnError = Literal["raise", "skip"]

RECORD_KEYS = ("id", "language", "metadata", "text", "segments", "spans")
SEGMENT_KEYS = ("text", "language", "id")
SPAN_KEYS = ("start", "end", "language", "id")


class InputError(ValueError):
    """A record (or input file) that cannot be indexed; the message says where and why."""


@dataclass(frozen=True)
class Segment:
    """One segment of a document: its 1-based position and character span in the document text."""

    position: int
    start: int
    end: int
    language: str | None = None
    segment_id: str | None = None


@dataclass(frozen=True)
class Document:
    """A validated document: the text that is embedded and its ordered segments."""

    doc_id: str
    text: str
    segments: tuple[Segment, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def segment_text(self, segment: Segment) -> str:
        return self.text[segment.start:segment.end]


@dataclass(frozen=True)
class Problem:
    """A record left out with ``on_error="skip"``: where it was and what was wrong."""

    where: str
    reason: str
    doc_id: str | None = None

    def __str__(self) -> str:
        """The location once: ``"f.jsonl line 3 (document 'y') segment 1: span ..."``."""
        return f"{self.where}{' ' if self.reason.startswith('(') else ': '}{self.reason}"

    def to_json(self) -> dict[str, str | None]:
        return {"where": self.where, "doc_id": self.doc_id, "reason": self.reason}


_INT64 = range(-2**63, 2**63)
"""The integers a payload keeps exactly (Qdrant stores 64-bit integers; a larger one became a rounded float)."""


def _json_value(value: Any, where: str, key: str) -> Any:
    """``value`` as a JSON value, the same in every store: a date or time as its ISO text (as Parquet gives them);
    anything a payload would keep another way per store (NaN, infinities, decimals, bytes, integers past 64 bits)
    refused by its key."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if value not in _INT64:
            raise InputError(f"{where}: {key} = {value} does not fit 64 bits; store it as text.")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{where}: {key} = {value} is not a JSON number; leave it out or store it as text.")
        return value
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, Mapping):
        if not all(isinstance(name, str) for name in value):
            raise InputError(f"{where}: {key} has keys that are not text.")
        return {name: _json_value(item, where, f"{key}.{name}") for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(item, where, f"{key}[{i}]") for i, item in enumerate(value)]
    raise InputError(f"{where}: {key} is a {type(value).__name__}, not a JSON value (text, number, true/false, null, "
                     "list or object); convert it, e.g. to text.")


def parse_document(record: Any, where: str = "record") -> Document:
    """Validate one record (see the module docstring) and build a :class:`Document`."""
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: expected a JSON object with 'id' and 'segments', got {type(record).__name__}.")
    doc_id = _doc_id(record.get("id"), where)
    where = f"{where} (document {doc_id!r})"
    check_keys(record, RECORD_KEYS, where, "record")
    default_language = _optional_str(record.get("language"), "language", where)
    metadata = record.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        raise InputError(f"{where}: 'metadata' must be an object, got {type(metadata).__name__}.")
    metadata = _json_value(metadata, where, "metadata")
    text = record.get("text")
    segments = record.get("segments")
    spans = record.get("spans")
    if segments is not None and spans is not None:
        raise InputError(f"{where}: give either 'segments' or 'spans', not both.")
    items = spans if spans is not None else segments
    if items is None or (isinstance(items, (list, tuple)) and len(items) == 0):
        raise InputError(f"{where}: the document has no segments; give a non-empty 'segments' list (or 'text' + 'spans').")
    if not isinstance(items, (list, tuple)):
        raise InputError(f"{where}: 'segments' must be a list, got {type(items).__name__}.")
    if text is None:
        if spans is not None:
            raise InputError(f"{where}: 'spans' need the document 'text'.")
        document = _from_segment_list(doc_id, items, default_language, dict(metadata), where)
    elif not isinstance(text, str):
        raise InputError(f"{where}: 'text' must be a string, got {type(text).__name__}.")
    else:
        valid_unicode(text, where, "the document 'text'")
        document = _from_spans(doc_id, text, items, default_language, dict(metadata), where, shorthand=spans is not None)
    first: dict[str, int] = {}
    for segment in document.segments:  # a segment id names one segment: search and discoverability report it
        name = segment.segment_id
        if name is not None and first.setdefault(name, segment.position) != segment.position:
            raise InputError(f"{where} segment {segment.position}: id {name!r} is segment {first[name]}'s too; "
                             "segment ids must differ within a document.")
    return document


def as_record(document: Document, where: str = "document") -> dict[str, Any]:
    """A hand-built :class:`Document` as the record it stands for, so that it is validated as records are.

    A segment's position is its place in the list; one that says otherwise is refused rather than renumbered.
    """
    if not isinstance(document.segments, (list, tuple)):
        raise InputError(f"{where}: 'segments' must be a tuple of Segment, got {type(document.segments).__name__}.")
    spans = []
    for place, segment in enumerate(document.segments, start=1):
        if not isinstance(segment, Segment):
            raise InputError(f"{where} segment {place}: expected a Segment, got {type(segment).__name__}.")
        if segment.position != place or isinstance(segment.position, bool):
            raise InputError(f"{where} segment {place}: its position is {segment.position!r}, but it is segment "
                             f"{place} of the document; positions are 1, 2, ... in the order of the segments.")
        start, end = (int(at) if whole(at) else at for at in (segment.start, segment.end))  # numpy's integers too
        spans.append({"start": start, "end": end, "language": segment.language, "id": segment.segment_id})
    return {"id": document.doc_id, "text": document.text, "segments": spans, "metadata": document.metadata}


def check_iterable_of_records(records: Any) -> None:
    """A string, path or single dict where a list of records belongs is a clear TypeError."""
    if isinstance(records, (str, bytes, Path)):
        raise TypeError(f"expected an iterable of records (dicts), got a {type(records).__name__}; "
                        "to index a file, use index_file(path) or read_documents(path).")
    if isinstance(records, Mapping):
        raise TypeError("expected an iterable of records, got a single record (a dict): wrap it in a list.")
    if not isinstance(records, Iterable):
        raise TypeError(f"expected an iterable of records (dicts), got {type(records).__name__}.")


def require_documents(documents: list[Document], problems: list[Problem], source: str) -> None:
    """Refuse an input with nothing to index, before a collection is created for it."""
    if documents:
        return
    reason = f"all {len(problems)} record(s) are invalid (first: {problems[0]})" if problems else "it holds no record"
    raise InputError(f"{source}: nothing to index: {reason}.")


# ---------------------------------------------------------------------------- internals
def _doc_id(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}: every document needs an 'id' (string or integer), got {value!r}.")
    text = valid_unicode(str(value), where, "the document 'id'")
    if not text.strip():
        raise InputError(f"{where}: the document 'id' is empty.")
    return text


def valid_unicode(text: str, where: str, what: str) -> str:
    """``text`` if it can be stored and tokenized: a lone surrogate (``\\ud800``) cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InputError(f"{where}: {what} holds a lone surrogate ({text[err.start]!r}) at character {err.start}; "
                         "texts must be valid Unicode (was a UTF-16 string decoded wrongly?).") from None
    return text


def check_keys(item: Mapping[str, Any], known: tuple[str, ...], where: str, what: str) -> None:
    """Refuse keys outside ``known``, suggesting the close one: a misspelt field would be read as absent."""
    unknown = [key for key in item if key not in known]
    if not unknown:
        return
    hints = [f"{key!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(str(key), known, n=1)) else repr(key)
             for key in unknown]
    extra = "; put other fields under 'metadata'" if what == "record" else ""
    raise InputError(f"{where}: unknown {what} key(s) {', '.join(hints)}; known: {', '.join(known)}{extra}.")


def _optional_str(value: Any, name: str, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    raise InputError(f"{where}: {name!r} must be a string, got {value!r}.")


def _segment_id(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}: segment 'id' must be a string or integer, got {value!r}.")
    return str(value)


def _from_segment_list(doc_id: str, items: list, default_language: str | None, metadata: dict, where: str) -> Document:
    texts: list[str] = []
    details: list[tuple[str | None, str | None]] = []
    for position, item in enumerate(items, start=1):
        here = f"{where} segment {position}"
        if isinstance(item, str):
            text, language, seg_id = item, default_language, None
        elif isinstance(item, Mapping):
            if "start" in item or "end" in item:
                raise InputError(f"{here}: has a character span but the document has no 'text'.")
            check_keys(item, SEGMENT_KEYS, here, "segment")
            text = item.get("text")
            if not isinstance(text, str):
                raise InputError(f"{here}: needs a 'text' string, got {text!r:.60}.")
            language = _optional_str(item.get("language"), "language", here) or default_language
            seg_id = _segment_id(item.get("id"), here)
        else:
            raise InputError(f"{here}: expected a string or an object with 'text', got {type(item).__name__}.")
        if not valid_unicode(text, here, "the segment text").strip():
            raise InputError(f"{here}: the segment text is empty.")
        texts.append(text)
        details.append((language, seg_id))
    text, spans = join_segments(texts)
    segments = tuple(Segment(position, start, end, language, seg_id)
                     for position, ((start, end), (language, seg_id)) in enumerate(zip(spans, details), start=1))
    return Document(doc_id, text, segments, metadata)


def _from_spans(doc_id: str, text: str, items: list, default_language: str | None, metadata: dict, where: str,
                *, shorthand: bool) -> Document:
    segments: list[Segment] = []
    previous_end = 0
    for position, item in enumerate(items, start=1):
        here = f"{where} segment {position}"
        language, seg_id = default_language, None
        if shorthand or isinstance(item, (list, tuple)):
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise InputError(f"{here}: a span must be [start, end], got {item!r:.60}.")
            start, end = item
        elif isinstance(item, Mapping):
            if "text" in item and "start" not in item:
                raise InputError(f"{here}: the document has a 'text', so segments must be character spans "
                                 "({'start', 'end'}); drop 'text' to give segment texts instead.")
            check_keys(item, SPAN_KEYS, here, "segment")
            start, end = item.get("start"), item.get("end")
            language = _optional_str(item.get("language"), "language", here) or default_language
            seg_id = _segment_id(item.get("id"), here)
        else:
            raise InputError(f"{here}: expected {{'start', 'end'}} or [start, end], got {type(item).__name__}.")
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"{here}: span {name} must be an integer, got {value!r}.")
        if start < 0 or end > len(text) or start >= end:
            raise InputError(f"{here}: span [{start}, {end}) lies outside the text (length {len(text)}) or is empty; "
                             "spans are half-open character offsets with 0 <= start < end <= len(text).")
        if start < previous_end:
            raise InputError(f"{here}: span [{start}, {end}) overlaps or precedes the previous segment (which ends at "
                             f"{previous_end}); spans must be in document order and must not overlap.")
        if not text[start:end].strip():
            raise InputError(f"{here}: span [{start}, {end}) covers only whitespace.")
        segments.append(Segment(position, start, end, language, seg_id))
        previous_end = end
    return Document(doc_id, text, tuple(segments), metadata)
