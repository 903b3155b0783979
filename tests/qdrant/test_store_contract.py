"""The store contract: the same operations on every `Store` give the same answers.

Qdrant Edge and qdrant-client's local mode run for real (the ``backend`` fixture); a server is
qdrant-client's `ServerStore` talking to the recorded stand-in of `fake_qdrant_server` (no
Qdrant server can be installed here), which answers the collection calls, writes, retrieves,
deletes and an unfiltered count, so the server joins the part of the contract those cover.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from mteb_fairpos.integrations.qdrant import FairQdrantIndex, LocalStore, ServerStore, as_store, open_store, point_id
from mteb_fairpos.integrations.qdrant.search import position_filter
from mteb_fairpos.integrations.qdrant.store import PAYLOAD_INDEXES

from fake_qdrant_server import FakeServer

VECTORS = {"calibrated": models.VectorParams(size=4, distance=models.Distance.COSINE),
           "uncalibrated": models.VectorParams(size=4, distance=models.Distance.COSINE)}
METADATA = {"mteb_fairpos": {"model": "m", "vectors": ["calibrated", "uncalibrated"]}}


def _points() -> list[models.PointStruct]:
    rng = np.random.default_rng(7)
    points = []
    for i in range(12):
        segments = [{"position": p, "language": ("en", "de")[(i + p) % 2], "coverage": "full"} for p in (1, 2, 3)[: 1 + i % 3]]
        points.append(models.PointStruct(
            id=point_id("c", f"d{i}"), vector={name: rng.standard_normal(4).tolist() for name in VECTORS},
            payload={"kind": "document", "doc_id": f"d{i}", "n_segments": len(segments), "segments": segments,
                     "group": i % 3}))
    return points


def _server(server: FakeServer):
    return open_store(url="https://qdrant.test:6333", transport=httpx.MockTransport(server))


@pytest.fixture()
def every_store(backend, tmp_path):
    """Opens a new store of this test's embedded backend, and one on the recorded server."""
    opened = [open_store(":memory:") if backend == "local" else open_store(str(tmp_path / "edge")),
              _server(FakeServer())]
    yield opened
    for store in opened:
        store.close()


def _basics(store) -> dict:
    """What the store answers to the operations every backend (the recorded server included) covers."""
    points = _points()
    ids = [str(p.id) for p in points]
    answers = {"before": (store.collections(), store.exists("c"))}
    store.create("c", VECTORS, metadata=METADATA)
    if store.capabilities.payload_indexes:
        for field, schema in PAYLOAD_INDEXES:
            store.add_payload_index("c", field, schema)
    store.write("c", points, batch_size=5)
    info = store.describe("c")
    answers["created"] = (store.collections(), store.exists("c"), info.name, dict(info.vectors), info.metadata,
                          info.points, store.count("c"))
    answers["indexes"] = info.payload_indexes if store.capabilities.payload_indexes else {f for f, _ in PAYLOAD_INDEXES}
    found = store.retrieve("c", [ids[3], "00000000-0000-0000-0000-000000000000", ids[0]], payload=["doc_id", "group"])
    answers["retrieve"] = sorted((str(r.id), r.payload, r.vector) for r in found)
    [whole] = store.retrieve("c", [ids[5]], payload=True, vectors=True)
    answers["payload"] = whole.payload
    answers["vector"] = {name: np.round(v, 5).tolist() for name, v in whole.vector.items()}
    answers["no payload"] = [(str(r.id), r.payload) for r in store.retrieve("c", ids[:2], payload=False)]
    store.write("c", points[:4])  # rewriting the same ids adds nothing
    store.delete("c", ids[:3])
    answers["deleted"] = (store.count("c"), len(store.retrieve("c", ids[:4], payload=False)))
    store.drop("c")
    answers["dropped"] = (store.exists("c"), store.collections())
    return answers


