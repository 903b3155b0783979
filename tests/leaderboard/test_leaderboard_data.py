"""The data the leaderboard page is built from: columns, rows grouped by base model, deltas against
the twin, pooled markers, issues and provenance, for results of every task family."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import COMMIT, MINILM, POSIR, PROBE, RETRIEVAL
from results_folders import retrieval_entry, write_result
from mteb_fairpos.leaderboard import build, publish


@pytest.fixture
def board(results, tmp_path):
    return build([results], tmp_path / "site")


def test_columns_per_task_family(board):
    keys = [(c.task, c.measure, c.subset, c.family) for c in board.columns]
    assert keys == [(RETRIEVAL, "main", "", "retrieval"), (RETRIEVAL, "psi", "", "retrieval"),
                    (POSIR, "main", "", "retrieval"), (POSIR, "psi", "", "retrieval"),
                    (PROBE, "main", "", "probe"), (PROBE, "fairness", "n3_de", "probe"), (PROBE, "fairness", "n3_en", "probe")]
    languages = {(c.task, c.subset): c.languages for c in board.columns}
    assert languages[(PROBE, "n3_de")] == ("de",) and languages[(RETRIEVAL, "")] == ("en",)
    assert {"de", "en"} <= set(languages[(POSIR, "")])


def test_rows_grouped_by_base_model_twin_first(board):
    assert board.bases == ["all-MiniLM-L6-v2", "bge-m3"]
    assert [r.model.name for r in board.rows] == [*MINILM, "fair/bge-m3"]
    assert [r.config for r in board.rows] == ["none", "b128_lhalf_a0.5", "b64_llast_a1", "b128_lhalf_a0.5"]
    assert [r.twin for r in board.rows] == [True, False, False, False]
    twin = board.rows[0].model
    assert [r.partner for r in board.rows] == [None, twin, twin, None]  # bge-m3 has no twin here


def test_deltas_against_the_twin(board):
    twin, default, strong, bge = board.rows
    main, psi = f"{RETRIEVAL}|main|", f"{RETRIEVAL}|psi|"
    assert default.cells[main].value == pytest.approx(0.81) and default.cells[main].delta == pytest.approx(0.09)
    assert default.cells[psi].delta == pytest.approx(0.0824 - 0.3333)
    assert strong.cells[psi].value == pytest.approx(1 - 0.73 / 0.75)  # no psi recorded: from the profile
    assert twin.cells[main].delta is None and bge.cells[main].delta is None
    fairness = f"{PROBE}|fairness|n3_de"
    assert twin.cells[fairness].value == pytest.approx(0.84) and strong.cells[fairness].delta == pytest.approx(0.96 - 0.84)
    assert "[0.4000, 0.4400]" in twin.cells[fairness].note  # position 3's 95 % interval


def test_pooled_missing_and_partial_cells(board):
    twin, default, strong, bge = board.rows
    assert "means over 2 subsets" in twin.cells[f"{PROBE}|main|"].pooled
    assert "pooled per language" in default.cells[f"{POSIR}|psi|"].pooled and "2 languages" in default.cells[f"{POSIR}|psi|"].pooled
    assert twin.cells[f"{RETRIEVAL}|main|"].pooled == ""
    assert strong.cells[f"{POSIR}|main|"].status == "missing" and strong.cells[f"{POSIR}|main|"].value is None
    assert bge.cells[f"{RETRIEVAL}|main|"].status == "partial" and bge.cells[f"{RETRIEVAL}|main|"].value == pytest.approx(0.6)


def test_posir_figures_per_language(board):
    pools = board.pools[(board.rows[0].model, POSIR)]
    assert sorted(pools) == ["deu-Latn", "eng-Latn"]
    assert pools["deu-Latn"]["position_0.00-0.05"] == pytest.approx((3 * 0.8 + 0.7) / 4)


def test_missing_partial_and_foreign_files_are_listed(board):
    seen = {(issue.kind, issue.where.split(": ")[-1]) for _, issue in board.issues}
    assert ("corrupt", f"fair__all-MiniLM-L6-v2/{COMMIT}/Broken.json") in seen
    assert ("foreign", f"fair__all-MiniLM-L6-v2/{COMMIT}/Notes.json") in seen
    assert ("foreign", "README.txt") in seen
    assert ("no-meta", "fair__bge-m3/b128_lhalf_a0.5") in seen
    assert {"partial", "missing", "no-twin", "pooled"} <= {kind for kind, _ in seen}


def test_provenance_links_and_settings(board, results, tmp_path):
    twin = board.rows[0].model
    source = board.sources[(twin, PROBE)]
    assert (tmp_path / "site" / source.href).resolve() == source.path.resolve()
    assert source.path.name == f"{PROBE}.json" and source.mteb_version == "2.26.24"
    assert source.settings == {"corpus": "manpages", "corpus_fingerprint": "1a2b3c4d5e6f", "num_segment_sets": "10",
                               "seed": "42", "model_max_length": "512"}
    assert board.rows[0].cells[f"{PROBE}|main|"].source == source.href
    assert board.sources[(board.rows[3].model, RETRIEVAL)].path.parent.name == "b128_lhalf_a0.5"  # found without model_meta


def test_folders_and_site_given_as_strings(results, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the spelling of the Python API's example: relative folder names as text
    board, page = publish([str(results.relative_to(tmp_path))], "site")
    assert page == Path("site") / "index.html" and page.is_file()
    twin = board.rows[0].model
    assert (tmp_path / "site" / board.sources[(twin, PROBE)].href).resolve() == board.sources[(twin, PROBE)].path.resolve()


def test_one_folder_given_as_text_or_a_file_as_the_site_is_named_before_anything_is_read(results, tmp_path, monkeypatch):
    """A folder given as text was read letter by letter, '/' (the whole disk) first; a file where the site goes
    failed in pathlib after every result was read; the tables and plots of compare likewise."""
    from mteb_fairpos.results import collect, plots, tables

    def refuse(*args, **kwargs):
        raise AssertionError("a results folder was read")

    (tmp_path / "taken").write_text("mine\n")
    monkeypatch.setattr("mteb_fairpos.leaderboard.data.collect", refuse)
    named = re.escape(repr(str(results)))
    with pytest.raises(TypeError, match=rf"folders is a list of results folders; got the path {named} \(write \[{named}\]\)"):
        publish(str(results), tmp_path / "site")
    for site in (tmp_path / "taken", tmp_path / "taken" / "site"):
        with pytest.raises(NotADirectoryError, match=r"cannot write into '.*(taken|site)': '.*taken' is a file, not a folder"):
            publish([results], site)
    found = collect(results)
    for write in (tables.write_tables, plots.write_plots):
        with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
            write(found, tmp_path / "taken")
    assert (tmp_path / "taken").read_text() == "mine\n"


def test_several_folders_and_experiments(results, tmp_path):
    other = tmp_path / "other"
    write_result(other, MINILM[0], COMMIT, RETRIEVAL, {"test": [retrieval_entry(0.5, {"begin": 0.5, "end": 0.4})]})
    folder = other / MINILM[1].replace("/", "__") / COMMIT / "experiments" / "max_seq_length_256"
    folder.mkdir(parents=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": MINILM[1], "revision": COMMIT, "experiment_kwargs": {"max_seq_length": 256}}))
    (folder / f"{RETRIEVAL}.json").write_text((results / "results" / MINILM[1].replace("/", "__") / COMMIT / f"{RETRIEVAL}.json").read_text())
    board = build([results, other], tmp_path / "site")
    assert any(issue.kind == "duplicate" and MINILM[0] in issue.where for _, issue in board.issues)
    experiment = next(r for r in board.rows if r.model.experiment)
    assert experiment.partner.name == MINILM[0]
    assert board.sources[(experiment.model, RETRIEVAL)].experiment == {"max_seq_length": 256}
    assert [r.model.name for r in board.rows].count(MINILM[1]) == 2


def test_what_a_model_lacks_is_found_in_all_folders_together(tmp_path):
    """A twin in another folder is no missing twin, and a task another folder has is missing where a model lacks it."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_result(first, "fair/bge-m3", COMMIT, RETRIEVAL, {"test": [retrieval_entry(0.5, {"begin": 0.5, "end": 0.4})]})
    write_result(first, "fair/bge-m3", COMMIT, "SQuADPosQTiny", {"test": [retrieval_entry(0.5, {"0-100": 0.5})]})
    write_result(second, "fair-off/bge-m3", COMMIT, RETRIEVAL, {"test": [retrieval_entry(0.4, {"begin": 0.5, "end": 0.3})]})
    board = build([first, second], tmp_path / "site")
    assert next(r for r in board.rows if r.model.name == "fair/bge-m3").partner.name == "fair-off/bge-m3"
    gaps = [(issue.kind, issue.where, issue.message) for _, issue in board.issues if issue.kind in ("missing", "no-twin")]
    assert gaps == [("missing", f"fair-off/bge-m3 [{COMMIT[:7]}]", "no results for SQuADPosQTiny.")]


