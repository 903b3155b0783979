"""The Ray engine on a real local Ray runtime (``ray.init(num_cpus=2)``, no mocks): the encode
pipeline against the single-process index, an encoding actor killed mid-run, and a bad address.

Slow (a Ray runtime and its worker processes start in about 10-20 s), so marked ``slow``: CI runs them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

from mteb_fairpos.cli import main  # noqa: E402
from mteb_fairpos.integrations.qdrant import FairQdrantIndex, store  # noqa: E402
from mteb_fairpos.integrations.qdrant.load import load_parts  # noqa: E402
from mteb_fairpos.integrations.qdrant.encode import encode_to_parts  # noqa: E402
from mteb_fairpos.integrations.qdrant.encoding import ModelLoader  # noqa: E402
from mteb_fairpos.integrations.qdrant.parts import read_points, part_files  # noqa: E402
from mteb_fairpos.integrations.ray import runtime  # noqa: E402
from mteb_fairpos.offline import MINILM_HUB_ID  # noqa: E402

from corpus import CALIBRATION, assert_same_points, points_of, records, write_jsonl  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def local_ray(minilm_dir):
    import sys

    # the crash-once loader below is defined in this test module: ship it by value to the workers
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # the sweep's workers need the tiny test task: the plugin's extra-task variable, with tests/ importable
    tests = str(Path(__file__).parent.parent)
    env = {"MTEB_FAIRPOS_EXTRA_TASKS": "fairpos_tiny_tasks",
           "PYTHONPATH": os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p)}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": env})
    yield
    ray.shutdown()


@dataclass(frozen=True)
class CrashOnce:
    """Loads the model; the first forward pass in any worker kills that worker's process (os._exit),
    once per marker file: a real crash of an encoding actor, for Ray to restart and retry."""

    loader: ModelLoader
    marker: str

    def __call__(self, device: str | None = None):
        model = self.loader(device)
        marker = self.marker

        def crash(*_):
            # removing the marker is the claim: two actors may both have seen it, only one crashes
            try:
                os.remove(marker)
            except FileNotFoundError:
                return
            os._exit(1)

        model.register_forward_pre_hook(crash)
        return model


def test_ray_pipeline_equals_the_single_process_index(tmp_path):
    items = records(36, seed=11)
    path = write_jsonl(tmp_path / "docs.jsonl", items)
    loader = ModelLoader(MINILM_HUB_ID, CALIBRATION)
    report = encode_to_parts(path, tmp_path / "parts", loader, "pages", engine="ray", actors=2, part_size=6,
                              late_chunks=True, show_progress=False)
    assert (report.engine, report.documents, report.parts, report.parts_encoded) == ("ray", 36, 6, 6)
    client = store.open_store(":memory:")
    assert load_parts(tmp_path / "parts", client, show_progress=False).documents == 36
    with FairQdrantIndex(loader(), "pages", model_name=MINILM_HUB_ID) as index:
        index.index_file(path, late_chunks=True, show_progress=False)
        assert_same_points(points_of(index.store, "pages"), points_of(client, "pages"))
    again = encode_to_parts(path, tmp_path / "parts", loader, "pages", engine="ray", actors=2, part_size=6,
                             late_chunks=True, show_progress=False)
    assert (again.parts_skipped, again.forward_passes) == (6, 0)


def test_a_killed_encoding_actor_is_restarted_and_its_part_retried(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", records(24, seed=2))
    marker = tmp_path / "crash-once"
    marker.touch()
    crashing = CrashOnce(ModelLoader(MINILM_HUB_ID, CALIBRATION), str(marker))
    report = encode_to_parts(path, tmp_path / "parts", crashing, "pages", engine="ray", actors=2, part_size=4,
                              show_progress=False)
    assert not marker.exists(), "no actor crashed: the test did not test a crash"
    assert report.documents == 24 and report.parts_encoded == 6
    ids = [p.id for f in part_files(tmp_path / "parts") for p in read_points(f)]
    assert len(ids) == len(set(ids)) == 24
    reference = encode_to_parts(path, tmp_path / "reference", ModelLoader(MINILM_HUB_ID, CALIBRATION), "pages",
                                 part_size=4, show_progress=False)
    assert reference.points == report.points == 24


def test_gpus_the_cluster_lacks_are_refused_not_waited_for(tmp_path):
    """GPUs per actor the cluster does not have made Ray wait for ever; a CUDA device with actors that get no GPU
    failed in every actor with torch's traceback."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine's Ray runtime has GPUs")
    path = write_jsonl(tmp_path / "d.jsonl", records(2))
    with pytest.raises(runtime.RayUnavailableError, match=r"each actor asks for 1 GPU\(s\), but no node of the Ray cluster"):
        encode_to_parts(path, tmp_path / "o", MINILM_HUB_ID, "p", engine="ray", gpus_per_actor=1, show_progress=False)
    with pytest.raises(runtime.RayUnavailableError, match="device 'cuda', but the Ray actors get no GPU"):
        encode_to_parts(path, tmp_path / "o", ModelLoader(MINILM_HUB_ID, device="cuda"), "p", engine="ray",
                        show_progress=False)
    assert not any((tmp_path / "o").glob("*.parquet"))


