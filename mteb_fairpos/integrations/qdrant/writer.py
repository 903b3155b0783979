"""The one writer of points into a collection, used by ``index`` and ``load`` alike.

``index`` is the in-process case of encode + load: both hand this writer the points that
:func:`.points.document_points` built, so the two routes cannot store a document differently.
The writer owns everything between a point and the store:

- create-or-check the collection (:func:`.store.open_collection`: a mismatch is refused before
  any write) and its payload indexes;
- the bulk-load settings: where the backend has HNSW settings, building is deferred (``m=0``)
  for the load and restored afterwards, also when the load fails; a backend that builds its
  indexes only when asked (Edge) builds them at the end;
- :meth:`.backends.Store.write` with transient failures (connection, timeout, 429, 5xx) retried with
  exponential backoff and client errors (4xx) raised at once;
- the content-hash skip: :meth:`Writer.stored` returns what the store holds of the documents,
  so a caller leaves unchanged ones out, and a changed document's stale segment points go;
- a read-back of every point written, so each count in a report is what the store holds.

A document's segment points are written before its document point, so a stored document point
means a complete document and a killed run is finished by running it again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from qdrant_client import models

from . import store
from .backends import Store

logger = logging.getLogger(__name__)


@dataclass
class Written:
    """What the store holds of the points one call wrote, counted by reading them back."""

    documents: int = 0
    points: int = 0
    stale: int = 0


class Writer:
    """Writes points into ``collection`` of ``target`` (see the module docstring).

    Args:
        batch_size: points per request.
        parallel: upload streams of a server's ``upload_points`` (an embedded store is written
            from the thread that opened it).
        retries / backoff: a transient failure is retried up to ``retries`` times, waiting
            ``backoff * 2**attempt`` seconds; re-sending is safe since point ids are deterministic.
    """

    def __init__(self, target: Store, collection: str, spec: store.CollectionSpec, *, batch_size: int = 256,
                 parallel: int = 1, retries: int = 3, backoff: float = 0.5) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        if parallel < 1:
            raise ValueError(f"parallel must be >= 1, got {parallel}.")
        self.target = target
        self.collection = collection
        self.spec = spec
        self.batch_size = batch_size
        self.parallel = parallel if target.capabilities.concurrent_writers else 1
        self.retries = retries
        self.backoff = backoff

    @classmethod
    def open(cls, target: Store, collection: str, spec: store.CollectionSpec, *,
             cluster: Mapping[str, Any] | None = None, **options: Any) -> tuple[Writer, bool]:
        """Create ``collection`` for ``spec`` or check the existing one (raising before any write);
        returns the writer and whether the collection was created. ``cluster`` settings
        (``shard_number``, ...) apply to a new collection."""
        created = store.open_collection(target, collection, spec, **dict(cluster or {}))
        return cls(target, collection, spec, **options), created

    # ------------------------------------------------------------------ bulk settings
    @contextmanager
    def bulk(self, defer: bool) -> Iterator[bool]:
        """Around a load: defer HNSW building (``m=0``) if asked and the backend has the setting,
        restore it afterwards even on failure, then build indexes on a backend that waits to be
        asked. Yields whether building was deferred."""
        defer = defer and self.target.capabilities.hnsw_settings
        restore = self._defer_hnsw() if defer else None
        try:
            yield restore is not None
        finally:
            if restore is not None:
                self.target.set_hnsw_m(self.collection, restore)
        self.finish()

    def finish(self) -> None:
        """Build the indexes of what was written, where the backend builds them only when asked (Edge)."""
        if self.target.capabilities.indexes_on_request:
            self.target.build_indexes(self.collection)

    def _defer_hnsw(self) -> int | None:
        """Set ``m=0``; returns the ``m`` to restore (``None``: the server reported none, so nothing is deferred)."""
        original = self.target.describe(self.collection).hnsw_m
        if original is None:
            return None
        self.target.set_hnsw_m(self.collection, 0)
        return original

    # ------------------------------------------------------------------ content-hash skip
    def stored(self, doc_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored ``content_hash`` and ``n_segments`` of these documents' points, by document id
        (a document without a stored document point is absent)."""
        if not doc_ids:
            return {}
        ids = {store.point_id(self.collection, doc_id, 0): doc_id for doc_id in doc_ids}
        found = self._retried(lambda: self.target.retrieve(self.collection, list(ids),
                                                           payload=["content_hash", "n_segments"]),
                              "lookup of stored documents")
        return {ids[str(p.id)]: dict(p.payload or {}) for p in found}

    def stale(self, doc_id: str, previous: Mapping[str, Any] | None, points: Sequence[models.PointStruct]) -> list[str]:
        """Segment point ids a changed document had and its new points do not rewrite."""
        if previous is None or not self.spec.late_chunks:
            return []
        written = {str(p.id) for p in points}
        positions = range(1, int(previous.get("n_segments") or 0) + 1)  # the segment points the stored document has
        ids = (store.point_id(self.collection, doc_id, position) for position in positions)
        return [pid for pid in ids if pid not in written]

    # ------------------------------------------------------------------ writing
    def write(self, points: Sequence[models.PointStruct], *, stale: Sequence[str] = (), what: str = "this run",
              resume: str = "Run it again") -> Written:
        """Delete ``stale`` point ids, write ``points`` in their order (each document's segment
        points before its document point) and read them back.

        A failure left after the retries raises :class:`.store.UpsertFailedError` naming ``what``
        and ending with ``resume`` (how to finish the job)."""
        written = Written()
        if stale:
            ids = list(stale)
            self._retried(lambda: self.target.delete(self.collection, ids), "delete of stale segment points")
            written.stale = len(ids)
        try:
            for batch in self._requests(points):
                self._retried(lambda batch=batch: self.target.write(self.collection, batch, batch_size=self.batch_size,
                                                                    parallel=self.parallel),
                              f"upload of {len(batch)} points")
        except Exception as err:
            tried = f"despite {self.retries} retries" if store.is_transient(err) else "(not a failure a retry mends)"
            raise store.UpsertFailedError(
                f"writing {what} into collection {self.collection!r} failed {tried} ({store.short(err)}); documents "
                f"whose points were all written are complete. {resume}: ids are deterministic, so it rewrites the same "
                "points and adds no duplicate.") from err
        found = self.read_back(points)
        written.documents, written.points = found
        if written.points != len(points):
            raise store.UpsertFailedError(
                f"after writing {what}, {len(points) - written.points} of its {len(points)} point(s) are missing "
                f"from {self.collection!r}; {resume.lower()}.")
        return written

    def read_back(self, points: Sequence[models.PointStruct], chunk: int = 1000) -> tuple[int, int]:
        """``(documents, points)`` of ``points`` that the store holds."""
        documents = {str(p.id) for p in points if (p.payload or {}).get("kind") == store.KIND_DOCUMENT}
        found_documents = found = 0
        for begin in range(0, len(points), chunk):
            ids = [p.id for p in points[begin:begin + chunk]]
            records = self._retried(lambda ids=ids: self.target.retrieve(self.collection, ids, payload=False),
                                    "read-back")
            found += len(records)
            found_documents += sum(1 for r in records if str(r.id) in documents)
        return found_documents, found

    def _requests(self, points: Sequence[models.PointStruct]) -> Iterator[list[models.PointStruct]]:
        """The requests to send: batches in order; with parallel streams (which do not keep order)
        all segment points go in one call before all document points."""
        if self.parallel > 1:
            for phase in (store.KIND_SEGMENT, store.KIND_DOCUMENT):
                batch = [p for p in points if (p.payload or {}).get("kind", store.KIND_DOCUMENT) == phase]
                if batch:
                    yield batch
            return
        for begin in range(0, len(points), self.batch_size):
            yield list(points[begin:begin + self.batch_size])

    def _retried(self, action: Any, what: str) -> Any:
        return store.with_retries(action, what=f"{what} in {self.collection!r}", retries=self.retries,
                                  backoff=self.backoff)
