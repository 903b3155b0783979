"""The Qdrant Edge backend against local mode: the same points, the same search results, and the
reliability checks local mode passes (refusal of a mismatch, filters, reopening
after a crash, one client per store). Real qdrant-edge-py, real MiniLM weights, no mocks."""

from __future__ import annotations

import json
import subprocess
from contextlib import closing
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("qdrant_edge", reason='the Edge backend is an extra: pip install "mteb-fairpos[edge]"')

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer  # noqa: E402
from mteb_fairpos.cli import main  # noqa: E402
from mteb_fairpos.integrations.qdrant import (  # noqa: E402
    CollectionMismatchError,
    FairQdrantIndex,
    QdrantIndexError,
    point_id,
    store,
)
from mteb_fairpos.integrations.qdrant.load import load_parts  # noqa: E402
from mteb_fairpos.integrations.qdrant.encode import encode_to_parts  # noqa: E402
from mteb_fairpos.offline import MINILM_HUB_ID  # noqa: E402

from corpus import RECORDS, assert_same_points, points_of, records, write_jsonl  # noqa: E402


def both(tmp_path):
    return store.open_store(str(tmp_path / "local"), backend="local"), store.open_store(str(tmp_path / "edge"), backend="edge")


def test_edge_stores_and_finds_what_local_mode_does(tmp_path, model):
    local, edge = both(tmp_path)
    for client in (local, edge):
        FairQdrantIndex(model, "news", client, model_name=MINILM_HUB_ID).index(RECORDS, late_chunks=True,
                                                                               show_progress=False)
    assert_same_points(points_of(local, "news"), points_of(edge, "news"))
    assert edge.describe("news").metadata == local.describe("news").metadata
    for options in ({}, {"position": 3}, {"language": "de"}, {"position": [1, 2], "language": "en"},
                    {"level": "segment"}, {"level": "segment", "position": 2}):
        found = [FairQdrantIndex(model, "news", client, model_name=MINILM_HUB_ID).search("football championship", **options)
                 for client in (local, edge)]
        assert [(h.doc_id, h.position) for h in found[0]] == [(h.doc_id, h.position) for h in found[1]], options
        assert np.allclose([h.score for h in found[0]], [h.score for h in found[1]], atol=1e-5)
    report = FairQdrantIndex(model, "news", edge, model_name=MINILM_HUB_ID).discoverability(show_progress=False)
    reference = FairQdrantIndex(model, "news", local, model_name=MINILM_HUB_ID).discoverability(show_progress=False)
    assert report.rows == reference.rows
    # payload indexes exist in Edge (local mode scans)
    assert {"doc_id", "segments[].position", "position"} <= edge.describe("news").payload_indexes
    local.close()
    edge.close()


def test_reopen_after_a_crash_keeps_every_acknowledged_point(tmp_path):
    """A process that writes and dies without closing (os._exit): the reopened store has every point."""
    path = tmp_path / "edge"
    script = textwrap.dedent(f"""
        import os
        from qdrant_client import models
        from mteb_fairpos.integrations.qdrant import store
        client = store.open_store({str(path)!r}, backend="edge")
        client.create("c", {{"v": models.VectorParams(size=4, distance=models.Distance.COSINE)}},
                                 metadata={{"k": 1}})
        for batch in range(5):
            client.write("c", [models.PointStruct(id=store.point_id("c", f"d{{batch}}-{{i}}"), vector={{"v": [1.0, i, 2.0, batch]}},
                                                   payload={{"n": i}}) for i in range(40)])
        os._exit(1)
    """)
    assert subprocess.run([sys.executable, "-c", script], capture_output=True).returncode == 1
    client = store.open_store(str(path), backend="edge")
    assert client.count("c") == 200
    assert client.describe("c").metadata == {"k": 1}
    found = client.retrieve("c", [store.point_id("c", "d4-39")], vectors=True)
    assert found[0].payload == {"n": 39} and np.allclose(found[0].vector["v"], np.array([1, 39, 2, 4]) / np.linalg.norm([1, 39, 2, 4]))
    client.close()


def test_mismatch_is_refused_and_a_store_has_one_client(tmp_path, model):
    path = str(tmp_path / "edge")
    client = store.open_store(path, backend="edge")
    FairQdrantIndex(model, "news", client).index(RECORDS, show_progress=False)
    other = FairSentenceTransformer(model, CalibrationConfig(basket_size=16))
    with pytest.raises(CollectionMismatchError, match="b16_lhalf_a0.5"):
        FairQdrantIndex(other, "news", client).index([{"id": "x", "segments": ["new"]}], show_progress=False)
    assert client.count("news") == 3
    with pytest.raises(QdrantIndexError, match="already open"):
        store.open_store(path, backend="edge")
    client.close()
    local = store.open_store(str(tmp_path / "local-mode"), backend="local")
    FairQdrantIndex(model, "news", local).index(RECORDS[:1], show_progress=False)
    local.close()
    with pytest.raises(ValueError, match="local-mode store"):
        store.open_store(str(tmp_path / "local-mode"), backend="edge")
    # and the other way: local mode would write its own files beside the shards, and hide them from the next command
    before = sorted(p.name for p in (tmp_path / "edge").iterdir())
    with pytest.raises(ValueError, match="holds a Qdrant Edge store, not a qdrant-client local-mode one"):
        store.open_store(path, backend="local")
    assert sorted(p.name for p in (tmp_path / "edge").iterdir()) == before
    reopened = store.open_store(path)  # still found as Edge
    assert reopened.count("news") == 3
    reopened.close()
    (tmp_path / "edge" / "meta.json").write_text((tmp_path / "local-mode" / "meta.json").read_text())  # as an earlier
    for backend in (None, "local", "edge"):  # release left it: both engines' files in one folder, refused either way
        with pytest.raises(ValueError, match="holds both a Qdrant Edge store and qdrant-client local-mode files"):
            store.open_store(path, backend=backend)


