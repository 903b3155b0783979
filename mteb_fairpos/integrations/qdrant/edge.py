"""Qdrant Edge as an embedded store: the real Qdrant engine in this process (qdrant-edge-py).

qdrant-client's local mode is a pure-Python stand-in that slows down past a few thousand points;
Qdrant Edge runs the server's own storage, HNSW and filters in-process. :class:`EdgeStore` is
the :class:`.backends.Store` on it, calling ``qdrant_edge`` directly.

A store is a folder: one Edge shard per collection (``<collection>/``) with the collection's
vector settings and mteb-fairpos metadata beside it (``<collection>.collection.json``, written
once the shard exists, so a collection without it does not exist), and a lock file that keeps a
second process out, as local mode does. A write is in the shard's write-ahead log when it
returns, and a reopened shard replays the log, also after the process was killed (the test
ends one with ``os._exit``; a power loss can take what the operating system had not yet
written). The segments are flushed (about 0.1-0.3 s each time on a plain disk) after every
:data:`FLUSH_POINTS` points written, when the indexes are built, and at close: what a long write
holds in memory is bounded by that volume, not by the size of the archive.
qdrant-edge is young (0.x): its version is pinned, and the filters and payload
selectors used here are translated one by one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qdrant_client.http import models  # the REST models (qdrant_client.models shadows QueryResponse)

from .backends import (EDGE, Collection, PayloadSelector, QdrantIndexError, Store, VectorSelector,
                       check_collection_name)
from .clients import holds_local_mode

COLLECTION_SUFFIX = ".collection.json"
LOCK_FILE = ".lock"
FLUSH_POINTS = 20_000
"""Points written into a shard between two flushes (a flush takes 0.1-0.3 s: a few per cent of writing them)."""
_SCHEMAS = {"keyword": "Keyword", "integer": "Integer", "float": "Float", "bool": "Bool", "text": "Text",
            "geo": "Geo", "datetime": "Datetime", "uuid": "Uuid"}


def require_edge() -> Any:
    """The ``qdrant_edge`` module, or a clear error saying how to install it."""
    try:
        import qdrant_edge
    except ImportError:
        raise ImportError('the Qdrant Edge backend needs qdrant-edge-py, a dependency of mteb-fairpos: '
                          'pip install "qdrant-edge-py==0.9.0".') from None
    return qdrant_edge


def holds_edge(path: str | os.PathLike[str]) -> bool:
    """Whether the folder ``path`` holds a Qdrant Edge store (a collection's ``<collection>.collection.json``)."""
    folder = Path(path)
    return folder.is_dir() and any(folder.glob("*" + COLLECTION_SUFFIX))


def mixed(path: str | os.PathLike[str]) -> str:
    """Why a folder holding both an Edge store and local mode's files is refused, and how to mend it."""
    return (f"{str(path)!r} holds both a Qdrant Edge store and qdrant-client local-mode files (an earlier release "
            "opened the Edge folder in local mode): move meta.json and collection/ to a folder of their own "
            "(`mteb-fairpos copy` moves their collections into Edge), then open the Edge store as it is.")


class EdgeStore(Store):
    """Qdrant Edge shards in one folder, one per collection."""

    capabilities = EDGE

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._edge = require_edge()
        self.path = Path(path)
        if holds_local_mode(self.path):
            raise ValueError(mixed(self.path) if holds_edge(self.path) else
                             f"{str(self.path)!r} holds a qdrant-client local-mode store, not a Qdrant Edge one; "
                             "open it with the local backend, or give Edge a folder of its own.")
        if self.path.exists() and not self.path.is_dir():
            raise QdrantIndexError(f"{str(self.path)!r} is a file; a Qdrant Edge store is a folder.")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = _lock(self.path / LOCK_FILE)
        self._shards: dict[str, Any] = {}
        self._unflushed: dict[str, int] = {}

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        for shard in self._shards.values():
            shard.flush()
            shard.close()
        self._shards.clear()
        if self._lock is not None:
            _unlock(self._lock)
            self._lock = None

    # ------------------------------------------------------------------ collections
    def collections(self) -> list[str]:
        self._open()
        return sorted(p.name[: -len(COLLECTION_SUFFIX)] for p in self.path.glob(f"*{COLLECTION_SUFFIX}"))

    def exists(self, collection: str) -> bool:
        return self._settings_path(collection).is_file()

    def create(self, collection: str, vectors: Mapping[str, models.VectorParams], *,
               metadata: Mapping[str, Any] | None = None, shard_number: int | None = None,
               replication_factor: int | None = None, write_consistency_factor: int | None = None,
               on_disk_payload: bool | None = None) -> None:
        """Create the shard; the cluster settings (shards, replicas) do not apply to one embedded shard."""
        if self.exists(collection):
            raise ValueError(f"collection {collection!r} already exists in {self.path}.")
        edge = self._edge
        params = {name: edge.EdgeVectorParams(size=p.size, distance=getattr(edge.Distance, p.distance.value))
                  for name, p in vectors.items()}
        folder = self._folder(collection)
        if folder.exists():  # a shard left by a create that died before its settings were written
            shutil.rmtree(folder)
        self._shards[collection] = edge.EdgeShard.create(str(folder), edge.EdgeConfig(
            vectors=params, on_disk_payload=on_disk_payload))
        _write_json(self._settings_path(collection), {
            "vectors": {name: {"size": p.size, "distance": p.distance.value} for name, p in vectors.items()},
            "metadata": dict(metadata or {})})

    def drop(self, collection: str) -> None:
        shard = self._shards.pop(collection, None)
        if shard is not None:
            shard.close()
        self._settings_path(collection).unlink(missing_ok=True)
        shutil.rmtree(self._folder(collection), ignore_errors=True)

    def describe(self, collection: str) -> Collection:
        """The points and payload indexes Edge reports, and the vectors and metadata of the settings
        file; Edge reports no HNSW settings, so there are none."""
        settings = self._settings(collection)
        info = self._shard(collection).info()
        vectors = {name: models.VectorParams(size=v["size"], distance=models.Distance(v["distance"]))
                   for name, v in settings["vectors"].items()}
        return Collection(collection, vectors, settings["metadata"], info.points_count,
                          frozenset(info.payload_schema))

    def add_payload_index(self, collection: str, field: str, schema: models.PayloadSchemaType) -> None:
        kind = getattr(schema, "value", schema)
        self._shard(collection).update(self._edge.UpdateOperation.create_field_index(
            field, getattr(self._edge.PayloadSchemaType, _SCHEMAS[str(kind)])))

    def build_indexes(self, collection: str) -> None:
        """Build the HNSW and payload indexes of what was written (blocking).

        Edge does not optimize in the background: until this runs, queries scan the points."""
        shard = self._shard(collection)
        shard.optimize()
        shard.flush()

    # ------------------------------------------------------------------ points
    def write(self, collection: str, points: Sequence[models.PointStruct], *, batch_size: int = 256,
              parallel: int = 1) -> None:
        shard = self._shard(collection)
        point = self._edge.Point
        for begin in range(0, len(points), batch_size):
            shard.update(self._edge.UpdateOperation.upsert_points(
                [point(str(p.id), p.vector, p.payload) for p in points[begin:begin + batch_size]]))
        self._unflushed[collection] = self._unflushed.get(collection, 0) + len(points)
        if self._unflushed[collection] >= FLUSH_POINTS:
            shard.flush()
            self._unflushed[collection] = 0

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        self._shard(collection).update(self._edge.UpdateOperation.delete_points([str(i) for i in ids]))

    def retrieve(self, collection: str, ids: Sequence[str], *, payload: PayloadSelector = True,
                 vectors: VectorSelector = False) -> list[models.Record]:
        found = self._shard(collection).retrieve([str(i) for i in ids], with_payload=self._payload(payload),
                                                 with_vector=_vectors(vectors))
        return [_record(r) for r in found]

    def scroll(self, collection: str, *, filter: models.Filter | None = None, limit: int = 256,
               offset: str | None = None, payload: PayloadSelector = True,
               vectors: VectorSelector = False) -> tuple[list[models.Record], str | None]:
        request = self._edge.ScrollRequest(offset=None if offset is None else str(offset), limit=limit,
                                           filter=self._filter(filter), with_payload=self._payload(payload),
                                           with_vector=_vectors(vectors))
        found, following = self._shard(collection).scroll(request)
        return [_record(r) for r in found], None if following is None else str(following)

    def count(self, collection: str, filter: models.Filter | None = None) -> int:
        return self._shard(collection).count(self._edge.CountRequest(exact=True, filter=self._filter(filter)))

    def query(self, collection: str, vector: Sequence[float], *, using: str, filter: models.Filter | None = None,
              limit: int = 10, payload: PayloadSelector = True) -> list[models.ScoredPoint]:
        return [_scored(p) for p in self._shard(collection).query(self._request(vector, using, filter, limit, payload))]

    def query_batch(self, collection: str, requests: Sequence[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        batch = self._edge.QueryBatchRequest([
            self._request(r.query, r.using, r.filter, r.limit or 10, True if r.with_payload is None else r.with_payload)
            for r in requests])
        return [[_scored(p) for p in found] for found in self._shard(collection).query_batch(batch)]

    # ------------------------------------------------------------------ internals
    def _request(self, vector: Any, using: str | None, flt: models.Filter | None, limit: int,
                 payload: PayloadSelector) -> Any:
        edge = self._edge
        return edge.QueryRequest(limit=limit, query=edge.Query.Nearest(list(vector), using=using),
                                 filter=self._filter(flt), with_payload=self._payload(payload), with_vector=False)

    def _folder(self, name: str) -> Path:
        return self.path / check_collection_name(name, folder=True)

    def _settings_path(self, name: str) -> Path:
        self._open()  # every call on a collection passes here: none after close, none outside the folder
        return self.path / f"{check_collection_name(name, folder=True)}{COLLECTION_SUFFIX}"

    def _open(self) -> None:
        """Refuse work once closed: the store would go on without its lock, beside another process's."""
        if self._lock is None:
            raise QdrantIndexError(f"the Qdrant Edge store {self.path} is closed; open it again (open_store).")

    def _settings(self, name: str) -> dict[str, Any]:
        path = self._settings_path(name)
        if not path.is_file():
            raise ValueError(f"collection {name!r} does not exist in the Qdrant Edge store {self.path}.")
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
            raise QdrantIndexError(f"{path}: not readable as the collection's settings ({err}); the store is damaged.") from None
        vectors = settings.get("vectors") if isinstance(settings, dict) else None
        if (not isinstance(vectors, dict) or not isinstance(settings.get("metadata"), dict)
                or not all(isinstance(v, dict) and {"size", "distance"} <= set(v) for v in vectors.values())):
            raise QdrantIndexError(f"{path}: not the collection's settings (an object with its vectors, each with a size "
                                   "and distance, and its metadata); the store is damaged.")
        return settings

    def _shard(self, name: str) -> Any:
        shard = self._shards.get(name)
        if shard is None:
            self._settings(name)
            folder = self._folder(name)
            if not folder.is_dir():
                raise QdrantIndexError(f"collection {name!r} of the Qdrant Edge store {self.path} has its settings "
                                       f"but not its shard folder {folder}; the store is damaged.")
            try:
                shard = self._shards[name] = self._edge.EdgeShard.load(str(folder))
            except Exception as err:  # noqa: BLE001 - qdrant-edge raises plain Exceptions ("Service runtime error")
                raise QdrantIndexError(f"cannot load collection {name!r}'s shard {folder}: {err}") from None
        return shard

    def _payload(self, selector: PayloadSelector) -> Any:
        if isinstance(selector, models.PayloadSelectorExclude):
            return self._edge.PayloadSelector.Exclude(list(selector.exclude))
        if isinstance(selector, models.PayloadSelectorInclude):
            return self._edge.PayloadSelector.Include(list(selector.include))
        if isinstance(selector, (list, tuple)):
            return self._edge.PayloadSelector.Include(list(selector))
        return bool(selector)

    def _filter(self, flt: models.Filter | None) -> Any:
        """A qdrant-client filter in Edge's terms (the conditions this package builds: match, nested, ids)."""
        if flt is None:
            return None
        edge = self._edge

        def condition(item: Any) -> Any:
            if isinstance(item, models.Filter):
                return self._filter(item)
            if isinstance(item, models.NestedCondition):
                return edge.NestedCondition(item.nested.key, self._filter(item.nested.filter))
            if isinstance(item, models.HasIdCondition):
                return edge.HasIdCondition({str(i) for i in item.has_id})
            if isinstance(item, models.FieldCondition) and item.match is not None:
                if isinstance(item.match, models.MatchValue):
                    return edge.FieldCondition(item.key, match=edge.MatchValue(item.match.value))
                if isinstance(item.match, models.MatchAny):
                    return edge.FieldCondition(item.key, match=edge.MatchAny(list(item.match.any)))
            raise NotImplementedError(f"the Qdrant Edge store does not translate the condition {item!r}.")

        def conditions(items: Any) -> list[Any] | None:
            if items is None:
                return None
            return [condition(c) for c in (items if isinstance(items, list) else [items])]

        return edge.Filter(must=conditions(flt.must), should=conditions(flt.should), must_not=conditions(flt.must_not))


def _vectors(selector: VectorSelector) -> Any:
    return list(selector) if isinstance(selector, tuple) else selector


def _record(found: Any) -> models.Record:
    return models.Record.model_construct(id=str(found.id), payload=found.payload, vector=found.vector,
                                         shard_key=None, order_value=None)


def _scored(found: Any) -> models.ScoredPoint:
    return models.ScoredPoint.model_construct(id=str(found.id), version=found.version, score=found.score,
                                              payload=found.payload, vector=found.vector, shard_key=None,
                                              order_value=None)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(partial, path)


def _lock(path: Path) -> Any:
    """An exclusive lock on the store (portalocker, as qdrant-client's local mode uses)."""
    import portalocker

    handle = open(path, "w")  # noqa: SIM115 - held open for the client's life
    try:
        portalocker.lock(handle, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
    except portalocker.exceptions.LockException:
        handle.close()
        raise QdrantIndexError(f"the Qdrant Edge store {path.parent} is already open in another client or process; "
                               "close it there first.") from None
    return handle


def _unlock(handle: Any) -> None:
    import portalocker

    portalocker.unlock(handle)
    handle.close()
