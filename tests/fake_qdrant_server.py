"""A stand-in for a Qdrant >= 1.16 server's REST API, for the tests that check what is sent to a server.

No Qdrant server can be installed on the test machines, so these tests give qdrant-client an
``httpx.MockTransport`` with this object: it answers the REST calls the integration makes (list,
create, get, update and delete collections, payload indexes, retrieve, upsert, delete points, an
unfiltered count) and records every
request, so the assertions are on exactly what a real server or cluster would receive.
"""

from __future__ import annotations

import json

import httpx


class FakeServer:
    """Answers qdrant-client's REST calls like a Qdrant >= 1.16 server and records each request."""

    def __init__(self, *, keep_metadata: bool = True) -> None:
        self.requests: list[httpx.Request] = []
        self.collections: dict[str, dict] = {}
        self.points: dict[str, dict[str, dict]] = {}
        self.indexes: dict[str, dict[str, str]] = {}
        self.upsert_failures: list[int] = []  # status codes for the next upserts
        self.status_for_list: int = 200
        self.keep_metadata = keep_metadata

    # -- helpers for the assertions
    def calls(self, method: str | None = None, path: str | None = None) -> list[httpx.Request]:
        return [r for r in self.requests if (method is None or r.method == method) and (path is None or r.url.path == path)]

    @staticmethod
    def body(request: httpx.Request):
        return json.loads(request.content) if request.content else None

    # -- the transport
    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        parts = request.url.path.strip("/").split("/")
        body = self.body(request)
        method = request.method
        if parts == ["collections"] and method == "GET":
            if self.status_for_list != 200:
                return self._error(self.status_for_list, "Must provide an API key or an Authorization bearer token")
            return self._ok({"collections": [{"name": n} for n in self.collections]})
        name = parts[1]
        rest = parts[2:]
        if rest == ["exists"] and method == "GET":
            return self._ok({"exists": name in self.collections})
        if rest == [] and method == "PUT":
            if not self.keep_metadata:
                body.pop("metadata", None)
            self.collections[name] = body
            self.points[name] = {}
            self.indexes[name] = {}
            return self._ok(True)
        if rest == [] and method == "GET":
            return self._ok(self._info(name))
        if rest == [] and method == "PATCH":  # update_collection
            self.collections[name].setdefault("hnsw_config", {}).update(body.get("hnsw_config") or {})
            return self._ok(True)
        if rest == [] and method == "DELETE":
            self.collections.pop(name, None)
            return self._ok(True)
        if rest == ["index"] and method == "PUT":
            self.indexes[name][body["field_name"]] = body["field_schema"]
            return self._ok({"operation_id": 1, "status": "completed"})
        if rest == ["points"] and method == "POST":  # retrieve
            found = [self._record(self.points[name][i], body.get("with_payload"), body.get("with_vector"))
                     for i in body["ids"] if i in self.points[name]]
            return self._ok(found)
        if rest == ["points", "delete"] and method == "POST":
            for i in body["points"]:
                self.points[name].pop(i, None)
            return self._ok({"operation_id": 3, "status": "completed"})
        if rest == ["points", "count"] and method == "POST" and body.get("filter") is None:
            return self._ok({"count": len(self.points[name])})
        if rest == ["points"] and method == "PUT":  # upsert
            if self.upsert_failures:
                return self._error(self.upsert_failures.pop(0), "service unavailable")
            for point in body["points"]:
                self.points[name][point["id"]] = point
            return self._ok({"operation_id": 2, "status": "completed"})
        return self._error(404, f"the fake server does not implement {method} {request.url.path}")

    def _info(self, name: str) -> dict:
        spec = self.collections[name]
        params = {k: spec[k] for k in ("vectors", "shard_number", "replication_factor", "write_consistency_factor") if k in spec}
        return {
            "status": "green", "optimizer_status": "ok", "segments_count": 1, "points_count": len(self.points[name]),
            "config": {
                "params": params,
                "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000, **spec.get("hnsw_config", {})},
                "optimizer_config": {"deleted_threshold": 0.2, "vacuum_min_vector_number": 1000,
                                     "default_segment_number": 0, "flush_interval_sec": 5},
                "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                "metadata": spec.get("metadata"),
            },
            "payload_schema": {f: {"data_type": s, "points": 0} for f, s in self.indexes[name].items()},
        }

    @staticmethod
    def _record(point: dict, with_payload, with_vector) -> dict:
        """A stored point as the server returns it: payload keys and vectors as selected (``true``,
        ``false`` or a list of names; a server stores cosine vectors normalised)."""
        payload = point.get("payload") or {}
        if isinstance(with_payload, list):
            payload = {k: payload[k] for k in with_payload if k in payload}
        vectors = {name: _normalised(v) for name, v in (point.get("vector") or {}).items()}
        if isinstance(with_vector, list):
            vectors = {k: v for k, v in vectors.items() if k in with_vector}
        return {"id": point["id"], "payload": payload if with_payload is not False else None,
                "vector": vectors if with_vector else None}

    @staticmethod
    def _ok(result) -> httpx.Response:
        return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})

    @staticmethod
    def _error(status: int, message: str) -> httpx.Response:
        return httpx.Response(status, json={"status": {"error": message}, "time": 0.0})


def _normalised(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector
