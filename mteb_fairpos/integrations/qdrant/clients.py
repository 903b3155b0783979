"""The two stores on qdrant-client: its embedded local mode (:class:`LocalStore`) and a Qdrant
server or cluster (:class:`ServerStore`).

This module is the only one that holds a ``QdrantClient``; :func:`as_store` wraps a user's own
client in the store its public settings (``init_options``) name, so the public API keeps
accepting one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client.http import models

from .backends import (
    LOCAL,
    SERVER,
    Collection,
    PayloadSelector,
    QdrantIndexError,
    QdrantUnavailableError,
    Store,
    VectorSelector,
    short,
    status_of,
)


def holds_local_mode(path: str | os.PathLike[str]) -> bool:
    """Whether the folder ``path`` holds a qdrant-client local-mode store (its ``meta.json`` or ``collection/``)."""
    folder = Path(path)
    return (folder / "meta.json").is_file() or (folder / "collection").is_dir()


class ClientStore(Store):
    """A store reached through a ``QdrantClient`` (what local mode and a server share)."""

    def __init__(self, client: QdrantClient) -> None:
        self._client = client

    def collections(self) -> list[str]:
        return sorted(c.name for c in self._client.get_collections().collections)

    def exists(self, collection: str) -> bool:
        return self._client.collection_exists(collection)

    def create(self, collection: str, vectors: Mapping[str, models.VectorParams], *,
               metadata: Mapping[str, Any] | None = None, shard_number: int | None = None,
               replication_factor: int | None = None, write_consistency_factor: int | None = None,
               on_disk_payload: bool | None = None) -> None:
        self._client.create_collection(collection, vectors_config=dict(vectors), shard_number=shard_number,
                                       replication_factor=replication_factor,
                                       write_consistency_factor=write_consistency_factor,
                                       on_disk_payload=on_disk_payload,
                                       metadata=dict(metadata) if metadata is not None else None)

    def drop(self, collection: str) -> None:
        self._client.delete_collection(collection)

    def describe(self, collection: str) -> Collection:
        info = self._client.get_collection(collection)
        vectors = info.config.params.vectors
        hnsw = info.config.hnsw_config
        return Collection(collection, dict(vectors) if isinstance(vectors, Mapping) else {},
                          info.config.metadata, info.points_count, frozenset(info.payload_schema or {}),
                          hnsw.m if hnsw is not None else None)

    def add_payload_index(self, collection: str, field: str, schema: models.PayloadSchemaType) -> None:
        self._client.create_payload_index(collection, field_name=field, field_schema=schema, wait=True)

    def write(self, collection: str, points: Sequence[models.PointStruct], *, batch_size: int = 256,
              parallel: int = 1) -> None:
        # upload_points' own retries are immediate and include 4xx: off; the writer backs off instead
        self._client.upload_points(collection, points, batch_size=batch_size, parallel=parallel, max_retries=0,
                                   wait=True)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        self._client.delete(collection, points_selector=models.PointIdsList(points=list(ids)), wait=True)

    def retrieve(self, collection: str, ids: Sequence[str], *, payload: PayloadSelector = True,
                 vectors: VectorSelector = False) -> list[models.Record]:
        return self._client.retrieve(collection, list(ids), with_payload=_payload(payload), with_vectors=vectors)

    def scroll(self, collection: str, *, filter: models.Filter | None = None, limit: int = 256,
               offset: str | None = None, payload: PayloadSelector = True,
               vectors: VectorSelector = False) -> tuple[list[models.Record], str | None]:
        records, following = self._client.scroll(collection, scroll_filter=filter, limit=limit, offset=offset,
                                                 with_payload=_payload(payload), with_vectors=vectors)
        return records, None if following is None else str(following)

    def count(self, collection: str, filter: models.Filter | None = None) -> int:
        return self._client.count(collection, count_filter=filter, exact=True).count

    def query(self, collection: str, vector: Sequence[float], *, using: str, filter: models.Filter | None = None,
              limit: int = 10, payload: PayloadSelector = True) -> list[models.ScoredPoint]:
        return self._client.query_points(collection, query=list(vector), using=using, query_filter=filter,
                                         limit=limit, with_payload=_payload(payload)).points

    def query_batch(self, collection: str, requests: Sequence[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        return [r.points for r in self._client.query_batch_points(collection, requests=list(requests))]

    def close(self) -> None:
        self._client.close()


LOCAL_OPTIONS = frozenset({"force_disable_check_same_thread", "local_inference_batch_size"})
"""The ``QdrantClient`` options local mode uses."""


class LocalStore(ClientStore):
    """qdrant-client's local mode: a folder (SQLite) or memory, in this process."""

    capabilities = LOCAL

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, **client_kwargs: Any) -> LocalStore:
        """The local-mode store in the folder ``path`` (``None`` or ``":memory:"``: in memory).

        qdrant-client drops the options of a server client in local mode without a word; they are refused here.
        """
        ignored = sorted(set(client_kwargs) - LOCAL_OPTIONS)
        if ignored:
            raise TypeError(f"{', '.join(ignored)}: options of a qdrant-client server client, which local mode ignores "
                            f"(it takes {', '.join(sorted(LOCAL_OPTIONS))}); give url= to open a server.")
        if path is None or str(path) == ":memory:":
            return cls(QdrantClient(location=":memory:", **client_kwargs))
        try:
            return cls(QdrantClient(path=str(path), **client_kwargs))
        except RuntimeError as err:  # the folder is locked by another local client
            raise QdrantIndexError(f"cannot open the local Qdrant folder {str(path)!r}: {err}") from err
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as err:  # its settings file is damaged
            raise QdrantIndexError(f"{Path(path) / 'meta.json'}: not readable as local mode's settings "
                                   f"({type(err).__name__}: {err}); the store is damaged.") from None


