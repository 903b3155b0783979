"""Splitting an input of any size into shards of records, validated before anything is encoded.

The driver of a distributed encode reads the input once, validating every record exactly as the
single-process `index` does, and cuts it into `InputShard` ranges: a byte offset and line count
in a JSONL file, a row range in a Parquet file. A worker then reads only its range
(`read_shard`), and the shard's name and fingerprint (a hash of the range's bytes or rows) let a
re-run recognise output that is already complete and refuse output made from other input.
Duplicate ids across files are found here, with counts, before any worker starts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...jsonl import BLANK, decode_line, raw_lines
from .records import Document, InputError, OnError, Problem, parse_document

INPUT_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class InputShard:
    """A range of records of one input file, encoded by one worker into one output shard."""

    file: str
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
        """What a shard file records about where its points came from."""
        return {"file": self.file, "first": self.first, "lines": self.lines, "documents": self.documents,
                "fingerprint": self.fingerprint}


@dataclass
class InputPlan:
    """An input cut into shards, with what was left out and why."""

    shards: list[InputShard]
    problems: list[Problem] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)
    """Ids that occur more than once (``on_error="skip"``: the first occurrence is kept), with their counts."""

    @property
    def documents(self) -> int:
        return sum(s.documents for s in self.shards)


def input_files(inputs: str | Path | Sequence[str | Path]) -> list[Path]:
    """The input files: given files, or the JSONL/Parquet files of given folders (sorted by name)."""
    items = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    files: list[Path] = []
    for item in map(Path, items):
        if item.is_dir():
            found = sorted(p for p in item.iterdir() if p.suffix.lower() in INPUT_SUFFIXES and not p.name.startswith("."))
            if not found:
                raise InputError(f"folder {str(item)!r} holds no JSONL or Parquet file "
                                 f"({', '.join(sorted(INPUT_SUFFIXES))}).")
            files.extend(found)
        elif item.is_file():
            files.append(item)
        else:
            raise FileNotFoundError(f"input {str(item)!r} does not exist.")
    if not files:
        raise InputError("no input given.")
    return files


def plan_input(inputs: str | Path | Sequence[str | Path], *, shard_size: int = 1000, on_error: OnError = "raise",
               format: str | None = None) -> InputPlan:
    """Validate every record and cut the input into shards of at most ``shard_size`` documents.

    ``on_error="raise"`` stops at the first invalid record and refuses duplicate ids (with their
    counts); ``"skip"`` leaves both out and reports them.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}.")
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}.")
    files = input_files(inputs)
    stems = Counter(f.stem for f in files)
    plan = InputPlan(shards=[])
    first_seen: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for number, path in enumerate(files):
        fmt = format or _format_of(path)
        label = path.stem if stems[path.stem] == 1 else f"{path.stem}-{number}"
        builder = _ShardBuilder(path, fmt, label, shard_size)
        for unit in _units(path, fmt):
            builder.add(unit)
            if unit.record is _NOTHING:
                continue
            try:
                if unit.malformed:
                    raise InputError(f"{unit.where}: malformed JSON ({unit.malformed}).")
                doc = parse_document(unit.record, unit.where)
            except InputError as err:
                if on_error == "raise":
                    raise
                plan.problems.append(_problem(unit, err))
                builder.skip(unit)
                continue
            counts[doc.doc_id] += 1
            if doc.doc_id in first_seen:
                if on_error == "skip":
                    plan.problems.append(Problem(unit.where, f"duplicate document id {doc.doc_id!r} (first seen at "
                                                             f"{first_seen[doc.doc_id]}); left out", doc.doc_id))
                    builder.skip(unit)
                continue
            first_seen[doc.doc_id] = unit.where
            builder.keep()
        plan.shards.extend(builder.finish())
    plan.duplicates = {doc_id: n for doc_id, n in counts.items() if n > 1}
    if plan.duplicates and on_error == "raise":
        raise InputError(_duplicates_message(plan.duplicates, first_seen))
    return plan


