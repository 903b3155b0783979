"""The store interface: the few operations this package asks of a Qdrant store, and what each backend can do.

Three backends hold a collection, each with one implementation of :class:`Store`: Qdrant Edge
(:class:`.edge.EdgeStore`, the embedded default: the server's engine in this process),
qdrant-client's local mode (:class:`.clients.LocalStore`, embedded, pure Python) and a Qdrant
server or cluster (:class:`.clients.ServerStore`). Callers hold a ``Store`` and ask its
:class:`Capabilities`, never which backend it is. Points, records, filters and payload selectors
are qdrant-client's ``models``: the vocabulary Qdrant users know; the Edge store translates them.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client.http import models  # the REST models (qdrant_client.models shadows QueryResponse)

PayloadSelector = bool | Sequence[str] | models.PayloadSelectorInclude | models.PayloadSelectorExclude
VectorSelector = bool | Sequence[str]
_FOLDER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class QdrantIndexError(RuntimeError):
    """Base class of the errors of the Qdrant integration."""


class QdrantUnavailableError(QdrantIndexError):
    """The Qdrant server cannot be reached (checked before anything is written)."""


class CollectionMismatchError(QdrantIndexError):
    """The existing collection was built with other settings; nothing was written."""


class UpsertFailedError(QdrantIndexError):
    """Writing a batch failed after all retries; finished documents stay, a re-run resumes."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers; the writer and the loader act on these flags."""

    name: str
    """``"edge"``, ``"local"`` or ``"server"``: for messages and reports only."""
    remote: bool
    """Behind a network: probed before the first write, and it may drop metadata it does not know."""
    payload_indexes: bool
    """Payload indexes exist (local mode scans every payload, so it has none)."""
    hnsw_settings: bool
    """HNSW settings can be changed: a bulk load defers index building (``m=0``) and restores it."""
    indexes_on_request: bool
    """Indexes are built only when asked (Edge optimizes when told to, after the writes)."""
    concurrent_writers: bool
    """Writes may come from another thread or process (an embedded store belongs to the thread that opened it)."""


EDGE = Capabilities("edge", remote=False, payload_indexes=True, hnsw_settings=False, indexes_on_request=True,
                    concurrent_writers=False)
LOCAL = Capabilities("local", remote=False, payload_indexes=False, hnsw_settings=False, indexes_on_request=False,
                     concurrent_writers=False)
SERVER = Capabilities("server", remote=True, payload_indexes=True, hnsw_settings=True, indexes_on_request=False,
                      concurrent_writers=True)


@dataclass(frozen=True)
class Collection:
    """What the engine reports about a collection; a field it does not report is ``None``."""

    name: str
    vectors: Mapping[str, models.VectorParams]
    metadata: Mapping[str, Any] | None
    points: int | None
    payload_indexes: frozenset[str]
    hnsw_m: int | None = None
    """The HNSW ``m`` of the collection, where the engine reports one (a server)."""


