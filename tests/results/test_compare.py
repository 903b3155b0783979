"""`mteb-fairpos compare` on a hand-made mteb results folder: tables, profiles, plots, issues."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.results import collect, position_profiles, profile_psi
from mteb_fairpos.results.tables import report
from results_folders import add_unreadable, posir_entry, probe_entry, register_tasks, retrieval_entry, write_result

TASK = "FairPosTinyRetrieval"
PNG = b"\x89PNG\r\n\x1a\n"


def _write(root: Path, model: str, revision: str, task: str, scores: dict, *, meta: bool = True) -> Path:
    return write_result(root / "results", model, revision, task, scores, meta=meta)


@pytest.fixture(scope="module", autouse=True)
def _tasks():
    register_tasks()


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "run"
    off = {"begin": 0.9, "middle": 0.7, "end": 0.6}
    fair = {"begin": 0.85, "middle": 0.8, "end": 0.78}
    _write(root, "fair-off/all-MiniLM-L6-v2", "off", TASK, {"test": [retrieval_entry(0.72, off, psi=0.3333)]})
    _write(root, "fair/all-MiniLM-L6-v2", "b128_lhalf_a0.5", TASK, {"test": [retrieval_entry(0.81, fair, psi=0.0824)]})
    # a task mteb does not know, for the calibrated model only (the twin then misses it)
    _write(root, "fair/all-MiniLM-L6-v2", "b128_lhalf_a0.5", "PrivateTask", {"test": [retrieval_entry(0.5)]})
    # partial: the task's split "test" is absent
    _write(root, "fair/bge-m3", "b128_lhalf_a0.5", TASK, {"dev": [retrieval_entry(0.6, {"begin": 0.7, "end": 0.5})]}, meta=False)
    # foreign and corrupt files
    add_unreadable(root / "results", root / "results" / "fair__all-MiniLM-L6-v2" / "b128_lhalf_a0.5")
    return root


def test_tables_plots_and_issues(results, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out

    table = (out / "main_scores.md").read_text()
    assert "| fair/all-MiniLM-L6-v2 [b128_lhalf_a0.5] | 0.8100 | 0.5000 |" in table
    assert "| fair-off/all-MiniLM-L6-v2 [off] | 0.7200 | — |" in table
    assert "0.6000 (partial)" in table
    profiles = (out / "profiles.md").read_text()
    assert "| model | begin | middle | end | PSI | main |" in profiles
    assert "| fair/bge-m3 [b128_lhalf_a0.5] | 0.7000 |  | 0.5000 | 0.2857 | 0.6000 |" in profiles  # PSI from the profile

    rows = list(csv.DictReader((out / "main_scores.csv").open()))
    by = {(r["model"], r["task"]): r for r in rows}
    assert by[("fair-off/all-MiniLM-L6-v2", "PrivateTask")]["status"] == "missing"
    assert by[("fair/bge-m3", TASK)]["status"] == "partial"
    assert float(by[("fair/all-MiniLM-L6-v2", TASK)]["psi"]) == pytest.approx(0.0824)
    long = list(csv.DictReader((out / "profiles.csv").open()))
    assert {(r["model"], r["label"]) for r in long if r["task"] == TASK} >= {("fair/all-MiniLM-L6-v2", "end")}

    for name in (f"profile_{TASK}.png", "psi_vs_score.png"):
        assert (out / name).read_bytes()[:8] == PNG, name

    for needle in ("[corrupt] fair__all-MiniLM-L6-v2/b128_lhalf_a0.5/Broken.json",
                   "[foreign] fair__all-MiniLM-L6-v2/b128_lhalf_a0.5/Notes.json",
                   "[foreign] README.txt",
                   "[missing] fair-off/all-MiniLM-L6-v2 [off]: no results for PrivateTask",
                   "[partial] fair/bge-m3 [b128_lhalf_a0.5]",
                   "missing split test",
                   "[unchecked]",
                   "[no-meta] fair__bge-m3/b128_lhalf_a0.5",
                   "[no-twin] fair/bge-m3"):
        assert needle in printed, needle
    assert "## Issues" in (out / "main_scores.md").read_text()


def test_filters_and_empty_folders(results, tmp_path, capsys):
    found = collect(results, tasks=[TASK], models=["fair/all-MiniLM-L6-v2", "fair-off/all-MiniLM-L6-v2"])
    assert found.tasks == [TASK]
    assert [m.name for m in found.models] == ["fair-off/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2"]  # twin first
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["compare", str(empty), "--out", str(tmp_path / "o")]) == 1
    assert "no readable mteb results found" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()  # no empty tables that look like a comparison
    assert "## Main scores\n\nNo result could be read.\n" in report(collect(empty))  # not a table of no columns
    assert main(["compare", str(results), "--tasks", "NoSuchTask", "--out", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out
    assert "for the --tasks and --models given (they leave out all 6 result file(s) there)" in out
    assert "note: no result here matches --tasks NoSuchTask\n" in out
    assert main(["compare", str(results), "--tasks", TASK, "Typo", "--models", "fair/all-MiniLM-L6-v2", "nope/x",
                 "--out", str(tmp_path / "o"), "--no-plots"]) == 0  # a typo among good names narrows the table: said so
    assert "note: no result here matches --tasks Typo; --models nope/x\n" in capsys.readouterr().out
    assert collect(results, tasks=[TASK]).seen["tasks"] > {TASK}  # names of filtered files are seen too
    assert main(["compare", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    a_file = tmp_path / "scores.json"
    a_file.write_text("{}")
    assert main(["compare", str(a_file)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_position_convention():
    entry = {
        "main_score": 0.9, "position_fairness": 0.8, "position_1": 0.9, "position_1_se": 0.01, "position_1_ci_low": 0.8,
        "position_1_ci_high": 1.0, "position_2": 0.72, "position_3": None, "tau_position_1": 0.5, "tau_position_2": 0.4,
        "position_counts": {"1": 10}, "beta_2": -0.1,
    }
    profiles = position_profiles(entry)
    assert profiles == {"": {"1": 0.9, "2": 0.72, "3": None}, "tau": {"1": 0.5, "2": 0.4}}
    assert position_profiles({"positions": {"begin": 0.5, "end": 0.25}, "tau_positions": {"a": 1}}) == {
        "": {"begin": 0.5, "end": 0.25}, "tau": {"a": 1.0}}
    assert profile_psi({"a": 0.5, "b": 0.25, "c": None}) == pytest.approx(0.5)
    assert profile_psi({"a": 0.0, "b": 0.0}) is None


def test_posir_subsets_are_pooled_per_language_as_the_papers_do(tmp_path):
    """PosIR's (language, domain) subsets: compare shows the per-language pooling, not the plain mean."""
    from mteb_fairpos.tasks.grouped_metrics import empty_cells
    from mteb_fairpos.tasks.posir import summarize_scores

    cells_a, cells_b = empty_cells(), empty_cells()
    cells_a["Q1"] = {"0.00-0.05": [3, 3.0]}  # 3 queries, all at 1.0
    cells_b["Q1"] = {"0.95-1.00": [1, 0.2]}  # 1 query at 0.2
    entries = [posir_entry("deu-Latn.game", 1.0, cells_a), posir_entry("deu-Latn.sports", 0.2, cells_b)]
    _write(tmp_path / "run", "fair/all-MiniLM-L6-v2", "b128_lhalf_a0.5", "PosIR", {"test": entries})
    found = collect(tmp_path / "run")
    (model,) = found.models
    scores = found.get(model, "PosIR")
    assert scores.main_score == pytest.approx((3.0 + 0.2) / 4)  # query-weighted, not (1.0 + 0.2) / 2
    assert scores.main_score == pytest.approx(summarize_scores(entries)["main_score"])
    assert scores.psi == pytest.approx(0.8)  # over the pooled bins (1.0 and 0.2), not the entries' 0.0
    assert scores.profile["0.00-0.05"] == pytest.approx(1.0) and scores.profile["0.95-1.00"] == pytest.approx(0.2)
    # the other 308 declared subsets are missing: named briefly, not all 308
    (note,) = [text for kind, text in scores.notes if kind == "partial"]
    assert "308 subsets [" in note and "... and 303 more" in note
    # a PosIR file without the per-cell counts cannot be pooled: reported, plain means kept
    for entry in entries:
        del entry["cells"]
    _write(tmp_path / "old", "fair/all-MiniLM-L6-v2", "b128_lhalf_a0.5", "PosIR", {"test": entries})
    old = collect(tmp_path / "old")
    scores = old.get(old.models[0], "PosIR")
    assert scores.main_score == pytest.approx((1.0 + 0.2) / 2) and scores.status == "partial"
    assert any("cannot pool the subsets as PosIR does" in text for _, text in scores.notes)


