"""`FairQdrantIndex`: multi-segment documents as calibrated vectors with position payloads (docs/method.md#s4).

Each document becomes one point (id from collection, document id and position 0) with the
named vectors ``calibrated`` and, optionally, ``uncalibrated``; its payload lists every
segment's position, character span, token span in the model input, language and id, plus the
model name and the calibration text. With ``late_chunks=True`` (mean-pooled models) every
segment that reached the model also becomes a point (position 1..n) holding its
late-chunking vector(s) ``late_chunk`` / ``late_chunk_uncalibrated``.

Documents are embedded as an ``encode`` part embeds them: a window of documents (a range of
the input) sorted by length, in model batches (`encoding.encode_batches`), each batch written
as soon as it is embedded.

Writes are idempotent and resumable: before embedding a window, the index looks up its
document points; a document whose stored ``content_hash`` matches is skipped (nothing is
written), and since a document's point is upserted after its segment points, a document point
exists only once the document is complete. A killed run therefore resumes where it stopped
and ends with exactly one point per record. (In a collection the run has just created there
is nothing to look up, so that step is left out.)
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qdrant_client import models
from sentence_transformers import SentenceTransformer

from ...config import require_positive
from ...segmented import require_mean_pooling
from . import store
from .backends import Store
from .clients import as_store
from .discoverability import DiscoverabilityReport, discoverability
from .encoding import (
    EncodedDocument,
    Truncation,
    UncalibratedCount,
    encode_batches,
    model_name,
)
from .listing import Listing, held
from .points import collection_spec, content_hash, document_points, refuse_no_uncalibrated
from .input import INDEX_WINDOW, InputScan, parse_documents, read_range, scan_file
from .records import Document, OnError, Problem, as_record, check_iterable_of_records, require_documents
from .search import SearchHit, search
from .store import CollectionSpec, open_store
from .writer import Writer

logger = logging.getLogger(__name__)


@dataclass
class IndexReport:
    """What an indexing run did."""

    collection: str
    documents: int = 0
    written: int = 0
    unchanged: int = 0
    points_written: int = 0
    stale_points_deleted: int = 0
    created_collection: bool = False
    invalid: Listing[Problem] = field(default_factory=Listing)
    truncated: Listing[Truncation] = field(default_factory=Listing)
    uncalibrated: int = 0
    seconds: float = 0.0

    def summary(self, report: str | None = None) -> str:
        """The run in a few lines: at most :data:`.listing.SHOWN` truncated or invalid documents are named,
        the rest counted, with where the full list is (``report``: the report file written, if any)."""
        lines = [
            f"collection {self.collection!r}: {self.documents} valid document(s); {self.written} written "
            f"({self.points_written} points), {self.unchanged} unchanged and skipped"
            + (", collection created" if self.created_collection else "")
            + f" [{self.seconds:.1f} s]"
        ]
        if self.stale_points_deleted:
            lines.append(f"{self.stale_points_deleted} stale segment point(s) of changed documents deleted")
        if self.uncalibrated:
            lines.append(UncalibratedCount.line(self.uncalibrated))
        lines += self.invalid.summary_lines("invalid record(s) skipped", report)
        lines += self.truncated.summary_lines("document(s) truncated to the model's maximum length", report)
        return "\n".join(lines)

    def to_dict(self, *, stream: bool = False) -> dict[str, Any]:
        """The report as JSON values; with ``stream`` the per-document lists are `listing.JsonList`s, made item
        by item as `listing.write_json` writes them (what ``--report`` does, in bounded memory)."""
        return held({
            "collection": self.collection,
            "documents": self.documents,
            "written": self.written,
            "unchanged": self.unchanged,
            "points_written": self.points_written,
            "stale_points_deleted": self.stale_points_deleted,
            "uncalibrated": self.uncalibrated,
            "created_collection": self.created_collection,
            "invalid": self.invalid.as_json(Problem.to_json),
            "truncated": self.truncated.as_json(lambda t: {
                "doc_id": t.doc_id, "n_tokens": t.n_tokens, "n_tokens_exact": t.n_tokens_exact,
                "max_tokens": t.max_tokens, "partial_positions": list(t.partial), "cut_positions": list(t.cut)}),
            "seconds": round(self.seconds, 3),
        }, stream)


class FairQdrantIndex:
    """A Qdrant collection of position-aware, calibrated document embeddings.

    Args:
        model: a :class:`~mteb_fairpos.FairSentenceTransformer` (``encode_document`` calibrates,
            ``encode_query`` does not) or any SentenceTransformer (then the stored calibration is
            ``"none"`` and each document has one vector, ``uncalibrated``).
        collection: the collection name.
        store: an open :class:`.backends.Store` (:func:`.store.open_store`); otherwise one is
            opened from ``path`` (an embedded store: Qdrant Edge for a new folder; local mode in
            memory by default) or ``url`` + ``api_key`` (a server or cluster).
        client: a ready ``qdrant_client.QdrantClient`` instead, wrapped in the store its
            settings name (:func:`.clients.as_store`). A given store or client stays the
            caller's to close.
        model_name: the name stored in the collection (default: the model's Hub id or path).
        **client_kwargs: passed to :func:`.store.open_store`.
    """

    def __init__(
        self,
        model: SentenceTransformer,
        collection: str,
        store: Store | None = None,
        *,
        client: Any = None,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float = 10.0,
        model_name: str | None = None,
        **client_kwargs: Any,
    ) -> None:
        if not isinstance(collection, str) or not collection.strip():
            raise ValueError(f"collection must be a non-empty name, got {collection!r}.")
        self.model = model
        self.collection = collection
        self.model_name = model_name or _model_name(model)
        if store is not None and client is not None:
            raise ValueError("give either a store or a client, not both.")
        given = store if store is not None else client
        if given is None:
            self.store = open_store(path, url=url, api_key=api_key, timeout=timeout, **client_kwargs)
            self._owns_store = True
        else:
            if path is not None or url is not None:
                raise ValueError("give either a store (or client) or a path/url, not both.")
            self.store = as_store(given)
            self._owns_store = False
        self._prepared: CollectionSpec | None = None
        self._search_spec: CollectionSpec | None = None  # set by prepare() or searchable_spec()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the store if this index opened it (an embedded store releases its folder lock)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> FairQdrantIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema
    def spec_for(self, *, uncalibrated: bool, late_chunks: bool, store_text: bool = True) -> store.CollectionSpec:
        """The collection spec this model and these options produce (see :func:`.points.collection_spec`)."""
        return collection_spec(self.model, self.model_name, uncalibrated=uncalibrated, late_chunks=late_chunks,
                               store_text=store_text)

    def stored_spec(self) -> store.CollectionSpec | None:
        """The spec stored with the collection, ``None`` if the collection does not exist."""
        return store.read_spec(self.store, self.collection)

    def searchable_spec(self) -> store.CollectionSpec:
        """The collection's spec, once checked that it exists and that this index's model built it (cached)."""
        if self._search_spec is not None:
            return self._search_spec
        spec = store.existing_spec(self.store, self.collection)
        if spec.model != self.model_name:
            raise store.CollectionMismatchError(
                f"collection {self.collection!r} was built with model {spec.model!r}, but queries would be encoded with "
                f"{self.model_name!r}; vectors of different models are not comparable. Load {spec.model!r}."
            )
        self._search_spec = spec
        return spec

    def prepare(
        self,
        *,
        uncalibrated: bool | None = None,
        late_chunks: bool | None = None,
        store_text: bool | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        on_disk_payload: bool | None = None,
    ) -> tuple[store.CollectionSpec, bool]:
        """Create the collection, or check that the existing one matches; returns ``(spec, created)``.

        Options left as ``None`` follow an existing collection (defaults: uncalibrated vectors on,
        late chunks off, document text stored). Raises :class:`store.CollectionMismatchError` before anything is written.
        """
        refuse_no_uncalibrated(self.model, uncalibrated)
        stored = self.stored_spec()
        if uncalibrated is None:
            uncalibrated = store.VECTOR_UNCALIBRATED in stored.vectors if stored else True
        if late_chunks is None:
            late_chunks = bool(stored and {store.VECTOR_LATE, store.VECTOR_LATE_UNCALIBRATED} & set(stored.vectors))
        if store_text is None:
            store_text = stored.store_text is not False if stored else True
        if late_chunks:
            require_mean_pooling(self.model)
        wanted = self.spec_for(uncalibrated=uncalibrated, late_chunks=late_chunks, store_text=store_text)
        created = store.open_collection(self.store, self.collection, wanted, shard_number=shard_number,
                                        replication_factor=replication_factor,
                                        write_consistency_factor=write_consistency_factor,
                                        on_disk_payload=on_disk_payload)
        # a collection of an earlier release has no recorded store_text: this run's is what the writer uses
        self._prepared = self._search_spec = wanted if created else replace(stored, store_text=store_text)
        return self._prepared, created

    # ------------------------------------------------------------------ indexing
    def index(
        self,
        documents: Iterable[Document | dict],
        *,
        uncalibrated: bool | None = None,
        late_chunks: bool | None = None,
        store_text: bool | None = None,
        batch_size: int = 32,
        window: int = INDEX_WINDOW,
        upsert_batch_size: int = 256,
        on_error: OnError = "raise",
        retries: int = 3,
        backoff: float = 0.5,
        show_progress: bool = True,
        invalid: Sequence[Problem] = (),
        **collection_options: Any,
    ) -> IndexReport:
        """Index documents (:class:`Document` objects or records as in :mod:`.records`).

        Every record is validated before the collection is touched. ``window`` documents at a time
        are sorted by length and embedded ``batch_size`` at a time (see :func:`.encoding.encode_batches`).
        ``collection_options`` (``shard_number``, ``replication_factor``, ...) apply when the
        collection is created.
        """
        _require_window(window)
        invalid = [invalid] if isinstance(invalid, (str, bytes)) else list(invalid)  # a generator is read once
        if not all(isinstance(problem, Problem) for problem in invalid):
            raise TypeError("invalid must be a list of Problem: the records left out before this call, to be reported.")
        docs, problems = _as_documents(documents, on_error)
        require_documents(docs, list(invalid) + problems, f"collection {self.collection!r}")
        windows = (docs[begin:begin + window] for begin in range(0, len(docs), window))
        return self._index_windows(windows, len(docs), Listing([*invalid, *problems]), uncalibrated=uncalibrated,
                                   late_chunks=late_chunks, store_text=store_text, batch_size=batch_size,
                                   upsert_batch_size=upsert_batch_size, retries=retries, backoff=backoff,
                                   show_progress=show_progress, collection_options=collection_options)

    def index_file(self, path: str | Path, *, format: str | None = None, on_error: OnError = "raise",
                   window: int = INDEX_WINDOW, **options: Any) -> IndexReport:
        """Index a JSONL or Parquet file of any size, streamed one window of ``window`` documents at a time.

        The whole file is validated first (see :func:`.input.scan_file`; only ids and byte ranges
        are kept), then read again range by range, so memory does not grow with the file.
        """
        _require_window(window)
        return self.index_scan(scan_file(path, on_error=on_error, format=format, range_size=window), **options)

    def index_scan(self, scan: InputScan, *, batch_size: int = 32, uncalibrated: bool | None = None,
                   late_chunks: bool | None = None, store_text: bool | None = None, upsert_batch_size: int = 256,
                   retries: int = 3, backoff: float = 0.5, show_progress: bool = True,
                   **collection_options: Any) -> IndexReport:
        """Index a validated input (`input.scan_file`, `input.scan_input`); each of its ranges is one window."""
        windows = (read_range(span) for span in scan.ranges)
        return self._index_windows(windows, scan.documents, scan.problems, uncalibrated=uncalibrated,
                                   late_chunks=late_chunks, store_text=store_text, batch_size=batch_size,
                                   upsert_batch_size=upsert_batch_size, retries=retries, backoff=backoff,
                                   show_progress=show_progress, collection_options=collection_options)

    def _index_windows(self, windows: Iterable[list[Document]], total: int, invalid: Listing[Problem], *,
                       uncalibrated: bool | None, late_chunks: bool | None, store_text: bool | None, batch_size: int,
                       upsert_batch_size: int, retries: int, backoff: float, show_progress: bool,
                       collection_options: dict[str, Any]) -> IndexReport:
        """Embed and write window after window, as an ``encode`` part is embedded: the documents of a
        window whose stored content hash differs are sorted by length and embedded batch by batch
        (`encoding.encode_batches`), and each batch is written as soon as it is embedded. On a server,
        batch k is written on a thread while batch k+1 is embedded (the network wait overlaps the
        model); local mode writes in place, since its SQLite store belongs to the thread that opened
        it and the write costs little."""
        unknown = sorted(set(collection_options) - COLLECTION_OPTIONS)
        if unknown:  # named here, not as prepare()'s TypeError
            raise TypeError(f"unknown option(s) {', '.join(unknown)}; the collection options are "
                            f"{', '.join(sorted(COLLECTION_OPTIONS))}.")
        require_positive(batch_size, "batch_size")  # before the collection is made: a run that cannot write leaves none
        require_positive(upsert_batch_size, "upsert_batch_size")
        start = time.perf_counter()
        report = IndexReport(self.collection, documents=total, invalid=invalid)
        spec, report.created_collection = self.prepare(uncalibrated=uncalibrated, late_chunks=late_chunks,
                                                       store_text=store_text, **collection_options)
        writer = Writer(self.store, self.collection, spec, batch_size=upsert_batch_size, retries=retries,
                        backoff=backoff)
        hashes = _Hashes(spec)
        progress = _progress(total, f"indexing into {self.collection}", show_progress)
        background = ThreadPoolExecutor(1, thread_name_prefix="fairpos-write") \
            if self.store.capabilities.concurrent_writers else None
        pending: Future | None = None
        try:
            for window in windows:
                hashes.new_window()
                # a collection this run created holds only this run's documents (ids are unique): no lookup
                previous = {} if report.created_collection else writer.stored([d.doc_id for d in window])
                todo = [d for d in window if not hashes.unchanged(d, previous)]
                report.unchanged += len(window) - len(todo)
                progress.update(len(window) - len(todo))
                with UncalibratedCount() as count:
                    for encoded in encode_batches(self.model, todo, uncalibrated_vectors=spec.both_passes,
                                                  late_chunks=spec.late_chunks, batch_size=batch_size):
                        for enc in encoded:
                            if enc.truncation is not None:
                                report.truncated.append(enc.truncation)
                                logger.debug("truncated: %s", enc.truncation)
                        if pending is not None:
                            pending.result()  # the previous batch is written before this one starts
                        if background is None:
                            _write(writer, hashes, encoded, previous, report, progress)
                        else:
                            pending = background.submit(_write, writer, hashes, encoded, previous, report, progress)
                report.uncalibrated += count.documents
            if pending is not None:
                pending.result()
            if report.written:
                writer.finish()
            if report.truncated:  # one line for the run (each document at DEBUG, all of them in report.truncated)
                logger.warning("%d document(s) truncated to the model's maximum length; IndexReport.truncated "
                               "lists them", len(report.truncated))
        finally:
            if background is not None:
                background.shutdown(wait=True)
            progress.close()
            report.seconds = time.perf_counter() - start
        return report

    def write_encoded(self, encoded: Sequence[EncodedDocument], *, upsert_batch_size: int = 256,
                      retries: int = 3, backoff: float = 0.5) -> IndexReport:
        """Write already embedded documents (skipping unchanged ones) with the settings :meth:`prepare`
        chose; the benchmark times this path."""
        start = time.perf_counter()
        spec = self._prepared
        if spec is None:
            raise store.QdrantIndexError(f"call prepare() before write_encoded() (collection {self.collection!r}).")
        writer = Writer(self.store, self.collection, spec, batch_size=upsert_batch_size, retries=retries,
                        backoff=backoff)
        hashes = _Hashes(spec)
        report = IndexReport(self.collection, documents=len(encoded))
        previous = writer.stored([e.document.doc_id for e in encoded])
        todo = [e for e in encoded if not hashes.unchanged(e.document, previous)]
        report.unchanged = len(encoded) - len(todo)
        _write(writer, hashes, todo, previous, report)
        report.seconds = time.perf_counter() - start
        return report

    # ------------------------------------------------------------------ reading
    def count(self, kind: str | None = None) -> int:
        """Number of points (all, or only ``"document"`` / ``"segment"`` points)."""
        if kind not in (None, "document", "segment"):  # any other kind matches no point: 0, as if counted
            raise ValueError(f"kind must be None (every point), 'document' or 'segment', got {kind!r}.")
        flt = None if kind is None else models.Filter(must=[models.FieldCondition(key="kind", match=models.MatchValue(value=kind))])
        return self.store.count(self.collection, flt)

    def get_document(self, doc_id: str) -> dict[str, Any] | None:
        """The payload of a document point, or ``None``."""
        found = self.store.retrieve(self.collection, [store.point_id(self.collection, str(doc_id), 0)])
        return dict(found[0].payload or {}) if found else None

    def search(self, query: str, **options: Any) -> list[SearchHit]:
        """See :func:`mteb_fairpos.integrations.qdrant.search.search`."""
        return search(self, query, **options)

    def discoverability(self, **options: Any) -> DiscoverabilityReport:
        """See :func:`mteb_fairpos.integrations.qdrant.discoverability.discoverability`."""
        return discoverability(self, **options)


def index_documents(model: SentenceTransformer, documents: Iterable[Document | dict], collection: str,
                    store: Store | None = None, **options: Any) -> IndexReport:
    """One-call indexing; ``options`` are split between :class:`FairQdrantIndex` and :meth:`FairQdrantIndex.index`."""
    opening = {k: options.pop(k) for k in list(options) if k in {"path", "url", "api_key", "timeout", "model_name",
                                                                   "client"}}
    with FairQdrantIndex(model, collection, store, **opening) as index:
        return index.index(documents, **options)


# ---------------------------------------------------------------------------- internals
def _model_name(model: SentenceTransformer) -> str:
    return model_name(model)


def _write(writer: Writer, hashes: _Hashes, encoded: Sequence[EncodedDocument], previous: dict[str, dict],
           report: IndexReport, progress: Any = None) -> None:
    """Write one batch of encoded documents through the writer and add what it read back to ``report``."""
    points: list[models.PointStruct] = []
    stale: list[str] = []
    for enc in encoded:
        doc = enc.document
        doc_points = [p.to_point() for p in document_points(enc, writer.spec, writer.collection,
                                                            store_text=hashes.store_text, digest=hashes(doc))]
        stale.extend(writer.stale(doc.doc_id, previous.get(doc.doc_id), doc_points))
        points.extend(doc_points)
    written = writer.write(points, stale=stale, what=f"{len(encoded)} document(s)",
                           resume=f"{report.written} document(s) of this run were written completely before the "
                                  "failure. Re-run the same command to resume (finished documents are skipped)")
    report.written += written.documents
    report.points_written += written.points
    report.stale_points_deleted += written.stale
    if progress is not None:
        progress.update(len(encoded))


COLLECTION_OPTIONS = frozenset(inspect.signature(FairQdrantIndex.prepare).parameters) - {
    "self", "uncalibrated", "late_chunks", "store_text"}
"""What :meth:`FairQdrantIndex.prepare` passes on to the collection when it creates one."""


def _require_window(window: int) -> None:
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}.")


def _as_documents(documents: Iterable[Document | dict], on_error: OnError) -> tuple[list[Document], list[Problem]]:
    check_iterable_of_records(documents)
    items = list(documents)
    if any(isinstance(d, Document) for d in items):
        if not all(isinstance(d, Document) for d in items):
            raise TypeError("pass either Document objects or records (dicts), not a mix.")
        # a hand-built Document is checked as the record it stands for: the same spans, ids, texts and metadata
        items = [as_record(d, f"document {number}") for number, d in enumerate(items, start=1)]
        return parse_documents(items, on_error=on_error, source="document")
    return parse_documents(items, on_error=on_error)


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="doc", disable=not enabled)


class _Hashes:
    """Content hashes of a window's documents (computed once per document) and the unchanged-document test.

    Only the current window's are kept (:meth:`new_window`): a run's memory must not grow with the archive.
    """

    def __init__(self, spec: store.CollectionSpec) -> None:
        self.spec = spec
        self.store_text = spec.store_text is not False
        self._known: dict[str, tuple[Document, str]] = {}

    def __call__(self, doc: Document) -> str:
        cached = self._known.get(doc.doc_id)
        if cached is not None and cached[0] is doc:
            return cached[1]
        value = content_hash(doc, self.spec, store_text=self.store_text)
        self._known[doc.doc_id] = (doc, value)
        return value

    def new_window(self) -> None:
        """Forget the hashes of the previous window (a write still running for it just computes them again)."""
        self._known = {}

    def unchanged(self, doc: Document, previous: dict[str, dict]) -> bool:
        old = previous.get(doc.doc_id)
        return old is not None and old.get("content_hash") == self(doc)
