"""The one reader of input documents: JSONL and Parquet, a file or a folder, local or object storage.

Every route from documents to points starts here: ``index`` and the Python API, ``encode`` on one
machine or a Ray cluster, and ``discoverability --input``. `scan_input` reads the input once,
validating every record with `records.parse_document`, counting document ids (the one place
where input ids are checked: a duplicate is refused with its counts, or left out and reported),
and cuts it into `InputRange` s: a byte offset and line count in a JSONL file, a row range in a
Parquet file. `read_range` reads one range again (a worker reads only its own) and refuses it if
its bytes changed since the scan (a fingerprint of the range). Paths may be local or URIs
(``s3://bucket/docs/``: see `storage`); messages name the file and its line or row.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow.fs as pafs

from ...jsonl import BLANK, decode_line, raw_lines
from .listing import Listing
from .records import Document, InputError, OnError, Problem, check_iterable_of_records, parse_document, require_documents
from .storage import Location, locate

INPUT_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
INDEX_WINDOW = 1024
"""Documents ``index`` reads and embeds at once, sorted by length: a range, as an ``encode`` part is."""


@dataclass(frozen=True)
class InputRange:
    """A run of consecutive records of one input file: one worker's unit of work and one output file."""

    file: str
    """A local absolute path or a URI."""
    format: str
    start: int
    """JSONL: byte offset of the range's first line; Parquet: index of its first row."""
    first: int
    """1-based line (JSONL) or row (Parquet) number of the first record, for messages."""
    lines: int
    """Lines (blank ones included) or rows the range covers."""
    documents: int
    """Valid records in the range (``skip`` left out)."""
    fingerprint: str
    name: str
    skip: tuple[int, ...] = ()
    """Line or row numbers left out: invalid records or later duplicates (``on_error="skip"``)."""

    def source(self) -> dict[str, Any]:
        """What an encoded file records about where its points came from."""
        return {"file": self.file, "first": self.first, "lines": self.lines, "documents": self.documents,
                "fingerprint": self.fingerprint}


@dataclass
class InputScan:
    """What one validating pass over the input found: its ranges, and what was left out and why."""

    ranges: list[InputRange]
    problems: Listing[Problem] = field(default_factory=Listing)
    """Records left out (``on_error="skip"``): counted, the first few in memory, the rest on disk."""
    duplicates: dict[str, int] = field(default_factory=dict)
    """Ids that occur more than once (``on_error="skip"``: the first occurrence is kept), with their counts."""
    unread: list[str] = field(default_factory=list)
    """Files of the input folders that are not JSONL or Parquet by their suffix (hidden ones aside): not read."""

    @property
    def documents(self) -> int:
        return sum(r.documents for r in self.ranges)


def input_items(inputs: Any) -> list[str | Path]:
    """``inputs`` (one file, folder or URI, or a list of them) as a list, read once; anything else is named."""
    if isinstance(inputs, (str, os.PathLike)):
        return [inputs]
    items = list(inputs) if isinstance(inputs, Iterable) and not isinstance(inputs, (bytes, Mapping)) else None
    if items is None or not all(isinstance(item, (str, os.PathLike)) for item in items):
        raise TypeError(f"inputs are a file, folder or URI, or a list of them; got {inputs!r:.80}.")
    return items


def input_files(inputs: str | Path | Sequence[str | Path]) -> tuple[list[Location], list[str]]:
    """The input files (given files, or the JSONL/Parquet files of given folders, sorted by name), and the other
    files of those folders, which are not read (hidden ones aside)."""
    items = input_items(inputs)
    files: list[Location] = []
    unread: list[str] = []
    for item in map(locate, items):
        kind = item.kind()
        if kind == pafs.FileType.Directory:
            visible = [f for f in item.files() if not f.name.startswith(".")]
            found = [f for f in visible if _suffix(f.name) in INPUT_SUFFIXES]
            if not found:
                raise InputError(f"folder {str(item)!r} holds no JSONL or Parquet file "
                                 f"({', '.join(sorted(INPUT_SUFFIXES))}).")
            files.extend(found)
            unread.extend(f.uri for f in visible if _suffix(f.name) not in INPUT_SUFFIXES)
        elif kind == pafs.FileType.File:
            files.append(item)
        else:
            raise FileNotFoundError(f"input {str(item)!r} does not exist.")
    if not files:
        raise InputError("no input given.")
    seen: dict[tuple[str, str], str] = {}
    for file in files:  # the same file twice would be encoded twice, under the same point ids
        key = (file.filesystem.type_name, os.path.realpath(file.path) if file.local else file.path)
        if key in seen:
            raise InputError(f"input {file.uri!r} is {seen[key]!r} again (given twice, through a link, or inside a folder given too); "
                             "give each file once.")
        seen[key] = file.uri
    return files, unread


