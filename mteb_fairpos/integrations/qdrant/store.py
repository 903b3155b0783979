"""Opening a store, and what this package keeps in one: the collection's spec, point ids, retries.

:func:`open_store` is the one entry point: a folder (``path``) is an embedded store, Qdrant Edge
for a new one and qdrant-client's local mode for one local mode already holds or one in memory;
a URL (plus API key) is a server or cluster. Each is a :class:`.backends.Store` that declares
what it can do. Everything the index needs to refuse a mismatched write (model, calibration,
vector size and distance, vector names) is stored in the collection's own metadata
(Qdrant >= 1.16) and checked before the first point is written.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from qdrant_client import models

from .backends import (  # noqa: F401 - the errors are part of this module's interface
    CollectionMismatchError,
    QdrantIndexError,
    QdrantUnavailableError,
    Store,
    UpsertFailedError,
    check_collection_name,
    short,
    status_of,
)
from .clients import LocalStore, ServerStore, holds_local_mode
from ...config import whole
from .listing import some
from .edge import LOCK_FILE, EdgeStore, holds_edge, mixed  # the store only: qdrant_edge itself is imported when a store is opened

logger = logging.getLogger(__name__)

METADATA_KEY = "mteb_fairpos"
SCHEMA_VERSION = 1

VECTOR_CALIBRATED = "calibrated"
VECTOR_UNCALIBRATED = "uncalibrated"
VECTOR_LATE = "late_chunk"
VECTOR_LATE_UNCALIBRATED = "late_chunk_uncalibrated"

BACKENDS = ("edge", "local")
"""The embedded engines: Qdrant Edge (the default for a new folder) and qdrant-client's local mode."""

KIND_DOCUMENT = "document"
KIND_SEGMENT = "segment"

PAYLOAD_INDEXES: tuple[tuple[str, models.PayloadSchemaType], ...] = (
    ("doc_id", models.PayloadSchemaType.KEYWORD),
    ("kind", models.PayloadSchemaType.KEYWORD),
    ("segments[].position", models.PayloadSchemaType.INTEGER),
    ("segments[].language", models.PayloadSchemaType.KEYWORD),
    ("position", models.PayloadSchemaType.INTEGER),
    ("language", models.PayloadSchemaType.KEYWORD),
)
"""Payload indexes, where the backend has them (:attr:`.backends.Capabilities.payload_indexes`)."""

_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://pypi.org/project/mteb-fairpos/qdrant-points")

_DISTANCES = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclidean": models.Distance.EUCLID,
    "manhattan": models.Distance.MANHATTAN,
}

T = TypeVar("T")


# ---------------------------------------------------------------------------- opening
def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = 10.0,
    backend: str | None = None,
    **client_kwargs: Any,
) -> Store:
    """The store in the folder ``path`` or at the server ``url``.

    ``backend`` picks the embedded engine (see :func:`embedded_backend`): ``"edge"`` (Qdrant Edge,
    the default for a new folder), ``"local"`` (qdrant-client's local mode: an existing local-mode
    folder is opened with it, and ``None`` or ``":memory:"`` keeps it in memory).
    A server is probed once (list collections); if it cannot be reached this raises
    :class:`QdrantUnavailableError` and nothing has been written. ``client_kwargs`` go to
    ``QdrantClient`` (and from there to httpx, e.g. ``transport=`` or ``verify=``).
    """
    if url is not None and path is not None:
        raise ValueError("give either a local path or a server url, not both.")
    if url is not None:
        if not isinstance(url, str) or not url.strip():  # qdrant-client would try a default host and name none
            raise ValueError(f"url must be a server's address (http://host:6333), got {url!r}; give path= for an "
                             "embedded store.")
        if backend is not None:  # a server runs its own engine
            raise ValueError("backend= chooses the embedded engine of path=; a server (url=) runs its own.")
        return ServerStore.open(url, api_key=api_key, timeout=timeout, **client_kwargs)
    if api_key is not None:
        raise ValueError("an API key only applies to a server; give url= as well.")
    if path is not None and not str(path).strip():  # '' would be the current folder, among whatever it holds
        raise ValueError("path is empty; give the store's folder (or None for a local-mode store in memory).")
    if path is not None and str(path) != ":memory:":
        if file := next((up for up in Path(path).expanduser().absolute().parents if up.is_file()), None):
            raise QdrantIndexError(f"{str(path)!r}: {str(file)!r} is a file, so no store folder can be made below it.")
        refuse_foreign(path)
    if embedded_backend(path, backend) == "edge":
        if path is None or str(path) == ":memory:":
            raise ValueError("the Qdrant Edge backend stores its data in a folder; give path=.")
        if client_kwargs:  # Qdrant Edge runs in this process: no client to give them to
            raise TypeError(f"{', '.join(sorted(client_kwargs))}: options of qdrant-client, which a Qdrant Edge store "
                            "does not use (open a server with url=, or local mode with backend='local').")
        return EdgeStore(path)
    if path is not None and holds_edge(path):  # local mode would write beside the shards, and hide them
        if holds_local_mode(path):
            raise ValueError(mixed(path))
        raise ValueError(f"{str(path)!r} holds a Qdrant Edge store, not a qdrant-client local-mode one; open it with "
                         "the edge backend, or give local mode a folder of its own.")
    return LocalStore.open(path, **client_kwargs)


