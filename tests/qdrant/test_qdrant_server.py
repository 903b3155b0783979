"""What the Qdrant integration sends to a *server*, checked by inspecting the HTTP requests.

No Qdrant server can be installed on the test machines, so these tests give qdrant-client an
``httpx.MockTransport``: a small in-process stand-in that answers the REST calls the index
makes (list / create / get collections, payload indexes, retrieve, upsert) and records every
request object. The assertions are on those recorded requests: method, path, query, headers
and JSON body, i.e. exactly what a real server or cluster would receive.
"""

from __future__ import annotations


import httpx
import pytest

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
from mteb_fairpos.integrations.qdrant import (
    CollectionMismatchError,
    FairQdrantIndex,
    QdrantIndexError,
    QdrantUnavailableError,
    UpsertFailedError,
    point_id,
)
from mteb_fairpos.integrations.qdrant.store import PAYLOAD_INDEXES

from fake_qdrant_server import FakeServer

URL = "https://qdrant.test:6333"
DOCS = [
    {"id": "p1", "segments": [{"text": "The mayor opened a new bridge over the river on Friday.", "language": "en"},
                              {"text": "Der Zoo begrüßt zwei junge Pandas aus China.", "language": "de"}]},
    {"id": "p2", "segments": ["Farmers expect a record apple harvest this autumn in the valley."]},
]


def _index(model, server: FakeServer, **kwargs) -> FairQdrantIndex:
    return FairQdrantIndex(model, "news", url=URL, api_key="secret-key", transport=httpx.MockTransport(server), **kwargs)


def test_requests_sent_to_a_cluster(model):
    server = FakeServer()
    index = _index(model, server)
    report = index.index(DOCS, shard_number=3, replication_factor=2, write_consistency_factor=2, show_progress=False)
    assert report.written == 2 and report.created_collection

    # every request goes to the server URL with the API key
    assert all(r.url.host == "qdrant.test" and r.url.port == 6333 and r.url.scheme == "https" for r in server.requests)
    assert all(r.headers.get("api-key") == "secret-key" for r in server.requests)
    # reachability probe first, then the existence check, then the creation
    assert (server.requests[0].method, server.requests[0].url.path) == ("GET", "/collections")
    [create] = server.calls("PUT", "/collections/news")
    body = server.body(create)
    assert body["shard_number"] == 3 and body["replication_factor"] == 2 and body["write_consistency_factor"] == 2
    assert body["vectors"] == {"calibrated": {"size": 384, "distance": "Cosine"},
                               "uncalibrated": {"size": 384, "distance": "Cosine"}}
    stored = body["metadata"]["mteb_fairpos"]
    assert stored["model"] == "sentence-transformers/all-MiniLM-L6-v2" and stored["calibration"] == "b8_lhalf_a0.5"
    assert stored["vectors"] == ["calibrated", "uncalibrated"] and stored["dimension"] == 384

    # payload indexes on document id, kind, positions and languages (nested and flat)
    indexes = {server.body(r)["field_name"]: server.body(r)["field_schema"] for r in server.calls("PUT", "/collections/news/index")}
    assert indexes == {field: schema.value for field, schema in PAYLOAD_INDEXES}
    assert {"doc_id", "segments[].position", "segments[].language"} <= set(indexes)

    # one upsert, waited for, with deterministic ids, both named vectors and the position payload
    [upsert] = server.calls("PUT", "/collections/news/points")
    assert upsert.url.params.get("wait") == "true"
    points = {p["id"]: p for p in server.body(upsert)["points"]}
    assert set(points) == {point_id("news", "p1"), point_id("news", "p2")}
    p1 = points[point_id("news", "p1")]
    assert set(p1["vector"]) == {"calibrated", "uncalibrated"} and len(p1["vector"]["calibrated"]) == 384
    payload = p1["payload"]
    assert payload["doc_id"] == "p1" and payload["n_segments"] == 2 and payload["calibration"] == "b8_lhalf_a0.5"
    assert [(s["position"], s["language"]) for s in payload["segments"]] == [(1, "en"), (2, "de")]
    assert payload["segments"][1]["char_span"] == [56, 100] and payload["segments"][0]["token_span"][0] == 1
    order = [(r.method, r.url.path) for r in server.requests]
    assert order.index(("PUT", "/collections/news")) < order.index(("PUT", "/collections/news/index")) < order.index(
        ("PUT", "/collections/news/points"))

    # the same input again: the lookup finds every document, nothing is sent to be written
    before = len(server.calls("PUT"))
    again = index.index(DOCS, show_progress=False)
    assert again.written == 0 and again.unchanged == 2
    assert len(server.calls("PUT")) == before
    index.close()


def test_transient_server_errors_are_retried(model):
    server = FakeServer()
    server.upsert_failures = [503, 502]
    with _index(model, server) as index:
        report = index.index(DOCS, backoff=0, show_progress=False)
    assert report.written == 2
    assert len(server.calls("PUT", "/collections/news/points")) == 3
    assert len(server.points["news"]) == 2


def test_client_errors_are_not_retried_and_say_how_to_resume(model):
    server = FakeServer()
    server.upsert_failures = [400]
    with _index(model, server) as index:
        with pytest.raises(UpsertFailedError, match=r"failed \(not a failure a retry mends\).*Re-run the same command"):
            index.index(DOCS, backoff=0, show_progress=False)
    assert len(server.calls("PUT", "/collections/news/points")) == 1 and server.points["news"] == {}


def test_mismatch_on_a_server_is_refused_without_any_write(model):
    server = FakeServer()
    with _index(model, server) as index:
        index.index(DOCS, show_progress=False)
    writes = len(server.calls("PUT"))
    other = FairSentenceTransformer(model, CalibrationConfig(basket_size=32))
    with FairQdrantIndex(other, "news", url=URL, api_key="secret-key", transport=httpx.MockTransport(server)) as index:
        with pytest.raises(CollectionMismatchError, match="b32_lhalf_a0.5"):
            index.index(DOCS, show_progress=False)
    assert len(server.calls("PUT")) == writes


def test_server_without_collection_metadata_is_refused_and_cleaned_up(model):
    server = FakeServer(keep_metadata=False)
    with _index(model, server) as index:
        with pytest.raises(QdrantIndexError, match="Qdrant >= 1.16"):
            index.index(DOCS, show_progress=False)
    assert server.calls("DELETE", "/collections/news") and not server.calls("PUT", "/collections/news/points")


def test_unreachable_or_refusing_server(model):
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(QdrantUnavailableError, match=rf"cannot reach the Qdrant server at {URL}.*nothing was written"):
        FairQdrantIndex(model, "news", url=URL, transport=httpx.MockTransport(refuse))

    server = FakeServer()
    server.status_for_list = 401
    with pytest.raises(QdrantUnavailableError, match="refused the credentials"):
        _index(model, server)
    assert len(server.requests) == 1  # only the probe