def scan_input(inputs: str | Path | Sequence[str | Path], *, range_size: int = 1000, on_error: OnError = "raise",
               format: str | None = None) -> InputScan:
    """Validate every record and cut the input into ranges of at most ``range_size`` documents.

    ``on_error="raise"`` stops at the first invalid record and refuses duplicate ids (with their
    counts); ``"skip"`` leaves both out and reports them.
    """
    if range_size < 1:
        raise ValueError(f"range_size must be >= 1, got {range_size}.")
    checker = _Checker(on_error)
    files, unread = input_files(inputs)
    stems = Counter(_stem(f.name) for f in files)
    ranges: list[InputRange] = []
    for number, location in enumerate(files):
        fmt = format or format_of(location.name)
        stem = _stem(location.name)
        builder = _RangeBuilder(location, fmt, stem if stems[stem] == 1 else f"{stem}-{number}", range_size)
        for unit in _units(location, fmt):
            builder.add(unit)
            if unit.record is BLANK:
                continue
            if checker.check(unit) is None:
                builder.skip(unit)
            else:
                builder.keep()
        ranges.extend(builder.finish())
    checker.finish()
    return InputScan(ranges, checker.problems, checker.duplicates(), unread)


def read_range(span: InputRange) -> list[Document]:
    """The documents of one range, parsed as the scan validated them; refuses a changed input."""
    digest = hashlib.blake2b(digest_size=16)
    documents = []
    location = locate(span.file)
    for unit in _units(location, span.format, start=span.start, first=span.first, limit=span.lines):
        digest.update(unit.raw)
        if unit.record is BLANK or unit.number in span.skip:
            continue
        if unit.malformed:
            raise InputError(f"{unit.where}: {unit.malformed} (the input changed since it was scanned?)")
        documents.append(parse_document(unit.record, unit.where))
    if digest.hexdigest() != span.fingerprint or len(documents) != span.documents:
        raise InputError(f"{location.name} from {'line' if span.format == 'jsonl' else 'row'} {span.first}: the input "
                         "changed after the run was planned (its bytes differ); re-run to scan it again.")
    return documents


def scan_file(path: str | Path, *, on_error: OnError = "raise", format: str | None = None,
              range_size: int = INDEX_WINDOW) -> InputScan:
    """`scan_input` of one file, as ``index`` takes it: a folder, a missing file or nothing to index is refused."""
    location = _one_file(path)
    scan = scan_input(location.uri, range_size=range_size, on_error=on_error, format=format)
    if not scan.ranges:
        require_documents([], scan.problems, str(location))
    return scan


def read_documents(path: str | Path, *, on_error: OnError = "raise",
                   format: str | None = None) -> tuple[list[Document], list[Problem]]:
    """Read and validate a JSONL or Parquet file (``format`` from the suffix unless given), all in memory."""
    location = _one_file(path)
    checker = _Checker(on_error)
    documents = [doc for unit in _units(location, format or format_of(location.name))
                 if unit.record is not BLANK and (doc := checker.check(unit)) is not None]
    checker.finish()
    return documents, list(checker.problems)


def parse_documents(records: Iterable[Any], *, on_error: OnError = "raise",
                    source: str = "record") -> tuple[list[Document], list[Problem]]:
    """Validate records given in memory (the Python API's input), with the same id checks as a file."""
    check_iterable_of_records(records)
    checker = _Checker(on_error)
    documents = [doc for number, record in enumerate(records, start=1)
                 if (doc := checker.check(_Unit(number, number - 1, b"", record, None, f"{source} {number}")))
                 is not None]
    checker.finish()
    return documents, list(checker.problems)


def format_of(name: str) -> str:
    """``jsonl`` or ``parquet`` from a file name's suffix."""
    fmt = INPUT_SUFFIXES.get(_suffix(name))
    if fmt is None:
        raise InputError(f"cannot tell the format of {name!r} from its suffix; pass format='jsonl' or 'parquet' (--format on the command line).")
    return fmt


# ---------------------------------------------------------------------------- internals
@dataclass
class _Unit:
    """One line or row of an input file: its raw bytes (for the fingerprint) and its record."""

    number: int
    position: int  # byte offset (JSONL) or row index (Parquet)
    raw: bytes
    record: Any
    malformed: str | None
    where: str


