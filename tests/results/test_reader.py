"""The reader reads a result file as mteb's own ``TaskResult.from_disk`` does, for current files and for the
layouts and version stamps of older mteb releases."""

from __future__ import annotations

import json
import math

import pytest
from results_folders import register_tasks, retrieval_entry

from mteb_fairpos.results.reader import read_result, summarize

PROFILE = {"0-100": 0.6, "100-200": 0.4}


@pytest.fixture(scope="module", autouse=True)
def _tasks():
    register_tasks()


def _written(tmp_path, name: str, data: dict):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def _current(version: str) -> dict:
    return {"dataset_revision": "1", "task_name": "SQuADPosQTiny", "mteb_version": version, "evaluation_time": 1.0,
            "kg_co2_emissions": None, "scores": {"test": [retrieval_entry(0.5, PROFILE)]}}


@pytest.mark.parametrize("version", ["2.26.24", "2.12.16-2.26.24", "1.12.0"])
def test_a_file_of_any_mteb_since_1_11_reads_as_from_disk_reads_it(tmp_path, version):
    from mteb.results.task_result import TaskResult

    path = _written(tmp_path, "result", _current(version))
    scores = read_result(path)
    assert scores.main_score == 0.5 and scores.profiles[""] == PROFILE and scores.mteb_version == version
    assert (scores.main_score, scores.profiles) == (lambda s: (s.main_score, s.profiles))(summarize(TaskResult.from_disk(path)))


def test_a_file_in_the_layout_before_mteb_1_11_is_converted_by_mteb(tmp_path):
    from mteb.results.task_result import TaskResult

    old = {"mteb_dataset_name": "SQuADPosQTiny", "mteb_version": "1.10.0", "dataset_revision": "1",
           "test": {"evaluation_time": 1.0, "harmonic_mean": 0.5, **{f"position_{k}": v for k, v in PROFILE.items()}}}
    path = _written(tmp_path, "old", old)
    issues = []
    scores = read_result(path, issues)
    assert issues == [] and scores.main_score == 0.5 and scores.profiles[""] == PROFILE
    assert scores.main_score == summarize(TaskResult.from_disk(path)).main_score


def test_a_current_file_that_does_not_validate_is_named(tmp_path):
    broken = {**_current("2.26.24"), "scores": "not a mapping"}
    issues = []
    assert read_result(_written(tmp_path, "broken", broken), issues, where="broken.json") is None
    assert [(issue.kind, issue.where) for issue in issues] == [("foreign", "broken.json")]
    assert "mteb cannot read it" in issues[0].message