def test_unreachable_address_is_reported_before_anything_runs(tmp_path):
    with pytest.raises(runtime.RayUnavailableError, match="cannot reach the Ray cluster at 127.0.0.1:1"):
        encode_to_parts(write_jsonl(tmp_path / "d.jsonl", records(2)), tmp_path / "o", MINILM_HUB_ID, "p",
                         engine="ray", address="127.0.0.1:1")
    assert not Path(tmp_path / "o").exists()


def test_distributed_sweep_equals_the_sequential_one(tmp_path, capsys):
    """One Ray task per (config, task, subset), merged per (config, task) with mteb's TaskResult.merge:
    the same result files and the same table as the sequential sweep; a rerun sends nothing out."""
    import fairpos_tiny_tasks
    import mteb
    from mteb.cache import ResultCache

    from mteb_fairpos.integrations.ray.sweep import UNITS_FOLDER, run_on_ray
    from mteb_fairpos.mteb_plugin import register
    from mteb_fairpos.sweep import SweepPoint, plan_sweep

    register()
    fairpos_tiny_tasks.register()
    tasks = ["FairPosTinyRetrieval", "FairPosTinyTwoSubsets"]
    args = ["sweep", "-m", "fair/all-MiniLM-L6-v2", "-t", *tasks, "--baskets", "64", "--layers", "last_half",
            "--strengths", "1", "--batch-size", "4", "--device", "cpu", "--quiet"]
    assert main(args + ["--output-folder", str(tmp_path / "sequential")]) == 0
    sequential = capsys.readouterr().out
    assert main(args + ["--output-folder", str(tmp_path / "ray"), "--engine", "ray", "--actors", "2"]) == 0
    distributed = capsys.readouterr().out
    # both points were just evaluated by the Ray workers (they were reported as cached)
    assert distributed.count(": evaluated") == 2 and ": cached" not in distributed
    table = sequential[sequential.index("### FairPosTinyRetrieval"):]
    assert distributed[distributed.index("### FairPosTinyRetrieval"):] == table
    for task in tasks:
        written = sorted(p.relative_to(tmp_path / "ray") for p in (tmp_path / "ray").rglob(f"{task}.json"))
        assert written == sorted(p.relative_to(tmp_path / "sequential")
                                 for p in (tmp_path / "sequential").rglob(f"{task}.json"))
        assert len(written) == 2
    merged = json.loads(next((tmp_path / "ray").rglob("FairPosTinyTwoSubsets.json")).read_text())
    assert sorted(s["hf_subset"] for s in merged["scores"]["test"]) == ["early", "late"]
    assert not (tmp_path / "ray" / UNITS_FOLDER).exists()
    points = [SweepPoint("fair/all-MiniLM-L6-v2", None, "cpu")]

    def sweep_on_ray(points, tasks, folder, show_progress):
        plan = plan_sweep(points, mteb.get_tasks(tasks=tasks), ResultCache(folder))
        done, failures = run_on_ray(plan, folder, show_progress=show_progress)
        assert failures == []
        return done

    assert sweep_on_ray(points, tasks, tmp_path / "ray", show_progress=False) == []  # nothing missing, nothing run
    # a result that lost one subset: only that subset is sent out, and merged back in
    twin = next(p for p in (tmp_path / "ray").rglob("FairPosTinyTwoSubsets.json") if "fair-off" in str(p))
    complete = json.loads(twin.read_text())
    partial = dict(complete, scores={"test": [s for s in complete["scores"]["test"] if s["hf_subset"] == "early"]})
    twin.write_text(json.dumps(partial))
    assert sweep_on_ray(points, tasks, tmp_path / "ray", show_progress=False) == [
        ("fair-off/all-MiniLM-L6-v2", "FairPosTinyTwoSubsets", "late")]
    restored = json.loads(twin.read_text())["scores"]["test"]
    assert sorted(s["hf_subset"] for s in restored) == ["early", "late"]
    assert [s for s in restored if s["hf_subset"] == "late"] == [s for s in complete["scores"]["test"]
                                                                 if s["hf_subset"] == "late"]
