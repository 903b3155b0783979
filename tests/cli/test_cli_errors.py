"""The CLI's one error path (one line on stderr; 2 for bad input, 1 for a run that failed) and its
warnings about the data, printed once per run."""

from __future__ import annotations

import argparse
import json
import logging

import pytest

from mteb_fairpos.cli import errors, main, options


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["copy", "{tmp}/no-store", "{tmp}/target", "-c", "c"], "no store at"),
        (["copy", "{tmp}/store", ":memory:", "-c", "c", "--quiet"],  # it reported points copied into nothing
         "the target ':memory:' keeps nothing after the command; give a folder"),
        (["sweep", "-m", "fair/no-such-model", "-t", "FairPosTinyRetrieval", "-o", "{tmp}/r"], "no-such-model"),
        (["profile", "-o", "{tmp}/p.png"], "give at least one --text or a --file"),
        (["profile", "-o", "{tmp}/p.png", "--file", "{tmp}/blank.jsonl"], "--file '{tmp}/blank.jsonl' holds no text."),
        (["probe", "-o", "{tmp}/out", "--corpus", "{tmp}/docs.jsonl", "--corpus-revision", "v2", "--quiet"],
         "--corpus-revision applies to a Hugging Face corpus (--corpus owner/name); '{tmp}/docs.jsonl' is read as it is"),
        (["probe", "-o", "{tmp}/out", "--corpus-revision", "v2", "--quiet"], "the bundled corpus is read as it is"),
        (["search", "q", "-c", "c", "--path", "{tmp}/typo"], "no local Qdrant store"),
        (["load", "{tmp}/file", "--path", "{tmp}/store"], "is a file; give the part folder"),
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/file", "--quiet"], "is a file; a Qdrant Edge store is a folder"),
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/file/sub", "--quiet"],  # was errno 20's text
         "'{tmp}/file/sub': '{tmp}/file' is a file, so no store folder can be made below it"),
        (["encode", "{tmp}/docs.jsonl", "-o", "{tmp}/parts", "-c", "c", "-m", "fair/no-such-model", "--quiet"],
         "cannot load the model 'fair/no-such-model'"),
        (["profile", "--text", "t", "-o", "{tmp}/p.png", "-m", "no-such/model"], "cannot load the model 'no-such/model'"),
        (["segments", "--segment", "a", "--segment", "b", "-m", "no-such/model"], "cannot load the model 'no-such/model'"),
        (["segments", "--segment", "a", "--segment", "b", "-m", "{tmp}/empty"], "/empty': Unrecognized model in"),
        (["segments", "--segment", "a", "--segment", "b", "-m", "{tmp}/nowhere"], "cannot load the model '{tmp}/nowhere': no such folder."),
        (["profile", "--text", "t", "-o", "{tmp}/p.png", "-m", "./nowhere"], "cannot load the model './nowhere': no such folder."),
        (["probe", "-o", "{tmp}/out", "-m", "no-such/model", "--quiet"], "cannot load the model 'no-such/model'"),
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/store", "--max-length", "2000", "--quiet"],
         "--max-length 2000: this model embeds at most 512 tokens"),
        (["segments", "--segment", "a", "--segment", "b", "--max-length", "1000"], "--max-length 1000: this model embeds at"),
        (["probe", "-o", "{tmp}/out", "--max-length", "1000", "--quiet"], "--max-length 1000: this model embeds at most 512"),
        (["profile", "--text", "t", "-o", "{tmp}/p.png", "--max-length", "1000"], "--max-length 1000: this model embeds at"),
        (["segments", "--file", "{tmp}/file"], "file: not a JSON list of segments"),
        (["discoverability", "-c", "c", "--path", "{tmp}/store", "--queries", "{tmp}/blank.jsonl"],
         "queries file '{tmp}/blank.jsonl' holds no queries"),
        (["discoverability", "-c", "c", "--path", "{tmp}/store", "--queries", "{tmp}/empty"],
         "queries file '{tmp}/empty' is a folder; give the JSONL file"),
        (["discoverability", "-c", "c", "--path", "{tmp}/store", "--queries", "{tmp}/typo.jsonl"],
         "typo.jsonl line 1: unknown query key(s) 'qury' (did you mean 'query'?)"),
        (["discoverability", "-c", "c", "--path", "{tmp}/store", "--queries", "{tmp}/twice.jsonl"],
         "twice.jsonl line 2: repeats line 1 (the same doc_id, position and query)"),
        (["discoverability", "-c", "c", "--path", "{tmp}/store", "--ks", "1", "50", "--depth", "5"],
         "--depth 5 is below --ks 50: the ranks searched must reach every cut-off"),
        (["discoverability", "-c", "le", "--path", "{tmp}/store", "-o", "{tmp}/fi<collection>"],
         "-o/--output: '{tmp}/file' is a file; give the path of a folder"),
        (["compare", "{tmp}/empty", "-o", "{tmp}/empty/tables"],
         "-o/--output '{tmp}/empty/tables' is inside the results folder '{tmp}/empty': what it writes would be read"),
        (["leaderboard", "{tmp}/empty", "-o", "{tmp}/empty"], "-o/--output '{tmp}/empty' is inside the results"),
        (["leaderboard", "{tmp}/empty", "{tmp}/../" + "{name}/empty", "-o", "{tmp}/site"],
         "results folder '{tmp}/../{name}/empty' is given twice (as '{tmp}/empty' too); give each once"),
        (["profile", "--text", "t", "-o", "{tmp}/p.png", "--json", "{tmp}/p.png"],
         "-o and --json both name '{tmp}/p.png': the JSON would overwrite the figure; give two files"),
        (["profile", "--text", "t", "-o", "{tmp}/p.png", "--max-length", "2"],
         "--max-length 2: the tokenizer adds 2 special token(s) to every input, so the model would read no text; give at least 3"),
        (["load", "{tmp}/empty", "--path", "{tmp}/store", "--shard-number", "3"],
         "--shard-number applies to a server; give --url as well"),
        (["load", "{tmp}/empty", "--path", "{tmp}/store", "--parallel", "8"],  # an embedded store took one stream
         "--parallel applies to a server; give --url as well"),
        (["load", "{tmp}/empty", "--path", "{tmp}/store", "--backend", "local", "--on-disk-payload"],
         "--on-disk-payload: qdrant-client's local mode keeps payloads in memory"),
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/store", "--replication-factor", "2",
          "--write-consistency-factor", "2", "--quiet"], "--replication-factor/--write-consistency-factor apply to a"),
        (["search", "q", "-c", "c", "--path", "{tmp}/store", "--timeout", "5", "--api-key", "k"],
         "--api-key/--timeout apply to a server; give --url as well"),
        (["search", "q", "-c", "c", "--path", "{tmp}/store", "--include-cut"],
         "--include-cut widens a --position/--language filter of documents; give one, without --segments"),
        (["search", "q", "-c", "c", "--path", "{tmp}/store", "--include-cut", "--position", "2", "--segments"],
         "--include-cut widens a --position/--language filter"),
        (["search", "q", "-c", "c", "--url", "http://127.0.0.1:9", "--backend", "edge"],
         "--backend chooses the embedded engine of --path; a server (--url) runs its own"),
        (["encode", "{tmp}/docs.jsonl", "{tmp}/docs.jsonl", "-o", "{tmp}/parts", "-c", "c", "--quiet"],
         "docs.jsonl' again (given twice, through a link, or inside a folder given too)"),
        (["encode", "{tmp}/docs.jsonl", "-o", "{tmp}/parts", "-c", "c", "--calibration", "none", "--no-uncalibrated", "--quiet"],
         "an uncalibrated model (calibration 'none') stores only uncalibrated vectors; drop --no-uncalibrated"),
        (["sweep", "-t", "FairPosTinyRetrieval", "--configs", "b64_lhalf_a1", "--baskets", "32", "-o", "{tmp}/r"],
         "--baskets applies to the grid, which --configs replaces; give one or the other"),
        (["sweep", "-t", "FairPosTinyRetrieval", "--address", "localhost:1234", "-o", "{tmp}/r"],
         "--address applies to the Ray engine; add --engine ray"),
        (["probe", "-o", "{tmp}/out", "--calibration", "none", "b64_lhalf_a1", "off", "--quiet"],
         "--calibration: 'off' is given twice (the same config as 'none'); give each config once"),
        (["demo", "-o", "{tmp}/out", "--calibration", "b64_lhalf_a1", "b64_lhalf_a1.0", "--quiet"],
         "--calibration: 'b64_lhalf_a1.0' is given twice (the same config as 'b64_lhalf_a1')"),
        (["sweep", "-t", "FairPosTinyRetrieval", "--configs", "b64_lhalf_a1", "b64_lhalf_a1", "-o", "{tmp}/r"],
         "--configs: 'b64_lhalf_a1' is given twice; give each config once"),
        (["sweep", "-t", "FairPosTinyRetrieval", "--configs", "none", "-o", "{tmp}/r"],
         "--configs: 'none' is not a calibration config here (the uncalibrated twin is part of the run, or left out with --no-twin)"),
    ],
)
def test_bad_input_of_any_command_is_one_line_and_status_2(tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "empty").mkdir()  # a folder without a model
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    (tmp_path / "blank.jsonl").write_text("\n")
    (tmp_path / "typo.jsonl").write_text('{"doc_id": "a", "position": 1, "qury": "One."}\n')
    (tmp_path / "twice.jsonl").write_text('{"doc_id": "a", "position": 1, "query": "One."}\n' * 2)
    def filled(text):
        return text.replace("{tmp}", str(tmp_path)).replace("{name}", tmp_path.name)

    assert main([filled(arg) for arg in argv]) == errors.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"mteb-fairpos {argv[0]}: error: ") and filled(message) in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--part-size", "0"], "--part-size"),
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--actors", "0"], "--actors"),
        (["index", "docs.jsonl", "-c", "c", "--upsert-batch-size", "0"], "--upsert-batch-size"),
        (["load", "parts", "--parallel", "0"], "--parallel"),
        (["probe", "--sets", "0"], "--sets"),
    ],
)
def test_a_count_below_one_is_refused_by_its_option_name(capsys, argv, option):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == errors.BAD_INPUT
    assert f"argument {option}: expected a positive integer, got 0" in capsys.readouterr().err