class _Checker:
    """Validates records one by one and counts their ids: the one place input ids are checked."""

    def __init__(self, on_error: OnError) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}.")
        self.on_error = on_error
        self.problems: Listing[Problem] = Listing()
        self.first_seen: dict[str, str] = {}
        self.copies: Counter[str] = Counter()  # later copies of an id, so only duplicates take memory twice

    def check(self, unit: _Unit) -> Document | None:
        """The unit's document, or None when it is left out (invalid, or a later copy of an id)."""
        try:
            if unit.malformed:
                raise InputError(f"{unit.where}: malformed JSON ({unit.malformed}).")
            doc = parse_document(unit.record, unit.where)
        except InputError as err:
            if self.on_error == "raise":
                raise
            self.problems.append(_problem(unit, err))
            return None
        first = self.first_seen.setdefault(doc.doc_id, unit.where)
        if first == unit.where:
            return doc
        self.copies[doc.doc_id] += 1
        if self.on_error == "skip":
            self.problems.append(Problem(unit.where, f"duplicate document id {doc.doc_id!r} (first seen at {first}); "
                                                     "left out", doc.doc_id))
        return None

    def duplicates(self) -> dict[str, int]:
        return {doc_id: 1 + n for doc_id, n in self.copies.items()}

    def finish(self) -> None:
        """With ``on_error="raise"``, refuse duplicate ids, all of them counted in one message."""
        duplicates = self.duplicates()
        if not duplicates or self.on_error != "raise":
            return
        extra = sum(duplicates.values()) - len(duplicates)
        shown = sorted(duplicates.items(), key=lambda item: (-item[1], item[0]))[:5]
        listed = "; ".join(f"{doc_id!r} x{n} (first at {self.first_seen[doc_id]})" for doc_id, n in shown)
        more = f"; and {len(duplicates) - len(shown)} more" if len(duplicates) > len(shown) else ""
        raise InputError(f"{len(duplicates)} document id(s) occur more than once ({extra} extra record(s)): {listed}"
                         f"{more}. Every document needs its own id; fix the input, or skip the later copies "
                         "(--skip-invalid).")


class _RangeBuilder:
    """Accumulates consecutive units of one file into ranges of ``size`` documents."""

    def __init__(self, location: Location, fmt: str, label: str, size: int) -> None:
        self.file = location.path if location.local else location.uri
        self.fmt, self.label, self.size = fmt, label, size
        self.ranges: list[InputRange] = []
        self._reset()

    def _reset(self) -> None:
        self.start: int | None = None
        self.first = 0
        self.lines = 0
        self.documents = 0
        self.skipped: list[int] = []
        self.digest = hashlib.blake2b(digest_size=16)

    def add(self, unit: _Unit) -> None:
        if self.start is None:
            self.start, self.first = unit.position, unit.number
        self.lines += 1
        self.digest.update(unit.raw)

    def skip(self, unit: _Unit) -> None:
        self.skipped.append(unit.number)

    def keep(self) -> None:
        self.documents += 1
        if self.documents == self.size:
            self._close()

    def _close(self) -> None:
        if self.start is not None and (self.documents or self.skipped):
            self.ranges.append(InputRange(
                file=self.file, format=self.fmt, start=self.start, first=self.first, lines=self.lines,
                documents=self.documents, fingerprint=self.digest.hexdigest(),
                name=f"{self.label}-{self.first:09d}", skip=tuple(self.skipped)))
        self._reset()

    def finish(self) -> list[InputRange]:
        self._close()
        return [r for r in self.ranges if r.documents]


def _units(location: Location, fmt: str, *, start: int = 0, first: int = 1, limit: int | None = None) -> Iterator[_Unit]:
    if fmt == "jsonl":
        with location.reader(start) as handle:
            for number, offset, raw in raw_lines(handle, start=start, first_line=first, max_lines=limit):
                value, reason = decode_line(raw)
                yield _Unit(number, offset, raw, value, reason, f"{location.name} line {number}")
        return
    if fmt != "parquet":
        raise InputError(f"unknown input format {fmt!r}; use 'jsonl' or 'parquet'.")
    import pyarrow.parquet as pq

    with location.opened() as handle:
        try:
            parquet = pq.ParquetFile(handle)
        except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise InputError(f"{location.name}: not a readable Parquet file ({err}).") from None
        row = 0
        for group in range(parquet.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            if row + rows <= start:
                row += rows
                continue
            for record in parquet.read_row_group(group).to_pylist():
                if row >= start:
                    if limit is not None and row >= start + limit:
                        return
                    record = {k: v for k, v in record.items() if v is not None}
                    raw = json.dumps(record, sort_keys=True, default=str).encode("utf-8")
                    yield _Unit(row + 1, row, raw, record, None, f"{location.name} row {row + 1}")
                row += 1


def _one_file(path: str | Path) -> Location:
    location = locate(path)
    kind = location.kind()
    if kind == pafs.FileType.Directory:
        raise InputError(f"{str(location)!r} is a folder; give a JSONL or Parquet file of documents.")
    if kind != pafs.FileType.File:
        raise FileNotFoundError(f"input file {str(location)!r} does not exist.")
    return location


def _suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def _stem(name: str) -> str:
    return PurePosixPath(name).stem


def _problem(unit: _Unit, err: InputError) -> Problem:
    message = str(err)
    reason = message[len(unit.where):].removeprefix(": ").lstrip() if message.startswith(unit.where) else message
    doc_id = unit.record.get("id") if isinstance(unit.record, Mapping) else None
    return Problem(unit.where, reason, None if doc_id is None else str(doc_id))
