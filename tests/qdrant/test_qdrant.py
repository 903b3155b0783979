"""Qdrant integration against the embedded local mode, with the real all-MiniLM-L6-v2.

Basket size 8 keeps calibration active on these short documents (mean pooling: every row is
calibrated once a sequence has at least 8 content tokens).
"""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest
import torch

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
from mteb_fairpos.integrations.qdrant import (
    CollectionMismatchError,
    FairQdrantIndex,
    InputError,
    PositionQuery,
    QdrantIndexError,
    UpsertFailedError,
    open_store,
    encode_documents,
    parse_documents,
    point_id,
    position_filter,
)
from mteb_fairpos.integrations.qdrant import store
from mteb_fairpos.offline import MINILM_HUB_ID

from corpus import RECORDS

CALIBRATION = CalibrationConfig(basket_size=8)


@pytest.fixture()
def index(model):
    with FairQdrantIndex(model, "news") as idx:  # in-memory local mode
        yield idx


@pytest.fixture()
def stored(model, new_store):
    """An index on an empty store of each embedded backend (the writer's checks hold on both)."""
    return FairQdrantIndex(model, "news", new_store())


def _count_upserts(opened, monkeypatch):
    calls = []
    original = opened.write

    def counting(*args, **kwargs):
        calls.append(len(kwargs.get("points", args[1] if len(args) > 1 else [])))
        return original(*args, **kwargs)

    monkeypatch.setattr(opened, "write", counting)
    return calls


def _vector(index, pid, name):
    point = index.store.retrieve(index.collection, [pid], vectors=[name])[0]
    return np.asarray(point.vector[name], dtype=np.float32)


def _cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---------------------------------------------------------------------------- indexing
def test_points_payload_and_collection_metadata(index, model):
    report = index.index(RECORDS, late_chunks=True, show_progress=False)
    assert (report.documents, report.written, report.unchanged, report.created_collection) == (3, 3, 0, True)
    assert index.count("document") == 3 and index.count("segment") == 7 and index.count() == 10
    assert report.points_written == 10

    info = index.store.describe("news")
    assert set(info.vectors) == {"calibrated", "uncalibrated", "late_chunk", "late_chunk_uncalibrated"}
    assert all(v.size == 384 and v.distance.value == "Cosine" for v in info.vectors.values())
    stored = info.metadata["mteb_fairpos"]
    assert stored["model"] == MINILM_HUB_ID and stored["calibration"] == "b8_lhalf_a0.5" == str(CALIBRATION)

    doc = index.get_document("city")
    assert doc["kind"] == "document" and doc["doc_id"] == "city" and doc["n_segments"] == 3
    assert doc["model"] == MINILM_HUB_ID and doc["calibration"] == "b8_lhalf_a0.5" and doc["truncated"] is False
    assert [s["position"] for s in doc["segments"]] == [1, 2, 3]
    assert [s["language"] for s in doc["segments"]] == ["en", "en", "de"]
    assert [s["segment_id"] for s in doc["segments"]] == ["c1", "c2", None]
    assert all(s["coverage"] == "full" for s in doc["segments"])
    # character spans cut the segment texts out of the document text
    texts = [doc["text"][a:b] for a, b in (s["char_span"] for s in doc["segments"])]
    assert texts == [s["text"] for s in RECORDS[0]["segments"]]
    # token spans index the model input ([CLS] = 0), are contiguous and decode to the segment text
    ids = model.tokenizer(doc["text"], truncation=True, max_length=model.max_seq_length)["input_ids"]
    spans = [s["token_span"] for s in doc["segments"]]
    assert spans[0][0] == 1 and spans[-1][1] == len(ids) - 1
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    for (a, b), text in zip(spans, texts):
        assert model.tokenizer.decode(ids[a:b]).replace(" ", "") == text.lower().replace(" ", "")

    seg = index.store.retrieve("news", [point_id("news", "science", 2)])[0].payload
    assert seg["kind"] == "segment" and seg["doc_id"] == "science" and seg["position"] == 2
    assert seg["parent_id"] == point_id("news", "science", 0) and seg["char_span"] == [74, 155]
    assert seg["text"].startswith("A new species") and seg["segment_id"] is None and seg["language"] == "en"


def test_vectors_calibrated_uncalibrated_and_late_chunks(index, model):
    index.index(RECORDS, late_chunks=True, show_progress=False)
    doc = index.get_document("science")
    calibrated = _vector(index, point_id("news", "science"), "calibrated")
    uncalibrated = _vector(index, point_id("news", "science"), "uncalibrated")
    assert np.allclose(calibrated, model.encode_document([doc["text"]])[0], atol=1e-5)
    plain = FairSentenceTransformer(model, None)  # same weights, no calibration
    assert np.allclose(uncalibrated, plain.encode_document([doc["text"]])[0], atol=1e-5)
    assert _cos(calibrated, uncalibrated) < 0.9999  # calibration is active on these short documents

    tokens = model.encode_document([doc["text"]], output_value="token_embeddings")[0]
    for seg in doc["segments"]:
        a, b = seg["token_span"]
        expected = tokens[a:b].mean(dim=0)
        expected = (expected / expected.norm()).numpy()
        late = _vector(index, point_id("news", "science", seg["position"]), "late_chunk")
        assert np.allclose(late, expected, atol=1e-5)


