"""An archive's per-document lists stay short on screen and complete in the report; a killed `index`
of a few thousand documents resumes exactly.

Real MiniLM (cut to 12 tokens, so every document is truncated) for the listings; a tiny random
BERT for the kill, where encoding must cost little.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.cli import qdrant_common as _cli
from mteb_fairpos.integrations.qdrant import store
from mteb_fairpos.integrations.qdrant.listing import SHOWN, Listing, write_json
from mteb_fairpos.integrations.qdrant.records import Problem

from corpus import CALIBRATION, records, save_tiny_model, write_jsonl

TRUNCATED, INVALID = 25, 13


@pytest.fixture()
def archive(tmp_path):
    """25 valid documents (all longer than 12 tokens) with 13 invalid records (an unknown key) among them."""
    lines = []
    for i, record in enumerate(records(TRUNCATED, seed=3)):
        lines.append(json.dumps(record))
        if i < INVALID:
            lines.append(json.dumps({"id": f"bad{i}", "segments": ["x"], "langauge": "en"}))
    path = tmp_path / "archive.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def short_model(model, monkeypatch):
    """The session's MiniLM handed to the CLI, cut to 12 tokens for this test only."""
    saved = model.max_seq_length
    monkeypatch.setattr(_cli, "load_model", lambda name, calibration, device=None: model)
    yield model
    model.max_seq_length = saved


def test_index_names_ten_documents_per_list_and_reports_all_of_them(tmp_path, archive, short_model, capsys):
    report_file = tmp_path / "report.json"
    rc = main(["index", str(archive), "-c", "pages", "--path", str(tmp_path / "edge"), "--calibration", CALIBRATION,
               "--max-length", "12", "--no-uncalibrated", "--skip-invalid", "--quiet", "--report", str(report_file)])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert rc == 0 and captured.err == ""
    # the summary line, then per list a title, ten names and one "and N more" line naming the report
    assert len(lines) == 1 + 2 * (1 + SHOWN + 1)
    assert f"  ... and {INVALID - SHOWN} more (full list in {report_file})" in lines
    assert f"  ... and {TRUNCATED - SHOWN} more (full list in {report_file})" in lines
    assert sum("langauge" in line for line in lines) == SHOWN
    assert sum("the model reads 12" in line for line in lines) == SHOWN
    report = json.loads(report_file.read_text())
    assert [p["doc_id"] for p in report["invalid"]] == [f"bad{i}" for i in range(INVALID)]
    assert all("unknown record key(s) 'langauge'" in p["reason"] for p in report["invalid"])
    assert [p["where"].split(" (")[0] for p in report["invalid"]] == [
        f"archive.jsonl line {2 * i + 2}" for i in range(INVALID)]
    assert sorted(t["doc_id"] for t in report["truncated"]) == sorted(f"d{i}" for i in range(TRUNCATED))
    assert {t["max_tokens"] for t in report["truncated"]} == {12}
    assert report["written"] == TRUNCATED

    # without --report the summary says how to get the full list
    main(["index", str(archive), "-c", "other", "--path", str(tmp_path / "edge"), "--calibration", CALIBRATION,
          "--max-length", "12", "--no-uncalibrated", "--skip-invalid", "--quiet"])
    out = capsys.readouterr().out
    assert f"  ... and {TRUNCATED - SHOWN} more (--report FILE writes the full list)" in out
    assert len(out.splitlines()) == len(lines)


def test_a_library_caller_gets_one_warning_for_a_run_of_truncated_documents(tmp_path, archive, model, caplog):
    """Python callers see no per-document lines either: one warning for the run, every document in the report
    (and each one at DEBUG for whoever asks)."""
    from mteb_fairpos.integrations.qdrant import FairQdrantIndex

    saved = model.max_seq_length
    model.max_seq_length = 12
    try:
        with caplog.at_level(logging.DEBUG, logger="mteb_fairpos.integrations.qdrant"), \
                FairQdrantIndex(model, "pages", path=str(tmp_path / "edge")) as index:
            report = index.index_file(archive, on_error="skip", show_progress=False)
    finally:
        model.max_seq_length = saved
    assert len(report.truncated) == TRUNCATED and report.written == TRUNCATED
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mteb_fairpos") and r.levelno >= logging.WARNING]
    assert sum(r.getMessage().startswith("truncated: ") for r in caplog.records if r.levelno == logging.DEBUG) == TRUNCATED
    assert warnings == [f"{TRUNCATED} document(s) truncated to the model's maximum length; IndexReport.truncated "
                        "lists them"], warnings


