"""`mteb-fairpos probe`: any corpus, any model settings, several configs, the full report, mteb's layout."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.results import collect, pairing
from mteb_fairpos.permutation import sample_corpus
from mteb_fairpos.permutation.corpus import load_corpus_file

COMMIT = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
pytestmark = pytest.mark.usefixtures("minilm_dir")  # every test here runs the probe command on the offline MiniLM


def _corpus(tmp_path, languages=("en", "de")):
    path = tmp_path / "my corpus.jsonl"
    rows = [{"id": t.id, "texts": {lang: t.texts[lang] for lang in languages if lang in t.texts}} for t in sample_corpus()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_probe_on_a_users_corpus_with_a_prompt_and_several_configs(tmp_path, capsys):
    corpus = _corpus(tmp_path)
    out_dir = tmp_path / "out"
    code = main(["probe", "--corpus", str(corpus), "--prompt", "passage: ", "--subsets", "n3_en-de", "n3_en", "--sets", "2",
                 "--calibration", "none", "b128_lhalf_a1", "b64_lhalf_a0.5", "--max-length", "512", "--output", str(out_dir),
                 "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "document prompt 'passage: '" in out
    for label in ("uncalibrated", "calibrated (b128_lhalf_a1)", "calibrated (b64_lhalf_a0.5)"):
        assert label in out
    # the full report: means with CIs, betas with SE and p, tau, the mixed instance's contrasts
    assert "(+-" in out and "beta_2" in out and ("p<0.001" in out or "p=" in out)
    assert "mean tau" in out and "position 1 (en) minus later positions (de)" in out
    fingerprint = load_corpus_file(corpus).fingerprint()
    task = f"PermutationFairness.corpus-my_corpus-{fingerprint}.sets-2"
    assert f"(task {task})" in out
    experiment = "document_prompt_passage_ __max_seq_length_512"  # mteb's name for these experiment kwargs
    for model in ("fair-off__all-MiniLM-L6-v2", "fair__all-MiniLM-L6-v2-b128_lhalf_a1", "fair__all-MiniLM-L6-v2-b64_lhalf_a0.5"):
        saved = json.loads((out_dir / "results" / model / COMMIT / "experiments" / experiment / f"{task}.json").read_text())
        assert saved["dataset_revision"] == fingerprint
        scores = {s["hf_subset"]: s for s in saved["scores"]["test"]}
        assert set(scores) == {"n3_en", "n3_en-de"} and scores["n3_en"]["num_segment_sets"] == 2
        assert scores["n3_en"]["corpus"] == str(corpus)
    assert (out_dir / "profile.png").is_file()
    # read back as the probe task with settings of its own: its two subsets are all it ran, nothing is missing
    from mteb_fairpos.results import collect

    found = collect(out_dir / "results")
    assert {scores.status for scores in found.scores.values()} == {"ok"} and len(found.scores) == 3
    assert not [issue for issue in found.issues if issue.kind == "partial"]


def test_the_prompt_reaches_the_segments_and_documents(tmp_path, capsys):
    """The same run without the prompt gives other sigmas: the prompt is really used, not only named."""
    corpus = _corpus(tmp_path, languages=("en",))
    runs = {}
    for name, extra in (("plain", []), ("prompted", ["--prompt", "passage: "])):
        out_dir = tmp_path / name
        assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "--sets", "2", "--calibration", "none",
                     "--max-length", "512", "--output", str(out_dir), "--quiet", *extra]) == 0
        (file,) = (out_dir / "results").rglob("PermutationFairness.*.json")
        runs[name] = json.loads(file.read_text())["scores"]["test"][0]
    capsys.readouterr()
    assert runs["plain"]["position_1"] != runs["prompted"]["position_1"]


def test_probe_refuses_what_the_corpus_cannot_build(tmp_path, capsys):
    corpus = _corpus(tmp_path)
    assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_fr", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "n3_fr" in err and "the corpus has ['de', 'en']" in err
    assert main(["probe", "--corpus", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "o")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["probe", "--subsets", "n3_zh-cn", "--output", str(tmp_path / "o")]) == 2
    assert "write 'zh-CN'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # at parsing, before the model is loaded
        main(["probe", "--window", "0", "40", "--output", str(tmp_path / "o")])
    assert stop.value.code == 2
    assert "argument --window: expected a positive integer, got 0" in capsys.readouterr().err


def test_a_run_that_fails_on_the_data_names_the_options_and_leaves_no_output_folder(tmp_path, capsys):
    corpus = _corpus(tmp_path)  # its texts are longer than the window the default mode (filter) keeps at 256 tokens
    out = tmp_path / "o"
    assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "--sets", "2", "--calibration", "none",
                 "--output", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "exceed the segment window" in err and "--window LOW HIGH" in err and "--mode lead" in err
    assert not out.exists()
    out.mkdir()  # a folder that was there before the run stays
    assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "--sets", "2", "--calibration", "none",
                 "--output", str(out), "--quiet"]) == 2
    assert out.is_dir()


def test_a_hub_corpus_id_goes_to_the_hub_and_says_so_when_offline(tmp_path, capsys, monkeypatch):
    """The hub cannot be reached here (HF offline): the command must end with the loader's clear message."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert main(["probe", "--corpus", "someone/not-cached-corpus", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "someone/not-cached-corpus" in err and "local corpus file" in err