def read_shard(shard: InputShard) -> list[Document]:
    """The documents of one input shard, parsed as the plan validated them; refuses a changed input."""
    digest = hashlib.blake2b(digest_size=16)
    documents = []
    path = Path(shard.file)
    for unit in _units(path, shard.format, start=shard.start, first=shard.first, limit=shard.lines):
        digest.update(unit.raw)
        if unit.record is _NOTHING or unit.number in shard.skip:
            continue
        if unit.malformed:
            raise InputError(f"{unit.where}: {unit.malformed} (the input changed since it was planned?)")
        documents.append(parse_document(unit.record, unit.where))
    if digest.hexdigest() != shard.fingerprint or len(documents) != shard.documents:
        raise InputError(f"{path.name} from {_unit_name(shard.format)} {shard.first}: the input changed after the "
                         "run was planned (its bytes differ); re-run to plan it again.")
    return documents


# ---------------------------------------------------------------------------- internals
_NOTHING = object()


@dataclass
class _Unit:
    """One line or row of an input file: its raw bytes (for the fingerprint) and its record."""

    number: int
    position: int  # byte offset (JSONL) or row index (Parquet)
    raw: bytes
    record: Any
    malformed: str | None
    where: str


class _ShardBuilder:
    """Accumulates consecutive units into shards of ``size`` documents."""

    def __init__(self, path: Path, fmt: str, label: str, size: int) -> None:
        self.path, self.fmt, self.label, self.size = path, fmt, label, size
        self.shards: list[InputShard] = []
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
            self.shards.append(InputShard(
                file=str(self.path.resolve()), format=self.fmt, start=self.start, first=self.first, lines=self.lines,
                documents=self.documents, fingerprint=self.digest.hexdigest(),
                name=f"{self.label}-{self.first:09d}", skip=tuple(self.skipped)))
        self._reset()

    def finish(self) -> list[InputShard]:
        self._close()
        return [s for s in self.shards if s.documents]


def _units(path: Path, fmt: str, *, start: int = 0, first: int = 1, limit: int | None = None) -> Iterator[_Unit]:
    if fmt == "jsonl":
        for number, offset, raw in raw_lines(path, start=start, first_line=first, max_lines=limit):
            value, reason = decode_line(raw)
            yield _Unit(number, offset, raw, _NOTHING if value is BLANK else value, reason, f"{path.name} line {number}")
        return
    if fmt != "parquet":
        raise InputError(f"unknown input format {fmt!r}; use 'jsonl' or 'parquet'.")
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise InputError(f"{path.name}: not a readable Parquet file ({err}).") from None
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
                yield _Unit(row + 1, row, raw, record, None, f"{path.name} row {row + 1}")
            row += 1


def _format_of(path: Path) -> str:
    fmt = INPUT_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"cannot tell the format of {path.name!r} from its suffix; pass format='jsonl' or 'parquet'.")
    return fmt


def _unit_name(fmt: str) -> str:
    return "line" if fmt == "jsonl" else "row"


def _problem(unit: _Unit, err: InputError) -> Problem:
    message = str(err)
    reason = message[len(unit.where):].removeprefix(": ").lstrip() if message.startswith(unit.where) else message
    doc_id = unit.record.get("id") if isinstance(unit.record, dict) else None
    return Problem(unit.where, reason, None if doc_id is None else str(doc_id))


def _duplicates_message(duplicates: dict[str, int], first_seen: dict[str, str]) -> str:
    extra = sum(duplicates.values()) - len(duplicates)
    shown = sorted(duplicates.items(), key=lambda item: (-item[1], item[0]))[:5]
    listed = "; ".join(f"{doc_id!r} x{n} (first at {first_seen[doc_id]})" for doc_id, n in shown)
    more = f"; and {len(duplicates) - len(shown)} more" if len(duplicates) > len(shown) else ""
    return (f"{len(duplicates)} document id(s) occur more than once ({extra} extra record(s)): {listed}{more}. "
            "Every document needs its own id; fix the input, or skip the later copies (--skip-invalid).")