def test_an_empty_folder_gives_an_empty_board(tmp_path):
    (tmp_path / "empty").mkdir()
    board = build([Path(tmp_path / "empty")], tmp_path / "site")
    assert board.rows == [] and board.columns == []


def test_the_page_reads_each_result_file_once(results, tmp_path, monkeypatch):
    """Provenance comes from the reader's record of each file: no result file is opened a second time."""
    opened = []
    original = Path.read_text

    def counting(self, *args, **kwargs):
        opened.append(Path(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    board = build([results], tmp_path / "site")
    files = sorted(p for p in (results / "results").rglob("*.json") if p.name != "model_meta.json")
    assert sorted(p for p in opened if p.name != "model_meta.json" and results in p.parents) == files  # each once
    twin = board.rows[0].model
    scores, source = board.scores[(twin, PROBE)], board.sources[(twin, PROBE)]
    assert source.path == scores.path and source.mteb_version == scores.mteb_version == "2.26.24"
    assert source.dataset_revision == scores.dataset_revision == "1" and scores.settings["seed"] == [42]
    assert source.pools == {} and board.sources[(twin, POSIR)].pools is board.scores[(twin, POSIR)].pools


def test_a_probe_subsets_fairness_change_is_paired_on_the_observations_both_results_hold(tmp_path):
    """Each probe subset's fairness gets its interval and its change against the twin from the two sidecars:
    the rows aligned by observation id (those both hold), resampled with the same draws for both, as the
    result records; identical rows change by exactly 0."""
    import numpy as np
    from results_folders import simulated_probe_rows, write_probe_result

    from mteb_fairpos.permutation import fairness_bootstrap
    from mteb_fairpos.resampling import Resampling

    twin_en, same_de = simulated_probe_rows(1), simulated_probe_rows(2)
    rng = np.random.default_rng(3)
    keep = slice(3, None)  # the calibrated run lost the first document (3 observations)
    worse = {name: values[keep] for name, values in twin_en.items()}
    worse["score"] = [v + rng.normal(0, 0.01) - (0.05 if g == "3" else 0.0) for v, g in zip(worse["score"], worse["group"])]
    root = tmp_path / "results"
    write_probe_result(root, MINILM[0], COMMIT, {"n3_en": twin_en, "n3_de": same_de}, resamples=400, seed=11)
    write_probe_result(root, MINILM[1], COMMIT, {"n3_en": worse, "n3_de": same_de}, resamples=400, seed=11)
    board = build([tmp_path], tmp_path / "site")
    twin, calibrated = board.rows
    change = calibrated.cells[f"{PROBE}|fairness|n3_en"].change
    stored = {name: np.asarray(rows["score"], dtype=np.float32).astype(np.float64) for name, rows in (("twin", twin_en), ("worse", worse))}
    expected = fairness_bootstrap(stored["worse"], np.asarray(worse["group"], dtype=int), worse["segment_set"], worse["topic"],
                                  Resampling(400, 11), baseline_values=stored["twin"][keep]).change
    assert change.paired == len(twin_en["unit"]) - 3
    assert (change.value, *change.interval, change.pvalue) == pytest.approx(
        (expected.estimate, expected.ci_low, expected.ci_high, expected.pvalue), rel=1e-9)
    assert change.verdict(higher_is_better=True) == "worse"
    same = calibrated.cells[f"{PROBE}|fairness|n3_de"]
    assert (same.change.value, same.change.interval, same.change.pvalue) == (0.0, (0.0, 0.0), 1.0)
    assert same.change.verdict(higher_is_better=True) == "not significant"
    assert same.interval == twin.cells[f"{PROBE}|fairness|n3_de"].interval and same.interval[0] < same.value < same.interval[1]
    # the main score, the mean over subsets, resampled with both subsets together (they share topics)
    main = calibrated.cells[f"{PROBE}|main|"]
    both = {name: np.concatenate([stored[name][keep] if name == "twin" else stored[name],
                                  np.asarray(same_de["score"], dtype=np.float32).astype(np.float64)])
            for name in ("twin", "worse")}
    pooled = fairness_bootstrap(both["worse"], np.asarray(worse["group"] + same_de["group"], dtype=int),
                                worse["segment_set"] + same_de["segment_set"], worse["topic"] + same_de["topic"],
                                Resampling(400, 11), baseline_values=both["twin"],
                                strata=["n3_en"] * len(worse["unit"]) + ["n3_de"] * len(same_de["unit"]))
    assert main.change.paired == len(both["twin"])
    assert (main.change.value, *main.change.interval, main.change.pvalue) == pytest.approx(
        (pooled.change.estimate, pooled.change.ci_low, pooled.change.ci_high, pooled.change.pvalue), rel=1e-9)
    assert main.change.value == pytest.approx((expected.estimate + 0.0) / 2, rel=1e-9)  # the mean of the subsets' changes
    assert main.interval == pytest.approx((pooled.fairness.ci_low, pooled.fairness.ci_high), rel=1e-9)
    # every change on the page (main, the two subsets' fairness) is adjusted by Holm's method for all three
    changed = [cell for cell in calibrated.cells.values() if cell.change is not None]
    assert len(changed) == 3
    adjusted = sorted(cell.adjusted for cell in changed)
    raw = sorted(cell.change.pvalue for cell in changed)
    assert adjusted == pytest.approx([min(1.0, 3 * raw[0]), max(min(1.0, 3 * raw[0]), min(1.0, 2 * raw[1])), 1.0])
    from html import escape

    from mteb_fairpos.leaderboard.page import render
    from mteb_fairpos.results.pairing import format_p

    lowered = calibrated.cells[f"{PROBE}|fairness|n3_en"]
    assert escape(f"{lowered.change.text()}; adjusted for every change on the page (Holm): {format_p(lowered.adjusted)}") in render(board)


def test_a_filter_name_no_folder_has_is_reported_and_one_another_folder_has_is_not(results, tmp_path):
    other = tmp_path / "other"
    write_result(other, "fair/bge-m3", COMMIT, "OnlyHere", {"test": [retrieval_entry(0.5, {"begin": 0.5, "end": 0.4})]})
    board = build([results, other], tmp_path / "site", tasks=[RETRIEVAL, "OnlyHere", "Typo"],
                  models=[MINILM[0], "fair/bge-m3", "nope/x"])
    assert board.unmatched == "--tasks Typo; --models nope/x"
    assert build([results, other], tmp_path / "site", tasks=[RETRIEVAL]).unmatched == ""