def holds_store(path: str | os.PathLike[str]) -> bool:
    """Whether the folder ``path`` holds an embedded store: Qdrant Edge's or local mode's files, or the lock
    file both write first."""
    return holds_edge(path) or holds_local_mode(path) or os.path.exists(os.path.join(path, LOCK_FILE))


def refuse_foreign(path: str | os.PathLike[str]) -> None:
    """Refuse a folder of other files as a store: a store would be written among them (a mistyped ``--path``)."""
    if not os.path.isdir(path) or holds_store(path):
        return
    names = sorted(name for name in os.listdir(path) if not name.startswith("."))  # .DS_Store and the like: no data
    if names:
        raise QdrantIndexError(f"{str(path)!r} holds other files ({some(names)}), not a Qdrant store; give a new or empty "
                               "folder, or the folder of a store.")


def embedded_backend(path: str | os.PathLike[str] | None, backend: str | None = None) -> str:
    """The engine for an embedded store at ``path``: ``backend`` if given; else local mode for a
    store in memory or a folder local mode already holds (it is opened as it is), Qdrant Edge for
    anything else (a new store)."""
    if backend is not None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}.")
        return backend
    if path is None or str(path) == ":memory:" or holds_local_mode(path):
        return "local"
    return "edge"


# ---------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class CollectionSpec:
    """What a collection built by this package holds; stored in its metadata and compared on reuse."""

    model: str
    calibration: str
    pooling: str
    dimension: int
    distance: str
    vectors: tuple[str, ...]
    max_tokens: int
    # whether document points carry their text; None for a collection of an earlier release (not
    # recorded). Left out of equality: parts and manifests record it beside the spec.
    store_text: bool | None = field(default=None, compare=False)

    @property
    def late_chunks(self) -> bool:
        """Whether segment points with late-chunking vectors belong in the collection."""
        return bool({VECTOR_LATE, VECTOR_LATE_UNCALIBRATED} & set(self.vectors))

    @property
    def both_passes(self) -> bool:
        """Whether documents need a calibrated and an uncalibrated pass (both vectors are stored)."""
        return {VECTOR_CALIBRATED, VECTOR_UNCALIBRATED} <= set(self.vectors)

    def vectors_config(self) -> dict[str, models.VectorParams]:
        distance = models.Distance(self.distance)
        return {name: models.VectorParams(size=self.dimension, distance=distance) for name in self.vectors}

    def metadata(self) -> dict[str, Any]:
        return {METADATA_KEY: {
            "schema": SCHEMA_VERSION,
            "model": self.model,
            "calibration": self.calibration,
            "pooling": self.pooling,
            "dimension": self.dimension,
            "distance": self.distance,
            "vectors": list(self.vectors),
            "max_tokens": self.max_tokens,
            **({} if self.store_text is None else {"store_text": self.store_text}),
        }}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None) -> CollectionSpec | None:
        stored = (metadata or {}).get(METADATA_KEY)
        if not isinstance(stored, Mapping):
            return None
        return cls(
            model=str(stored.get("model")),
            calibration=str(stored.get("calibration")),
            pooling=str(stored.get("pooling")),
            dimension=int(stored.get("dimension", 0)),
            distance=str(stored.get("distance")),
            vectors=tuple(stored.get("vectors") or ()),
            max_tokens=int(stored.get("max_tokens", 0)),
            store_text=None if stored.get("store_text") is None else bool(stored["store_text"]),
        )


