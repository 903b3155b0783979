"""Per-document lists of a run (truncated documents, records left out) whose memory does not grow.

An archive of a million documents can have thousands of truncated or invalid ones. A
:class:`Listing` counts them, keeps the first :data:`SHOWN` in memory for the summary and spills
every later one to an anonymous temporary file, so the ``--report`` file still gets the whole
list (read back in order by iterating) while memory stays bounded and the summary stays short.
"""

from __future__ import annotations

import json
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

T = TypeVar("T")

SHOWN = 10
"""How many items a summary names before "and N more"."""


def some(values: Sequence[Any], limit: int = 3, *, quote: bool = False) -> str:
    """The first ``limit`` of ``values`` joined, then "and N more": a message names a few, and says how many."""
    shown = ", ".join(repr(v) if quote else str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


class Listing(Generic[T]):
    """An append-only list that holds its first ``kept`` items in memory and the rest on disk."""

    def __init__(self, items: Iterable[T] = (), *, kept: int = SHOWN) -> None:
        self.kept = kept
        self.head: list[T] = []
        self._count = 0
        self._spill: IO[bytes] | None = None
        self.extend(items)

    def append(self, item: T) -> None:
        self._count += 1
        if len(self.head) < self.kept:
            self.head.append(item)
            return
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(prefix="mteb-fairpos-listing-")
        self._spill.seek(0, 2)  # a read may have moved the position
        pickle.dump(item, self._spill, protocol=pickle.HIGHEST_PROTOCOL)

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[T]:
        yield from self.head
        if self._spill is None:
            return
        position = 0
        for _ in range(self._count - len(self.head)):  # the items spilled so far; appends may come meanwhile
            self._spill.seek(position)
            item = pickle.load(self._spill)
            position = self._spill.tell()
            yield item

    def __getitem__(self, index: int) -> T:
        if 0 <= index < len(self.head):
            return self.head[index]
        if index < 0 and -index <= self._count:
            return self[self._count + index]
        for number, item in enumerate(self):
            if number == index:
                return item
        raise IndexError(f"listing index {index} out of range ({self._count} items)")

    def __repr__(self) -> str:
        return f"Listing({self._count} items, first {self.head!r})"

    def as_json(self, item_json: Callable[[T], Any]) -> JsonList:
        """The items as JSON values, produced one at a time when the report is written (:func:`write_json`)."""
        return JsonList(self, item_json)

    def summary_lines(self, title: str, report: str | None = None) -> list[str]:
        """``title`` (with the count), the first :data:`SHOWN` items indented, then "and N more" and
        where the whole list is: the report file, or the option that writes one."""
        if not self:
            return []
        lines = [f"{self._count} {title}:"]
        lines.extend(f"  {item}" for item in self.head[:SHOWN])
        more = self._count - min(len(self.head), SHOWN)
        if more:
            where = f"full list in {report}" if report else "--report FILE writes the full list"
            lines.append(f"  ... and {more} more ({where})")
        return lines


class JsonList:
    """A report's list whose items are made one at a time as :func:`write_json` writes them."""

    def __init__(self, items: Iterable[Any], item_json: Callable[[Any], Any]) -> None:
        self.items = items
        self.item_json = item_json

    def __iter__(self) -> Iterator[Any]:
        return map(self.item_json, self.items)


def held(data: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    """A report's ``to_dict``: as it is for :func:`write_json` with ``stream``, else every :class:`JsonList` made
    into a list (plain JSON values, what ``json.dumps`` takes; the whole list in memory)."""
    return dict(data) if stream else {key: list(value) if isinstance(value, JsonList) else value for key, value in data.items()}


def write_json(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write a report's JSON object, each :class:`JsonList` streamed item by item (two-space indent)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write("{")
        for number, (key, value) in enumerate(data.items()):
            out.write(("," if number else "") + f"\n  {json.dumps(key)}: ")
            if not isinstance(value, JsonList):
                out.write(json.dumps(value, indent=2).replace("\n", "\n  "))
                continue
            out.write("[")
            empty = True
            for item in value:
                out.write(("" if empty else ",") + "\n    " + json.dumps(item))
                empty = False
            out.write("]" if empty else "\n  ]")
        out.write("\n}\n")
