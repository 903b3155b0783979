"""Qdrant Edge as an embedded backend: the real Qdrant engine in this process (qdrant-edge-py).

qdrant-client's local mode is a pure-Python stand-in that slows down past a few thousand points;
Qdrant Edge runs the server's own storage, HNSW and filters in-process. `EdgeClient` gives it the
shape of the ``QdrantClient`` methods this package calls (collections, upsert / upload, retrieve,
scroll, count, query, delete), so the index, the loader, search and discoverability run on it
unchanged: the backend is chosen where the client is made (`store.connect(..., backend="edge")`).

A store is a folder: one Edge shard per collection (``<collection>/``) with the collection's
vector settings and mteb-fairpos metadata beside it (``<collection>.collection.json``, written
before the shard, so a collection without it does not exist), and a lock file that keeps a
second process out, as local mode does. qdrant-edge is young (0.x): its version is pinned in the
``edge`` extra, and the filters and payload selectors used here are translated one by one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from qdrant_client.http import models  # the REST models (qdrant_client.models shadows QueryResponse)

COLLECTION_SUFFIX = ".collection.json"
LOCK_FILE = ".lock"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
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


def holds_local_mode(path: str | os.PathLike[str]) -> bool:
    """Whether the folder ``path`` holds a qdrant-client local-mode store (its ``meta.json`` or ``collection/``)."""
    folder = Path(path)
    return (folder / "meta.json").is_file() or (folder / "collection").is_dir()


class EdgeClient:
    """The subset of ``QdrantClient`` this package uses, on Qdrant Edge shards in one folder."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._edge = require_edge()
        self.path = Path(path)
        if holds_local_mode(self.path):
            raise ValueError(f"{str(self.path)!r} holds a qdrant-client local-mode store, not a Qdrant Edge one; "
                             "open it with the local backend, or give Edge a folder of its own.")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = _lock(self.path / LOCK_FILE)
        self._shards: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle
    def close(self, **_: Any) -> None:
        for shard in self._shards.values():
            shard.flush()
            shard.close()
        self._shards.clear()
        if self._lock is not None:
            _unlock(self._lock)
            self._lock = None

    # ------------------------------------------------------------------ collections
    def get_collections(self) -> models.CollectionsResponse:
        names = sorted(p.name[: -len(COLLECTION_SUFFIX)] for p in self.path.glob(f"*{COLLECTION_SUFFIX}"))
        return models.CollectionsResponse(collections=[models.CollectionDescription(name=n) for n in names])

    def collection_exists(self, collection_name: str) -> bool:
        return self._settings_path(collection_name).is_file()

    def create_collection(self, collection_name: str, vectors_config: dict[str, models.VectorParams], *,
                          metadata: dict[str, Any] | None = None, on_disk_payload: bool | None = None,
                          **_cluster_settings: Any) -> bool:
        """Create the shard; cluster settings (shards, replicas) do not apply to one embedded shard."""
        if self.collection_exists(collection_name):
            raise ValueError(f"collection {collection_name!r} already exists in {self.path}.")
        edge = self._edge
        vectors = {name: edge.EdgeVectorParams(size=params.size, distance=getattr(edge.Distance, params.distance.value))
                   for name, params in vectors_config.items()}
        settings = {"vectors": {name: {"size": p.size, "distance": p.distance.value} for name, p in vectors_config.items()},
                    "metadata": metadata or {}, "payload_schema": {}}
        folder = self._folder(collection_name)
        if folder.exists():  # a shard left by a create that died before its settings were written
            shutil.rmtree(folder)
        self._shards[collection_name] = edge.EdgeShard.create(str(folder), edge.EdgeConfig(
            vectors=vectors, on_disk_payload=on_disk_payload))
        _write_json(self._settings_path(collection_name), settings)
        return True

    def get_collection(self, collection_name: str) -> models.CollectionInfo:
        """What Edge reports (points, segments) and the settings file holds (vectors, metadata, payload
        indexes); the fields a server adds (status, HNSW, optimizer, WAL) are left empty, not made up."""
        settings = self._settings(collection_name)
        shard = self._shard(collection_name)
        vectors = {name: models.VectorParams(size=v["size"], distance=models.Distance(v["distance"]))
                   for name, v in settings["vectors"].items()}
        config = models.CollectionConfig.model_construct(  # HNSW, optimizer and WAL: Edge does not report them
            params=models.CollectionParams.model_construct(vectors=vectors), hnsw_config=None, optimizer_config=None,
            wal_config=None, metadata=settings["metadata"])
        schema = {field: models.PayloadIndexInfo.model_construct(data_type=models.PayloadSchemaType(kind))
                  for field, kind in settings["payload_schema"].items()}
        info = shard.info()
        return models.CollectionInfo.model_construct(  # status: no server, no status
            status=None, optimizer_status=None, points_count=info.points_count, segments_count=info.segments_count,
            config=config, payload_schema=schema)

    def optimize(self, collection_name: str) -> bool:
        """Build the HNSW and payload indexes of what was written (blocking); True if anything changed.

        Edge does not optimize in the background: until this runs, queries scan the points."""
        shard = self._shard(collection_name)
        changed = shard.optimize()
        shard.flush()
        return changed

    def delete_collection(self, collection_name: str, **_: Any) -> bool:
        shard = self._shards.pop(collection_name, None)
        if shard is not None:
            shard.close()
        self._settings_path(collection_name).unlink(missing_ok=True)
        shutil.rmtree(self._folder(collection_name), ignore_errors=True)
        return True

    def create_payload_index(self, collection_name: str, field_name: str, field_schema: Any, **_: Any) -> None:
        kind = getattr(field_schema, "value", field_schema)
        self._shard(collection_name).update(self._edge.UpdateOperation.create_field_index(
            field_name, getattr(self._edge.PayloadSchemaType, _SCHEMAS[str(kind)])))
        settings = self._settings(collection_name)
        settings["payload_schema"][field_name] = str(kind)
        _write_json(self._settings_path(collection_name), settings)

    # ------------------------------------------------------------------ points
    def upsert(self, collection_name: str, points: Sequence[models.PointStruct], **_: Any) -> models.UpdateResult:
        """Upsert and flush: when this returns, the points survive a crash of the process."""
        shard = self._shard(collection_name)
        shard.update(self._edge.UpdateOperation.upsert_points(
            [self._edge.Point(str(p.id), p.vector, p.payload) for p in points]))
        shard.flush()
        return models.UpdateResult(operation_id=0, status=models.UpdateStatus.COMPLETED)

    def upload_points(self, collection_name: str, points: Iterable[models.PointStruct], batch_size: int = 64,
                      **_: Any) -> None:
        batch: list[models.PointStruct] = []
        for point in points:
            batch.append(point)
            if len(batch) >= batch_size:
                self.upsert(collection_name, batch)
                batch = []
        if batch:
            self.upsert(collection_name, batch)

    def delete(self, collection_name: str, points_selector: models.PointIdsList, **_: Any) -> models.UpdateResult:
        shard = self._shard(collection_name)
        shard.update(self._edge.UpdateOperation.delete_points([str(i) for i in points_selector.points]))
        shard.flush()
        return models.UpdateResult(operation_id=0, status=models.UpdateStatus.COMPLETED)

    def retrieve(self, collection_name: str, ids: Sequence[Any], with_payload: Any = True, with_vectors: Any = False,
                 **_: Any) -> list[models.Record]:
        found = self._shard(collection_name).retrieve([str(i) for i in ids], with_payload=self._payload(with_payload),
                                                      with_vector=with_vectors)
        return [_record(r) for r in found]

    def count(self, collection_name: str, count_filter: models.Filter | None = None, exact: bool = True,
              **_: Any) -> models.CountResult:
        request = self._edge.CountRequest(exact=True, filter=self._filter(count_filter))
        return models.CountResult(count=self._shard(collection_name).count(request))

    def scroll(self, collection_name: str, scroll_filter: models.Filter | None = None, limit: int = 10,
               offset: Any = None, with_payload: Any = True, with_vectors: Any = False,
               **_: Any) -> tuple[list[models.Record], str | None]:
        request = self._edge.ScrollRequest(offset=None if offset is None else str(offset), limit=limit,
                                           filter=self._filter(scroll_filter), with_payload=self._payload(with_payload),
                                           with_vector=with_vectors)
        found, next_offset = self._shard(collection_name).scroll(request)
        return [_record(r) for r in found], None if next_offset is None else str(next_offset)

    def query_points(self, collection_name: str, query: Sequence[float], using: str | None = None,
                     query_filter: models.Filter | None = None, limit: int = 10, with_payload: Any = True,
                     with_vectors: Any = False, **_: Any) -> models.QueryResponse:
        request = self._edge.QueryRequest(limit=limit, query=self._edge.Query.Nearest(list(query), using=using),
                                          filter=self._filter(query_filter), with_payload=self._payload(with_payload),
                                          with_vector=with_vectors)
        return models.QueryResponse(points=[_scored(p) for p in self._shard(collection_name).query(request)])

    def query_batch_points(self, collection_name: str, requests: Sequence[models.QueryRequest],
                           **_: Any) -> list[models.QueryResponse]:
        return [self.query_points(collection_name, r.query, using=r.using, query_filter=r.filter,
                                  limit=r.limit or 10, with_payload=r.with_payload if r.with_payload is not None else True)
                for r in requests]

    # ------------------------------------------------------------------ internals
    def _folder(self, name: str) -> Path:
        if not _NAME.match(name):
            raise ValueError(f"collection name {name!r} cannot be a folder name; use letters, digits, '_', '-' and '.'.")
        return self.path / name

    def _settings_path(self, name: str) -> Path:
        return self.path / f"{name}{COLLECTION_SUFFIX}"

    def _settings(self, name: str) -> dict[str, Any]:
        path = self._settings_path(name)
        if not path.is_file():
            raise ValueError(f"collection {name!r} does not exist in the Qdrant Edge store {self.path}.")
        return json.loads(path.read_text(encoding="utf-8"))

    def _shard(self, name: str) -> Any:
        shard = self._shards.get(name)
        if shard is None:
            self._settings(name)
            shard = self._shards[name] = self._edge.EdgeShard.load(str(self._folder(name)))
        return shard

    def _payload(self, selector: Any) -> Any:
        if isinstance(selector, models.PayloadSelectorExclude):
            return self._edge.PayloadSelector.Exclude(list(selector.exclude))
        if isinstance(selector, models.PayloadSelectorInclude):
            return self._edge.PayloadSelector.Include(list(selector.include))
        if isinstance(selector, (list, tuple)):
            return self._edge.PayloadSelector.Include(list(selector))
        return bool(selector)

    def _filter(self, flt: models.Filter | None) -> Any:
        """A qdrant-client filter in Edge's terms (the conditions this package builds: match, nested)."""
        if flt is None:
            return None
        edge = self._edge

        def condition(item: Any) -> Any:
            if isinstance(item, models.Filter):
                return self._filter(item)
            if isinstance(item, models.NestedCondition):
                return edge.NestedCondition(item.nested.key, self._filter(item.nested.filter))
            if isinstance(item, models.FieldCondition) and item.match is not None:
                if isinstance(item.match, models.MatchValue):
                    return edge.FieldCondition(item.key, match=edge.MatchValue(item.match.value))
                if isinstance(item.match, models.MatchAny):
                    return edge.FieldCondition(item.key, match=edge.MatchAny(list(item.match.any)))
            raise NotImplementedError(f"the Qdrant Edge backend does not translate the condition {item!r}.")

        def conditions(items: Any) -> list[Any] | None:
            if items is None:
                return None
            return [condition(c) for c in (items if isinstance(items, list) else [items])]

        return edge.Filter(must=conditions(flt.must), should=conditions(flt.should), must_not=conditions(flt.must_not))


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
        raise RuntimeError(f"the Qdrant Edge store {path.parent} is already open in another client or process; "
                           "close it there first.") from None
    return handle


def _unlock(handle: Any) -> None:
    import portalocker

    portalocker.unlock(handle)
    handle.close()