def test_encode_names_ten_records_left_out_and_reports_all_of_them(tmp_path, archive, minilm_dir, capsys):
    report_file = tmp_path / "encode.json"
    rc = main(["encode", str(archive), "-o", str(tmp_path / "parts"), "-c", "pages", "--calibration", CALIBRATION,
               "--skip-invalid", "--quiet", "--report", str(report_file)])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0 and sum("langauge" in line for line in lines) == SHOWN
    assert f"  ... and {INVALID - SHOWN} more (full list in {report_file})" in lines
    assert len(lines) <= 2 + 1 + SHOWN + 1
    assert [p["doc_id"] for p in json.loads(report_file.read_text())["invalid"]] == [f"bad{i}" for i in range(INVALID)]


def test_a_listing_keeps_ten_in_memory_and_gives_back_every_item_in_order(tmp_path):
    problems = [Problem(f"f.jsonl line {i}", f"reason {i}", f"d{i}") for i in range(1000)]
    listing = Listing(problems)
    assert len(listing) == 1000 and listing.head == problems[:SHOWN]
    assert list(listing) == problems and listing[-1] == problems[-1] and listing[500] == problems[500]
    listing.append(Problem("g.jsonl line 1", "late", "x"))  # appending after a read keeps the order
    assert [p.doc_id for p in listing][-2:] == ["d999", "x"]
    path = tmp_path / "report.json"
    write_json(path, {"count": 2, "nested": {"a": [1]}, "invalid": listing.as_json(Problem.to_json),
                      "none": Listing().as_json(str)})
    written = json.loads(path.read_text())
    assert written["count"] == 2 and written["nested"] == {"a": [1]} and written["none"] == []
    assert written["invalid"] == [p.to_json() for p in problems] + [{"where": "g.jsonl line 1", "doc_id": "x",
                                                                     "reason": "late"}]
    assert listing.summary_lines("record(s)")[-1] == "  ... and 991 more (--report FILE writes the full list)"


@pytest.mark.slow
def test_index_killed_halfway_through_thousands_of_documents_resumes_exactly(tmp_path):
    """SIGKILL `mteb-fairpos index` once its progress bar passes half of 2,000 documents; the re-run
    skips what was finished and the store ends with exactly one point per document."""
    n = 2000
    model = save_tiny_model(tmp_path / "tiny", max_seq_length=128)
    data = write_jsonl(tmp_path / "docs.jsonl", records(n, seed=11))
    target = tmp_path / "edge"
    command = [sys.executable, "-c", "from mteb_fairpos.cli import main; raise SystemExit(main())", "index",
               str(data), "-c", "pages", "--path", str(target), "-m", model, "--calibration", "none"]
    env = dict(os.environ, TQDM_MININTERVAL="0")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    done = _progress_of(process)
    deadline = time.monotonic() + 300
    while process.poll() is None and done[0] < n // 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = done[0]
    assert n // 2 <= killed_at < n, "the run was meant to be killed midway"

    report_file = tmp_path / "report.json"
    again = subprocess.run(command + ["--quiet", "--report", str(report_file)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    report = json.loads(report_file.read_text())
    assert report["unchanged"] >= killed_at and report["unchanged"] + report["written"] == n
    with store.open_store(str(target)) as opened:
        ids, offset = [], None
        while True:
            page, offset = opened.scroll("pages", limit=1000, offset=offset, payload=["doc_id"])
            ids += [p.payload["doc_id"] for p in page]
            if offset is None:
                break
        assert opened.count("pages") == n
    assert len(ids) == len(set(ids)) == n and set(ids) == {f"d{i}" for i in range(n)}


def _progress_of(process: subprocess.Popen) -> list[int]:
    """The documents done as the command's progress bar reports them, updated by a reader thread."""
    done = [0]
    pattern = re.compile(rb"(\d+)/(\d+) \[")

    def read() -> None:
        tail = b""
        while chunk := process.stderr.read1(4096):
            tail = (tail + chunk)[-400:]
            found = pattern.findall(tail)
            if found:
                done[0] = int(found[-1][0])

    threading.Thread(target=read, daemon=True).start()
    return done


def test_a_reports_dict_is_plain_json_unless_streamed(tmp_path):
    """``to_dict()`` gives what ``json.dumps`` takes, the lists whole (spilled items included); ``stream=True``
    gives the lazily made lists `write_json` streams into ``--report``, with the same content."""
    from mteb_fairpos.integrations.qdrant.load import LoadReport

    report = LoadReport(collection="c")
    report.bad_parts.extend(f"part-{i:03d}.parquet" for i in range(25))  # 15 of them spilled to disk
    plain = json.loads(json.dumps(report.to_dict()))
    assert plain["bad_parts"] == [f"part-{i:03d}.parquet" for i in range(25)]
    write_json(tmp_path / "report.json", report.to_dict(stream=True))
    assert json.loads((tmp_path / "report.json").read_text()) == plain