def distance_for(similarity_fn_name: str | None) -> str:
    """Qdrant distance matching a sentence-transformers similarity function."""
    name = (similarity_fn_name or "cosine").lower()
    if name not in _DISTANCES:
        raise ValueError(f"no Qdrant distance for the model's similarity function {name!r}.")
    return _DISTANCES[name].value


def existing_spec(store: Store, collection: str) -> CollectionSpec:
    """`read_spec` of a collection that must exist, as one to search or measure must."""
    spec = read_spec(store, collection)
    if spec is None:
        raise QdrantIndexError(f"collection {collection!r} does not exist; index documents into it first.")
    return spec


def read_spec(store: Store, collection: str) -> CollectionSpec | None:
    """The stored spec of ``collection``; ``None`` if it does not exist. Raises if it is not ours."""
    if not store.exists(collection):
        return None
    info = store.describe(collection)
    spec = CollectionSpec.from_metadata(info.metadata)
    if spec is None:
        raise CollectionMismatchError(
            f"collection {collection!r} exists but was not created by mteb-fairpos (its metadata has no "
            f"{METADATA_KEY!r} entry), so its model and calibration are unknown. Use a new collection name. "
            "(A server older than Qdrant 1.16 does not keep collection metadata.)"
        )
    for name, params in info.vectors.items():
        if name in spec.vectors and (params.size != spec.dimension or params.distance.value != spec.distance):
            raise CollectionMismatchError(
                f"collection {collection!r}: vector {name!r} is {params.size}-d {params.distance.value}, but its "
                f"metadata says {spec.dimension}-d {spec.distance}; the collection was changed outside mteb-fairpos."
            )
    return spec


def check_compatible(collection: str, stored: CollectionSpec, wanted: CollectionSpec) -> None:
    """Raise :class:`CollectionMismatchError` listing every difference that makes a write unsafe."""
    differences = []
    labels = (("model", "model"), ("calibration", "calibration"), ("dimension", "vector size"),
              ("distance", "distance"), ("pooling", "pooling"))
    for attr, label in labels:
        old, new = getattr(stored, attr), getattr(wanted, attr)
        if old != new:
            differences.append(f"{label}: collection has {old!r}, this run uses {new!r}")
    if stored.max_tokens and stored.max_tokens != wanted.max_tokens:  # 0: not recorded by an earlier release
        differences.append(f"maximum length: collection's documents were cut at {stored.max_tokens} tokens, this run "
                           f"cuts at {wanted.max_tokens} (--max-length; the same text would get another vector)")
    if set(stored.vectors) != set(wanted.vectors):
        differences.append(f"named vectors: collection has {sorted(stored.vectors)}, this run writes {sorted(wanted.vectors)} "
                           "(match the uncalibrated / late-chunk options the collection was built with)")
    if None not in (stored.store_text, wanted.store_text) and stored.store_text != wanted.store_text:
        differences.append(f"document text: collection {'stores' if stored.store_text else 'does not store'} it, this "
                           f"run {'would' if wanted.store_text else 'would not'} (store_text={wanted.store_text}; "
                           "the --no-store-text option)")
    if differences:
        raise CollectionMismatchError(
            f"refusing to write into collection {collection!r}, built with other settings; nothing was written.\n  "
            + "\n  ".join(differences)
            + "\nUse a new collection name, or index with the collection's settings."
        )