def test_every_store_answers_the_same(every_store):
    embedded, server = every_store
    assert _basics(embedded) == _basics(server)


def test_the_embedded_stores_page_count_and_query_alike(tmp_path):
    pytest.importorskip("qdrant_edge")
    points = _points()
    ids = [str(p.id) for p in points]
    answers = []
    for store in (open_store(":memory:"), open_store(str(tmp_path / "edge"))):
        with store:
            store.create("c", VECTORS, metadata=METADATA)
            store.write("c", points)
            store.build_indexes("c")
            pages, offset = [], None
            while True:
                page, offset = store.scroll("c", limit=5, offset=offset, payload=["doc_id"])
                pages.append(len(page))
                if offset is None:
                    break
            everything, _ = store.scroll("c", limit=100, payload=models.PayloadSelectorExclude(exclude=["segments"]))
            group = models.Filter(must=[models.FieldCondition(key="group", match=models.MatchValue(value=1))])
            counts = [store.count("c", flt) for flt in (
                None, group, models.Filter(must=[models.FieldCondition(key="group", match=models.MatchAny(any=[0, 2]))]),
                position_filter(3), position_filter(2, "de"), models.Filter(must_not=[group]),
                models.Filter(must=[models.HasIdCondition(has_id=ids[:5] + [point_id("c", "absent")])]))]
            query = points[4].vector["calibrated"]
            nearest = store.query("c", query, using="calibrated", limit=4, filter=position_filter(2),
                                  payload=["doc_id"])
            batch = store.query_batch("c", [
                models.QueryRequest(query=query, using="calibrated", limit=4, filter=position_filter(2),
                                    with_payload=["doc_id"]),
                models.QueryRequest(query=points[0].vector["uncalibrated"], using="uncalibrated", limit=3)])
            answers.append({
                "pages": pages, "scrolled": sorted((str(r.id), r.payload) for r in everything), "counts": counts,
                "nearest": [(str(p.id), p.payload, round(p.score, 5)) for p in nearest],
                "batch": [[(str(p.id), round(p.score, 5)) for p in hits] for hits in batch],
                "batch first is the query": [str(p.id) for p in batch[0]] == [str(p.id) for p in nearest]})
    local, edge = answers
    assert local == edge
    assert local["counts"][:2] == [12, 4] and local["counts"][-1] == 5 and local["batch first is the query"]


def test_a_users_qdrant_client_is_wrapped_in_the_store_its_settings_name(model):
    local = as_store(QdrantClient(location=":memory:"))
    assert isinstance(local, LocalStore) and local.capabilities.name == "local"
    with FairQdrantIndex(model, "c", client=QdrantClient(location=":memory:")) as index:
        index.index([{"id": "a", "segments": ["One short text.", "And a second one."]}], show_progress=False)
        assert isinstance(index.store, LocalStore) and index.count() == 1
    server = FakeServer()
    remote = as_store(QdrantClient(url="https://qdrant.test:6333", transport=httpx.MockTransport(server),
                                   check_compatibility=False))
    assert isinstance(remote, ServerStore) and remote.capabilities.remote
    assert [(r.method, r.url.path) for r in server.requests] == [("GET", "/collections")]  # probed once
    assert as_store(local) is local
    with pytest.raises(TypeError, match="expected a Store or a qdrant_client.QdrantClient, got str"):
        as_store("./qdrant")
    local.close()
    remote.close()


def test_a_server_defers_hnsw_and_reports_what_it_holds():
    server = FakeServer()
    with _server(server) as store:
        store.create("c", VECTORS, metadata=METADATA, shard_number=2, replication_factor=2)
        assert store.describe("c").hnsw_m == 16
        store.set_hnsw_m("c", 0)
        assert store.describe("c").hnsw_m == 0
        body = server.body(server.calls("PUT", "/collections/c")[0])
        assert (body["shard_number"], body["replication_factor"], body["metadata"]) == (2, 2, METADATA)
