"""``mteb-fairpos index | search | discoverability`` on the embedded local mode."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
from mteb_fairpos.cli import main
from mteb_fairpos.cli import qdrant_common as _cli
from mteb_fairpos.offline import MINILM_HUB_ID

DOCS = [
    {"id": "page1", "segments": [
        {"text": "The city council approved a new budget for public parks and libraries.", "language": "en", "id": "a"},
        {"text": "Der Wetterdienst warnt vor starkem Schneefall in den Alpen am Wochenende.", "language": "de", "id": "b"},
    ]},
    {"id": "page2", "text": "Astronomers observed a comet near the sun. Biologists found a new tree frog in the rainforest.",
     "spans": [[0, 42], [43, 94]], "language": "en"},
    {"id": "page3", "segments": ["Stock markets rallied as inflation fell again this spring.",
                                 "The national orchestra announced a summer tour through twelve cities."]},
]


@pytest.fixture()
def reuse_model(model, monkeypatch):
    """Hand the CLI the already loaded model (after checking what it asked for) to keep tests fast."""
    asked = []

    def load(name, calibration, device=None):
        asked.append((name, calibration))  # "none": plain (queries); None: the model's own (a new collection)
        assert name == MINILM_HUB_ID and calibration in ("none", None, "b8_lhalf_a0.5")
        return model

    monkeypatch.setattr(_cli, "load_model", load)
    return asked


@pytest.fixture()
def docs_file(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def test_index_search_discoverability(tmp_path, docs_file, reuse_model, capsys):
    store = str(tmp_path / "qdrant")
    report_file = tmp_path / "report.json"
    rc = main(["index", str(docs_file), "-c", "pages", "--path", store, "--calibration", "b8_lhalf_a0.5",
               "--late-chunks", "--quiet", "--report", str(report_file)])
    out = capsys.readouterr().out
    assert rc == 0 and "3 written (9 points)" in out and "collection created" in out
    assert json.loads(report_file.read_text())["written"] == 3

    # again: the stored calibration is the default, nothing is written
    assert main(["index", str(docs_file), "-c", "pages", "--path", store, "--quiet"]) == 0
    assert "0 written (0 points), 3 unchanged" in capsys.readouterr().out
    assert reuse_model[-1] == (MINILM_HUB_ID, "b8_lhalf_a0.5")

    assert main(["search", "tree frog discovered", "-c", "pages", "--path", store, "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[-3:] == ["page2", "(2", "segments)"]
    assert "layout 1:en[0:42], 2:en[43:94]" in out
    assert reuse_model[-1] == (MINILM_HUB_ID, "none")  # queries are never calibrated

    assert main(["search", "snow", "-c", "pages", "--path", store, "--language", "de", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [h["doc_id"] for h in hits] == ["page1"]

    assert main(["search", "snow", "-c", "pages", "--path", store, "--segments", "--position", "2", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(h["doc_id"], h["position"]) for h in hits} == {("page1", 2), ("page2", 2), ("page3", 2)}

    out_dir = tmp_path / "disc"
    assert main(["discoverability", "-c", "pages", "--path", store, "--out", str(out_dir), "--ks", "1", "3"]) == 0
    out = capsys.readouterr().out
    assert "| vector | position | n | recall@1 | recall@3 | MRR |" in out and "| calibrated | all | 6 |" in out
    assert (out_dir / "discoverability.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out_dir / "discoverability.json").read_text())["calibration"] == "b8_lhalf_a0.5"

    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"doc_id": "page2", "position": 2, "query": "frog"}) + "\nnot json\n")
    assert main(["discoverability", "-c", "pages", "--path", store, "--queries", str(queries), "--out", str(out_dir)]) == 2
    assert "queries.jsonl line 2: malformed JSON" in capsys.readouterr().err


def test_bad_input_and_refusals(tmp_path, docs_file, reuse_model, capsys):
    store = str(tmp_path / "qdrant")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(DOCS[0]) + "\n" + '{"id": "x", "segments": ["unterminated"\n'
                   + json.dumps({"id": "y", "text": "tiny", "spans": [[0, 40]]}) + "\n")
    assert main(["index", str(bad), "-c", "pages", "--path", store, "--calibration", "b8_lhalf_a0.5", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl line 2: malformed JSON" in err
    assert reuse_model == []  # refused before the model was even loaded

    assert main(["index", str(bad), "-c", "pages", "--path", store, "--calibration", "b8_lhalf_a0.5", "--quiet",
                 "--skip-invalid"]) == 0
    out = capsys.readouterr().out
    assert "1 written" in out and "2 invalid record(s) skipped" in out
    assert "bad.jsonl line 2: malformed JSON" in out and "bad.jsonl line 3 (document 'y') segment 1" in out

    assert main(["index", str(docs_file), "-c", "pages", "--path", store, "--late-chunks", "--quiet"]) == 2
    assert "named vectors" in capsys.readouterr().err
    assert main(["search", "x", "-c", "pages", "--path", store, "--max-length", "1"]) == 2  # moved here: a
    # search on a collection that does not exist is refused before any model loads, so before --max-length is checked
    err = capsys.readouterr().err
    assert err.startswith("mteb-fairpos search: error: ") and "--max-length 1: the tokenizer adds 2" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    loaded = len(reuse_model)
    assert main(["search", "x", "-c", "missing", "--path", store]) == 2
    assert "collection 'missing' does not exist; index documents into it first." in capsys.readouterr().err
    assert main(["discoverability", "-c", "missing", "--path", store, "-o", str(tmp_path / "d")]) == 2
    assert "collection 'missing' does not exist; index documents into it first." in capsys.readouterr().err
    assert len(reuse_model) == loaded  # both refused before a model was loaded for queries
    assert main(["index", str(docs_file), "-c", "pages", "--url", "http://127.0.0.1:9", "--timeout", "2"]) == 2
    assert "cannot reach the Qdrant server at http://127.0.0.1:9" in capsys.readouterr().err


def test_real_model_loading_through_the_cli(tmp_path, docs_file, capsys, minilm_dir):
    """No stand-in: the CLI loads all-MiniLM-L6-v2 (offline copy for its Hub id) with the asked calibration."""
    store = str(tmp_path / "qdrant")
    assert main(["index", str(docs_file), "-c", "real", "--path", store, "--calibration", "b8_lhalf_a0.5",
                 "--no-uncalibrated", "--quiet"]) == 0
    assert "3 written (3 points)" in capsys.readouterr().out
    from mteb_fairpos.integrations.qdrant import open_store
    from mteb_fairpos.integrations.qdrant.store import read_spec

    client = open_store(store)
    try:
        spec = read_spec(client, "real")
    finally:
        client.close()
    assert (spec.model, spec.calibration, spec.vectors) == (MINILM_HUB_ID, "b8_lhalf_a0.5", ("calibrated",))


def test_an_uncalibrated_run_on_a_calibrated_only_collection_is_a_mismatch_not_a_flag_never_given(tmp_path, docs_file,
                                                                                                   capsys, minilm_dir):
    """--no-uncalibrated is refused for calibration 'none' only where it was given: a collection built without
    uncalibrated vectors is a settings mismatch for an uncalibrated run, named as one."""
    store = str(tmp_path / "qdrant")
    assert main(["index", str(docs_file), "-c", "real", "--path", store, "--calibration", "b8_lhalf_a0.5",
                 "--no-uncalibrated", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["index", str(docs_file), "-c", "real", "--path", store, "--calibration", "none", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "built with other settings" in err and "this run uses 'none'" in err and "--no-uncalibrated" not in err
    assert main(["index", str(docs_file), "-c", "plain", "--path", store, "--calibration", "none", "--no-uncalibrated",
                 "--quiet"]) == 2
    assert "stores only uncalibrated vectors; drop --no-uncalibrated" in capsys.readouterr().err


def test_a_model_folder_saved_with_a_calibration_indexes_with_it(tmp_path, docs_file, capsys, minilm_dir):
    """As ``FairSentenceTransformer(folder)`` loads it: a new collection built from a folder saved with a calibration
    takes that calibration unless --calibration says otherwise; a model saved without one gets the default."""
    from mteb_fairpos.integrations.qdrant import open_store
    from mteb_fairpos.integrations.qdrant.encoding import ModelLoader, calibration_text
    from mteb_fairpos.integrations.qdrant.store import read_spec

    folder = str(tmp_path / "saved")
    FairSentenceTransformer(str(minilm_dir), CalibrationConfig.parse("b8_lhalf_a1")).save(folder)
    store = str(tmp_path / "qdrant")
    for collection, extra in (("saved", []), ("asked", ["--calibration", "b16_lhalf_a0.5"])):
        assert main(["index", str(docs_file), "-c", collection, "--path", store, "--model", folder, "--no-uncalibrated",
                     "--quiet", *extra]) == 0
    client = open_store(store)
    try:
        assert [read_spec(client, c).calibration for c in ("saved", "asked")] == ["b8_lhalf_a1", "b16_lhalf_a0.5"]
    finally:
        client.close()
    assert calibration_text(ModelLoader(MINILM_HUB_ID)()) == str(CalibrationConfig())  # saved without one: the default
    assert calibration_text(ModelLoader(folder, "none")()) == "none"
    capsys.readouterr()


def test_a_model_folder_given_relative_is_recorded_absolute_and_found_from_any_folder(tmp_path, docs_file, capsys,
                                                                                       minilm_dir, monkeypatch):
    """A collection records its model: a folder typed relative (``-m mini``) would mean another folder, or the Hub id
    sentence-transformers/mini, from anywhere else; a collection of an earlier release that recorded it relative is
    still matched from where it resolves."""
    from contextlib import closing

    from mteb_fairpos.integrations.qdrant import FairQdrantIndex, open_store
    from mteb_fairpos.integrations.qdrant.store import read_spec

    (tmp_path / "mini").symlink_to(minilm_dir)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["index", str(docs_file), "-c", "news", "--path", "store", "-m", "mini", "--calibration", "b8_lhalf_a0.5",
                 "--quiet"]) == 0
    with closing(open_store("store")) as client:
        assert read_spec(client, "news").model == str(tmp_path / "mini")
        FairQdrantIndex(FairSentenceTransformer(minilm_dir, CalibrationConfig(basket_size=8)), "old", client,
                        model_name="mini").index(DOCS, show_progress=False)  # as an earlier release recorded it
    capsys.readouterr()
    assert main(["search", "city council budget", "-c", "old", "--path", "store", "-m", "mini", "--json"]) == 0
    old = [json.loads(line)["doc_id"] for line in capsys.readouterr().out.splitlines()]
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["search", "city council budget", "-c", "news", "--path", "../store", "--json"]) == 0
    assert [json.loads(line)["doc_id"] for line in capsys.readouterr().out.splitlines()] == old
    assert old[0] == "page1" and sorted(old) == ["page1", "page2", "page3"]


def test_held_out_bad_input_is_one_clear_line(tmp_path, docs_file, reuse_model, capsys):
    store = tmp_path / "qdrant"
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n")
    assert main(["index", str(blank), "-c", "pages", "--path", str(store), "--quiet"]) == 2
    assert "blank.jsonl: nothing to index: it holds no record" in capsys.readouterr().err
    assert not store.exists() and reuse_model == []  # nothing created, no model loaded
    assert main(["index", str(tmp_path), "-c", "pages", "--path", str(store), "--quiet"]) == 2
    assert "is a folder; give a JSONL or Parquet file" in capsys.readouterr().err
    typo = tmp_path / "qdrnat"
    for command in (["search", "x"], ["discoverability"]):
        assert main([*command, "-c", "pages", "--path", str(typo)]) == 2
        assert f"no local Qdrant store at {str(typo)!r}" in capsys.readouterr().err
    assert not typo.exists()  # a mistyped path leaves no empty store behind

    assert main(["index", str(docs_file), "-c", "pages", "--path", str(store), "--calibration", "b8_lhalf_a0.5",
                 "--quiet"]) == 0
    capsys.readouterr()
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"doc_id": "page9", "position": 1, "query": "budget"}) + "\n")
    assert main(["discoverability", "-c", "pages", "--path", str(store), "--queries", str(queries),
                 "--out", str(tmp_path / "report")]) == 2
    assert "not in collection 'pages': 'page9'" in capsys.readouterr().err


def test_max_length_reaches_the_model(tmp_path, docs_file, reuse_model, capsys, model):
    store = str(tmp_path / "qdrant")
    saved = model.max_seq_length
    try:
        assert main(["index", str(docs_file), "-c", "short", "--path", store, "--calibration", "b8_lhalf_a0.5",
                     "--max-length", "12", "--quiet"]) == 0
        out = capsys.readouterr().out
        assert "truncated to the model's maximum length" in out and "the model reads 12" in out
    finally:
        model.max_seq_length = saved
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit status for a bad argument
        main(["index", str(docs_file), "-c", "x", "--path", store, "--max-length", "0"])
    assert stopped.value.code == 2 and "expected a positive number of tokens" in capsys.readouterr().err


def test_refusals_name_the_options_that_fix_them(tmp_path, docs_file, reuse_model, capsys):
    """The library's hint names its keyword and the CLI's flag: both kinds of user read it."""
    store = str(tmp_path / "qdrant")
    assert main(["index", str(docs_file), "-c", "bare", "--path", store, "--calibration", "b8_lhalf_a0.5",
                 "--no-store-text", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["search", "x", "-c", "bare", "--path", store, "--segments"]) == 2
    assert "into a new collection with late_chunks=True (mteb-fairpos index --late-chunks;" in capsys.readouterr().err
    assert main(["discoverability", "-c", "bare", "--path", store, "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "store_text=False, --no-store-text" in err and "--input" in err and "--queries" in err


def test_the_library_refuses_a_depth_below_one():
    from mteb_fairpos.integrations.qdrant.discoverability import discoverability

    with pytest.raises(ValueError, match="depth must be a positive integer, got 0"):
        discoverability(None, depth=0)  # refused before the index is asked anything


@pytest.fixture()
def no_model(monkeypatch):
    """A command that must stop before loading a model fails the test if it tries."""
    monkeypatch.setattr(_cli, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))


def test_a_failed_command_leaves_no_store_folder_it_created(tmp_path, docs_file, no_model, capsys):
    from mteb_fairpos.integrations.qdrant import open_store

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "a.parquet").write_text("not parquet\n")
    (foreign / "manifest.json").write_text("{}\n")
    open_store(str(tmp_path / "source")).close()  # an empty store to copy from
    new = tmp_path / "new"
    runs = [
        (["index", str(docs_file), "-c", "c", "--path", f"{new}/o1", "--calibration", "bogus"], "cannot parse calibration"),
        (["index", str(docs_file), "-c", "", "--path", f"{new}/o2"], "-c/--collection must be a non-empty name"),
        (["index", str(docs_file), "-c", "../evil", "--path", f"{new}/o3"], "cannot be a folder name"),
        (["load", str(foreign), "--path", f"{new}/L1"], "not a manifest of `mteb-fairpos encode` ('documents' is None"),
        (["load", str(foreign), "--path", f"{new}/L2", "--backend", "local"], "not a manifest of `mteb-fairpos encode` ('documents' is None"),
        (["copy", str(tmp_path / "source"), f"{new}/C2", "-c", "nosuch"], "does not exist in the source store"),
    ]
    for argv, message in runs:
        assert main([*argv, "--quiet"]) == 2
        assert message in capsys.readouterr().err
        assert not new.exists(), argv  # not the store folder, nor the folder made to hold it
    assert main(["search", "x", "-c", "c", "--path", f"{new}/o1"]) == 2
    assert "no local Qdrant store at" in capsys.readouterr().err

    kept = tmp_path / "kept"
    kept.mkdir()
    assert main(["load", str(foreign), "--path", str(kept), "--quiet"]) == 2
    assert kept.is_dir()  # a folder that existed before is never removed


def test_a_failed_command_keeps_a_store_holding_a_collection_and_what_others_wrote(tmp_path, docs_file, reuse_model,
                                                                                    monkeypatch, capsys):
    from mteb_fairpos.integrations.qdrant import load, open_store, store, writer

    def failing_write(self, points, **_):  # the collection exists by now: what was written must stay for a re-run
        raise store.UpsertFailedError("the disk is full")

    monkeypatch.setattr(writer.Writer, "write", failing_write)
    target = tmp_path / "new" / "store"
    assert main(["index", str(docs_file), "-c", "c", "--path", str(target), "--calibration", "b8_lhalf_a0.5",
                 "--quiet"]) == 1
    with open_store(str(target)) as reopened:
        assert reopened.collections() == ["c"]

    def refused_after_others_wrote(*_, **__):  # another process writes beside the store while this one runs
        (tmp_path / "top" / "other").mkdir(parents=True)
        (tmp_path / "top" / "other" / "part.parquet").write_text("theirs\n")
        raise ValueError("bad parts")

    monkeypatch.setattr(load, "load_parts", refused_after_others_wrote)
    assert main(["load", str(tmp_path), "--path", str(tmp_path / "top" / "deep" / "store"), "--quiet"]) == 2
    assert "bad parts" in capsys.readouterr().err
    assert (tmp_path / "top" / "other" / "part.parquet").read_text() == "theirs\n"
    assert not (tmp_path / "top" / "deep").exists()  # the store and the empty folder made for it are gone