class Store(ABC):
    """A Qdrant store: the operations ``index``, ``load``, ``copy``, search and discoverability use.

    Every write waits until the points are stored; ``count`` is exact. Open one with
    :func:`.store.open_store`, or wrap a ``QdrantClient`` with :func:`.clients.as_store`.
    """

    capabilities: Capabilities

    # ------------------------------------------------------------------ collections
    @abstractmethod
    def collections(self) -> list[str]:
        """The names of the collections in the store."""

    @abstractmethod
    def exists(self, collection: str) -> bool: ...

    @abstractmethod
    def create(self, collection: str, vectors: Mapping[str, models.VectorParams], *,
               metadata: Mapping[str, Any] | None = None, shard_number: int | None = None,
               replication_factor: int | None = None, write_consistency_factor: int | None = None,
               on_disk_payload: bool | None = None) -> None:
        """Create ``collection`` with these named vectors; the cluster settings apply where there is a cluster."""

    @abstractmethod
    def drop(self, collection: str) -> None: ...

    @abstractmethod
    def describe(self, collection: str) -> Collection: ...

    @abstractmethod
    def add_payload_index(self, collection: str, field: str, schema: models.PayloadSchemaType) -> None: ...

    def set_hnsw_m(self, collection: str, m: int) -> None:
        """Change the collection's HNSW ``m`` (``0`` defers index building); only where
        :attr:`Capabilities.hnsw_settings`."""
        raise NotImplementedError(f"the {self.capabilities.name} store has no HNSW settings.")

    def build_indexes(self, collection: str) -> None:  # noqa: B027 - most engines build as they go
        """Build the indexes of what was written, where :attr:`Capabilities.indexes_on_request`."""

    # ------------------------------------------------------------------ points
    @abstractmethod
    def write(self, collection: str, points: Sequence[models.PointStruct], *, batch_size: int = 256,
              parallel: int = 1) -> None:
        """Upsert ``points`` in requests of ``batch_size`` (``parallel`` streams where
        :attr:`Capabilities.concurrent_writers`); returns once they are stored."""

    @abstractmethod
    def delete(self, collection: str, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def retrieve(self, collection: str, ids: Sequence[str], *, payload: PayloadSelector = True,
                 vectors: VectorSelector = False) -> list[models.Record]:
        """The stored points among ``ids`` (missing ones are left out)."""

    @abstractmethod
    def scroll(self, collection: str, *, filter: models.Filter | None = None, limit: int = 256,
               offset: str | None = None, payload: PayloadSelector = True,
               vectors: VectorSelector = False) -> tuple[list[models.Record], str | None]:
        """One page of points in id order, and the offset of the next page (``None`` after the last)."""

    @abstractmethod
    def count(self, collection: str, filter: models.Filter | None = None) -> int:
        """The exact number of points (matching ``filter``)."""

    @abstractmethod
    def query(self, collection: str, vector: Sequence[float], *, using: str, filter: models.Filter | None = None,
              limit: int = 10, payload: PayloadSelector = True) -> list[models.ScoredPoint]:
        """The ``limit`` nearest points to ``vector`` by the named vector ``using``."""

    @abstractmethod
    def query_batch(self, collection: str, requests: Sequence[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        """Several nearest-point queries (``query``, ``using``, ``filter``, ``limit``, ``with_payload``) at once."""

    # ------------------------------------------------------------------ lifecycle
    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_collection_name(name: object, *, folder: bool = False) -> str:
    """``name`` if it can name a collection; else a ValueError saying why.

    Blank names, names over 255 characters, path separators, control characters and ``.``/``..``
    are path syntax: no embedded store can hold them as a folder and no server as a URL path
    segment. ``folder``: the name must also be a plain folder name (letters, digits, ``_``, ``-``,
    ``.``), as an embedded Edge store keeps each collection in a folder of its name; an encode's
    parts may go there, and their point ids are made for the name, so ``encode`` asks for it."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a collection name must be non-empty text, got {name!r}.")
    if folder and not _FOLDER_NAME.match(name):
        raise ValueError(f"collection name {name!r} cannot be a folder name; use letters, digits, '_', '-' and '.'.")
    bad = sorted({c for c in name if c in "/\\" or ord(c) < 32})
    if bad or len(name) > 255 or name in (".", ".."):
        reason = (f"it holds {', '.join(map(repr, bad))}" if bad else
                  "it is over 255 characters" if len(name) > 255 else "it is a folder reference")
        raise ValueError(f"collection name {name!r} cannot name a collection ({reason}); "
                         "use letters, digits, '_', '-' and '.'.")
    return name


def status_of(err: BaseException) -> int | None:
    """The HTTP status of a failed qdrant-client request, if it had one."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(err, UnexpectedResponse):
        return int(err.status_code)
    return None


def short(err: BaseException) -> str:
    """The error's type and first line, for a one-line message."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__