def test_one_name_per_config_next_to_the_old_revision_layout(tmp_path, capsys):
    """configs are model names and revisions are weights' commits; old config-in-revision folders still read."""
    root = tmp_path / "run"
    commit = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    _write(root, "fair-off/all-MiniLM-L6-v2", commit, TASK, {"test": [retrieval_entry(0.72, {"begin": 0.9, "end": 0.6})]})
    _write(root, "fair/all-MiniLM-L6-v2", commit, TASK, {"test": [retrieval_entry(0.8, {"begin": 0.85, "end": 0.8})]})
    _write(root, "fair/all-MiniLM-L6-v2-b64_llast_a1", commit, TASK, {"test": [retrieval_entry(0.78, {"begin": 0.8, "end": 0.8})]})
    _write(root, "fair/bge-m3", "b128_lhalf_a0.5", TASK, {"test": [retrieval_entry(0.6, {"begin": 0.7, "end": 0.5})]})  # old form
    found = collect(root)
    labels = [m.label for m in found.models]
    assert labels == ["fair-off/all-MiniLM-L6-v2 [8b3219a]", "fair/all-MiniLM-L6-v2 [8b3219a]",
                      "fair/all-MiniLM-L6-v2-b64_llast_a1 [8b3219a]", "fair/bge-m3 [b128_lhalf_a0.5]"]
    twins = [issue for issue in found.issues if issue.kind == "no-twin"]
    assert [issue.where for issue in twins] == ["fair/bge-m3"]  # every MiniLM config has its twin
    assert main(["compare", str(root), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "fair/all-MiniLM-L6-v2-b64_llast_a1 [8b3219a]" in out


def test_sweep_plots_tell_configs_apart_and_name_their_metric(tmp_path):
    """Each config its own colour and marker, the metric on the axis, no cliff from a 0.003 difference."""
    import matplotlib

    matplotlib.use("Agg")
    from mteb_fairpos.results.plots import metric_label, readable_limits, style

    root = tmp_path / "run"
    commit = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    for name, main_score in (("fair-off/all-MiniLM-L6-v2", 0.800), ("fair/all-MiniLM-L6-v2", 0.802),
                             ("fair/all-MiniLM-L6-v2-b64_llast_a1", 0.803)):
        _write(root, name, commit, TASK, {"test": [retrieval_entry(main_score, {"begin": 0.8, "end": 0.79}, psi=0.01)]})
    found = collect(root)
    styles = style(found)
    configs = [styles[m] for m in found.models if not m.name.startswith("fair-off/")]
    assert len({(s["color"], s["marker"]) for s in configs}) == 2  # two configs of one model, told apart
    twin = next(styles[m] for m in found.models if m.name.startswith("fair-off/"))
    assert twin["linestyle"] == "--" and twin not in configs
    assert metric_label(found, TASK) == "nDCG@10"
    limits = []
    readable_limits(lambda low, high: limits.extend([low, high]), [0.800, 0.803])
    assert limits[1] - limits[0] >= 0.05 and limits[0] < 0.800 and limits[1] > 0.803


def test_probe_subsets_are_profiled_apart_with_their_intervals(tmp_path):
    """n=3 and n=4 subsets are not averaged into one profile ("position 4" exists only for n=4)."""
    root = tmp_path / "run"
    _write(root, "fair-off/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a", "PermutationFairnessSample",
           {"test": [probe_entry("n3_en", [0.6, 0.6, 0.55]), probe_entry("n4_en", [0.5, 0.5, 0.5, 0.42])]})
    found = collect(root)
    [scores] = found.scores.values()
    assert set(scores.profiles) == {"n3_en", "n4_en"} and "4" not in scores.profiles["n3_en"]
    assert scores.intervals["n4_en"]["4"] == pytest.approx((0.40, 0.44))
    assert any(kind == "pooled" and "means over 2 subsets" in text for kind, text in scores.notes)
    from mteb_fairpos.results.plots import plot_profiles
    from mteb_fairpos.results.tables import profile_tables

    tables = profile_tables(found)
    assert "### PermutationFairnessSample: n3_en" in tables and "0.4200 [0.400, 0.440]" in tables
    from mteb_fairpos.results.tables import effect_tables  # the betas, with SE and p, per subset

    effects = effect_tables(found)
    assert "| subset | beta_2 | beta_3 | beta_4 |" in effects and "-0.0800 (0.0100) p<0.001" in effects
    from mteb_fairpos.results.tables import main_table  # like with like: no mean across the subsets

    table = main_table(found)
    assert "| model | PermutationFairnessSample: n3_en | PermutationFairnessSample: n4_en |" in table
    assert "| 0.9167 | 0.8400 |" in table and "not averaged" in table
    (tmp_path / "out").mkdir()
    assert plot_profiles(found, tmp_path / "out")[0].read_bytes()[:8] == PNG


def test_tables_and_plots_take_folder_names_as_text(results, tmp_path, monkeypatch):
    """The Python example of docs/results.md: folders named by strings, the figures' folder not made yet."""
    from mteb_fairpos.results.plots import plot_profiles, plot_psi_scatter, write_plots
    from mteb_fairpos.results.tables import write_tables

    monkeypatch.chdir(tmp_path)
    found = collect(str(results.relative_to(tmp_path)))
    [profile] = plot_profiles(found, "figures")
    assert profile == Path("figures") / f"profile_{TASK}.png" and profile.read_bytes()[:8] == PNG
    assert plot_psi_scatter(found, "scatter").read_bytes()[:8] == PNG
    assert {p.name for p in write_plots(found, "all")} == {f"profile_{TASK}.png", "psi_vs_score.png"}
    assert {p.name for p in write_tables(found, "tables")} == {"main_scores.md", "main_scores.csv", "profiles.md", "profiles.csv"}


def test_a_checkpoint_the_registry_does_not_know_still_pairs_with_its_twin(tmp_path):
    """`probe --model <folder>` names its results fair/<folder>-<config> and fair-off/<folder>: the pair is found
    by the name alone, and an ordinary model is paired with nothing."""
    from mteb_fairpos.results import plugin_base, twin_for

    profile = {"begin": 0.9, "end": 0.6}
    _write(tmp_path, "fair-off/my-model", "abc", TASK, {"test": [retrieval_entry(0.7, profile)]})
    _write(tmp_path, "fair/my-model-b128_lhalf_a1", "abc", TASK, {"test": [retrieval_entry(0.8, profile)]})
    _write(tmp_path, "BAAI/bge-m3", "abc", TASK, {"test": [retrieval_entry(0.75, profile)]})
    found = collect(tmp_path)
    pairs = {m.name: getattr(twin_for(m, found.models), "name", None) for m in found.models}
    assert pairs == {"fair-off/my-model": None, "fair/my-model-b128_lhalf_a1": "fair-off/my-model", "BAAI/bge-m3": None}
    assert plugin_base("fair/my-model-b128_lhalf_a1") == plugin_base("fair-off/my-model") == "my-model"
    assert plugin_base("fair/my-model-v2") == "my-model-v2" and plugin_base("BAAI/bge-m3") is None


def test_a_twin_of_other_weights_is_no_twin_and_says_so(tmp_path):
    """Result folders named after two commits of a checkpoint hold two sets of weights: a change between them would
    mix calibration with the weights' change, so they are not paired, and the issue says why."""
    from mteb_fairpos.results import twin_for

    profile = {"begin": 0.9, "end": 0.6}
    _write(tmp_path, "fair/bge-m3", "a" * 40, TASK, {"test": [retrieval_entry(0.8, profile)]})
    _write(tmp_path, "fair-off/bge-m3", "b" * 40, TASK, {"test": [retrieval_entry(0.7, profile)]})
    _write(tmp_path, "fair/all-MiniLM-L6-v2", "c" * 40, TASK, {"test": [retrieval_entry(0.8, profile)]})
    _write(tmp_path, "fair-off/all-MiniLM-L6-v2", "off", TASK, {"test": [retrieval_entry(0.7, profile)]})  # an earlier release's
    found = collect(tmp_path)
    pairs = {m.name: getattr(twin_for(m, found.models), "name", None) for m in found.models if not m.name.startswith("fair-off")}
    assert pairs == {"fair/bge-m3": None, "fair/all-MiniLM-L6-v2": "fair-off/all-MiniLM-L6-v2"}
    [issue] = [issue for issue in found.issues if issue.kind == "no-twin"]
    assert issue.where == f"fair/bge-m3 [{'a' * 7}]" and "only for other weights (fair-off/bge-m3 [bbbbbbb])" in issue.message


def test_holm_adjusts_the_tested_changes_and_leaves_out_those_without_a_test():
    """Holm's step-down by hand: sorted 0.01, 0.03, 0.04 times 3, 2, 1 is 0.03, 0.06, 0.04, made non-decreasing."""
    from mteb_fairpos.results.pairing import holm

    assert holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert holm([None, None]) == [None, None] and holm([0.2]) == [0.2]
    assert holm([0.01, float("nan"), 0.03]) == pytest.approx([0.02, None, 0.03])  # NaN is no test: not in the family
    with pytest.raises(ValueError, match=r"p-values lie in \[0, 1\]; got -0.2"):
        holm([0.01, -0.2])  # it passed through, as -0.2
    from mteb_fairpos.results.pairing import format_p

    assert (format_p(float("nan")), format_p(0.0004), format_p(0.0421)) == ("p undefined", "p<0.001", "p=0.042")
