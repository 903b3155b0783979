"""The sweep library: a plan from task objects and a results folder; a partial local copy of PosIR is
scored where it has data and names the rest; a failing unit is named in one line while the others land."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fairpos_tiny_tasks

POSIR = Path(__file__).resolve().parents[1] / "fixtures" / "posir"
MODEL = "fair/all-MiniLM-L6-v2"
HELD = ["deu-Latn.finance_economics", "deu-Latn.medicine_health_psychology_traditional_chinese_medicine"]
pytestmark = pytest.mark.usefixtures("minilm_dir")


@pytest.fixture(scope="module", autouse=True)
def _registered():
    from mteb_fairpos.mteb_plugin import register

    register()
    fairpos_tiny_tasks.register()


def _points():
    from mteb_fairpos.config import CalibrationConfig
    from mteb_fairpos.sweep import SweepPoint

    return [SweepPoint(MODEL, None, "cpu"), SweepPoint(MODEL, CalibrationConfig.parse("b64_lhalf_a1"), "cpu")]


def _tasks():
    from mteb_fairpos.tasks.posir import PosIR

    return [PosIR(data_dir=POSIR, languages=["deu"]), fairpos_tiny_tasks.FairPosTinyBroken(),
            fairpos_tiny_tasks.FairPosTinyRetrieval()]


def test_a_partial_copy_is_scored_where_it_has_data_and_a_failing_unit_is_named(tmp_path):
    from mteb.cache import ResultCache

    from mteb_fairpos.mteb_models import LoadedWeights
    from mteb_fairpos.sweep import Failure, plan_sweep, read_results, run_sweep

    cache = ResultCache(tmp_path)
    points, tasks = _points(), _tasks()
    declared = list(tasks[0].hf_subsets)
    assert len(declared) == 31  # every domain PosIR declares for German; the copy holds two
    plan = plan_sweep(points, tasks, cache)
    assert plan.absent == {"PosIR": [s for s in declared if s not in HELD]}
    assert [(u.point, u.task, u.subsets) for u in plan.units] == [
        (point, task, subsets)
        for task, subsets in (("PosIR", tuple(HELD)), ("FairPosTinyBroken", ("default",)), ("FairPosTinyRetrieval", ("default",)))
        for point in points]

    weights = LoadedWeights()
    failures = run_sweep(plan, cache, weights=weights, show_progress=False)
    assert len(weights) == 1  # both grid points on one loaded checkpoint
    assert failures == [Failure("FairPosTinyBroken", "RuntimeError: the tiny broken task fails on purpose",
                                point.meta().name, ("default",)) for point in points]
    assert str(failures[0]) == ("fair-off/all-MiniLM-L6-v2 on FairPosTinyBroken (default): "
                                "RuntimeError: the tiny broken task fails on purpose")
    landed = {(point.meta().name, result.task_name): sorted(s["hf_subset"] for s in result.scores["test"])
              for point, result in read_results(plan, cache)}
    assert landed == {(point.meta().name, task): subsets for point in points
                      for task, subsets in (("PosIR", HELD), ("FairPosTinyRetrieval", ["default"]))}

    # planned again, nothing is left but the failed units; the absent subsets are named again, not run
    again = plan_sweep(points, _tasks(), cache)
    assert [(u.task, u.subsets) for u in again.units] == [("FairPosTinyBroken", ("default",))] * 2
    assert again.absent == plan.absent


def test_a_task_whose_data_cannot_be_read_is_named_and_the_others_are_planned(tmp_path):
    from mteb.cache import ResultCache

    from mteb_fairpos.sweep import plan_sweep
    from mteb_fairpos.tasks.posir import PosIR

    empty = tmp_path / "empty-copy"
    empty.mkdir()
    plan = plan_sweep(_points()[:1], [PosIR(data_dir=empty, languages=["deu"]), fairpos_tiny_tasks.FairPosTinyRetrieval()],
                      ResultCache(tmp_path / "results"))
    assert [(f.task, f.model, f.error.split(":")[0]) for f in plan.failures] == [("PosIR", None, "DatasetSchemaError")]
    assert "\n" not in plan.failures[0].error
    assert [u.task for u in plan.units] == ["FairPosTinyRetrieval"]


def test_the_sweep_command_names_absent_subsets_and_failures(tmp_path, capsys, monkeypatch):
    from mteb_fairpos.cli import main

    monkeypatch.setenv("MTEB_FAIRPOS_DATA_DIR", str(tmp_path / "copies"))
    (tmp_path / "copies" / "infgrad").mkdir(parents=True)
    (tmp_path / "copies" / "infgrad" / "PosIR-Benchmark-v1").symlink_to(POSIR)
    from mteb_fairpos.mteb_plugin import register_tasks

    register_tasks([fairpos_tiny_tasks.FairPosTinyBroken])
    args = ["sweep", "-m", MODEL, "-t", "PosIR", "FairPosTinyBroken", "--configs", "b64_lhalf_a1", "--no-twin",
            "--output-folder", str(tmp_path / "out"), "--device", "cpu", "--quiet"]
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert "PosIR: the data lacks" in out and "not evaluated: " in out
    assert [line for line in err.splitlines() if "failed" in line] == ["mteb-fairpos sweep: failed: fair/all-MiniLM-L6-v2-b64_lhalf_a1 on "
                                        "FairPosTinyBroken (default): RuntimeError: the tiny broken task fails on purpose"]
    written = json.loads(next((tmp_path / "out").rglob("PosIR.json")).read_text())
    held = {f"{lang}/{folder.name}" for lang in ("deu-Latn", "eng-Latn") for folder in (POSIR / lang).iterdir()}
    scored = {s["hf_subset"] for s in written["scores"]["test"]}
    assert scored and {subset.replace(".", "/IndustryCorpus2_", 1) for subset in scored} <= held


def test_a_plan_refuses_what_would_lose_or_repeat_results_and_is_run_under_its_own_strategy(tmp_path):
    """A point given twice was evaluated twice into one file; a damaged result in the folder was a traceback from
    mteb; a run told 'always' on a plan made 'only-missing' dropped the stored subsets the plan kept; the Ray run's
    counts were checked inside Ray. Each is refused before anything runs (no Ray runtime is started here)."""
    from mteb.cache import ResultCache

    from mteb_fairpos.integrations.ray.sweep import run_on_ray
    from mteb_fairpos.sweep import plan_sweep, run_sweep

    cache = ResultCache(tmp_path / "results")
    twin, config = _points()
    tiny = [fairpos_tiny_tasks.FairPosTinyRetrieval()]
    with pytest.raises(ValueError, match=r"the grid point fair-off/all-MiniLM-L6-v2 \(max_length None\) is given twice"):
        plan_sweep([twin, config, twin], tiny, cache)
    with pytest.raises(TypeError, match="points must be SweepPoints, got 'fair/all-MiniLM-L6-v2'"):
        plan_sweep([MODEL], tiny, cache)
    damaged = cache.get_task_result_path("FairPosTinyRetrieval", twin.meta())
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"task_name": "FairPosTinyRetrieval"}')
    with pytest.raises(ValueError, match=rf"{damaged.name}: not a readable mteb result \(.*\); move it away"):
        plan_sweep([twin], tiny, cache)
    assert plan_sweep([twin], tiny, cache, "always").units  # rerun whole: the file is not read
    plan = plan_sweep([config], tiny, cache)
    for run in (lambda: run_sweep(plan, cache, overwrite_strategy="always", show_progress=False),
                lambda: run_on_ray(plan, tmp_path / "results", overwrite_strategy="always", show_progress=False)):
        with pytest.raises(ValueError, match="the plan was made with overwrite strategy 'only-missing', not 'always'"):
            run()
    for options, message in (({"actors": 1.5}, "actors must be a positive integer"),
                             ({"batch_size": 0}, "batch_size must be a positive integer"),
                             ({"gpus_per_actor": -1}, "gpus_per_actor must be a number of at least 0"),
                             ({"gpus_per_actor": "0"}, "gpus_per_actor must be a number of at least 0")):
        with pytest.raises(ValueError, match=message):
            run_on_ray(plan, tmp_path / "results", show_progress=False, **options)


def test_a_subset_with_no_query_left_is_named_not_counted_as_landed(tmp_path):
    """PosIR leaves such a subset out of its result; the sweep reported the unit as done although nothing landed."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq
    from mteb.cache import ResultCache

    from mteb_fairpos.sweep import plan_sweep, run_sweep
    from mteb_fairpos.tasks.posir import PosIR

    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    qrels = copy / "deu-Latn" / "IndustryCorpus2_finance_economics" / "qrels" / "test.parquet"
    rows = [{**row, "query-id": "elsewhere-" + row["query-id"]} for row in pq.read_table(qrels).to_pylist()]
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(qrels)), qrels)
    cache = ResultCache(tmp_path / "results")
    plan = plan_sweep(_points()[:1], [PosIR(data_dir=copy, languages=["deu"])], cache)
    failures = run_sweep(plan, cache, show_progress=False)
    assert [(f.task, f.subsets, f.error) for f in failures] == [
        ("PosIR", (HELD[0],), "no query left to evaluate; left out of the result")]
