"""The CLI's one error path (one line on stderr; 2 for bad input, 1 for a run that failed) and its
warnings about the data, printed once per run."""

from __future__ import annotations

import json
import logging

import pytest

from mteb_fairpos.cli import errors, main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["copy", "{tmp}/no-store", "{tmp}/target", "-c", "c"], "no store at"),
        (["sweep", "-m", "fair/no-such-model", "-t", "FairPosTinyRetrieval", "-o", "{tmp}/r"], "no-such-model"),
        (["profile", "-o", "{tmp}/p.png"], "give at least one --text or a --file"),
        (["search", "q", "-c", "c", "--path", "{tmp}/typo"], "no local Qdrant store"),
        (["load", "{tmp}/file", "--path", "{tmp}/store"], "is a file; give the part folder"),
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/file", "--quiet"], "is a file; a Qdrant Edge store is a folder"),
    ],
)
def test_bad_input_of_any_command_is_one_line_and_status_2(tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    assert main([arg.replace("{tmp}", str(tmp_path)) for arg in argv]) == errors.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"mteb-fairpos {argv[0]}: error: ") and message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--part-size", "0"], "--part-size"),
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--actors", "0"], "--actors"),
        (["index", "docs.jsonl", "-c", "c", "--upsert-batch-size", "0"], "--upsert-batch-size"),
        (["load", "parts", "--parallel", "0"], "--parallel"),
    ],
)
def test_a_count_below_one_is_refused_by_its_option_name(capsys, argv, option):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == errors.BAD_INPUT
    assert f"argument {option}: expected a positive integer, got 0" in capsys.readouterr().err


def test_a_failed_run_is_status_1_and_a_bug_keeps_its_traceback(capsys):
    from mteb_fairpos.integrations.qdrant.store import CollectionMismatchError, UpsertFailedError
    from mteb_fairpos.model import CalibratedModelError

    assert errors.exit_status(UpsertFailedError("3 batches failed")) == errors.FAILED_RUN
    assert errors.exit_status(CalibratedModelError("broke")) == errors.FAILED_RUN
    assert errors.exit_status(CollectionMismatchError("other dimension")) == errors.BAD_INPUT
    assert errors.exit_status(ZeroDivisionError()) is None  # not expected: main re-raises it
    assert errors.report("load", UpsertFailedError("first\n\nsecond\nthird\nfourth")) == errors.FAILED_RUN
    assert capsys.readouterr().err == "mteb-fairpos load: error: first second third ...\n"


def test_a_warning_about_the_data_is_printed_once_per_run(tmp_path, caplog, minilm_dir):
    """Sets that share topics are a property of the data: one warning per subset, not one per config."""
    from mteb_fairpos.permutation import sample_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": t.id, "texts": {"en": t.texts["en"]}}) + "\n"
                              for t in sample_corpus() if "en" in t.texts), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="mteb_fairpos.permutation.probe"):
        assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "--sets", "12", "--calibration", "none",
                     "b128_lhalf_a1", "--max-length", "512", "--output", str(tmp_path / "o"), "--quiet"]) == 0
    shared = [r for r in caplog.records if "sets share topics" in r.getMessage()]
    assert len(shared) == 1
    results = list((tmp_path / "o" / "results").rglob("PermutationFairness.*.json"))
    assert len(results) == 2  # both configs were scored on the data the warning is about
    for path in results:  # and each result still carries the note
        assert any("sets share topics" in n for n in json.loads(path.read_text())["scores"]["test"][0]["notes"])