def create_collection(store: Store, collection: str, spec: CollectionSpec, **cluster: Any) -> None:
    """Create ``collection`` for ``spec`` (``cluster`` settings passed through: ``shard_number``,
    ``replication_factor``, ``write_consistency_factor``, ``on_disk_payload``) and its payload indexes."""
    store.create(collection, spec.vectors_config(), metadata=spec.metadata(), **cluster)
    if store.capabilities.remote and CollectionSpec.from_metadata(store.describe(collection).metadata) is None:
        store.drop(collection)
        raise QdrantIndexError(
            "the Qdrant server did not keep the collection metadata (it needs Qdrant >= 1.16), so a later run "
            "could not check the model and calibration; the new collection was removed again."
        )
    ensure_payload_indexes(store, collection)


def open_collection(store: Store, collection: str, spec: CollectionSpec, **cluster: Any) -> bool:
    """Create ``collection`` for ``spec`` or check that the existing one matches it (raising
    :class:`CollectionMismatchError` before any write); returns whether it was created.

    The one create-or-check of every writer (``index``, ``load``, ``copy``); ``cluster`` settings
    (``shard_number``, ...) apply to a new collection."""
    check_collection_name(collection)
    stored = read_spec(store, collection)
    if stored is None:
        create_collection(store, collection, spec, **{k: v for k, v in cluster.items() if v is not None})
        return True
    check_compatible(collection, stored, spec)
    ensure_payload_indexes(store, collection)
    return False


def ensure_payload_indexes(store: Store, collection: str) -> list[str]:
    """Create the missing payload indexes where the backend has them; returns the fields created."""
    if not store.capabilities.payload_indexes:
        return []  # local mode scans payloads; indexes would be no-ops with a warning
    existing = store.describe(collection).payload_indexes
    created = []
    for field, schema in PAYLOAD_INDEXES:
        if field not in existing:
            store.add_payload_index(collection, field, schema)
            created.append(field)
    return created


# ---------------------------------------------------------------------------- ids
def point_id(collection: str, doc_id: str, position: int = 0) -> str:
    """Deterministic point id (UUID 5): the document point has position 0, segment points 1..n.

    The name is length-prefixed, so no two (collection, document id, position) triples share it. An integer
    document id is its text, as a record's is; a position is a whole number (1.0 or True would name another point).
    """
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise TypeError(f"doc_id must be a string or an integer, got {type(doc_id).__name__} {doc_id!r}.")
    if not whole(position) or position < 0:
        raise ValueError(f"position must be 0 (the document point) or a 1-based segment position, got {position!r}.")
    doc_id = str(doc_id)
    return str(uuid.uuid5(_NAMESPACE, f"{len(collection)}:{collection}{len(doc_id)}:{doc_id}{int(position)}"))


# ---------------------------------------------------------------------------- retries
def with_retries(action: Callable[[], T], *, what: str, retries: int = 3, backoff: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``action``; on a transient failure (connection, timeout, 429, 5xx) retry with exponential backoff."""
    attempt = 0
    while True:
        try:
            return action()
        except Exception as err:  # noqa: BLE001
            if not is_transient(err) or attempt >= retries:
                raise
            delay = backoff * (2 ** attempt)
            attempt += 1
            logger.warning("%s failed (%s); retry %d of %d in %.1f s", what, short(err), attempt, retries, delay)
            sleep(delay)


def is_transient(err: BaseException) -> bool:
    """Whether retrying ``err`` can help."""
    from qdrant_client.http.exceptions import ResponseHandlingException

    status = status_of(err)
    if status is not None:
        return status == 429 or status >= 500
    if isinstance(err, (ResponseHandlingException, ConnectionError, TimeoutError)):
        return True
    try:
        import grpc

        if isinstance(err, grpc.RpcError):
            code = err.code() if callable(getattr(err, "code", None)) else None
            return code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.RESOURCE_EXHAUSTED)
    except ImportError:  # pragma: no cover
        pass
    return type(err).__name__ == "ResourceExhaustedResponse"
