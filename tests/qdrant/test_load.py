"""Encode to Parquet parts and bulk-load them (the local engine; Ray is in test_ray_engine.py).

Real all-MiniLM-L6-v2 weights, real Parquet files, qdrant-client's embedded local mode. The one
thing that cannot run here, a Qdrant server, is the recorded-request stand-in of
fake_qdrant_server.py (say so where it is used).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.integrations.qdrant import FairQdrantIndex, InputError, point_id, store
from mteb_fairpos.integrations.qdrant.load import load_parts
from mteb_fairpos.integrations.qdrant.encode import MANIFEST, encode_to_parts
from mteb_fairpos.integrations.qdrant.encoding import ModelLoader
from mteb_fairpos.integrations.qdrant.input import read_range, scan_file, scan_input
from mteb_fairpos.integrations.qdrant.parts import PartError, read_points, part_files
from mteb_fairpos.offline import MINILM_HUB_ID

from corpus import CALIBRATION, assert_same_points, points_of, records, write_jsonl
from fake_qdrant_server import FakeServer

@pytest.fixture(scope="module")
def loader(minilm_dir):
    return ModelLoader(MINILM_HUB_ID, CALIBRATION, device="cpu")


@pytest.fixture(scope="module")
def model(loader):
    return loader()


# ---------------------------------------------------------------------------- the input scan
def test_scan_cuts_byte_ranges_and_reads_them_back(tmp_path):
    items = records(23)
    path = write_jsonl(tmp_path / "a.jsonl", items, blank_after={4, 9})
    scan = scan_input(path, range_size=10)
    assert [s.documents for s in scan.ranges] == [10, 10, 3] and scan.documents == 23
    assert [s.first for s in scan.ranges] == [1, 12, 23]  # line numbers, blank lines counted
    assert len({s.name for s in scan.ranges}) == 3
    docs = [d for s in scan.ranges for d in read_range(s)]
    assert [d.doc_id for d in docs] == [r["id"] for r in items]
    # the same input cut the same way: names and fingerprints are stable
    assert scan_input(path, range_size=10).ranges == scan.ranges


def test_scan_reads_parquet_and_folders(tmp_path):
    items = records(12)
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", items[:5])
    flat = [{"id": r["id"], "segments": [s["text"] for s in r["segments"]]} for r in items[5:]]
    pq.write_table(pa.Table.from_pylist(flat), folder / "b.parquet", row_group_size=3)
    scan = scan_input(folder, range_size=4)
    assert scan.documents == 12 and [s.format for s in scan.ranges] == ["jsonl", "jsonl", "parquet", "parquet"]
    assert [d.doc_id for s in scan.ranges for d in read_range(s)] == [r["id"] for r in items]



def test_the_other_files_of_an_input_folder_are_counted_and_named_not_read_silently(tmp_path, model):
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)  # a subfolder is not read, as documented (the parts may live there)
    write_jsonl(folder / "a.jsonl", records(3))
    write_jsonl(folder / "b.txt", records(2, prefix="t"))  # JSON Lines under another suffix: not read
    (folder / "c.csv").write_text("id,text\n")
    (folder / ".DS_Store").write_text("")  # hidden: no data
    scan = scan_input(folder)
    assert scan.documents == 3 and [Path(uri).name for uri in scan.unread] == ["b.txt", "c.csv"]
    report = encode_to_parts(folder, folder / "sub" / "parts", model, "pages", show_progress=False)
    assert report.documents == 3 and report.to_dict()["unread"] == scan.unread
    assert f"2 file(s) of the input folder(s) not read (not JSONL or Parquet by their suffix): {scan.unread[0]}, " in report.summary()
    assert scan_input(folder / "a.jsonl").unread == []  # a file given is read whatever else lies beside it

def test_scan_reports_duplicates_across_files_with_counts(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", records(4))
    write_jsonl(tmp_path / "b.jsonl", records(3) + records(2, prefix="x"))
    with pytest.raises(InputError, match=r"3 document id\(s\) occur more than once \(3 extra record\(s\)\).*'d0' x2"):
        scan_input(tmp_path)
    scan = scan_input(tmp_path, on_error="skip")
    assert scan.documents == 6 and scan.duplicates == {"d0": 2, "d1": 2, "d2": 2}
    assert [p.where for p in scan.problems] == ["b.jsonl line 1", "b.jsonl line 2", "b.jsonl line 3"]
    assert sorted(d.doc_id for s in scan.ranges for d in read_range(s)) == ["d0", "d1", "d2", "d3", "x0", "x1"]


def test_scan_validates_every_record_first(tmp_path):
    items = records(5)
    path = tmp_path / "a.jsonl"
    write_jsonl(path, items)
    with path.open("a") as handle:
        handle.write('{"id": "bad", "segments": []}\n{not json\n')
    with pytest.raises(InputError, match="a.jsonl line 6"):
        scan_input(path)
    scan = scan_input(path, on_error="skip")
    assert scan.documents == 5 and [p.where for p in scan.problems] == ["a.jsonl line 6", "a.jsonl line 7"]


def test_a_changed_input_is_refused_by_the_worker(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", records(4))
    [part] = scan_input(path).ranges
    text = path.read_text().replace("council", "parliament", 1)
    path.write_text(text)
    with pytest.raises(InputError, match="input changed"):
        read_range(part)


# ---------------------------------------------------------------------------- encode + load
def test_encode_and_load_equal_the_single_process_index(tmp_path, loader, model, new_store):
    """The part route gives the same points as `index`: ids, payloads, vectors (cosine >= 0.99999)."""
    items = records(30, seed=3)
    items[7]["segments"][0]["text"] = " ".join(["budget"] * 300)  # truncated: the payload says which segments
    path = write_jsonl(tmp_path / "docs.jsonl", items)
    report = encode_to_parts(path, tmp_path / "parts", model, "pages", part_size=8, late_chunks=True,
                              show_progress=False)
    assert (report.documents, report.parts, report.parts_encoded, report.truncated) == (30, 4, 4, 1)
    assert report.forward_passes > 0
    client = new_store()
    loaded = load_parts(tmp_path / "parts", client, show_progress=False)
    assert loaded.documents == 30 and loaded.created_collection and loaded.points == report.points
    with FairQdrantIndex(model, "pages", new_store(), model_name=MINILM_HUB_ID) as index:
        index.index_file(path, late_chunks=True, show_progress=False)
        expected = points_of(index.store, "pages")
    assert len(expected) == report.points > 30
    assert_same_points(expected, points_of(client, "pages"))
    assert client.describe("pages").metadata == index_metadata(model, late_chunks=True)
    # an `index` run into the loaded collection finds every document complete
    again = FairQdrantIndex(model, "pages", client, model_name=MINILM_HUB_ID).index_file(path, show_progress=False)
    assert again.unchanged == 30 and again.written == 0


def test_a_load_deletes_the_segments_a_changed_document_no_longer_has(tmp_path, model, new_store):
    """A document loaded again with fewer segments leaves none of its old ones behind, as `index` deletes them: the
    collection then holds what `index` of the new input would."""
    items = records(6, seed=5)
    items[3]["segments"] = items[3]["segments"] + [{"text": "And one more segment, later cut off again."}]
    old, new = write_jsonl(tmp_path / "old.jsonl", items), write_jsonl(tmp_path / "new.jsonl", records(6, seed=5))
    client = new_store()
    for path, folder in ((old, "first"), (new, "second")):
        encode_to_parts(path, tmp_path / folder, model, "pages", late_chunks=True, show_progress=False)
        report = load_parts(tmp_path / folder, client, show_progress=False)
    assert report.stale_points_deleted == 1 and "1 stale segment point(s)" in report.summary()
    with FairQdrantIndex(model, "pages", new_store(), model_name=MINILM_HUB_ID) as index:
        index.index_file(new, late_chunks=True, show_progress=False)
        assert_same_points(points_of(index.store, "pages"), points_of(client, "pages"))


def index_metadata(model, *, late_chunks):
    from mteb_fairpos.integrations.qdrant.points import collection_spec

    return collection_spec(model, MINILM_HUB_ID, uncalibrated=True, late_chunks=late_chunks).metadata()


def test_rerun_skips_complete_parts_and_redoes_a_missing_one(tmp_path, model):
    path = write_jsonl(tmp_path / "docs.jsonl", records(20))
    out = tmp_path / "parts"
    first = encode_to_parts(path, out, model, "pages", part_size=5, show_progress=False)
    assert (first.parts_encoded, first.parts_skipped) == (4, 0)
    again = encode_to_parts(path, out, model, "pages", part_size=5, show_progress=False)
    assert (again.parts_encoded, again.parts_skipped, again.forward_passes) == (0, 4, 0)
    # a run killed before its third part was renamed into place: that part (only) is redone
    victim = Path(part_files(out)[2].path)
    victim.unlink()
    (out / MANIFEST).unlink()
    resumed = encode_to_parts(path, out, model, "pages", part_size=5, show_progress=False)
    assert (resumed.parts_encoded, resumed.parts_skipped) == (1, 3)
    assert 0 < resumed.forward_passes < first.forward_passes
    assert victim.exists() and json.loads((out / MANIFEST).read_text())["documents"] == 20


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_killed_driver_resumes_without_recomputing_finished_parts(tmp_path, engine, minilm_dir):
    """SIGKILL the `encode` command (and, for Ray, the local Ray runtime it started: its whole process
    group) once its first part exists; the re-run ends with exactly N documents, no duplicates, and
    encodes only the parts that were not finished."""
    if engine == "ray":
        pytest.importorskip("ray")
    path = write_jsonl(tmp_path / "docs.jsonl", records(60, seed=5))
    out = tmp_path / "parts"
    command = [sys.executable, "-c", "from mteb_fairpos.cli import main; raise SystemExit(main())", "encode",
               str(path), "-o", str(out), "-c", "pages", "--calibration", CALIBRATION, "--part-size", "6",
               "--batch-size", "2", "--engine", engine, "--quiet"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None and not (out.is_dir() and part_files(out)):
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = _settled_count(out)
    assert 1 <= finished < 10, "the run was meant to be killed midway"
    assert not (out / MANIFEST).exists()
    report = tmp_path / "report.json"
    assert subprocess.run(command + ["--report", str(report)], capture_output=True).returncode == 0
    result = json.loads(report.read_text())
    assert result["parts_skipped"] == finished and result["parts_encoded"] == 10 - finished
    assert 0 < result["forward_passes"]
    ids = [pid for f in part_files(out) for pid in (p.id for p in read_points(f))]
    assert len(ids) == len(set(ids)) == 60


def _settled_count(out, quiet_seconds: float = 5.0, limit_seconds: float = 60.0) -> int:
    """The number of part files once none has appeared for ``quiet_seconds``: a Ray worker outside the
    killed process group can still finish (atomically) the part it was writing."""
    count, last_change, start = len(part_files(out)), time.monotonic(), time.monotonic()
    while time.monotonic() - last_change < quiet_seconds and time.monotonic() - start < limit_seconds:
        time.sleep(0.2)
        now = len(part_files(out))
        if now != count:
            count, last_change = now, time.monotonic()
    return count


def test_output_folder_of_another_run_is_refused(tmp_path, model):
    path = write_jsonl(tmp_path / "docs.jsonl", records(6))
    out = tmp_path / "parts"
    encode_to_parts(path, out, model, "pages", show_progress=False)
    with pytest.raises(store.CollectionMismatchError, match="another run.*Use a new output folder"):
        encode_to_parts(path, out, model, "other", show_progress=False)
    other_input = write_jsonl(tmp_path / "other.jsonl", records(3, prefix="o"))
    with pytest.raises(store.QdrantIndexError, match="not part of this input"):
        encode_to_parts(other_input, out, model, "pages", show_progress=False)



def test_a_folder_of_other_files_is_refused_as_the_output_before_any_work(tmp_path):
    """A mistyped -o: the parts would be written among the user's files."""
    path = write_jsonl(tmp_path / "docs.jsonl", records(3))
    out = tmp_path / "papers"
    out.mkdir()
    for name in ("a.pdf", "b.pdf", "notes.txt", "todo.md"):
        (out / name).write_text("mine\n")

    def no_model():
        raise AssertionError("the model was loaded before the refusal")

    with pytest.raises(store.QdrantIndexError, match=r"holds other files \(a.pdf, b.pdf, notes.txt and 1 more\) and no "
                                                     r"parts; give a new or empty folder"):
        encode_to_parts(path, out, no_model, "pages", show_progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["a.pdf", "b.pdf", "notes.txt", "todo.md"]


def test_a_part_folder_with_hidden_files_or_a_run_report_is_still_resumed(tmp_path, model):
    path = write_jsonl(tmp_path / "docs.jsonl", records(6))
    out = tmp_path / "parts"
    out.mkdir()
    (out / ".DS_Store").write_text("")  # no data
    first = encode_to_parts(path, out, model, "pages", part_size=2, show_progress=False)
    (out / "report.json").write_text("{}")  # what --report may have written beside the parts
    again = encode_to_parts(path, out, model, "pages", part_size=2, show_progress=False)
    assert (first.parts_encoded, again.parts_encoded, again.parts_skipped) == (first.parts, 0, first.parts) and first.parts > 1

def test_the_input_folder_as_output_or_an_unusable_collection_name_is_refused_before_any_work(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "docs.jsonl", records(3))

    def no_model():
        raise AssertionError("the model was loaded before the refusal")

    with pytest.raises(ValueError, match="is the input folder"):
        encode_to_parts(folder, folder, no_model, "pages", show_progress=False)
    for name in ("a/b", "..", " ", "x\ty", "my pages"):  # the last one an Edge store cannot hold as a folder
        with pytest.raises(ValueError, match="collection name"):
            encode_to_parts(folder / "docs.jsonl", tmp_path / "parts", no_model, name, show_progress=False)
    assert not (folder / "parts").exists() and not (tmp_path / "parts").exists()


# ---------------------------------------------------------------------------- load: bad input
@pytest.fixture()
def parts(tmp_path, model):
    path = write_jsonl(tmp_path / "docs.jsonl", records(12))
    encode_to_parts(path, tmp_path / "parts", model, "pages", part_size=4, show_progress=False)
    return tmp_path / "parts"


def test_a_truncated_or_foreign_part_is_named_and_nothing_written(parts, new_store):
    victim = Path(part_files(parts)[1].path)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    pq.write_table(pa.table({"x": [1, 2]}), parts / "notes.parquet")
    client = new_store()
    with pytest.raises(PartError, match=rf"(?s)2 of 4 file\(s\).*{victim.name}.*truncated.*notes.parquet.*foreign"):
        load_parts(parts, client, show_progress=False)
    assert not client.exists("pages")
    report = load_parts(parts, client, on_bad="skip", show_progress=False)
    assert report.documents == 8 and len(report.bad_parts) == 2
    assert client.count("pages") == 8


def halve_rows(path, *, metadata=None):
    """Rewrite a part with its first half of rows, keeping (or replacing) its file metadata."""
    table = pq.read_table(path)
    kept = table.slice(0, table.num_rows // 2)
    pq.write_table(kept.replace_schema_metadata(metadata or table.schema.metadata), path)
    return kept.num_rows


def test_a_part_whose_rows_disagree_with_its_metadata_or_the_manifest_is_refused(parts, new_store):
    victim = Path(part_files(parts)[1].path)
    rows = halve_rows(victim)
    client = new_store()
    with pytest.raises(PartError, match=rf"{victim.name}: its metadata says 4 document\(s\) in 4 point\(s\), "
                                         rf"but its rows hold {rows} in {rows}"):
        load_parts(parts, client, show_progress=False)
    assert not client.exists("pages")
    report = load_parts(parts, client, on_bad="skip", show_progress=False)
    assert (report.documents, report.points, report.parts) == (8, 8, 2)
    assert len(report.bad_parts) == 1 and victim.name in report.bad_parts[0]
    assert client.count("pages") == 8
    about = json.loads(pq.read_schema(victim).metadata[b"mteb_fairpos_shard"])
    about.update(documents=rows, points=rows)  # the file agrees with itself now, not with the manifest
    pq.write_table(pq.read_table(victim).replace_schema_metadata({b"mteb_fairpos_shard": json.dumps(about)}), victim)
    with pytest.raises(PartError, match=rf"{victim.name}: the manifest says 4 document\(s\) in 4 point\(s\)"):
        load_parts(parts, new_store(), show_progress=False)


def test_a_manifest_of_another_shape_is_named_with_its_field_and_nothing_written(parts, new_store):
    """Valid JSON that is not the manifest `encode` writes (a list, a field missing or of another type) is refused
    before any write, naming the file and the field: before, a load stopped in a traceback from deep inside."""
    path = parts / MANIFEST
    written = json.loads(path.read_text())

    def without(key, *, shard=None):
        changed = json.loads(json.dumps(written))
        del (changed if shard is None else changed["shards"][shard])[key]
        return changed

    for manifest, fault in (([1, 2, 3], "a JSON list, not an object"),
                            (without("documents"), "'documents' is None, not a count"),
                            ({**written, "documents": "three"}, "'documents' is 'three', not a count"),
                            ({**written, "shards": "notalist"}, "'shards' is 'notalist', not a list"),
                            (without("documents", shard=1), "shards[1].documents is None, not a count"),
                            ({**written, "documents": 1}, f"'documents' is 1, but its shards hold {written['documents']}"),
                            ({**written, "points": 99}, f"'points' is 99, but its shards hold {written['points']}")):
        path.write_text(json.dumps(manifest))
        client = new_store()
        with pytest.raises(store.QdrantIndexError) as raised:
            load_parts(parts, client, show_progress=False)
        assert str(raised.value).startswith(f"{path}: not a manifest of `mteb-fairpos encode` ({fault})")
        assert not client.exists("pages")


def test_a_part_the_manifest_does_not_list_is_refused_or_skipped(tmp_path, parts, model, new_store):
    """One folder holds one run: a part of another encode (same settings and collection, other
    documents) copied into a finished folder is not loaded unless the load is --partial."""
    other = write_jsonl(tmp_path / "other.jsonl", records(3, prefix="o"))
    encode_to_parts(other, tmp_path / "other", model, "pages", show_progress=False)
    [stray] = part_files(tmp_path / "other")
    (parts / stray.name).write_bytes(stray.read_bytes())
    client = new_store()
    with pytest.raises(PartError, match=rf"(?s)1 of 4 file\(s\).*{stray.name}: not in the folder's {MANIFEST}"):
        load_parts(parts, client, show_progress=False)
    assert not client.exists("pages")
    report = load_parts(parts, client, on_bad="skip", show_progress=False)
    assert (report.documents, report.points, report.parts) == (12, 12, 3) == (12, client.count("pages"), 3)
    assert len(report.bad_parts) == 1 and f"{stray.name}: not in the folder's {MANIFEST}" in report.bad_parts[0]
    assert "incomplete" not in report.summary()
    assert load_parts(parts, new_store(), partial=True, show_progress=False).documents == 15  # as without a manifest


def test_skipped_parts_of_the_manifest_are_reported_as_an_incomplete_load(parts, new_store):
    """A truncated part and a deleted one are both bad parts: refused, or skipped and listed with
    the manifest's totals beside what was loaded."""
    victim, gone = (Path(info.path) for info in part_files(parts)[1:])
    halve_rows(victim)
    gone.unlink()
    client = new_store()
    with pytest.raises(PartError, match=rf"(?s)2 of 3 file\(s\).*{victim.name}: its metadata says.*"
                                         rf"{gone.name}: listed in the {MANIFEST} but missing"):
        load_parts(parts, client, show_progress=False)
    assert not client.exists("pages")
    report = load_parts(parts, client, on_bad="skip", show_progress=False)
    assert (report.documents, report.points, report.parts, client.count("pages")) == (4, 4, 1, 4)
    assert [victim.name in report.bad_parts[0], gone.name in report.bad_parts[1]] == [True, True]
    assert "incomplete: 4 of the manifest's 12 document(s) and 4 of its 12 point(s) loaded; 8 document(s), " \
           "8 point(s) in skipped part(s)" in report.summary()
    as_json = report.to_dict()
    assert (as_json["documents"], as_json["manifest_documents"], as_json["manifest_points"]) == (4, 12, 12)
    partial = load_parts(parts, new_store(), on_bad="skip", partial=True, show_progress=False)
    assert (partial.documents, partial.manifest_documents) == (4, None) and "incomplete" not in partial.summary()


def test_load_command_skips_a_stray_part_and_a_missing_one(tmp_path, parts, model, capsys):
    other = write_jsonl(tmp_path / "other.jsonl", records(3, prefix="o"))
    encode_to_parts(other, tmp_path / "other", model, "pages", show_progress=False)
    [stray] = part_files(tmp_path / "other")
    (parts / stray.name).write_bytes(stray.read_bytes())
    gone = Path(part_files(parts)[0].path)
    gone.unlink()
    qdrant, saved = str(tmp_path / "qdrant"), tmp_path / "report.json"
    assert main(["load", str(parts), "--path", qdrant, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{stray.name}: not in the folder's {MANIFEST}" in err and f"{gone.name}: listed in the {MANIFEST}" in err
    assert main(["load", str(parts), "--path", qdrant, "--skip-bad", "--report", str(saved), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "8 document(s), 8 point(s) loaded from 2 part(s)" in out and "2 part file(s) skipped" in out
    assert "8 of the manifest's 12 document(s)" in out
    result = json.loads(saved.read_text())
    assert (result["documents"], result["manifest_documents"], len(result["bad_parts"])) == (8, 12, 2)


def test_load_reports_the_points_it_reads_back(parts, new_store):
    """The read-back counts what the store holds: a store that drops points fails the load."""
    client = new_store()
    report = load_parts(parts, client, show_progress=False)
    assert (report.documents, report.points) == (12, 12) == (12, client.count("pages"))
    dropping = new_store()
    real = dropping.write
    dropping.write = lambda name, points, **kw: real(name, points[1:], **kw)  # a store that loses a point
    with pytest.raises(store.UpsertFailedError, match=r"1 of its 4 point\(s\) are missing"):
        load_parts(parts, dropping, show_progress=False)


def test_duplicates_across_part_folders_are_counted(tmp_path, parts, model, new_store):
    copy = parts / "copy.parquet"
    copy.write_bytes(part_files(parts)[0].read_bytes())
    client = new_store()
    with pytest.raises(store.QdrantIndexError, match=r"4 document id\(s\) occur in more than one part \(8 copies\)"):
        load_parts(parts, client, partial=True, show_progress=False)
    assert not client.exists("pages")


def test_ids_whose_digests_collide_are_told_apart_by_the_ids_themselves(parts, model, new_store, monkeypatch):
    """Duplicates are found on 8-byte digests of the ids, then counted on the ids: with every digest forced equal
    (a real 64-bit collision cannot be made), distinct ids still load, and a real copy is still counted exactly."""
    from mteb_fairpos.integrations.qdrant import load

    monkeypatch.setattr(load, "_digests", lambda ids: np.zeros(len(ids), dtype=np.uint64))
    client = new_store()
    assert load_parts(parts, client, show_progress=False).documents == 12
    (parts / "copy.parquet").write_bytes(part_files(parts)[1].read_bytes())
    with pytest.raises(store.QdrantIndexError, match=r"4 document id\(s\) occur in more than one part \(8 copies\)"):
        load_parts(parts, new_store(), partial=True, show_progress=False)


def test_unfinished_encode_and_other_collection_are_refused(parts, model, new_store):
    client = new_store()
    with pytest.raises(store.CollectionMismatchError, match="encoded for collection 'pages'"):
        load_parts(parts, client, "news", show_progress=False)
    (parts / MANIFEST).unlink()
    with pytest.raises(store.QdrantIndexError, match="has not finished.*--partial"):
        load_parts(parts, client, show_progress=False)
    assert load_parts(parts, client, partial=True, show_progress=False).documents == 12


def test_a_mismatched_collection_is_refused_before_any_write(parts, model, loader, new_store):
    client = new_store()
    FairQdrantIndex(ModelLoader(MINILM_HUB_ID, "b16_lhalf_a0.5", device="cpu")(), "pages", client).index(
        records(2, prefix="z"), show_progress=False)
    with pytest.raises(store.CollectionMismatchError, match="b16_lhalf_a0.5"):
        load_parts(parts, client, show_progress=False)
    assert client.count("pages") == 2


def test_parts_without_text_are_refused_by_a_collection_that_stores_it(tmp_path, parts, model, new_store):
    client = new_store()
    load_parts(parts, client, show_progress=False)
    path = write_jsonl(tmp_path / "more.jsonl", records(2, prefix="t"))
    encode_to_parts(path, tmp_path / "no-text", model, "pages", store_text=False, show_progress=False)
    with pytest.raises(store.CollectionMismatchError, match="document text: collection stores it, this run would not"):
        load_parts(tmp_path / "no-text", client, show_progress=False)
    assert client.count("pages") == 12


def test_parts_of_an_earlier_release_give_the_collection_their_text_choice(parts, new_store):
    """Parts written before the spec recorded store_text have it beside the spec only."""
    from mteb_fairpos.integrations.qdrant.parts import METADATA_KEY

    for part in part_files(parts):
        table = pq.read_table(part.path)
        about = json.loads(table.schema.metadata[METADATA_KEY])
        del about["spec"]["store_text"]
        pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(about).encode()}), part.path)
    client = new_store()
    load_parts(parts, client, show_progress=False)
    assert store.read_spec(client, "pages").store_text is True


def test_load_twice_rewrites_the_same_points(parts, new_store):
    client = new_store()
    load_parts(parts, client, show_progress=False)
    first = points_of(client, "pages")
    second = load_parts(parts, client, show_progress=False)
    assert not second.created_collection and client.count("pages") == 12
    assert_same_points(first, points_of(client, "pages"))


def test_bulk_load_requests_sent_to_a_cluster(parts):
    """A server cannot be installed here: the stand-in records the REST requests a cluster would receive."""
    server = FakeServer()
    client = store.open_store(url="https://qdrant.test:6333", api_key="k", transport=httpx.MockTransport(server))
    report = load_parts(parts, client, shard_number=4, replication_factor=2, write_consistency_factor=2,
                         batch_size=5, show_progress=False)
    assert report.documents == 12 and report.deferred_indexing
    order = [(r.method, r.url.path) for r in server.requests]
    [create] = server.calls("PUT", "/collections/pages")
    body = server.body(create)
    assert (body["shard_number"], body["replication_factor"], body["write_consistency_factor"]) == (4, 2, 2)
    patches = [server.body(r)["hnsw_config"] for r in server.calls("PATCH", "/collections/pages")]
    assert patches == [{"m": 0}, {"m": 16}]  # deferred for the load, then restored
    first_upsert = order.index(("PUT", "/collections/pages/points"))
    assert order.index(("PUT", "/collections/pages/index")) < order.index(("PATCH", "/collections/pages")) < first_upsert
    assert max(i for i, o in enumerate(order) if o == ("PUT", "/collections/pages/points")) < \
        max(i for i, o in enumerate(order) if o == ("PATCH", "/collections/pages"))
    upserts = server.calls("PUT", "/collections/pages/points")
    assert all(len(server.body(r)["points"]) <= 5 for r in upserts) and all(r.url.params["wait"] == "true" for r in upserts)
    assert set(server.points["pages"]) == {point_id("pages", f"d{i}") for i in range(12)}


def test_transient_errors_are_retried_and_hnsw_restored_after_a_failure(parts):
    """The recorded-request stand-in again (no server here): three 503s are retried with backoff;
    a 400 stops the load at once, with how to resume, and HNSW is restored all the same."""
    server = FakeServer()
    server.upsert_failures = [503] * 3
    client = store.open_store(url="https://qdrant.test:6333", transport=httpx.MockTransport(server))
    assert load_parts(parts, client, backoff=0, show_progress=False).documents == 12
    assert len(server.points["pages"]) == 12
    server = FakeServer()
    server.upsert_failures = [400]
    client = store.open_store(url="https://qdrant.test:6333", transport=httpx.MockTransport(server))
    with pytest.raises(store.UpsertFailedError, match="Run the same load again"):
        load_parts(parts, client, backoff=0, show_progress=False)
    assert len(server.calls("PUT", "/collections/pages/points")) == 1  # a client error is not retried
    assert [server.body(r)["hnsw_config"] for r in server.calls("PATCH")] == [{"m": 0}, {"m": 16}]


# ---------------------------------------------------------------------------- the commands
def test_encode_and_load_commands(tmp_path, capsys, minilm_dir):
    path = write_jsonl(tmp_path / "docs.jsonl", records(9))
    out, qdrant = tmp_path / "parts", tmp_path / "qdrant"
    assert main(["encode", str(path), "-o", str(out), "-c", "pages", "--calibration", CALIBRATION, "--part-size", "4",
                 "--quiet"]) == 0
    assert "9 document(s) in 3 part(s)" in capsys.readouterr().out
    assert main(["load", str(out), "--path", str(qdrant), "--quiet"]) == 0
    assert "9 document(s), 9 point(s) loaded from 3 part(s), collection created" in capsys.readouterr().out
    assert main(["search", "budget", "-c", "pages", "--path", str(qdrant), "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(hits) > 0 and all(hit["doc_id"].startswith("d") for hit in hits)
    plain = tmp_path / "documents"  # no suffix: --format says what it holds
    plain.write_bytes(path.read_bytes())
    assert main(["encode", str(plain), "-o", str(tmp_path / "plain"), "-c", "pages", "--calibration", CALIBRATION,
                 "--part-size", "4", "--format", "jsonl", "--quiet"]) == 0
    assert "9 document(s) in 3 part(s)" in capsys.readouterr().out
    assert main(["encode", str(path), "-o", str(out), "-c", "pages", "--actors", "2"]) == 2
    assert "apply to the Ray engine; add --engine ray" in capsys.readouterr().err
    assert main(["load", str(tmp_path / "nowhere"), "--path", str(qdrant)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["load", str(out), "--url", "http://127.0.0.1:1", "--timeout", "2"]) == 2
    assert "cannot reach the Qdrant server at http://127.0.0.1:1" in capsys.readouterr().err


def test_quiet_prints_the_summary_and_the_uncalibrated_count_once(tmp_path, capfd, minilm_dir):
    short = [{"id": f"s{i}", "segments": [{"text": "Hi."}, {"text": "Yo."}]} for i in range(3)]  # < one basket of 8
    path = write_jsonl(tmp_path / "docs.jsonl", records(6) + short)
    capfd.readouterr()
    assert main(["encode", str(path), "-o", str(tmp_path / "parts"), "-c", "pages", "--calibration", CALIBRATION,
                 "--part-size", "3", "--quiet"]) == 0
    out, err = capfd.readouterr()
    assert err == ""
    assert out.count("3 document(s) left uncalibrated") == 1 and "3 part(s) encoded" in out
    assert main(["index", str(path), "-c", "pages", "--path", str(tmp_path / "qdrant"), "--calibration", CALIBRATION,
                 "--batch-size", "3", "--quiet"]) == 0
    out, err = capfd.readouterr()
    assert err == "" and out.count("3 document(s) left uncalibrated") == 1


# ---------------------------------------------------------------------------- the single-process index, streamed
def test_index_file_streams_in_bounded_reads_on_one_thread_in_local_mode(tmp_path, model, monkeypatch):
    """`index_file` reads the file part by part; in local mode every client call stays on the
    caller's thread (its SQLite store refuses other threads)."""
    import threading

    items = records(26, seed=9)
    path = write_jsonl(tmp_path / "docs.jsonl", items)
    client = store.open_store(str(tmp_path / "qdrant"), backend="local")  # on disk: SQLite, bound to this thread
    index = FairQdrantIndex(model, "pages", client, model_name=MINILM_HUB_ID)
    client_threads = set()
    original_upsert = client.write

    def recording(*args, **kwargs):
        client_threads.add(threading.current_thread().name)
        return original_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "write", recording)
    reads = []
    from mteb_fairpos.integrations.qdrant import index as index_module

    original_read = index_module.read_range
    monkeypatch.setattr(index_module, "read_range", lambda span: reads.append(span.documents) or original_read(span))
    report = index.index_scan(scan_file(path, range_size=10), batch_size=4, show_progress=False)
    assert report.written == 26 and client.count("pages") == 26
    assert reads == [10, 10, 6]  # three reads of bounded size, not one of the whole file
    assert client_threads == {threading.current_thread().name}
    with FairQdrantIndex(model, "pages", model_name=MINILM_HUB_ID) as reference:
        reference.index(items, show_progress=False)
        assert_same_points(points_of(reference.store, "pages"), points_of(client, "pages"))
    client.close()


def test_index_runs_the_forward_passes_of_the_parts_and_gives_their_vectors(tmp_path, model, new_store):
    """With windows as large as the parts, `index` embeds the same documents in the same batches as
    `encode`: as many forward passes, and vectors equal bit for bit (both loaded into the same engine)."""
    path = write_jsonl(tmp_path / "docs.jsonl", records(23, seed=5))
    report = encode_to_parts(path, tmp_path / "parts", model, "pages", part_size=8, batch_size=3,
                             show_progress=False)
    loaded = new_store()
    load_parts(tmp_path / "parts", loaded, show_progress=False)
    passes = []
    hook = model.register_forward_hook(lambda *_: passes.append(1))
    try:
        with FairQdrantIndex(model, "pages", new_store(), model_name=MINILM_HUB_ID) as index:
            index.index_file(path, window=8, batch_size=3, show_progress=False)
            indexed = points_of(index.store, "pages")
    finally:
        hook.remove()
    assert len(passes) == report.forward_passes == 2 * (3 + 3 + 3)  # 8 + 8 + 7 documents, 3 a batch, 2 passes
    expected = points_of(loaded, "pages")
    assert indexed.keys() == expected.keys() and len(indexed) == 23
    for pid, point in expected.items():
        assert indexed[pid].payload == point.payload
        for name, vector in point.vector.items():
            assert np.array_equal(np.asarray(vector), np.asarray(indexed[pid].vector[name]))


def test_on_a_server_batches_are_written_while_the_next_is_embedded(tmp_path, model):
    """The recorded-request stand-in (no server here): upserts are sent from the writer thread."""
    import threading

    server = FakeServer()
    threads = []

    def transport(request):
        if request.method == "PUT" and request.url.path.endswith("/points"):
            threads.append(threading.current_thread().name)
        return server(request)

    path = write_jsonl(tmp_path / "docs.jsonl", records(10))
    with FairQdrantIndex(model, "pages", url="https://qdrant.test:6333", transport=httpx.MockTransport(transport),
                         model_name=MINILM_HUB_ID) as index:
        report = index.index_file(path, batch_size=3, show_progress=False)
    assert report.written == 10 and len(server.points["pages"]) == 10
    assert len(threads) == 4 and all(name.startswith("fairpos-write") for name in threads)


def test_load_and_copy_take_a_users_qdrant_client_and_name_what_is_no_store(tmp_path, model):
    """As FairQdrantIndex does: a QdrantClient is wrapped; a path or None was an AttributeError in read_spec."""
    from qdrant_client import QdrantClient

    from mteb_fairpos.integrations.qdrant.copy import copy_collection

    path = write_jsonl(tmp_path / "docs.jsonl", records(4))
    encode_to_parts(path, tmp_path / "parts", model, "pages", show_progress=False)
    client = QdrantClient(":memory:")
    report = load_parts(tmp_path / "parts", client, show_progress=False)
    assert report.points > 0 and client.count("pages").count == report.points
    for target in (str(tmp_path / "store"), None):
        with pytest.raises(TypeError, match=f"expected a Store or a qdrant_client.QdrantClient, got {type(target).__name__}"):
            load_parts(tmp_path / "parts", target, show_progress=False)
    with pytest.raises(ValueError, match="source and target are the same store; copy into another one."):
        copy_collection(client, client, "pages")  # it reported every point copied


def test_settings_a_loaded_model_would_ignore_are_refused(tmp_path, model):
    """With a loaded model, calibration= and max_length= were ignored (max_length=8 still encoded 256 tokens)."""
    path = write_jsonl(tmp_path / "docs.jsonl", records(2))
    for options, given in (({"max_length": 8}, "max_length"), ({"calibration": "none"}, "calibration"),
                           ({"calibration": "none", "max_length": 8}, "calibration and max_length")):
        with pytest.raises(ValueError, match=f"^{given} apply to a model loaded from its name or path"):
            encode_to_parts(path, tmp_path / "parts", model, "pages", show_progress=False, **options)
    with pytest.raises(ValueError, match="max_length must be None \\(the model's own\\) or a positive integer, got 0"):
        encode_to_parts(path, tmp_path / "parts", "some/model", "pages", max_length=0, show_progress=False)
    with pytest.raises(TypeError, match="model must be a Hub id or path, a loaded SentenceTransformer or a callable"):
        encode_to_parts(path, tmp_path / "parts", None, "pages", show_progress=False)
    assert not (tmp_path / "parts").exists()


def test_inputs_of_the_wrong_kind_are_named_and_a_generator_is_read_once(tmp_path, minilm_dir):
    """None failed as 'not iterable', and a generator was spent by the check of the output folder: nothing was read."""
    for inputs in (None, 123, [None]):
        with pytest.raises(TypeError, match="inputs are a file, folder or URI, or a list of them"):
            encode_to_parts(inputs, tmp_path / "o", MINILM_HUB_ID, "p")
    source = write_jsonl(tmp_path / "d.jsonl", records(3))
    report = encode_to_parts((path for path in [source]), tmp_path / "parts", MINILM_HUB_ID, "p", show_progress=False)
    assert report.documents == 3 and report.points > 0
