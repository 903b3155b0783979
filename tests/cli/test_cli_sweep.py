"""`mteb-fairpos sweep`: the grid, a small real sweep, resuming from mteb's cache, bad input."""

from __future__ import annotations

import csv

import pytest

import fairpos_tiny_tasks
from mteb_fairpos.cli import main
from mteb_fairpos.cli.sweep import grid

TASK = "FairPosTinyRetrieval"
WEIGHTS = "8b3219a92973c328a8e22fadcfa821b5dc75636a"  # all-MiniLM-L6-v2's pinned commit: the model revision


@pytest.fixture(scope="module", autouse=True)
def _tasks():
    from mteb_fairpos.mteb_plugin import register

    register()
    fairpos_tiny_tasks.register()


def test_default_grid_is_the_papers():
    configs = [str(c) for c in grid((128, 256, 512), ("last", "last_half"), (0.5, 1.0))]
    assert len(configs) == 12
    assert configs[:4] == ["b128_llast_a0.5", "b128_llast_a1", "b128_lhalf_a0.5", "b128_lhalf_a1"]
    assert configs[-1] == "b512_lhalf_a1"
    assert [str(c) for c in grid([64], ["half", "2"], [1])] == ["b64_lhalf_a1", "b64_ln2_a1"]


@pytest.mark.usefixtures("minilm_dir")
def test_sweep_runs_and_resumes(tmp_path, capsys, monkeypatch):
    args = ["sweep", "-m", "fair/all-MiniLM-L6-v2", "-t", TASK, "--baskets", "64", "--layers", "last", "last_half",
            "--strengths", "1", "--output-folder", str(tmp_path), "--batch-size", "4", "--device", "cpu", "--quiet",
            "--csv", str(tmp_path / "sweep.csv")]
    assert main(args) == 0
    captured = capsys.readouterr()
    first = captured.out
    assert "%|" not in captured.err  # --quiet: no bar of mteb's search or datasets' formatting either
    assert "[1/3] fair-off/all-MiniLM-L6-v2: running" in first  # one model name per config
    assert "[3/3] fair/all-MiniLM-L6-v2-b64_lhalf_a1: running" in first
    table = first[first.index(f"### {TASK}"):]
    assert "| config | B | layers | alpha | begin | middle | end | main | Δmain | PSI | ΔPSI |" in table
    assert "| uncalibrated | — | — | 0 |" in table and "| b64_llast_a1 | 64 | last | 1 |" in table
    for model in ("fair-off__all-MiniLM-L6-v2", "fair__all-MiniLM-L6-v2-b64_llast_a1", "fair__all-MiniLM-L6-v2-b64_lhalf_a1"):
        assert (tmp_path / "results" / model / WEIGHTS / f"{TASK}.json").is_file(), model
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [r["config"] for r in rows] == ["off", "b64_llast_a1", "b64_lhalf_a1"]
    assert {r["revision"] for r in rows} == {WEIGHTS}  # the revision is the weights' commit
    assert rows[0]["delta_main"] == "" and rows[1]["delta_main"] != ""

    # resumed: everything comes from mteb's cache, no model is loaded
    def no_loading(*args, **kwargs):
        raise AssertionError("the sweep loaded a model although every result was cached")

    monkeypatch.setattr("mteb_fairpos.mteb_models._load_sentence_transformer", no_loading)
    assert main(args) == 0
    second = capsys.readouterr().out
    assert second.count(": cached") == 3
    assert second[second.index(f"### {TASK}"):] == table


def test_bad_input(tmp_path, capsys):
    assert main(["sweep", "-t", TASK, "--configs", "b128_half_a0.5", "--output-folder", str(tmp_path)]) == 2
    assert "Valid form: b<basket>_l<layers>_a<strength>" in capsys.readouterr().err
    assert main(["sweep", "-t", "FairPosTinyRetreival", "--output-folder", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "-t/--tasks: 'FairPosTinyRetreival' not found. Did you mean: 'FairPosTinyRetrieval'" in err
    assert "KeyError" not in err
    assert main(["sweep", "-m", "fair/nonexistent", "-t", TASK, "--output-folder", str(tmp_path)]) == 2
    assert "not an mteb-fairpos model" in capsys.readouterr().err


def test_an_unreachable_ray_cluster_is_named_before_any_data_is_read(tmp_path, capsys, monkeypatch):
    """The address was checked after every task's data was loaded, and an empty results folder was left."""
    pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

    def refuse(self, *args, **kwargs):
        raise AssertionError("a task's data was read")

    monkeypatch.setattr(fairpos_tiny_tasks.FairPosTinyRetrieval, "load_data", refuse)
    assert main(["sweep", "-t", TASK, "--configs", "b64_lhalf_a1", "--engine", "ray", "--address", "127.0.0.1:1",
                 "--output-folder", str(tmp_path / "results")]) == 2
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("minilm_dir")
def test_longer_inputs_go_to_an_experiment_folder(tmp_path, capsys):
    args = ["sweep", "-t", TASK, "--configs", "b64_llast_a1", "--no-twin", "--max-seq-length", "240",
            "--output-folder", str(tmp_path), "--device", "cpu", "--quiet"]
    assert main(args) == 0
    assert "[1/1] fair/all-MiniLM-L6-v2-b64_llast_a1: running" in capsys.readouterr().out
    folder = tmp_path / "results" / "fair__all-MiniLM-L6-v2-b64_llast_a1" / WEIGHTS / "experiments" / "max_seq_length_240"
    assert (folder / f"{TASK}.json").is_file()
    assert main(args) == 0
    assert ": cached" in capsys.readouterr().out
