"""The Ray sweep runs the sequential sweep's plan: on a partial local copy of PosIR and with a task
that fails, it writes the same result files as the sequential sweep, names the same missing
subsets and the same failed units, and lands everything else.

On a real local Ray runtime (``ray.init(num_cpus=2)``), so marked ``slow``: CI runs it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

import fairpos_tiny_tasks  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("minilm_dir")]
TESTS = Path(__file__).resolve().parents[1]
POSIR = TESTS / "fixtures" / "posir"
MODEL = "fair/all-MiniLM-L6-v2"


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    from mteb_fairpos.mteb_plugin import register

    register()
    fairpos_tiny_tasks.register()
    # the workers unpickle the task objects: the tiny tasks' module must be importable there
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": env})
    yield
    ray.shutdown()


def _plan(folder):
    from mteb.cache import ResultCache

    from mteb_fairpos.config import CalibrationConfig
    from mteb_fairpos.sweep import SweepPoint, plan_sweep
    from mteb_fairpos.tasks.posir import PosIR

    points = [SweepPoint(MODEL, None, "cpu"), SweepPoint(MODEL, CalibrationConfig.parse("b64_lhalf_a1"), "cpu")]
    tasks = [PosIR(data_dir=POSIR, languages=["deu"]), fairpos_tiny_tasks.FairPosTinyBroken(),
             fairpos_tiny_tasks.FairPosTinyRetrieval()]
    return plan_sweep(points, tasks, ResultCache(folder)), ResultCache(folder)


def _scores(folder: Path) -> dict[str, list]:
    found = {}
    for path in sorted(folder.rglob("*.json")):
        if path.name != "model_meta.json":
            found[str(path.relative_to(folder))] = sorted(
                ((s["hf_subset"], s["main_score"]) for s in json.loads(path.read_text())["scores"]["test"]))
    return found


def test_the_ray_sweep_runs_the_sequential_plan(tmp_path):
    from mteb_fairpos.integrations.ray.sweep import UNITS_FOLDER, run_on_ray
    from mteb_fairpos.sweep import run_sweep

    sequential, cache = _plan(tmp_path / "sequential")
    local_failures = run_sweep(sequential, cache, show_progress=False)
    distributed, _ = _plan(tmp_path / "ray")
    assert distributed.units == sequential.units and distributed.absent == sequential.absent
    done, ray_failures = run_on_ray(distributed, tmp_path / "ray", actors=2, show_progress=False)

    assert sorted(map(str, ray_failures)) == sorted(map(str, local_failures)) and len(ray_failures) == 2
    assert all(f.task == "FairPosTinyBroken" for f in ray_failures)
    assert len(done) == 2 * 3  # per point: PosIR's two subsets the copy holds, and the tiny task
    assert _scores(tmp_path / "ray") == _scores(tmp_path / "sequential") != {}
    assert not any((tmp_path / "ray" / UNITS_FOLDER).glob("*/**/PosIR.json"))  # landed units are merged and removed
    # each merged PosIR result keeps the per-query rows of both its subsets, the same as the sequential run's
    from mteb_fairpos.results import collect, units

    sidecars = {run: {key[0].name: units.read(units.sidecar_path(s.path)).tables for key, s in collect(tmp_path / run).scores.items()
                      if key[1] == "PosIR" and s.units is not None} for run in ("ray", "sequential")}
    assert len(sidecars["ray"]) == 2 and all(len(tables) == 2 for tables in sidecars["ray"].values())
    assert {m: {k: t.to_pydict() for k, t in tables.items()} for m, tables in sidecars["ray"].items()} == \
        {m: {k: t.to_pydict() for k, t in tables.items()} for m, tables in sidecars["sequential"].items()}


def test_points_that_differ_only_in_length_both_land_and_a_half_written_unit_is_evaluated_again(tmp_path):
    """Units were matched back to their point by model name, which a point at another max_length shares: one
    result was merged into the other's and deleted, yet both were reported done. A unit result a crash left
    half-written failed the unit on every rerun."""
    from mteb.cache import ResultCache

    from mteb_fairpos.integrations.ray.sweep import UNITS_FOLDER, _unit_folder, run_on_ray
    from mteb_fairpos.sweep import SweepPoint, plan_sweep

    points = [SweepPoint(MODEL, None, "cpu"), SweepPoint(MODEL, None, "cpu", max_length=32)]
    tasks = [fairpos_tiny_tasks.FairPosTinyRetrieval()]
    cache = ResultCache(tmp_path)
    plan = plan_sweep(points, tasks, cache)
    unit = _unit_folder(tmp_path / UNITS_FOLDER, points[1], "FairPosTinyRetrieval", plan.units[1].subsets[0])
    crashed = ResultCache(unit).get_task_result_path("FairPosTinyRetrieval", points[1].meta())
    crashed.parent.mkdir(parents=True)
    crashed.write_text('{"dataset_revision": "ab')  # cut off mid-write
    done, failures = run_on_ray(plan, tmp_path, actors=2, show_progress=False)
    assert failures == [] and len(done) == 2
    paths = [cache.get_task_result_path("FairPosTinyRetrieval", point.meta()) for point in points]
    assert paths[0] != paths[1] and all(path.is_file() for path in paths)


def test_a_gpu_request_the_cluster_cannot_meet_and_another_cluster_are_refused(tmp_path):
    """Ray waited for ever for GPUs the cluster does not have; an address other than the cluster this process had
    joined was ignored and the work ran here."""
    from mteb.cache import ResultCache

    from mteb_fairpos.integrations.ray import runtime
    from mteb_fairpos.integrations.ray.sweep import run_on_ray
    from mteb_fairpos.sweep import SweepPoint, plan_sweep

    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine's Ray runtime has GPUs")
    plan = plan_sweep([SweepPoint(MODEL, None, "cpu")], [fairpos_tiny_tasks.FairPosTinyRetrieval()], ResultCache(tmp_path))
    with pytest.raises(runtime.RayUnavailableError, match=r"each actor asks for 1 GPU\(s\), but no node of the Ray "
                                                          "cluster has more than 0"):
        run_on_ray(plan, tmp_path, gpus_per_actor=1, show_progress=False)
    on_cuda = plan_sweep([SweepPoint(MODEL, None, "cuda")], [fairpos_tiny_tasks.FairPosTinyRetrieval()], ResultCache(tmp_path))
    with pytest.raises(runtime.RayUnavailableError, match="device 'cuda', but the Ray actors get no GPU"):
        run_on_ray(on_cuda, tmp_path, show_progress=False)  # every unit failed on torch's assertion
    with pytest.raises(runtime.RayUnavailableError, match="this process has already joined the Ray cluster at .*, not "
                                                          "127.0.0.1:1"):
        run_on_ray(plan, tmp_path, address="127.0.0.1:1", show_progress=False)  # it ran here and reported success
    assert not any(tmp_path.rglob("FairPosTinyRetrieval.json"))
    joined = ray.get_runtime_context().gcs_address  # the cluster this process joined, named as it is or by port
    runtime._require_joined(ray, joined)
    runtime._require_joined(ray, "127.0.0.1:" + joined.rsplit(":", 1)[1])  # this machine, by another of its names
    with pytest.raises(runtime.RayUnavailableError, match=f"this process has already joined the Ray cluster at {joined}"):
        runtime._require_joined(ray, joined.rsplit(":", 1)[0] + ":1")
