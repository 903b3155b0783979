"""A sweep fanned out over Ray: one task per (grid point, mteb task, subset) on a pool of workers.

mteb keeps all subsets of a task in one result file per model, so two workers must never write
one file. Each unit therefore evaluates its one subset into a results folder of its own
(``<results>/.fairpos-units/...``, on a cluster storage every node mounts); when every subset of
a (grid point, task) is done, the driver merges them with mteb's own ``TaskResult.merge`` (onto
what the main folder already held) and saves the result where a sequential sweep would have.
Subsets the main folder already has are not sent out again, a unit that finished before a
crash is read back rather than recomputed, and a worker that dies is restarted by Ray.

Each worker registers the plugin and keeps the checkpoint loaded once for every grid point it
evaluates (`shared_weights`). The sweep's table and ``mteb-fairpos compare`` read the folder back.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...sweep import SweepPoint
from . import runtime

UNITS_FOLDER = ".fairpos-units"


class SweepWorker:
    """Evaluates (grid point, task, subset) units; the checkpoint is loaded once per worker."""

    def __init__(self, batch_size: int | None) -> None:
        from ...mteb_models import shared_weights
        from ...mteb_plugin import register

        register()
        self._shared = shared_weights()
        self._shared.__enter__()  # for the worker's life: every grid point reuses the loaded checkpoint
        self.encode_kwargs = {"batch_size": batch_size} if batch_size else {}

    def evaluate(self, point: SweepPoint, task_name: str, subset: str, folder: str) -> tuple[str, str, str]:
        import mteb
        from mteb.cache import ResultCache

        mteb.evaluate(point.meta(), [mteb.get_task(task_name, hf_subsets=[subset])], cache=ResultCache(folder),
                      overwrite_strategy="only-missing", encode_kwargs=dict(self.encode_kwargs),
                      show_progress_bar=False)
        return point.meta().name, task_name, subset


def run_sweep(points: Sequence[SweepPoint], task_names: Sequence[str], output_folder: str | Path, *, actors: int = 1,
              gpus_per_actor: float | None = None, address: str | None = None, batch_size: int | None = None,
              overwrite_strategy: str = "only-missing", show_progress: bool = True) -> list[tuple[str, str, str]]:
    """Evaluate every (point, task, subset) missing from ``output_folder`` on Ray; returns the units run."""
    import mteb
    from mteb.cache import ResultCache
    from tqdm.auto import tqdm

    if actors < 1:
        raise ValueError(f"actors must be >= 1, got {actors}.")
    cache = ResultCache(output_folder)
    units_root = Path(output_folder) / UNITS_FOLDER
    if overwrite_strategy == "always":
        shutil.rmtree(units_root, ignore_errors=True)
    units: dict[tuple[SweepPoint, str], list[tuple[str, str]]] = defaultdict(list)
    for point in points:
        for name in task_names:
            task = mteb.get_task(name)
            for subset in _missing_subsets(cache, point, task, overwrite_strategy):
                units[(point, name)].append((subset, str(_unit_folder(units_root, point, name, subset))))
    flat = [(point, name, subset, folder) for (point, name), items in units.items() for subset, folder in items]
    if not flat:
        return []
    runtime.init(address)
    ray = runtime.require_ray()
    if gpus_per_actor is None:
        gpus_per_actor = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    worker = ray.remote(SweepWorker).options(num_cpus=1, num_gpus=gpus_per_actor, max_restarts=-1, max_task_retries=-1)
    pool = ray.util.ActorPool([worker.remote(batch_size) for _ in range(min(actors, len(flat)))])
    done: list[tuple[str, str, str]] = []
    with tqdm(total=len(flat), desc="sweep on ray", unit="subset", disable=not show_progress) as bar:
        for result in pool.map_unordered(lambda actor, unit: actor.evaluate.remote(*unit), flat):
            done.append(result)
            bar.update(1)
    for (point, name), items in units.items():
        _merge_into(cache, point, mteb.get_task(name), [folder for _, folder in items], overwrite_strategy)
    shutil.rmtree(units_root, ignore_errors=True)
    return done


def _missing_subsets(cache: Any, point: SweepPoint, task: Any, overwrite_strategy: str) -> list[str]:
    """The task's subsets the results folder lacks for this point (all of them with ``always``)."""
    from mteb.results import TaskResult

    path = cache.get_task_result_path(task.metadata.name, point.meta())
    if overwrite_strategy == "always" or not path.is_file():
        return list(task.hf_subsets)
    missing = TaskResult.from_disk(path).get_missing_evaluations(task)
    return sorted({subset for subsets in missing.values() for subset in subsets})


def _unit_folder(root: Path, point: SweepPoint, task_name: str, subset: str) -> Path:
    key = hashlib.blake2b(repr((point, task_name, subset)).encode("utf-8"), digest_size=8).hexdigest()
    return root / key


def _merge_into(cache: Any, point: SweepPoint, task: Any, folders: list[str], overwrite_strategy: str) -> None:
    """Merge the units' one-subset results (onto the stored result) with mteb's ``TaskResult.merge``."""
    from mteb.cache import ResultCache
    from mteb.results import TaskResult

    meta = point.meta()
    path = cache.get_task_result_path(task.metadata.name, meta)
    merged = TaskResult.from_disk(path) if path.is_file() and overwrite_strategy != "always" else None
    for folder in folders:
        part = TaskResult.from_disk(ResultCache(folder).get_task_result_path(task.metadata.name, meta))
        merged = part if merged is None else merged.merge(part)
    if merged is not None:
        cache.save_to_cache(merged, meta)