def _refused_by_argparse(argv: list[str], capsys) -> str:
    """The one line argparse's refusal of ``argv`` printed (exit status 2)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == errors.BAD_INPUT
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--batch-size", "-3"], "argument --batch-size: expected a positive integer, got -3"),
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--part-size", "0"], "argument --part-size: expected a positive integer, got 0"),
        (["index", "docs.jsonl", "-c", "c", "--format", "csv"],
         "argument --format: invalid choice: 'csv' (choose from 'jsonl', 'parquet')"),
    ],
)
def test_an_argument_argparse_refuses_is_one_line_pointing_to_help(capsys, argv, message):
    assert _refused_by_argparse(argv, capsys) == f"mteb-fairpos {argv[0]}: error: {message} (see mteb-fairpos {argv[0]} --help)"


def test_an_unknown_argument_is_refused_by_the_command_it_follows(capsys):
    assert _refused_by_argparse(["index", "docs.jsonl", "-c", "c", "--bogus", "x"], capsys) == (
        "mteb-fairpos index: error: unrecognized arguments: --bogus x (see mteb-fairpos index --help)")


def test_a_refusal_is_one_line_and_help_still_the_whole_usage(capsys):
    assert _refused_by_argparse(["load"], capsys) == (
        "mteb-fairpos load: error: the following arguments are required: parts (see mteb-fairpos load --help)")
    with pytest.raises(SystemExit) as stop:
        main(["load", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mteb-fairpos load [-h]") and "--report REPORT" in out and "--retries RETRIES" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["index", "docs.jsonl", "-c", "c", "--retries", "-1"], "argument --retries: expected a non-negative integer, got -1"),
        (["load", "parts", "--retries", "-1"], "argument --retries: expected a non-negative integer, got -1"),
        (["index", "docs.jsonl", "-c", "c", "--timeout", "0"], "argument --timeout: expected a positive number of seconds, got 0.0"),
        (["search", "q", "-c", "c", "--timeout", "-1"], "argument --timeout: expected a positive number of seconds, got -1.0"),
        (["discoverability", "-c", "c", "--depth", "0"], "argument --depth: expected a positive integer, got 0"),
        (["discoverability", "-c", "c", "--depth", "-5"], "argument --depth: expected a positive integer, got -5"),
        (["search", "q", "-c", "c", "--limit", "0"], "argument --limit: expected a positive integer, got 0"),
        (["load", "parts", "--shard-number", "0"], "argument --shard-number: expected a positive integer, got 0"),
        (["index", "docs.jsonl", "-c", "c", "--replication-factor", "-2"],
         "argument --replication-factor: expected a positive integer, got -2"),
        (["encode", "docs.jsonl", "-o", "parts", "-c", "c", "--engine", "ray", "--gpus-per-actor", "-1"],
         "argument --gpus-per-actor: expected a non-negative number of GPUs, got -1.0"),
        (["search", "q", "-c", "c", "--position", "2", "0"], "argument --position: expected a positive integer, got 0"),
        (["search", "q", "-c", "c", "--language", " "], "argument --language: expected a language code, got an empty one"),
        (["profile", "--text", "t", "-o", "p.txt"], "argument -o/--output: cannot write a figure as '.txt'; give one of"),
        (["probe", "--sets", "1"], "argument --sets: expected at least 2 segment sets (the intervals resample them), got 1"),
        (["probe", "--seed", "-1"], "argument --seed: expected a seed, an integer from 0 to 4294967295, got -1"),
        (["probe", "--seed", "4294967296"], "argument --seed: expected a seed, an integer from 0 to 4294967295, got 4294967296"),
        # beyond what the engines count: an OverflowError traceback (Edge), a Rust binding's message, or a numpy
        # MemoryError after every document was embedded
        (["search", "q", "-c", "c", "--limit", str(2**64)],
         f"argument --limit: expected a positive integer of at most 9,223,372,036,854,775,807, got {2**64}"),
        (["search", "q", "-c", "c", "--position", str(2**63)], "argument --position: expected a positive integer of at most"),
        (["discoverability", "-c", "c", "--ks", "1", str(2**64)], "argument --ks: expected a positive integer of at most"),
        (["probe", "--resamples", "1000000000000"],
         "argument --resamples: expected a positive number of resamples of at most 1,000,000, got 1000000000000"),
    ],
)
def test_a_number_out_of_range_is_refused_at_parse_time(capsys, argv, message):
    assert message in _refused_by_argparse(argv, capsys)


def test_retries_may_be_zero():
    from mteb_fairpos.cli import build_parser

    assert options.non_negative_int("0") == 0
    assert build_parser().parse_args(["load", "parts", "--retries", "0"]).retries == 0


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["load", "{tmp}/parts", "--path", "{tmp}/store", "--report", "{tmp}/folder"], "--report"),
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/store", "--report", "{tmp}/file/r.json"], "--report"),
        (["encode", "{tmp}/docs.jsonl", "-o", "{tmp}/parts", "-c", "c", "--report", "{tmp}/folder"], "--report"),
        (["copy", "{tmp}/store", "{tmp}/copy", "-c", "c", "--report", "{tmp}/file/deeper/r.json"], "--report"),
        (["profile", "--text", "t", "--json", "{tmp}/folder"], "--json"),
        (["sweep", "-t", "T", "--csv", "{tmp}/file/t.csv"], "--csv"),
    ],
)
def test_an_output_file_that_cannot_be_written_is_refused_before_the_run(tmp_path, capsys, argv, option):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("not a folder\n")
    err = _refused_by_argparse([arg.replace("{tmp}", str(tmp_path)) for arg in argv], capsys)
    assert err.startswith(f"mteb-fairpos {argv[0]}: error: argument {option}: ")
    assert "is a folder; give the path of a file" in err or "is a file, not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]  # nothing ran: no store, no parts


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["probe", "-o", "{tmp}/file"], "-o/--output/--out"),
        (["demo", "-o", "{tmp}/file/deeper"], "-o/--output/--out"),
        (["compare", "{tmp}/folder", "-o", "{tmp}/file"], "-o/--output/--out"),
        (["leaderboard", "{tmp}/folder", "-o", "{tmp}/file/site"], "-o/--output/--out"),
        (["sweep", "-t", "T", "--output-folder", "{tmp}/file"], "-o/--output/--output-folder/--out"),
        (["discoverability", "-c", "c", "--path", "{tmp}/store", "-o", "{tmp}/file/<collection>"], "-o/--output/--out"),
        (["encode", "{tmp}/docs.jsonl", "-o", "{tmp}/file", "-c", "c"], "-o/--output"),
        (["encode", "{tmp}/docs.jsonl", "-o", "{tmp}/file/parts", "-c", "c"], "-o/--output"),
    ],
)
def test_an_output_folder_that_cannot_be_written_is_refused_before_the_run(tmp_path, capsys, argv, option):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    err = _refused_by_argparse([arg.replace("{tmp}", str(tmp_path)) for arg in argv], capsys)
    assert err.startswith(f"mteb-fairpos {argv[0]}: error: argument {option}: ")
    assert "is a file; give the path of a folder" in err or "is a file, not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "file", "folder"]  # nothing ran


def test_a_default_output_folder_is_checked_too(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fairpos-probe").write_text("not a folder\n")
    assert "argument -o/--output/--out: 'fairpos-probe' is a file" in _refused_by_argparse(["probe"], capsys)


def test_an_output_folder_is_checked_not_created(tmp_path):
    assert options.output_folder(str(tmp_path / "new" / "deeper")) == tmp_path / "new" / "deeper"
    assert options.output_folder(str(tmp_path)) == tmp_path  # an existing folder: resumed or added to
    assert options.output_location("s3://bucket/parts") == "s3://bucket/parts"  # its bucket is checked by the run
    assert not (tmp_path / "new").exists()


def test_an_output_file_in_folders_still_to_be_made_is_accepted(tmp_path):
    assert options.output_file(str(tmp_path / "new" / "deeper" / "r.json")) == tmp_path / "new" / "deeper" / "r.json"
    assert not (tmp_path / "new").exists()  # checked, not created: the run makes it when it writes


@pytest.mark.parametrize(
    ("argv", "device"),
    [
        (["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/store"], "nosuch"),
        (["encode", "{tmp}/docs.jsonl", "-o", "{tmp}/parts", "-c", "c"], "nosuch"),
        (["search", "q", "-c", "c", "--path", "{tmp}/store"], "nosuch"),
        (["segments", "--segment", "a"], "cuda:x"),
        (["profile", "--text", "t", "-o", "{tmp}/p.png"], "nosuch"),
    ],
)
def test_an_unknown_device_is_one_line_before_any_work(tmp_path, capsys, argv, device):
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    assert main([arg.replace("{tmp}", str(tmp_path)) for arg in argv] + ["--device", device]) == errors.BAD_INPUT
    assert capsys.readouterr().err == (f"mteb-fairpos {argv[0]}: error: --device {device}: unknown device; "
                                       "expected e.g. cpu, cuda, cuda:1 or mps.\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]  # no store, parts or plot


def test_a_device_this_machine_lacks_is_refused_unless_ray_places_the_work(monkeypatch, tmp_path, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    assert main(["index", str(tmp_path / "docs.jsonl"), "-c", "c", "--path", str(tmp_path / "store"),
                 "--device", "cuda"]) == errors.BAD_INPUT
    assert capsys.readouterr().err == ("mteb-fairpos index: error: --device cuda: cuda was asked for but torch sees "
                                       "no CUDA device.\n")
    assert not (tmp_path / "store").exists()
    options.check_device(argparse.Namespace(device="cuda", engine="ray"))  # each actor's own device, on its node
    options.check_device(argparse.Namespace(device="cpu", engine="local"))
    with pytest.raises(ValueError, match="--device nosuch: unknown device"):
        options.check_device(argparse.Namespace(device="nosuch", engine="ray"))


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
    """Too few segment sets for solid inference are a property of the data: one warning per subset, not one
    per config."""
    from mteb_fairpos.permutation import sample_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": t.id, "texts": {"en": t.texts["en"]}}) + "\n"
                              for t in sample_corpus() if "en" in t.texts), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="mteb_fairpos.permutation.probe"):
        assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "--sets", "3", "--calibration", "none",
                     "b128_lhalf_a1", "--max-length", "512", "--output", str(tmp_path / "o"), "--quiet"]) == 0
    few = [r for r in caplog.records if "rest on 3 clusters" in r.getMessage()]
    assert len(few) == 1
    results = list((tmp_path / "o" / "results").rglob("PermutationFairness.*.json"))
    assert len(results) == 2  # both configs were scored on the data the warning is about
    for path in results:  # and each result still carries the note
        assert any("rest on 3 clusters" in n for n in json.loads(path.read_text())["scores"]["test"][0]["notes"])

@pytest.mark.parametrize("argv", [["segments", "--segment", "a", "--segment", "b", "-m", "{tmp}"],
                                  ["index", "{tmp}/docs.jsonl", "-c", "c", "--path", "{tmp}/store", "-m", "{tmp}", "--quiet"]])
def test_a_model_that_fails_to_load_is_named_once(tmp_path, capsys, argv):
    """Two nested loading blocks each named it: 'cannot load the model X: cannot load the model X: ...'."""
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    assert main([arg.replace("{tmp}", str(tmp_path)) for arg in argv]) == errors.BAD_INPUT
    assert capsys.readouterr().err.count("cannot load the model") == 1