def test_a_key_given_twice_is_named_not_resolved_unseen(tmp_path):
    """A parser keeps one value of a repeated key and drops the other; which score is right, no reader can tell."""
    from results_folders import write_result

    from mteb_fairpos.results import collect

    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps(_current("2.26.24")).replace('"main_score": 0.5', '"main_score": 0.5, "main_score": 0.9', 1))
    assert twice.read_text().count('"main_score"') == 2
    issues = []
    assert read_result(twice, issues, where="twice.json") is None
    assert [(issue.kind, issue.where, issue.message) for issue in issues] == [
        ("corrupt", "twice.json", "the key 'main_score' appears twice in one object (only one of its values would be kept); skipped.")]
    kept = write_result(tmp_path / "results", "fair/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [retrieval_entry(0.5, PROFILE)]})
    (kept.parent / "model_meta.json").write_text('{"name": "fair/a", "name": "fair/b", "revision": "abc"}')
    found = collect(tmp_path / "results")
    assert [key.name for key, _ in found.scores] == ["fair/all-MiniLM-L6-v2"]  # taken from the folder, and said
    assert [(issue.kind, issue.message) for issue in found.issues if issue.where.endswith("model_meta.json")] == [
        ("corrupt", "unreadable (the key 'name' appears twice in one object (only one of its values would be kept)); "
                    "model name taken from the folder.")]

@pytest.mark.parametrize("entry", [
    {"cells": {"Q1": {"0.00-0.05": ["3", "1.5"]}}},  # counts and sums as text
    {"cells": {"Q1": [1, 2]}},                      # a bucket's bins as a list
    {"cells": {"Q9": {"0.00-0.05": [3, 1.5]}}},     # a length bucket PosIR does not have
    {"n_queries": "3"},
])
def test_an_entry_whose_contents_do_not_read_is_a_named_skip(tmp_path, entry):
    from results_folders import posir_entry

    scores = {"test": [{**posir_entry("eng-Latn.Q", 0.5, {"Q1": {"0.00-0.05": [3, 1.5]}}), **entry}]}
    data = {**_current("2.26.24"), "task_name": "PosIR", "scores": scores}
    issues = []
    assert read_result(_written(tmp_path, "PosIR", data), issues, where="m/r/PosIR.json") is None
    assert [(issue.kind, issue.where) for issue in issues] == [("corrupt", "m/r/PosIR.json")]
    assert "do not read as PosIR's" in issues[0].message


def test_a_folder_tree_that_names_one_model_twice_keeps_the_first_and_says_so(tmp_path):
    from results_folders import write_result

    from mteb_fairpos.results import collect

    write_result(tmp_path, "fair/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [retrieval_entry(0.5, PROFILE)]})
    copy = write_result(tmp_path, "fair/all-MiniLM-L6-v2", "abc_copy", "SQuADPosQTiny", {"test": [retrieval_entry(0.9, PROFILE)]})
    (copy.parent / "model_meta.json").write_text(json.dumps({"name": "fair/all-MiniLM-L6-v2", "revision": "abc"}))
    broken = write_result(tmp_path, "fair/bge-m3", "r1", "SQuADPosQTiny", {"test": [retrieval_entry(0.7, PROFILE)]})
    (broken.parent / "model_meta.json").write_text(json.dumps({"name": ["fair/bge-m3"], "revision": "r1"}))
    (broken.parent / "Other.json").mkdir()  # a folder is no result
    found = collect(tmp_path)
    assert {(key.label, task): scores.main_score for (key, task), scores in found.scores.items()} == {
        ("fair/all-MiniLM-L6-v2 [abc]", "SQuADPosQTiny"): 0.5, ("fair/bge-m3 [r1]", "SQuADPosQTiny"): 0.7}
    kinds = {(issue.kind, issue.where) for issue in found.issues}
    assert ("duplicate", "fair/all-MiniLM-L6-v2 [abc]: fair__all-MiniLM-L6-v2/abc_copy/SQuADPosQTiny.json") in kinds
    assert ("corrupt", "fair__bge-m3/r1/model_meta.json") in kinds


def test_a_result_name_that_is_no_readable_file_is_listed_not_dropped(tmp_path):
    from results_folders import write_result

    from mteb_fairpos.results import collect

    write_result(tmp_path, "fair-off/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [retrieval_entry(0.5, PROFILE)]})
    linked = write_result(tmp_path, "fair/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [retrieval_entry(0.6, PROFILE)]})
    linked.unlink()
    linked.symlink_to(tmp_path / "gone.json")
    folder = write_result(tmp_path, "fair/bge-m3", "r1", "SQuADPosQTiny", {"test": [retrieval_entry(0.7, PROFILE)]})
    folder.unlink()
    folder.mkdir()
    found = collect(tmp_path)
    assert [key.label for key, _ in found.scores] == ["fair-off/all-MiniLM-L6-v2 [abc]"]
    corrupt = {issue.where: issue.message for issue in found.issues if issue.kind == "corrupt"}
    assert corrupt == {"fair__all-MiniLM-L6-v2/abc/SQuADPosQTiny.json": "a link to nothing, not a result file; skipped.",
                       "fair__bge-m3/r1/SQuADPosQTiny.json": "a folder, not a result file; skipped."}


@pytest.mark.parametrize(("change", "fault"), [
    ({"position_0-100": float("nan")}, "position_0-100 is nan, not a finite number"),
    ({"position_0-100": float("inf")}, "position_0-100 is inf, not a finite number"),
    ({"positions": "oops"}, "positions is a str, not a number or a mapping"),
    ({"position_100-200": "0.4"}, "position_100-200 is a str, not a number"),
    ({"psi": float("-inf")}, "psi is -inf, not a finite number"),
    ({"main_score": float("inf")}, "no numeric main score"),
])
def test_a_value_that_is_not_a_score_is_named_and_left_out_of_every_figure(tmp_path, change, fault):
    from results_folders import write_result

    from mteb_fairpos.leaderboard.data import build
    from mteb_fairpos.results import collect

    write_result(tmp_path, "fair/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [{**retrieval_entry(0.5, PROFILE), **change}]})
    found = collect(tmp_path)
    (scores,) = found.scores.values()
    partial = [issue.message for issue in found.issues if issue.kind == "partial"]
    assert scores.status == "partial" and any(fault in message for message in partial), partial
    figures = [scores.main_score, scores.psi, *scores.profiles[""].values()]
    assert all(value is None or math.isfinite(value) for value in figures), figures
    board = build([tmp_path], tmp_path / "site")  # the page is laid out from what is left, as compare tables it
    assert len(board.rows) == 1


def test_a_pooled_task_does_not_pool_a_score_that_is_not_one(tmp_path):
    from results_folders import posir_entry, write_result

    from mteb_fairpos.results import collect

    cells = {"Q1": {"0.00-0.05": [3, 1.5]}}
    write_result(tmp_path, "fair/all-MiniLM-L6-v2", "abc", "PosIR",
                 {"test": [posir_entry("eng-Latn.Q", float("inf"), cells), posir_entry("eng-Latn.R", 0.5, cells)]})
    found = collect(tmp_path)
    (scores,) = found.scores.values()
    assert scores.status == "partial" and scores.main_score is None
    assert "PosIR pools an infinite main score from its subsets; not used." in [issue.message for issue in found.issues]


def test_a_pooled_task_does_not_pool_a_nan_and_the_page_and_plots_are_drawn_without_it(tmp_path):
    """A NaN subset score made the pooled main score NaN without a word; plots and the page then failed in
    matplotlib and in the chart code."""
    from results_folders import posir_entry, write_result

    from mteb_fairpos.leaderboard import build
    from mteb_fairpos.results import collect, plots

    cells = {"Q1": {"0.00-0.05": [3, 1.5]}}
    write_result(tmp_path / "results", "fair/all-MiniLM-L6-v2", "abc", "PosIR",
                 {"test": [posir_entry("eng-Latn.Q", float("nan"), cells), posir_entry("eng-Latn.R", 0.5, cells)]})
    found = collect(tmp_path / "results")
    (scores,) = found.scores.values()
    assert scores.status == "partial" and scores.main_score is None
    assert "PosIR pools a NaN main score from its subsets; not used." in [issue.message for issue in found.issues]
    plots.write_plots(found, tmp_path / "plots")
    assert len(build([tmp_path / "results"], tmp_path / "site").rows) == 1


def test_results_one_folder_too_deep_are_named_not_an_empty_table_without_a_word(tmp_path):
    from results_folders import write_result

    from mteb_fairpos.results import collect

    write_result(tmp_path / "runs" / "first", "fair/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [retrieval_entry(0.5, PROFILE)]})
    found = collect(tmp_path / "runs")
    assert found.scores == {}
    assert [(issue.kind, issue.where, issue.message) for issue in found.issues] == [
        ("foreign", "first", "holds <model>/<revision>/<Task>.json folders below this results folder, which are not "
                             "read; give it as the results folder.")]
    assert [key.name for key, _ in collect(tmp_path / "runs" / "first").scores] == ["fair/all-MiniLM-L6-v2"]


@pytest.mark.parametrize("option", ["tasks", "models"])
def test_a_name_given_as_text_where_a_list_belongs_is_refused(tmp_path, option):
    """A text would be matched as a substring of every name: 'Tiny' kept 'SQuADPosQTiny' and 'FairPosTiny...'."""
    from mteb_fairpos.results import collect

    with pytest.raises(TypeError, match=f"{option} is a list of names; got the text 'Tiny'"):
        collect(tmp_path, **{option: "Tiny"})


def test_a_model_folder_given_as_the_results_folder_is_not_sent_above_itself(tmp_path):
    """Results found only above the folder given are not advice: the folder itself is listed as not a model's."""
    from results_folders import write_result

    from mteb_fairpos.results import collect

    write_result(tmp_path, "fair/all-MiniLM-L6-v2", "abc", "SQuADPosQTiny", {"test": [retrieval_entry(0.5, PROFILE)]})
    found = collect(tmp_path / "fair__all-MiniLM-L6-v2")
    assert found.scores == {} and not any("below this results folder" in issue.message for issue in found.issues)
    assert sorted((issue.kind, issue.where) for issue in found.issues) == [
        ("foreign", "abc/SQuADPosQTiny.json"), ("foreign", "abc/model_meta.json")]


def test_a_damaged_recorded_seed_is_named_and_the_scores_still_read(tmp_path):
    """A bootstrap seed below 0 made the whole result 'corrupt' (Resampling refused it): its scores were dropped."""
    from results_folders import register_tasks, retrieval_entry, write_result

    from mteb_fairpos.results import collect

    register_tasks()
    entry = dict(retrieval_entry(0.5, {"begin": 0.6, "end": 0.4}), bootstrap_resamples=100, bootstrap_seed=-3)
    write_result(tmp_path, "fair/m", "r", "FairPosTinyRetrieval", {"test": [entry]})
    found = collect(tmp_path)
    assert [scores.main_score for scores in found.scores.values()] == [0.5]
    assert [issue.message for issue in found.issues] == [
        "split test, subset default: bootstrap_seed is -3, below 0: no count, size or seed is; not used."]