def test_bulk_load_and_commands_on_edge(tmp_path, model, capsys):
    path = write_jsonl(tmp_path / "docs.jsonl", records(14))
    encode_to_parts(path, tmp_path / "parts", model, "pages", part_size=5, late_chunks=True, show_progress=False)
    edge = store.open_store(str(tmp_path / "edge"), backend="edge")
    assert load_parts(tmp_path / "parts", edge, show_progress=False).documents == 14
    local = store.open_store(":memory:")
    load_parts(tmp_path / "parts", local, show_progress=False)
    assert_same_points(points_of(local, "pages"), points_of(edge, "pages"))
    assert edge.retrieve("pages", [point_id("pages", "d3")])[0].payload["doc_id"] == "d3"
    edge.close()
    assert main(["search", "budget", "-c", "pages", "--path", str(tmp_path / "edge"), "--backend", "edge",
                 "--json", "--limit", "3"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(hits) == 3


# ---------------------------------------------------------------------------- Edge as the default, and moving to it
def test_capabilities_say_what_each_backend_does_and_edge_reports_only_what_it_knows(tmp_path, model):
    local, edge = both(tmp_path)
    assert (local.capabilities.name, edge.capabilities.name, store.open_store(":memory:").capabilities.name) == \
        ("local", "edge", "local")
    assert edge.capabilities.payload_indexes and edge.capabilities.indexes_on_request
    assert not local.capabilities.payload_indexes and not edge.capabilities.hnsw_settings
    FairQdrantIndex(model, "news", edge, model_name=MINILM_HUB_ID).index(RECORDS, show_progress=False)
    info = edge.describe("news")
    assert info.points == len(RECORDS)
    assert info.hnsw_m is None  # Edge reports no HNSW settings, so none is made up


def test_a_new_folder_is_edge_and_a_local_mode_folder_opens_as_it_is_with_a_note(tmp_path, model, capsys):
    assert store.embedded_backend(str(tmp_path / "new")) == "edge"
    assert store.embedded_backend(":memory:") == store.embedded_backend(None) == "local"
    old = tmp_path / "old"
    client = store.open_store(str(old), backend="local")
    FairQdrantIndex(model, "news", client, model_name=MINILM_HUB_ID).index(RECORDS, show_progress=False)
    client.close()
    assert store.embedded_backend(str(old)) == "local"
    with closing(store.open_store(str(old))) as reopened:
        assert reopened.count("news") == len(RECORDS)
    capsys.readouterr()
    assert main(["search", "football", "-c", "news", "--path", str(old)]) == 0
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and f"note: {old} is a qdrant-client local-mode store, opened as it is" in err
    assert f"mteb-fairpos copy {old} NEW -c COLLECTION" in err
    assert main(["search", "football", "-c", "news", "--path", str(old), "--quiet"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_copy_moves_a_local_mode_collection_into_edge_point_for_point(tmp_path, model, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    with closing(store.open_store(str(old), backend="local")) as client:
        FairQdrantIndex(model, "news", client, model_name=MINILM_HUB_ID).index(RECORDS, late_chunks=True,
                                                                               show_progress=False)
        expected = points_of(client, "news")
    assert main(["copy", str(old), str(new), "-c", "news", "--batch-size", "7"]) == 0
    out, err = capsys.readouterr()
    assert f"{len(expected)} point(s) copied from the local store into the edge store, collection created" in out
    assert "copying news: 100%" in err and f"{len(expected)}/{len(expected)}" in err  # the bar, over the source's count
    assert store.embedded_backend(str(new)) == "edge"
    with closing(store.open_store(str(new))) as copied:
        assert_same_points(expected, points_of(copied, "news"))
        assert {"doc_id", "segments[].position"} <= copied.describe("news").payload_indexes
    report = tmp_path / "copy.json"
    assert main(["copy", str(old), str(new), "-c", "news", "--quiet", "--report", str(report)]) == 0  # again: none added
    assert capsys.readouterr().err == ""
    written = json.loads(report.read_text())
    assert (written["points"], written["created_collection"], written["target"]) == (len(expected), False, "edge")
    with closing(store.open_store(str(new))) as copied:
        assert copied.count("news") == len(expected)
    assert main(["copy", str(old), str(new), "-c", "other"]) == 2
    assert "'other' does not exist in the source store" in capsys.readouterr().err


def test_copy_names_a_damaged_or_foreign_folder_and_writes_nothing_into_it(tmp_path, model, capsys):
    import shutil

    local, edge = tmp_path / "local", tmp_path / "edge"
    with closing(store.open_store(str(local), backend="local")) as client:
        FairQdrantIndex(model, "news", client, model_name=MINILM_HUB_ID).index(RECORDS, show_progress=False)
    assert main(["copy", str(local), str(edge), "-c", "news", "--quiet"]) == 0
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "readme.txt").write_text("not a store")

    def refused(source, target, *expected):
        capsys.readouterr()
        assert main(["copy", str(source), str(target), "-c", "news", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and all(part in err for part in expected), err
        assert not (tmp_path / "new").exists()

    (tmp_path / "link").symlink_to(edge)
    refused(edge, tmp_path / "link", "the source and the target are the same folder")
    refused(notes, tmp_path / "new", f"no store at {str(notes)!r} to copy from")
    assert sorted(p.name for p in notes.iterdir()) == ["readme.txt"]  # no lock file left in it
    (notes / ".DS_Store").write_text("")
    refused(edge, notes, f"{str(notes)!r} holds other files (readme.txt), not a Qdrant store")
    assert sorted(p.name for p in notes.iterdir()) == [".DS_Store", "readme.txt"]
    (notes / "readme.txt").unlink()  # a folder holding only hidden files is as good as empty
    assert main(["copy", str(edge), str(notes), "-c", "news", "--quiet"]) == 0

    settings = tmp_path / "settings"
    shutil.copytree(edge, settings)
    (settings / "news.collection.json").write_text('{"vectors": ')
    refused(settings, tmp_path / "new", f"{settings / 'news.collection.json'}: not readable as the collection's settings")
    for wrong in ("[]", '{"vectors": {}}', '{"vectors": {"calibrated": {"size": 384}}, "metadata": {}}'):
        (settings / "news.collection.json").write_text(wrong)
        refused(settings, tmp_path / "new", f"{settings / 'news.collection.json'}: not the collection's settings")
    shard = tmp_path / "shard"
    shutil.copytree(edge, shard)
    shutil.rmtree(shard / "news")
    refused(shard, tmp_path / "new", "has its settings but not its shard folder", "the store is damaged")
    meta = tmp_path / "meta"
    shutil.copytree(local, meta)
    for wrong in ("{bad", "{}", "[]"):
        (meta / "meta.json").write_text(wrong)
        refused(meta, tmp_path / "new", f"{meta / 'meta.json'}: not readable as local mode's settings")


def test_a_collection_name_that_leaves_the_store_touches_nothing_outside_it(tmp_path):
    """drop('../x') deleted '../x.collection.json' beside the store before its name was checked."""
    outside = tmp_path / "x.collection.json"
    outside.write_text("{}")
    with closing(store.open_store(str(tmp_path / "store"))) as opened:
        for call in (opened.drop, opened.exists, opened.describe):
            with pytest.raises(ValueError, match="collection name '../x' cannot be a folder name"):
                call("../x")
    assert outside.read_text() == "{}"


def test_a_closed_edge_store_refuses_work_it_would_do_without_its_lock(tmp_path, model):
    """After close(), calls reopened the shards unlocked, beside another process that took the lock."""
    opened = store.open_store(str(tmp_path / "store"))
    index = FairQdrantIndex(model, "pages", opened, model_name=MINILM_HUB_ID)
    index.index([{"id": "a", "segments": ["One text.", "Another text."]}])
    points = opened.count("pages")
    opened.close()
    for call in (lambda: index.search("text"), lambda: opened.collections(), lambda: opened.count("pages")):
        with pytest.raises(QdrantIndexError, match=f"the Qdrant Edge store {tmp_path / 'store'} is closed; open it again"):
            call()
    with closing(store.open_store(str(tmp_path / "store"))) as again:  # the lock was given back, and the points kept
        assert again.count("pages") == points > 0


def test_open_store_names_what_it_would_ignore_or_misplace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(ValueError, match=r"path is empty; give the store's folder \(or None for a local-mode store in memory\)"):
        store.open_store("")  # the current folder: refused before anything is written among the user's files
    with pytest.raises(TypeError, match="timeot: options of qdrant-client, which a Qdrant Edge store does not use"):
        store.open_store(str(tmp_path / "new"), timeot=3)
    with pytest.raises(ValueError, match=r"url must be a server's address \(http://host:6333\), got ''"):
        store.open_store(url="")  # it reported the Qdrant server at "the Qdrant server" unreachable
    with pytest.raises(ValueError, match=r"backend= chooses the embedded engine of path=; a server \(url=\) runs its own"):
        store.open_store(url="http://127.0.0.1:9", backend="edge")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
