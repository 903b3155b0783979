"""A sweep fanned out over Ray: one task per (grid point, mteb task) on a pool of workers.

Each worker registers the plugin, keeps the checkpoint loaded once for every grid point it
evaluates (`shared_weights`), and writes mteb's ordinary result files into the one results
folder (on a cluster: storage every node mounts). What is already there is not sent out again,
so a re-run resumes; ``mteb-fairpos compare`` and the sweep's own table read the folder back.
A worker that dies is restarted and its task retried by Ray.

The unit is a whole task, not one of its subsets: mteb keeps all subsets of a task in one result
file per model, and two workers writing one file would race.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...sweep import SweepPoint, is_cached
from . import runtime


class SweepWorker:
    """Evaluates (grid point, task) units into a results folder; the checkpoint is loaded once per worker."""

    def __init__(self, output_folder: str, batch_size: int | None, show_progress: bool) -> None:
        from ...mteb_models import shared_weights
        from ...mteb_plugin import register

        register()
        self._shared = shared_weights()
        self._shared.__enter__()  # for the worker's life: every grid point reuses the loaded checkpoint
        self.output_folder = output_folder
        self.encode_kwargs = {"batch_size": batch_size} if batch_size else {}
        self.show_progress = show_progress

    def evaluate(self, point: SweepPoint, task_name: str, overwrite_strategy: str) -> tuple[str, str]:
        import mteb
        from mteb.cache import ResultCache

        meta = point.meta()
        mteb.evaluate(meta, mteb.get_tasks(tasks=[task_name]), cache=ResultCache(self.output_folder),
                      overwrite_strategy=overwrite_strategy, encode_kwargs=dict(self.encode_kwargs),
                      show_progress_bar=self.show_progress)
        return meta.name, task_name


def run_sweep(points: Sequence[SweepPoint], task_names: Sequence[str], output_folder: str | Path, *, actors: int = 1,
              gpus_per_actor: float | None = None, address: str | None = None, batch_size: int | None = None,
              overwrite_strategy: str = "only-missing", show_progress: bool = True) -> list[tuple[str, str]]:
    """Evaluate every (point, task) not yet in ``output_folder`` on Ray; returns the units run (model, task)."""
    from mteb.cache import ResultCache
    from tqdm.auto import tqdm

    if actors < 1:
        raise ValueError(f"actors must be >= 1, got {actors}.")
    cache = ResultCache(output_folder)
    units = [(point, task) for point in points for task in task_names
             if overwrite_strategy == "always" or not is_cached(cache, point, task)]
    if not units:
        return []
    runtime.init(address)
    ray = runtime.require_ray()
    if gpus_per_actor is None:
        gpus_per_actor = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    worker = ray.remote(SweepWorker).options(num_cpus=1, num_gpus=gpus_per_actor, max_restarts=-1, max_task_retries=-1)
    pool = ray.util.ActorPool([worker.remote(str(output_folder), batch_size, False)
                               for _ in range(min(actors, len(units)))])
    done: list[tuple[str, str]] = []
    with tqdm(total=len(units), desc="sweep on ray", unit="task", disable=not show_progress) as bar:
        for result in pool.map_unordered(lambda actor, unit: actor.evaluate.remote(*unit, overwrite_strategy), units):
            done.append(result)
            bar.update(1)
    return done