def test_reindexing_writes_nothing_new(stored, monkeypatch):
    stored.index(RECORDS, late_chunks=True, show_progress=False)
    ids_before = sorted(str(p.id) for p in stored.store.scroll("news", limit=100)[0])
    calls = _count_upserts(stored.store, monkeypatch)
    report = stored.index(RECORDS, show_progress=False)  # options follow the existing collection
    assert (report.written, report.unchanged, report.points_written) == (0, 3, 0)
    assert calls == []
    assert sorted(str(p.id) for p in stored.store.scroll("news", limit=100)[0]) == ids_before
    expected = {point_id("news", r["id"], p) for r in RECORDS for p in range(len(r["segments"]) + 1)}
    assert set(ids_before) == expected


def test_changed_document_is_rewritten_and_stale_segment_points_removed(stored):
    stored.index(RECORDS, late_chunks=True, show_progress=False)
    changed = [dict(RECORDS[0], segments=RECORDS[0]["segments"][:1])] + RECORDS[1:]
    report = stored.index(changed, show_progress=False)
    assert (report.written, report.unchanged, report.stale_points_deleted) == (1, 2, 2)
    assert stored.get_document("city")["n_segments"] == 1
    assert stored.count("segment") == 5 and stored.count() == 8


def test_a_document_that_grows_rewrites_its_points_and_deletes_none(stored):
    stored.index(RECORDS, late_chunks=True, show_progress=False)
    grown = [dict(RECORDS[0], segments=RECORDS[0]["segments"] + ["A later paragraph about the harbour."])] + RECORDS[1:]
    report = stored.index(grown, show_progress=False)
    assert (report.written, report.unchanged, report.stale_points_deleted) == (1, 2, 0)
    assert stored.get_document("city")["n_segments"] == len(RECORDS[0]["segments"]) + 1


def test_killed_run_resumes_with_exactly_one_point_per_record(model, open_store, monkeypatch):
    records = RECORDS + [{"id": f"extra{i}", "segments": [f"Extra story number {i} about trains and buses.",
                                                          f"A second part of story {i} on harbours and ships."]}
                         for i in range(3)]
    with FairQdrantIndex(model, "news", open_store("qdrant")) as first:
        original = first.store.write
        calls = []

        def dies_on_sixth_call(*args, **kwargs):
            calls.append(1)
            if len(calls) == 6:
                raise KeyboardInterrupt("killed")  # not retried: a kill, not a transient error
            return original(*args, **kwargs)

        # 2 documents per batch, 2 points per upsert: city and science complete, then the two
        # segment points of "markets" are written but the run dies before its document point
        monkeypatch.setattr(first.store, "write", dies_on_sixth_call)
        with pytest.raises(KeyboardInterrupt):
            first.index(records, late_chunks=True, batch_size=2, upsert_batch_size=2, show_progress=False)
        done_before = first.count("document")
        half_written = first.count("segment")
        first.store.close()
    assert done_before == 2 and half_written == 3 + 2 + 2

    with FairQdrantIndex(model, "news", open_store("qdrant")) as second:  # a new process on the same folder
        report = second.index(records, batch_size=2, show_progress=False)
        assert report.unchanged == done_before and report.written == len(records) - done_before
        n_points = sum(len(r["segments"]) + 1 for r in records)
        assert second.count() == n_points and second.count("document") == len(records)
        points = second.store.scroll("news", limit=1000)[0]
        assert len({str(p.id) for p in points}) == n_points
        assert {(p.payload["doc_id"], p.payload.get("position", 0)) for p in points} == {
            (r["id"], pos) for r in records for pos in range(len(r["segments"]) + 1)}
        again = second.index(records, show_progress=False)
        assert again.written == 0 and second.count() == n_points


def test_upsert_is_retried_on_transient_errors_and_fails_cleanly(stored, monkeypatch):
    from qdrant_client.http.exceptions import ResponseHandlingException

    original = stored.store.write
    failures = iter([ResponseHandlingException(ConnectionError("reset")), TimeoutError("slow")])

    def flaky(*args, **kwargs):
        err = next(failures, None)
        if err is not None:
            raise err
        return original(*args, **kwargs)

    monkeypatch.setattr(stored.store, "write", flaky)
    report = stored.index(RECORDS, backoff=0, show_progress=False)
    assert report.written == 3 and stored.count() == 3

    def down(*args, **kwargs):
        raise ResponseHandlingException(ConnectionError("connection refused"))

    monkeypatch.setattr(stored.store, "write", down)
    more = [{"id": "late", "segments": ["A late story about trains."]}]
    with pytest.raises(UpsertFailedError, match="failed despite 2 retries .*Re-run the same command to resume"):
        stored.index(more, retries=2, backoff=0, show_progress=False)
    assert stored.count() == 3


