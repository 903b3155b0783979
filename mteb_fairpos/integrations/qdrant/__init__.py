"""Qdrant integration: a position-aware index of calibrated document embeddings (SPEC 4).

>>> from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
>>> from mteb_fairpos.integrations.qdrant import FairQdrantIndex
>>> model = FairSentenceTransformer("sentence-transformers/all-MiniLM-L6-v2", CalibrationConfig())
>>> with FairQdrantIndex(model, "pages", path="./qdrant-local") as index:      # doctest: +SKIP
...     index.index([{"id": "p1", "segments": ["First article.", "Second article."]}])
...     hits = index.search("second", position=2)
...     index.discoverability().save("report/")

Modules: :mod:`.records` (input formats and validation), :mod:`.encoding` (vectors, token
spans, truncation, late chunks), :mod:`.store` (connection, collection metadata, ids,
retries), :mod:`.index` (:class:`FairQdrantIndex`), :mod:`.search`, :mod:`.discoverability`.
"""

from .discoverability import DiscoverabilityReport, PositionQuery, discoverability, read_queries
from .encoding import EncodedDocument, SegmentLayout, Truncation, encode_documents, model_name, resolve_model_path
from .index import FairQdrantIndex, IndexReport, index_documents
from .records import Document, InputError, Problem, Segment, parse_document, parse_documents, read_documents
from .search import SearchHit, position_filter, search
from .store import (
    CollectionMismatchError,
    CollectionSpec,
    QdrantIndexError,
    QdrantUnavailableError,
    UpsertFailedError,
    connect,
    point_id,
)

__all__ = [
    "CollectionMismatchError",
    "CollectionSpec",
    "DiscoverabilityReport",
    "Document",
    "EncodedDocument",
    "FairQdrantIndex",
    "IndexReport",
    "InputError",
    "PositionQuery",
    "Problem",
    "QdrantIndexError",
    "QdrantUnavailableError",
    "SearchHit",
    "Segment",
    "SegmentLayout",
    "Truncation",
    "UpsertFailedError",
    "connect",
    "discoverability",
    "encode_documents",
    "index_documents",
    "model_name",
    "parse_document",
    "parse_documents",
    "point_id",
    "position_filter",
    "read_documents",
    "read_queries",
    "resolve_model_path",
    "search",
]