class ServerStore(ClientStore):
    """A Qdrant server or cluster behind a URL."""

    capabilities = SERVER

    def __init__(self, client: QdrantClient, where: str | None = None) -> None:
        super().__init__(client)
        options = client.init_options
        self.where = where or options.get("url") or options.get("host") or "the Qdrant server"

    @classmethod
    def open(cls, url: str, *, api_key: str | None = None, timeout: float = 10.0, **client_kwargs: Any) -> ServerStore:
        """The server at ``url``, probed once (see :meth:`check_reachable`). ``client_kwargs`` go to
        ``QdrantClient`` (and from there to httpx, e.g. ``transport=`` or ``verify=``)."""
        client_kwargs.setdefault("check_compatibility", False)
        client = QdrantClient(url=url, api_key=api_key, timeout=int(max(1, round(timeout))), **client_kwargs)
        server = cls(client, url)
        server.check_reachable()
        return server

    def check_reachable(self) -> None:
        """List the collections once; if that fails, raise :class:`.backends.QdrantUnavailableError`
        (before anything is written), naming a refusal of the credentials as one."""
        try:
            self._client.get_collections()
        except Exception as err:  # noqa: BLE001 - httpx, grpc and qdrant raise many kinds
            if status_of(err) in (401, 403):
                raise QdrantUnavailableError(
                    f"the Qdrant server at {self.where} refused the credentials ({short(err)}); check the API key. "
                    "Nothing was written.") from err
            raise QdrantUnavailableError(
                f"cannot reach the Qdrant server at {self.where} ({short(err)}). Check the URL and that the server "
                "is running; nothing was written. Leave out the URL to use an embedded store (--path).") from err

    def set_hnsw_m(self, collection: str, m: int) -> None:
        self._client.update_collection(collection, hnsw_config=models.HnswConfigDiff(m=m))


def as_store(store: Store | QdrantClient) -> Store:
    """``store`` itself, or a user's ``QdrantClient`` wrapped in the store its public settings name
    (local mode for a ``path`` or ``":memory:"``, else a server, probed once)."""
    if isinstance(store, Store):
        return store
    if not isinstance(store, QdrantClient):
        raise TypeError(f"expected a Store or a qdrant_client.QdrantClient, got {type(store).__name__}.")
    options = store.init_options
    if options.get("path") is not None or options.get("location") == ":memory:":
        return LocalStore(store)
    server = ServerStore(store)
    server.check_reachable()
    return server


def _payload(selector: PayloadSelector) -> Any:
    return list(selector) if isinstance(selector, tuple) else selector