def test_index_counts_what_it_reads_back(stored, monkeypatch):
    """The report's numbers are points found in the store: a store that loses a point fails the run."""
    real = stored.store.write
    monkeypatch.setattr(stored.store, "write", lambda name, points, **kw: real(name, points[1:], **kw))
    with pytest.raises(UpsertFailedError, match=r"1 of its 3 point\(s\) are missing"):
        stored.index(RECORDS, show_progress=False)
    assert stored.count("document") == 2


def test_truncation_is_reported_with_the_segments_it_cut(model):
    long = {"id": "long", "segments": [
        "Opening paragraph about the harbour and the ships that arrive every morning at dawn.",
        "Middle paragraph about the fish market where traders sell their catch to restaurants.",
        "Closing paragraph about the lighthouse keeper who retired after forty years of service.",
    ]}
    saved = model.max_seq_length
    model.max_seq_length = 24
    try:
        with FairQdrantIndex(model, "short") as index:
            report = index.index([long, {"id": "tiny", "segments": ["Short note.", "Another note."]}],
                                     late_chunks=True, show_progress=False)
            doc = index.get_document("long")
            n_late = index.count("segment")
    finally:
        model.max_seq_length = saved
    [trunc] = report.truncated
    assert trunc.doc_id == "long" and trunc.max_tokens == 24 and trunc.n_tokens > 40
    assert trunc.partial == (2,) and trunc.cut == (3,)
    assert "segment(s) 3 dropped" in str(trunc) and "long" in report.summary()
    assert doc["truncated"] is True and doc["max_tokens"] == 24
    assert [s["coverage"] for s in doc["segments"]] == ["full", "partial", "cut"]
    assert doc["segments"][2]["token_span"] is None and doc["segments"][1]["token_span"][1] == 23
    assert n_late == 2 + 2  # the cut segment has no contextual vector; "tiny" has two segments


