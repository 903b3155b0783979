"""A sweep fanned out over Ray: one Ray task per (grid point, mteb task, subset) of a sweep plan.

The plan is `mteb_fairpos.sweep.plan_sweep`'s, the same the sequential sweep runs: only subsets
the results folder lacks and the task's data holds are sent out. mteb keeps all subsets of a task
in one result file per model, so two workers must never write one file: each unit evaluates its one
subset into a results folder of its own (``<results>/.fairpos-units/...``, on storage every node
mounts); the driver then merges each (grid point, task)'s finished units with mteb's own
``TaskResult.merge`` (onto what the main folder already held) and saves the result where a
sequential sweep would have. A unit that fails comes back as a `Failure` (one line) while the
others still land; a unit that finished before a crash is read back rather than recomputed, and a
worker that dies is restarted by Ray.

Each worker registers the plugin and holds one `LoadedWeights`: the checkpoint is loaded once for
every grid point it evaluates. The sweep's table and ``mteb-fairpos compare`` read the folder back.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from ...config import require_positive
from ...results.output import check_folder
from ...sweep import LEFT_OUT, Failure, SweepPlan, SweepPoint, left_out, one_line, planned_strategy
from . import runtime

UNITS_FOLDER = ".fairpos-units"


class SweepWorker:
    """Evaluates (grid point, task, subset) units; the checkpoint is loaded once per worker."""

    def __init__(self, batch_size: int | None) -> None:
        from ...mteb_models import LoadedWeights
        from ...mteb_plugin import register

        register()
        self.weights = LoadedWeights()  # for the worker's life: every grid point reuses the loaded checkpoint
        # no bars in the actors: mteb's encode and search read this one
        self.encode_kwargs = {"show_progress_bar": False, **({"batch_size": batch_size} if batch_size else {})}

    def evaluate(self, number: int, point: SweepPoint, template: Any, subset: str, folder: str) -> tuple[int, str | None]:
        """Evaluate one subset of a task (rebuilt from its unloaded ``template``) into ``folder``;
        returns (the unit's ``number``, error line or None)."""
        import mteb
        from mteb.cache import ResultCache
        from mteb.results import TaskResult

        from ...mteb_models import build_encoder

        meta = point.meta()
        task = copy.deepcopy(template).filter_languages(None, hf_subsets=[subset])
        cache = ResultCache(folder)
        finished = cache.get_task_result_path(template.metadata.name, meta)
        try:  # a unit that finished before a crash is read back; one a crash left half-written is evaluated again
            if finished.is_file():
                TaskResult.from_disk(finished)
        except Exception:  # noqa: BLE001 -- whatever it holds, it is no result
            finished.unlink()
        try:
            mteb.evaluate(build_encoder(meta, weights=self.weights), task, cache=cache,
                          overwrite_strategy="only-missing", encode_kwargs=dict(self.encode_kwargs), show_progress_bar=False)
        except Exception as err:  # noqa: BLE001 -- reported to the driver in one line
            return number, one_line(err)
        return number, LEFT_OUT if left_out(task, [subset]) else None


def run_on_ray(plan: SweepPlan, output_folder: str | Path, *, actors: int = 1, gpus_per_actor: float | None = None,
               address: str | None = None, batch_size: int | None = None, overwrite_strategy: str | None = None,
               show_progress: bool = True) -> tuple[list[tuple[str, str, str]], list[Failure]]:
    """Evaluate the plan's units on Ray into ``output_folder`` (under the plan's overwrite strategy); returns the
    (model, task, subset) units that landed and the failures."""
    from mteb.cache import ResultCache
    from tqdm.auto import tqdm

    overwrite_strategy = planned_strategy(plan, overwrite_strategy)
    require_positive(actors, "actors")
    runtime.check_resources(gpus_per_actor)
    if batch_size is not None:
        require_positive(batch_size, "batch_size")
    cache = ResultCache(check_folder(output_folder))
    units_root = Path(output_folder) / UNITS_FOLDER
    if overwrite_strategy == "always":
        shutil.rmtree(units_root, ignore_errors=True)
    flat = [(unit.point, unit.task, subset, str(_unit_folder(units_root, unit.point, unit.task, subset)))
            for unit in plan.units for subset in unit.subsets]
    if not flat:
        return [], []
    runtime.init(address)
    ray = runtime.require_ray()
    gpus_per_actor = runtime.gpus_for_actors(gpus_per_actor)
    for point in plan.points:
        runtime.require_actor_gpus(point.device, gpus_per_actor)
    worker = ray.remote(SweepWorker).options(num_cpus=1, num_gpus=gpus_per_actor, max_restarts=-1, max_task_retries=-1)
    pool = ray.util.ActorPool([worker.remote(batch_size) for _ in range(min(actors, len(flat)))])
    done: list[tuple[str, str, str]] = []
    failures: list[Failure] = []
    landed: dict[tuple[SweepPoint, str], list[str]] = defaultdict(list)
    with tqdm(total=len(flat), desc="sweep on ray", unit="subset", disable=not show_progress) as bar:
        units = [(number, point, plan.templates[task], subset, folder) for number, (point, task, subset, folder) in enumerate(flat)]
        for number, error in pool.map_unordered(lambda actor, unit: actor.evaluate.remote(*unit), units):
            point, task, subset, folder = flat[number]  # by number: points that differ only in length share a name
            model = point.meta().name
            if error is None:
                done.append((model, task, subset))
                landed[(point, task)].append(folder)
            else:
                failures.append(Failure(task, error, model, (subset,)))
            bar.update(1)
    for (point, task), unit_folders in landed.items():
        _merge_into(cache, point, task, unit_folders, overwrite_strategy)
        for folder in unit_folders:
            shutil.rmtree(folder, ignore_errors=True)
    if not failures:
        shutil.rmtree(units_root, ignore_errors=True)
    return done, failures


def _unit_folder(root: Path, point: SweepPoint, task_name: str, subset: str) -> Path:
    key = hashlib.blake2b(repr((point, task_name, subset)).encode("utf-8"), digest_size=8).hexdigest()
    return root / key


def _merge_into(cache: Any, point: SweepPoint, task_name: str, folders: list[str], overwrite_strategy: str) -> None:
    """Merge the units' one-subset results (onto the stored result) with mteb's ``TaskResult.merge``."""
    from mteb.cache import ResultCache
    from mteb.results import TaskResult

    from ...results import units

    meta = point.meta()
    path = cache.get_task_result_path(task_name, meta)
    merged = TaskResult.from_disk(path) if path.is_file() and overwrite_strategy != "always" else None
    for folder in folders:
        part_path = ResultCache(folder).get_task_result_path(task_name, meta)
        part = TaskResult.from_disk(part_path)
        units.carry_over(part_path)  # its per-query rows go into the merged result's sidecar
        merged = part if merged is None else merged.merge(part)
    if merged is not None:
        cache.save_to_cache(merged, meta)