def test_an_empty_corpus_is_named_as_such(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["probe", "--corpus", str(empty), "--output", str(tmp_path / "o")]) == 2
    assert "holds no texts" in capsys.readouterr().err


def test_the_demo_subsets_are_a_task_the_run_completes_with_paired_changes(tmp_path, capsys):
    """Without --corpus, the demo's three subsets run as their own task, so the package's page flags nothing;
    each calibrated config (given before 'none' here) is paired with the uncalibrated run and its change shown."""
    from mteb_fairpos.leaderboard.data import build
    from mteb_fairpos.tasks.permutation import PermutationFairnessManpagesDemo

    out_dir = tmp_path / "out"
    assert main(["probe", "--subsets", "n3_en", "n3_de", "n3_en-de", "--sets", "2", "--calibration", "b128_lhalf_a1", "none",
                 "--max-length", "512", "--resamples", "300", "--bootstrap-seed", "3", "--output", str(out_dir), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "(task PermutationFairnessManpagesDemo.sets-2.resamples-300.bootseed-3)" in out
    assert "intervals from 300 bootstrap resamples" in out and "bootstrap seed 3" in out
    assert "fairness [95% CI]" in out and ("better" in out or "worse" in out or "not significant" in out)
    task = "PermutationFairnessManpagesDemo.sets-2.resamples-300.bootseed-3"

    def scores_of(model):
        path = out_dir / "results" / model / COMMIT / "experiments" / "max_seq_length_512" / f"{task}.json"
        return json.loads(path.read_text())["scores"]["test"]

    calibrated, plain = scores_of("fair__all-MiniLM-L6-v2-b128_lhalf_a1"), scores_of("fair-off__all-MiniLM-L6-v2")
    for scores in calibrated:
        assert scores["bootstrap_resamples"] == 300 and scores["bootstrap_seed"] == 3
        change = scores["change_position_fairness"]
        assert scores["change_position_fairness_ci_low"] <= change <= scores["change_position_fairness_ci_high"]
        assert 0 < scores["change_position_fairness_pvalue"] <= 1 and "change_tau_position_fairness" in scores
    assert all("change_position_fairness" not in scores and "position_fairness_ci_low" in scores for scores in plain)
    assert {scores["hf_subset"] for scores in plain} == set(PermutationFairnessManpagesDemo.metadata.hf_subsets)
    board = build([out_dir], tmp_path / "site")  # the page flags nothing as partial (the sets-2 name is not
    assert {issue.kind for _, issue in board.issues} <= {"pooled", "unchecked"}  # registered, so unchecked here)
    # compare pairs the two results again from their sidecars (sigma, and tau: MiniLM mean-pools), as the run paired them
    found = collect(out_dir)
    mine, twin = (found.get(next(m for m in found.models if m.name == name), task)
                  for name in ("fair/all-MiniLM-L6-v2-b128_lhalf_a1", "fair-off/all-MiniLM-L6-v2"))
    for scores in calibrated:
        for family, prefix in (("", ""), ("tau ", "tau_")):
            change = pairing.change(mine, twin, "fairness", subset=family + scores["hf_subset"])
            stored = [scores[f"change_{prefix}position_fairness{end}"] for end in ("", "_ci_low", "_ci_high")]
            assert [change.value, *change.interval] == pytest.approx(stored, abs=1e-5)  # the sidecar holds float32 values


def test_topics_left_out_are_counted_on_screen_by_subset_and_reason(tmp_path, capsys):
    corpus = tmp_path / "gaps.jsonl"
    rows = [{"id": t.id, "texts": {lang: t.texts[lang] for lang in ("en", "de")}} for t in sample_corpus()]
    rows[0]["texts"]["de"] = None  # usable for n3_en, not for n3_en-de
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "n3_en-de", "--sets", "2", "--calibration", "none",
                 "--max-length", "512", "--resamples", "50", "-o", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "topics left out: n3_en-de 1 missing language\n" in out