# ---------------------------------------------------------------------------- refusals
def test_mismatched_collection_is_refused_before_anything_is_written(stored, model, monkeypatch):
    stored.index(RECORDS, show_progress=False)
    calls = _count_upserts(stored.store, monkeypatch)

    other = FairSentenceTransformer(model, CalibrationConfig(basket_size=16))
    with pytest.raises(CollectionMismatchError, match=r"calibration: collection has 'b8_lhalf_a0.5', this run uses 'b16_lhalf_a0.5'"):
        FairQdrantIndex(other, "news", stored.store).index([{"id": "x", "segments": ["new text"]}], show_progress=False)
    with pytest.raises(CollectionMismatchError, match="model: collection has"):
        FairQdrantIndex(model, "news", stored.store, model_name="someone/else").index(RECORDS, show_progress=False)
    with pytest.raises(CollectionMismatchError, match="named vectors"):
        stored.index(RECORDS, late_chunks=True, show_progress=False)
    with pytest.raises(CollectionMismatchError, match="named vectors"):
        stored.index(RECORDS, uncalibrated=False, show_progress=False)
    monkeypatch.setattr(model, "max_seq_length", model.max_seq_length // 2)  # another --max-length: other vectors
    with pytest.raises(CollectionMismatchError, match=r"maximum length: collection's documents were cut at \d+ tokens"):
        FairQdrantIndex(model, "news", stored.store).index(RECORDS, show_progress=False)
    monkeypatch.undo()
    assert calls == [] and stored.count() == 3

    from qdrant_client import models

    stored.store.create("foreign", {"v": models.VectorParams(size=384, distance=models.Distance.COSINE)})
    with pytest.raises(CollectionMismatchError, match="not created by mteb-fairpos"):
        FairQdrantIndex(model, "foreign", stored.store).index(RECORDS, show_progress=False)
    assert stored.store.count("foreign") == 0


def test_storing_text_follows_the_collection_and_a_different_choice_is_refused(stored, model, monkeypatch):
    stored.index(RECORDS, store_text=False, show_progress=False)
    calls = _count_upserts(stored.store, monkeypatch)
    with pytest.raises(CollectionMismatchError, match="document text: collection does not store it, this run would"):
        stored.index([{"id": "x", "segments": ["new text"]}], store_text=True, show_progress=False)
    assert calls == [] and stored.count() == 3

    # left unsaid, the choice follows the collection: the new document carries no text either
    stored.index([{"id": "x", "segments": ["new text"]}], show_progress=False)
    [point] = stored.store.retrieve("news", [point_id("news", "x", 0)])
    assert "text" not in point.payload and store.read_spec(stored.store, "news").store_text is False

    other = FairQdrantIndex(model, "with-text", stored.store)
    other.index(RECORDS, show_progress=False)
    with pytest.raises(CollectionMismatchError, match="document text: collection stores it, this run would not"):
        other.index(RECORDS, store_text=False, show_progress=False)
    assert all("text" in p.payload for p in stored.store.scroll("with-text", limit=100)[0])


def test_a_collection_without_a_recorded_text_choice_takes_either(stored, model):
    """A collection of an earlier release has no store_text in its metadata: it is not refused."""
    spec = stored.spec_for(uncalibrated=True, late_chunks=False)
    metadata = spec.metadata()
    del metadata[store.METADATA_KEY]["store_text"]
    stored.store.create("older", spec.vectors_config(), metadata=metadata)
    older = FairQdrantIndex(model, "older", stored.store)
    assert store.read_spec(stored.store, "older").store_text is None
    older.index(RECORDS[:1], store_text=False, show_progress=False)
    older.index(RECORDS[1:], show_progress=False)
    assert older.count("document") == 3
    has_text = {p.payload["doc_id"]: "text" in p.payload for p in stored.store.scroll("older", limit=100)[0]}
    first = RECORDS[0]["id"]
    assert has_text == {doc_id: doc_id != first for doc_id in has_text}  # each run wrote what it was asked to


def test_bad_records_are_refused_before_the_collection_is_touched(stored):
    with pytest.raises(InputError, match=r"record 2 \(document 'b'\) segment 1: .*outside the text"):
        stored.index([{"id": "a", "segments": ["fine"]}, {"id": "b", "text": "tiny", "spans": [[0, 50]]}], show_progress=False)
    with pytest.raises(InputError, match="no segments"):
        stored.index([{"id": "a", "segments": []}], show_progress=False)
    assert not stored.store.exists("news")
    report = stored.index([{"id": "a", "segments": ["fine words here"]}, {"id": "b", "segments": []}],
                         on_error="skip", show_progress=False)
    assert report.written == 1 and len(report.invalid) == 1 and "no segments" in report.summary()


def test_late_chunks_need_mean_pooling(model):
    cls_model = FairSentenceTransformer(model, CalibrationConfig(basket_size=8, pooling="cls"))
    with FairQdrantIndex(cls_model, "cls") as index:
        with pytest.raises(ValueError, match="mean-pooled models only"):
            index.index(RECORDS, late_chunks=True, show_progress=False)
        assert not index.store.exists("cls")


def test_unreachable_server_is_a_clear_error_and_nothing_is_written(model, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setattr(model, "encode_document", lambda *a, **k: pytest.fail("nothing may be embedded"))
    with pytest.raises(store.QdrantUnavailableError, match=rf"cannot reach the Qdrant server at {url}.*nothing was written"):
        FairQdrantIndex(model, "news", url=url, timeout=2)
    with pytest.raises(store.QdrantUnavailableError):
        open_store(url=url, timeout=2)


def test_a_locked_local_folder_is_a_clear_error(tmp_path):
    first = open_store(str(tmp_path / "db"), backend="local")
    try:
        with pytest.raises(QdrantIndexError, match="already accessed by another instance"):
            open_store(str(tmp_path / "db"), backend="local")
    finally:
        first.close()


# ---------------------------------------------------------------------------- search
def test_search_encodes_the_query_uncalibrated_and_filters_by_position(index, model):
    index.index(RECORDS, late_chunks=True, show_progress=False)
    query = "frog species discovered in the rainforest"
    hits = index.search(query, limit=3)
    assert hits[0].doc_id == "science" and hits[0].n_segments == 2
    assert [s["position"] for s in hits[0].segments] == [1, 2]
    q = model.encode_query([query])[0]
    stored = _vector(index, point_id("news", "science"), "calibrated")
    assert hits[0].score == pytest.approx(_cos(q, stored), abs=1e-5)

    # documents with a German segment: only "city"
    assert [h.doc_id for h in index.search(query, language="de")] == ["city"]
    # position and language must hold for the same segment
    assert index.search(query, position=1, language="de") == []
    assert [h.doc_id for h in index.search(query, position=3, language="de")] == ["city"]
    assert {h.doc_id for h in index.search(query, position=3)} == {"city"}
    assert {h.doc_id for h in index.search(query, position=[2, 3], language=["fr", "de"])} == {"city", "markets"}

    unc = index.search(query, limit=1, vector="uncalibrated")[0]
    assert unc.doc_id == "science" and unc.score != hits[0].score

    segs = index.search(query, level="segment", limit=2, with_text=True)
    assert (segs[0].doc_id, segs[0].position) == ("science", 2) and segs[0].text.startswith("A new species")
    assert [s["position"] for s in segs[0].segments] == [1, 2]  # the parent's layout
    segs = index.search(query, level="segment", position=1, language="en")
    assert {(h.doc_id, h.position) for h in segs} == {("city", 1), ("science", 1), ("markets", 1)}


def test_search_errors(index, model):
    with pytest.raises(QdrantIndexError, match="does not exist"):
        index.search("anything")
    index.index(RECORDS, uncalibrated=False, show_progress=False)
    with pytest.raises(ValueError, match="no 'late_chunk' vectors"):
        index.search("anything", level="segment")
    with pytest.raises(ValueError, match="no 'uncalibrated' vectors"):
        index.search("anything", vector="uncalibrated")
    with pytest.raises(ValueError, match="1-based"):
        index.search("anything", position=0)
    with pytest.raises(CollectionMismatchError, match="built with model"):
        FairQdrantIndex(model, "news", index.store, model_name="other/model").search("anything")


def test_position_filter_shapes():
    assert position_filter() is None
    nested = position_filter(2, "de").must[0]
    assert nested.nested.key == "segments"
    # by default only segments the model read match (not ones the maximum length cut off)
    assert [c.key for c in nested.nested.filter.must] == ["position", "language", "coverage"]
    assert nested.nested.filter.must[2].match.any == ["full", "partial"]
    assert [c.key for c in position_filter(2, "de", coverage=None).must[0].nested.filter.must] == ["position", "language"]
    flat = position_filter([1, 2], level="segment").must[0]
    assert flat.key == "position" and flat.match.any == [1, 2]


# ---------------------------------------------------------------------------- discoverability
def test_discoverability_report_table_and_plot(index, tmp_path):
    index.index(RECORDS, show_progress=False)
    report = index.discoverability(ks=(1, 2), depth=3)
    assert report.vectors == ["calibrated", "uncalibrated"]
    rows = {(r["vector"], r["position"]): r for r in report.rows}
    assert rows[("calibrated", 1)]["n"] == 3 and rows[("calibrated", 3)]["n"] == 1 and rows[("calibrated", "all")]["n"] == 7
    for r in report.rows:
        assert 0 <= r["recall@1"] <= r["recall@2"] <= 1 and 0 <= r["mrr"] <= 1
    # with only three documents every segment finds its document within the top 3
    assert all(rank is not None and rank <= 3 for ranks in report.ranks.values() for _, _, rank in ranks)
    assert rows[("calibrated", "all")]["recall@1"] >= 0.5
    table = report.table()
    assert "| vector | position | n | recall@1 | recall@2 | MRR |" in table and "PSI" in table
    paths = report.save(tmp_path / "out")
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 600 and height > 200
    assert '"psi_mrr"' in paths["json"].read_text()


def test_discoverability_with_supplied_queries_and_without_stored_text(model):
    docs, _ = parse_documents(RECORDS)
    with FairQdrantIndex(model, "notext") as index:
        index.index(docs, store_text=False, show_progress=False)
        with pytest.raises(ValueError, match="stores no document text"):
            index.discoverability()
        with pytest.raises(InputError, match=r"search: the query holds a lone surrogate \('\\ud800'\) at character 4"):
            index.search("frog\ud800")  # it failed inside the tokenizer
        with pytest.raises(InputError, match="query 1: the 'query' holds a lone surrogate"):
            index.discoverability(queries=[{"doc_id": "city", "position": 1, "query": "x\ud800"}])
        report = index.discoverability(documents=docs, vectors=["calibrated"])
        assert report.vectors == ["calibrated"] and report.rows[-1]["n"] == 7
        report = index.discoverability(queries=[
            PositionQuery("science", 2, "tree frog"),
            {"doc_id": "city", "position": 3, "query": "snow in the Alps"},
        ])
        assert {(d, p) for d, p, _ in report.ranks["calibrated"]} == {("science", 2), ("city", 3)}
        with pytest.raises(InputError, match="position"):
            index.discoverability(queries=[{"doc_id": "city", "position": 0, "query": "x"}])


def test_encode_documents_matches_the_model_input(model):
    docs, _ = parse_documents(RECORDS)
    [enc] = encode_documents(model, docs[1:2], uncalibrated_vectors=False, late_chunks=False)
    assert enc.uncalibrated is None and enc.late_chunks is None and enc.truncation is None
    assert enc.n_tokens == len(model.tokenizer(docs[1].text)["input_ids"])
    assert isinstance(enc.calibrated, np.ndarray) and enc.calibrated.shape == (384,)
    assert torch.is_tensor(model.encode_document([docs[1].text], convert_to_tensor=True))


# ---------------------------------------------------------------------------- held-out bad input
def test_nothing_to_index_creates_no_collection(stored):
    with pytest.raises(InputError, match="nothing to index: it holds no record"):
        stored.index([], show_progress=False)
    with pytest.raises(InputError, match=r"nothing to index: all 1 record\(s\) are invalid"):
        stored.index([{"id": "x", "segments": []}], on_error="skip", show_progress=False)
    with pytest.raises(TypeError, match="to index a file, use index_file"):
        stored.index("pages.jsonl", show_progress=False)
    assert stored.stored_spec() is None  # no empty collection pinned to the model was left behind


def test_options_nothing_would_use_are_named(model, stored):
    """Options qdrant-client's local mode would drop, a misspelt collection option and a wrong ``invalid`` are refused."""
    with pytest.raises(TypeError, match=r"timeot: options of a qdrant-client server client, which local mode ignores"):
        FairQdrantIndex(model, "news", timeot=3)
    with pytest.raises(TypeError, match=r"unknown option\(s\) shard_numbr; the collection options are on_disk_payload, "
                                        "replication_factor, shard_number, write_consistency_factor"):
        stored.index(RECORDS, shard_numbr=2, show_progress=False)
    with pytest.raises(TypeError, match="invalid must be a list of Problem"):
        stored.index(RECORDS, invalid="oops", show_progress=False)
    assert stored.stored_spec() is None
    with FairQdrantIndex(model, "news", force_disable_check_same_thread=True) as index:  # an option local mode uses
        assert index.index(RECORDS[:1], show_progress=False).written == 1


def test_hand_built_documents_are_checked_as_records_are(stored):
    """A Document made in Python gets the checks a record gets: spans, positions, texts, metadata and ids."""
    from mteb_fairpos.integrations.qdrant import Document, Segment

    good = Document("d", "alpha beta", (Segment(1, 0, 5), Segment(2, 6, 10, "de")))
    cases = [
        (Document("d", "alpha beta", (Segment(1, 6, 2),)), r"document 1 \(document 'd'\) segment 1: span \[6, 2\)"),
        (Document("d", "alpha beta", (Segment(2, 0, 5),)), "segment 1: its position is 2"),
        (Document("d", "alpha beta", (Segment(1, 0, 5), (6, 10))), "segment 2: expected a Segment, got tuple"),
        (Document("d", "alpha beta", (Segment(1, 0, 5),), {"score": float("nan")}), "metadata.score = nan"),
        (Document("", "alpha beta", (Segment(1, 0, 5),)), "the document 'id' is empty"),
        (Document("d", "alpha \ud800", (Segment(1, 0, 5),)), "lone surrogate"),
    ]
    for document, message in cases:
        with pytest.raises(InputError, match=message):
            stored.index([document], show_progress=False)
    with pytest.raises(InputError, match="occur more than once"):
        stored.index([good, good], show_progress=False)
    assert stored.stored_spec() is None  # nothing was made for the refused input
    numpy_spans = Document("n", "alpha beta", (Segment(1, np.int64(0), np.int64(5)),))  # numpy's integers are integers
    report = stored.index([good, Document("e", "x", (Segment(1, 0, 0),)), numpy_spans], on_error="skip",
                          show_progress=False)
    assert report.written == 2 and len(report.invalid) == 1 and "document 2" in str(report.invalid[0])
    assert {hit.doc_id for hit in stored.search("beta", limit=3)} == {"d", "n"}


def test_queries_naming_unknown_documents_or_positions_are_refused(index):
    index.index(RECORDS, show_progress=False)
    with pytest.raises(InputError, match=r"1 quer\(ies\) name document\(s\) that are not in collection 'news': 'sciense'"):
        index.discoverability(queries=[{"doc_id": "sciense", "position": 1, "query": "frog"}])
    with pytest.raises(InputError, match=r"name a position the document does not have: 'city' position 9 \(it has 3\)"):
        index.discoverability(queries=[{"doc_id": "city", "position": 9, "query": "snow"}])


def test_documents_other_than_the_indexed_ones_are_refused_as_the_queries_source(index, model):
    """Same ids and segment counts, other texts: they were embedded as queries and scored against the indexed vectors
    (recall fell, and nothing said why)."""
    from dataclasses import replace

    from mteb_fairpos.integrations.qdrant import Document

    docs, _ = parse_documents(RECORDS)
    index.index(docs, show_progress=False)
    assert index.discoverability(documents=docs, ks=(1,)).rows  # the indexed ones are accepted
    reworded = [Document(d.doc_id, d.text.replace("a", "o"), d.segments) for d in docs]  # same spans, other text
    with pytest.raises(InputError, match=r"document\(s\) given differ from the ones indexed under their ids"):
        index.discoverability(documents=reworded)
    # with queries given, the documents are not their source and are not read
    report = index.discoverability(queries=[{"doc_id": "city", "position": 1, "query": "snow"}], documents=reworded)
    assert [(d, p) for d, p, _ in report.ranks["calibrated"]] == [("city", 1)]
    with FairQdrantIndex(model, "notext") as plain:  # without stored text, the segment spans still tell
        plain.index(docs, store_text=False, show_progress=False)
        shifted = [Document(d.doc_id, " " + d.text, tuple(replace(s, start=s.start + 1, end=s.end + 1) for s in d.segments))
                   for d in docs]
        with pytest.raises(InputError, match="differ from the ones indexed"):
            plain.discoverability(documents=shifted)


def test_a_huge_document_is_not_tokenized_in_full(model):
    """Only a prefix a little past the maximum is tokenized; the model reads the same tokens."""
    segment = "The harbour wakes before dawn and the boats come in with their catch. " * 6000  # ~420 kB
    docs, _ = parse_documents([{"id": "big", "segments": [segment, segment]}])
    calls = []
    tokenizer_call = type(model.tokenizer).__call__

    def counting(self, text, *args, **kwargs):
        calls.append(sum(map(len, text)) if isinstance(text, list) else len(text))
        return tokenizer_call(self, text, *args, **kwargs)

    type(model.tokenizer).__call__ = counting
    try:
        [enc] = encode_documents(model, docs, uncalibrated_vectors=False)
    finally:
        type(model.tokenizer).__call__ = tokenizer_call
    assert max(calls) < len(docs[0].text) / 20  # never the whole text
    assert enc.n_tokens > model.max_seq_length and not enc.n_tokens_exact
    assert [lay.coverage for lay in enc.layout] == ["partial", "cut"]
    assert "has more than" in str(enc.truncation)
    plain = model.encode_document([docs[0].text], convert_to_numpy=True)[0]  # the full text, cut by the model
    assert np.allclose(enc.calibrated, plain, atol=1e-6)


def test_cut_segments_are_neither_found_by_position_nor_scored(model):
    """A segment the maximum length cut off is left out of discoverability (counted) and of position search."""
    long = {"id": "long", "segments": [
        "Opening paragraph about the harbour and the ships that arrive every morning at dawn.",
        "Middle paragraph about the fish market where traders sell their catch to restaurants.",
        "Closing paragraph about the lighthouse keeper who retired after forty years of service.",
    ]}
    short = {"id": "short", "segments": ["A note on trains.", "A note on buses.", "A note on ferries."]}
    saved = model.max_seq_length
    model.max_seq_length = 24
    try:
        with FairQdrantIndex(model, "cut") as index:
            index.index([long, short], show_progress=False)
            report = index.discoverability(ks=(1,), depth=5)
            third = {hit.doc_id for hit in index.search("lighthouse keeper", position=3)}
            third_any = {hit.doc_id for hit in index.search("lighthouse keeper", position=3, coverage=None)}
    finally:
        model.max_seq_length = saved
    assert report.cut == {3: 1}  # "long" segment 3 never reached the model
    assert [r["n"] for r in report.rows if r["vector"] == "calibrated"] == [2, 2, 1, 5]
    assert "left out: 1 segment(s) the model never saw" in report.table() and report.to_dict()["cut_segments"] == {"3": 1}
    assert third == {"short"} and third_any == {"short", "long"}


def test_discoverability_shows_its_progress(index, capsys):
    index.index(RECORDS, show_progress=False)
    index.discoverability(ks=(1,), show_progress=True)
    assert "ranking segment queries" in capsys.readouterr().err


def test_an_uncalibrated_collection_stores_one_vector(model):
    """Calibration 'none' stores the plain vector once, named for what it is."""
    plain = FairSentenceTransformer(model, None)
    with FairQdrantIndex(plain, "plain", model_name=MINILM_HUB_ID) as index:
        index.index(RECORDS, late_chunks=True, show_progress=False)
        spec = index.stored_spec()
        point = index.store.retrieve("plain", [point_id("plain", "city", 0)], vectors=True)[0]
        hits = index.search("snow in the Alps")
        report = index.discoverability(ks=(1,))
        with pytest.raises(ValueError, match="stores only uncalibrated vectors"):
            index.index(RECORDS, uncalibrated=False, show_progress=False)
    assert (spec.calibration, spec.vectors) == ("none", ("uncalibrated", "late_chunk_uncalibrated"))
    assert set(point.vector) == {"uncalibrated"}
    np.testing.assert_allclose(point.vector["uncalibrated"], plain.encode_document([docs_text("city")])[0], atol=1e-5)
    assert hits and report.vectors == ["uncalibrated"]


def docs_text(doc_id):
    docs, _ = parse_documents(RECORDS)
    return next(d.text for d in docs if d.doc_id == doc_id)


@pytest.mark.parametrize(("options", "message"), [({"batch_size": 0}, "batch_size must be a positive integer, got 0."),
                                                  ({"upsert_batch_size": 0}, "upsert_batch_size must be a positive integer, got 0."),
                                                  ({"batch_size": 2.5}, "batch_size must be a positive integer, got 2.5.")])
def test_a_batch_size_no_run_can_use_is_refused_before_a_collection_is_made(stored, options, message):
    """Checked after the collection was created, it left an empty collection behind."""
    with pytest.raises(ValueError) as caught:
        stored.index(RECORDS[:1], **options)
    assert str(caught.value) == message and not stored.store.exists("news")


def test_count_knows_its_kinds(stored):
    stored.index(RECORDS[:2])
    assert stored.count() == stored.count("document") + stored.count("segment") and stored.count("document") == 2
    with pytest.raises(ValueError, match="kind must be None \\(every point\\), 'document' or 'segment', got 'documents'"):
        stored.count("documents")  # it matched no point: 0


@pytest.mark.parametrize(("options", "message"), [({"ks": "15"}, "ks must be a list of positive integers"),
                                                  ({"ks": [1.7]}, "ks must be a list of positive integers"),
                                                  ({"ks": 5}, "ks must be a list of positive integers"),
                                                  ({"ks": []}, "ks must be a list of positive integers"),
                                                  ({"vectors": "calibrated"}, "vectors must be a list of vector names, got 'calibrated'"),
                                                  ({"vectors": []}, "vectors must be a list of vector names, got []")])
def test_discoverability_options_are_not_misread(stored, options, message):
    """'15' was read as the cut-offs 1 and 5, 1.7 as 1, a vector name letter by letter, no vectors as an empty report."""
    stored.index(RECORDS[:2])
    with pytest.raises(ValueError) as caught:
        stored.discoverability(**options)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(("options", "message"), [
    ({"position": []}, "position is an empty list, which no position matches; give one or more, or None for any."),
    ({"language": []}, "language is an empty list, which no language matches; give one or more, or None for any."),
    ({"language": ""}, "language must be a non-empty string or a list of them, got ''."),
    ({"position": 2, "coverage": []}, "coverage must be a non-empty list among 'full', 'partial', 'cut' (or None for any), got []."),
    ({"position": 2, "coverage": "full"}, "coverage must be a non-empty list among 'full', 'partial', 'cut' (or None for any), got 'full'."),
    ({"position": 1.0}, "position must be an integer or a list of them, got 1.0."),
    ({"position": True}, "position must be an integer or a list of them, got True."),
])
def test_a_filter_that_would_match_nothing_or_be_misread_is_refused(options, message):
    """Before: an empty list or text matched nothing and searches returned [] without a word; 1.0 failed on
    'float' is not iterable; a coverage text was read letter by letter."""
    with pytest.raises(ValueError) as caught:
        position_filter(**options)
    assert str(caught.value) == message


def test_numpy_positions_filter_as_ints():
    assert position_filter(np.int64(2), level="segment").must[0].match.value == 2
    assert position_filter(np.array([1, 2]), level="segment").must[0].match.any == [1, 2]


@pytest.mark.parametrize("limit", [0, 2.5, "3", None, True])
def test_a_limit_that_is_no_count_is_named(index, limit):
    index.index(RECORDS[:1])
    with pytest.raises(ValueError, match=f"limit must be a positive integer, got {re.escape(repr(limit))}"):
        index.search("anything", limit=limit)


@pytest.mark.parametrize(("queries", "message"), [
    ([{"doc_id": "a", "position": 1, "query": "q"}] * 2, "query 2: repeats query 1 (the same doc_id, position and query)."),
    ([PositionQuery("a", 0, "q")], "query 1: 'position' must be a 1-based integer, got 0."),
    ([PositionQuery("a", 1, "  ")], "query 1: 'query' must be a non-empty string."),
])
def test_queries_given_in_python_are_checked_as_a_file_is(stored, queries, message):
    """A repeated query weighed twice in its position's recall; a PositionQuery at position 0 made a row for it."""
    stored.index(RECORDS[:2])
    with pytest.raises(InputError) as caught:
        stored.discoverability(queries=queries)
    assert str(caught.value) == message


def test_point_ids_take_integer_document_ids_as_records_do_and_refuse_other_positions():
    """An integer id failed on len(); a position of 1.0 or True named another point, so lookups missed."""
    assert point_id("news", 7) == point_id("news", "7") and point_id("news", "a", np.int64(2)) == point_id("news", "a", 2)
    assert point_id("news", "a", 2) == "9c9112cf-f9af-51f3-bbd6-1c624439d7ce"  # the ids of stored collections are unchanged
    for position in (1.0, True, -1):
        with pytest.raises(ValueError, match=f"position must be 0 \\(the document point\\) or a 1-based segment position, got {position!r}"):
            point_id("news", "a", position)
    with pytest.raises(TypeError, match="doc_id must be a string or an integer, got NoneType None"):
        point_id("news", None)
