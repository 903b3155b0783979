"""Qdrant integration: a position-aware index of calibrated document embeddings (docs/method.md#s4).

>>> from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
>>> from mteb_fairpos.integrations.qdrant import FairQdrantIndex
>>> model = FairSentenceTransformer("sentence-transformers/all-MiniLM-L6-v2", CalibrationConfig())
>>> with FairQdrantIndex(model, "pages", path="./qdrant-local") as index:      # doctest: +SKIP
...     index.index([{"id": "p1", "segments": ["First article.", "Second article."]}])
...     hits = index.search("second", position=2)
...     index.discoverability().save("report/")

Modules: :mod:`.records` (the record format and its validation), :mod:`.input` (the one reader
of input files: JSONL and Parquet, local or object storage, ids checked, cut into ranges),
:mod:`.storage` (local paths and ``s3://``-style URIs), :mod:`.encoding` (vectors, token
spans, truncation, late chunks), :mod:`.store` (:func:`open_store`, collection metadata, ids,
retries), :mod:`.index` (:class:`FairQdrantIndex`), :mod:`.search`, :mod:`.discoverability`;
the part route past one machine: :mod:`.part_encoder`, :mod:`.parts`,
:mod:`.encode` (:func:`encode_to_parts`), :mod:`.load` (:func:`load_parts`); the stores:
:mod:`.backends` (the :class:`Store` interface and what each backend can do), :mod:`.edge`
(:class:`EdgeStore`: Qdrant Edge, the default for a new folder), :mod:`.clients`
(:class:`LocalStore` and :class:`ServerStore` on qdrant-client), :mod:`.copy` (a collection from
one store into another).
"""

from .load import LoadReport, load_parts
from .discoverability import DiscoverabilityReport, PositionQuery, discoverability, read_queries
from .encode import EncodeReport, encode_to_parts
from .encoding import (
    EncodedDocument,
    ModelLoader,
    SegmentLayout,
    Truncation,
    encode_documents,
    model_name,
    resolve_model_path,
)
from .index import FairQdrantIndex, IndexReport, index_documents
from .input import InputRange, InputScan, parse_documents, read_documents, scan_file, scan_input
from .records import Document, InputError, Problem, Segment, parse_document
from .search import SearchHit, position_filter, search
from .store import (
    CollectionMismatchError,
    CollectionSpec,
    QdrantIndexError,
    QdrantUnavailableError,
    UpsertFailedError,
    open_store,
    point_id,
)
from .backends import Capabilities, Collection, Store
from .clients import LocalStore, ServerStore, as_store
from .edge import EdgeStore

__all__ = [
    "Capabilities",
    "Collection",
    "EdgeStore",
    "LocalStore",
    "ServerStore",
    "Store",
    "as_store",
    "open_store",
    "CollectionMismatchError",
    "CollectionSpec",
    "DiscoverabilityReport",
    "Document",
    "EncodeReport",
    "EncodedDocument",
    "FairQdrantIndex",
    "IndexReport",
    "InputError",
    "InputRange",
    "InputScan",
    "LoadReport",
    "ModelLoader",
    "PositionQuery",
    "Problem",
    "QdrantIndexError",
    "QdrantUnavailableError",
    "SearchHit",
    "Segment",
    "SegmentLayout",
    "Truncation",
    "UpsertFailedError",
    "discoverability",
    "encode_documents",
    "encode_to_parts",
    "index_documents",
    "load_parts",
    "model_name",
    "parse_document",
    "parse_documents",
    "point_id",
    "position_filter",
    "read_documents",
    "read_queries",
    "resolve_model_path",
    "scan_file",
    "scan_input",
    "search",
]
