"""Copying a collection point for point from one store into another (a local-mode folder into
Qdrant Edge, the embedded default; or any backend into any other).

The source must be a collection this package built (its spec is in its metadata); the target
collection is created with that spec, or must already match it (the refusal of ``index`` and
``load``, before any write). Ids, named vectors and payloads are copied as they are, so search
and discoverability answer the same on the copy; they go through the writer of ``index`` and
``load`` (:mod:`.writer`), so the copy is counted by reading it back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from qdrant_client import models

from . import store
from .backends import Store
from .clients import as_store
from .writer import Writer


@dataclass
class CopyReport:
    """What a copy did: points read from the source and found in the target afterwards."""

    collection: str
    source: str
    target: str
    points: int = 0
    created_collection: bool = False
    seconds: float = 0.0

    def summary(self, report: str | None = None) -> str:
        """One line (a copy lists nothing per document; ``report`` is taken as every report's summary takes it)."""
        return (f"collection {self.collection!r}: {self.points} point(s) copied from the {self.source} store into the "
                f"{self.target} store" + (", collection created" if self.created_collection else "")
                + f" [{self.seconds:.1f} s]")

    def to_dict(self, *, stream: bool = False) -> dict[str, Any]:
        """The JSON form `--report` writes; ``stream`` as every report takes it (a copy has no per-document lists)."""
        return {"collection": self.collection, "source": self.source, "target": self.target, "points": self.points,
                "created_collection": self.created_collection, "seconds": round(self.seconds, 3)}


def copy_collection(source: Store, target: Store, collection: str, *, batch_size: int = 256,
                    retries: int = 3, backoff: float = 0.5, show_progress: bool = False) -> CopyReport:
    """Copy ``collection`` from ``source`` into ``target`` (created there, or checked to match first);
    ``show_progress`` shows a bar of points over the source's count."""
    from tqdm.auto import tqdm

    start = time.perf_counter()
    if source is target:  # every point would be written over itself, and counted as copied
        raise ValueError("source and target are the same store; copy into another one.")
    source, target = as_store(source), as_store(target)  # a Store, or the user's own QdrantClient
    spec = store.read_spec(source, collection)
    if spec is None:
        raise store.QdrantIndexError(f"collection {collection!r} does not exist in the source store; nothing to copy.")
    report = CopyReport(collection, source.capabilities.name, target.capabilities.name)
    writer, report.created_collection = Writer.open(target, collection, spec, batch_size=batch_size, retries=retries,
                                                    backoff=backoff)
    offset = None
    with tqdm(total=source.count(collection), desc=f"copying {collection}", unit="point",
              disable=not show_progress) as progress:
        while True:
            records, offset = source.scroll(collection, limit=batch_size, offset=offset, payload=True, vectors=True)
            if records:
                points = [models.PointStruct(id=r.id, vector=r.vector, payload=r.payload) for r in records]
                report.points += writer.write(points, what=f"{len(points)} copied point(s)",
                                              resume="Run the copy again (ids are kept)").points
                progress.update(len(records))
            if offset is None:
                break
    writer.finish()
    report.seconds = time.perf_counter() - start
    return report
