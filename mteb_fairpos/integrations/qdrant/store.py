"""Talking to Qdrant: connecting, the collection's schema and metadata, point ids, retries.

A folder (``path``) is an embedded store: Qdrant Edge for a new one, qdrant-client's local mode
for one local mode already holds or one in memory; a URL (plus API key) selects a server or
cluster. What each can do is in :mod:`.backends`. Everything the index needs to refuse a mismatched
write (model, calibration, vector size and distance, vector names) is stored in the
collection's own metadata (Qdrant >= 1.16) and checked before the first point is written.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from qdrant_client import QdrantClient, models

from .backends import capabilities
from .edge import EdgeClient, holds_local_mode  # the adapter only: qdrant_edge itself is imported when a store is opened

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


class QdrantIndexError(RuntimeError):
    """Base class of the errors of the Qdrant integration."""


class QdrantUnavailableError(QdrantIndexError):
    """The Qdrant server cannot be reached (checked before anything is written)."""


class CollectionMismatchError(QdrantIndexError):
    """The existing collection was built with other settings; nothing was written."""


class UpsertFailedError(QdrantIndexError):
    """Writing a batch failed after all retries; finished documents stay, a re-run resumes."""


# ---------------------------------------------------------------------------- connecting
def connect(
    path: str | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = 10.0,
    backend: str | None = None,
    **client_kwargs: Any,
) -> QdrantClient:
    """A client for an embedded store at ``path`` or a server at ``url``.

    ``backend`` picks the embedded engine (see :func:`embedded_backend`): ``"edge"`` (Qdrant Edge,
    the default for a new folder), ``"local"`` (qdrant-client's local mode: an existing local-mode
    folder is opened with it, and ``None`` or ``":memory:"`` keeps it in memory).
    A server is probed once (list collections); if it cannot be reached this raises
    :class:`QdrantUnavailableError` and nothing has been written. ``client_kwargs`` go to
    ``QdrantClient`` (and from there to httpx, e.g. ``transport=`` or ``verify=``).
    """
    if url is not None and path is not None:
        raise ValueError("give either a local path or a server url, not both.")
    if url is None:
        if api_key is not None:
            raise ValueError("an API key only applies to a server; give url= as well.")
        if embedded_backend(path, backend) == "edge":
            if path is None or path == ":memory:":
                raise ValueError("the Qdrant Edge backend stores its data in a folder; give path=.")
            try:
                return EdgeClient(path)  # type: ignore[return-value]
            except RuntimeError as err:  # the folder is locked by another client
                raise QdrantIndexError(str(err)) from err
        if path is None or path == ":memory:":
            return QdrantClient(location=":memory:", **client_kwargs)
        try:
            return QdrantClient(path=str(path), **client_kwargs)
        except RuntimeError as err:  # the folder is locked by another local client
            raise QdrantIndexError(f"cannot open the local Qdrant folder {str(path)!r}: {err}") from err
    client_kwargs.setdefault("check_compatibility", False)
    client = QdrantClient(url=url, api_key=api_key, timeout=int(max(1, round(timeout))), **client_kwargs)
    check_reachable(client, url)
    return client


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


def check_reachable(client: QdrantClient, where: str | None = None) -> None:
    """Fail with a clear message if ``client`` cannot talk to its Qdrant (no-op for an embedded store)."""
    if not capabilities(client).remote:
        return
    try:
        client.get_collections()
    except Exception as err:  # noqa: BLE001 - httpx, grpc and qdrant raise many kinds
        options = client.init_options
        target = where or options.get("url") or options.get("host") or "the Qdrant server"
        if _status_of(err) in (401, 403):
            raise QdrantUnavailableError(
                f"the Qdrant server at {target} refused the credentials ({_short(err)}); check the API key. "
                "Nothing was written."
            ) from err
        raise QdrantUnavailableError(
            f"cannot reach the Qdrant server at {target} ({_short(err)}). Check the URL and that the server is "
            "running; nothing was written. Leave out the URL to use an embedded store (--path)."
        ) from err


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
        )


def distance_for(similarity_fn_name: str | None) -> str:
    """Qdrant distance matching a sentence-transformers similarity function."""
    name = (similarity_fn_name or "cosine").lower()
    if name not in _DISTANCES:
        raise ValueError(f"no Qdrant distance for the model's similarity function {name!r}.")
    return _DISTANCES[name].value


def read_spec(client: QdrantClient, collection: str) -> CollectionSpec | None:
    """The stored spec of ``collection``; ``None`` if it does not exist. Raises if it is not ours."""
    if not client.collection_exists(collection):
        return None
    info = client.get_collection(collection)
    spec = CollectionSpec.from_metadata(info.config.metadata)
    if spec is None:
        raise CollectionMismatchError(
            f"collection {collection!r} exists but was not created by mteb-fairpos (its metadata has no "
            f"{METADATA_KEY!r} entry), so its model and calibration are unknown. Use a new collection name. "
            "(A server older than Qdrant 1.16 does not keep collection metadata.)"
        )
    actual = info.config.params.vectors
    if isinstance(actual, Mapping):
        for name, params in actual.items():
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
    if set(stored.vectors) != set(wanted.vectors):
        differences.append(f"named vectors: collection has {sorted(stored.vectors)}, this run writes {sorted(wanted.vectors)} "
                           "(match the uncalibrated / late-chunk options the collection was built with)")
    if differences:
        raise CollectionMismatchError(
            f"refusing to write into collection {collection!r}, built with other settings; nothing was written.\n  "
            + "\n  ".join(differences)
            + "\nUse a new collection name, or index with the collection's settings."
        )


def create_collection(
    client: QdrantClient,
    collection: str,
    spec: CollectionSpec,
    *,
    shard_number: int | None = None,
    replication_factor: int | None = None,
    write_consistency_factor: int | None = None,
    on_disk_payload: bool | None = None,
) -> None:
    """Create ``collection`` for ``spec`` (cluster settings passed through) and its payload indexes."""
    client.create_collection(
        collection,
        vectors_config=spec.vectors_config(),
        shard_number=shard_number,
        replication_factor=replication_factor,
        write_consistency_factor=write_consistency_factor,
        on_disk_payload=on_disk_payload,
        metadata=spec.metadata(),
    )
    if capabilities(client).remote and CollectionSpec.from_metadata(
            client.get_collection(collection).config.metadata) is None:
        client.delete_collection(collection)
        raise QdrantIndexError(
            "the Qdrant server did not keep the collection metadata (it needs Qdrant >= 1.16), so a later run "
            "could not check the model and calibration; the new collection was removed again."
        )
    ensure_payload_indexes(client, collection)


def open_collection(client: QdrantClient, collection: str, spec: CollectionSpec, **cluster: Any) -> bool:
    """Create ``collection`` for ``spec`` or check that the existing one matches it (raising
    :class:`CollectionMismatchError` before any write); returns whether it was created.

    The one create-or-check of every writer (``index``, ``load``, ``copy``); ``cluster`` settings
    (``shard_number``, ...) apply to a new collection."""
    stored = read_spec(client, collection)
    if stored is None:
        create_collection(client, collection, spec, **cluster)
        return True
    check_compatible(collection, stored, spec)
    ensure_payload_indexes(client, collection)
    return False


def ensure_payload_indexes(client: QdrantClient, collection: str) -> list[str]:
    """Create the missing payload indexes where the backend supports them; returns the fields created."""
    if not capabilities(client).payload_indexes:
        return []  # local mode scans payloads; indexes would be no-ops with a warning
    existing = set(client.get_collection(collection).payload_schema or {})
    created = []
    for field, schema in PAYLOAD_INDEXES:
        if field not in existing:
            client.create_payload_index(collection, field_name=field, field_schema=schema, wait=True)
            created.append(field)
    return created


def build_indexes(client: QdrantClient, collection: str) -> None:
    """Build the indexes of what was written, on a backend that builds them only when asked (Edge)."""
    if capabilities(client).indexes_on_request:
        client.optimize(collection)


# ---------------------------------------------------------------------------- ids
def point_id(collection: str, doc_id: str, position: int = 0) -> str:
    """Deterministic point id (UUID 5): the document point has position 0, segment points 1..n.

    The name is length-prefixed, so no two (collection, document id, position) triples share it.
    """
    return str(uuid.uuid5(_NAMESPACE, f"{len(collection)}:{collection}{len(doc_id)}:{doc_id}{position}"))


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
            logger.warning("%s failed (%s); retry %d of %d in %.1f s", what, _short(err), attempt, retries, delay)
            sleep(delay)


def is_transient(err: BaseException) -> bool:
    """Whether retrying ``err`` can help."""
    from qdrant_client.http.exceptions import ResponseHandlingException

    status = _status_of(err)
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


def _status_of(err: BaseException) -> int | None:
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(err, UnexpectedResponse):
        return int(err.status_code)
    return None


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__
