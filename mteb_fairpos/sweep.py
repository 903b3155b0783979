"""A sweep: one model evaluated on some tasks over a grid of calibration configs.

The configs come from `mteb_fairpos.grid` (the retrieval paper's by default); a `SweepPoint` is
one of them (or the uncalibrated twin) as the mteb ``ModelMeta`` that `mteb.evaluate` runs and
names its results after.

`plan_sweep` turns points and task objects into units of work, (point, task, subsets), from what
the results folder lacks and what the data holds: a task's ``load_data`` is asked once which of its
declared subsets exist (a local copy of PosIR that holds some languages and domains lists only
those), and the subsets it lacks are named in the plan instead of being sent out to fail. Both
engines run the same plan: `run_sweep` here (in this process, the checkpoint loaded once for all
points through one `LoadedWeights`), and `mteb_fairpos.integrations.ray.sweep` (one Ray task per
unit subset). A unit that fails is named in one line (`Failure`) and the others' results still land.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import CalibrationConfig, whole

if TYPE_CHECKING:
    from .mteb_models import LoadedWeights

OVERWRITE_STRATEGIES = ("only-missing", "always", "never")
"""mteb's overwrite strategies a sweep accepts."""


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: a plugin model's base with one calibration (``None``: the uncalibrated twin)."""

    model: str
    calibration: CalibrationConfig | None
    device: str | None = None
    max_length: int | None = None
    """A length other than the model's own is an mteb experiment: its own results folder."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise TypeError(f"model must be a plugin model's name (fair/<model>, or its base), got {self.model!r}.")
        if self.device is not None and not isinstance(self.device, str):
            raise TypeError(f"device must be a torch device's name (cpu, cuda, cuda:1), or None; got {self.device!r}.")
        if self.calibration is not None and not isinstance(self.calibration, CalibrationConfig):
            raise TypeError(f"calibration must be a CalibrationConfig or None (the twin), got {type(self.calibration).__name__}; "
                            "CalibrationConfig.parse(text) reads a text form.")
        if self.max_length is not None and (not whole(self.max_length) or self.max_length < 1):
            raise ValueError(f"max_length must be None (the model's own) or a positive integer, got {self.max_length!r}.")

    def meta(self) -> Any:
        """The mteb ``ModelMeta`` of this point (named ``fair/<model>-<config>`` or ``fair-off/<model>``)."""
        from .mteb_models import base_model, calibrated_name, fair_model_meta

        meta = fair_model_meta(calibrated_name(base_model(self.model)), self.calibration)
        if self.device:
            meta = meta.model_copy(update={"loader_kwargs": {**meta.loader_kwargs, "device": self.device}})
        if self.max_length:
            meta = meta.model_copy(update={"experiment_kwargs": {"max_seq_length": self.max_length}})
        return meta


@dataclass(frozen=True)
class Unit:
    """Work for one grid point on one task: the subsets to evaluate."""

    point: SweepPoint
    task: str
    subsets: tuple[str, ...]


@dataclass(frozen=True)
class Failure:
    """A unit (or a task's data) that could not be evaluated, and why, in one line."""

    task: str
    error: str
    model: str | None = None
    """The grid point's model name; ``None`` when the task's data could not be read at all."""
    subsets: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.model} on {self.task}" if self.model else self.task
        if self.subsets:
            where += f" ({', '.join(self.subsets)})"
        return f"{where}: {self.error}"


@dataclass
class SweepPlan:
    """The units of a sweep, from its points, its task objects and a results folder."""

    points: list[SweepPoint]
    tasks: dict[str, Any]
    """Task objects by name, their data listed (`absent` subsets removed)."""
    templates: dict[str, Any]
    """The same task objects before loading, as a worker elsewhere rebuilds them (no data inside)."""
    units: list[Unit] = field(default_factory=list)
    absent: dict[str, list[str]] = field(default_factory=dict)
    """Per task, the declared subsets its data lacks: named, never evaluated."""
    failures: list[Failure] = field(default_factory=list)
    overwrite_strategy: str = "only-missing"
    """What the units were planned under: the run must write under it too (``always`` would drop stored subsets
    the plan kept)."""

    def pending(self, point: SweepPoint) -> list[Unit]:
        return [unit for unit in self.units if unit.point == point]


def plan_sweep(points: Sequence[SweepPoint], tasks: Sequence[Any], cache: Any,
               overwrite_strategy: str = "only-missing") -> SweepPlan:
    """The units of work the results folder behind ``cache`` lacks, for every point and task.

    A task with work left is asked once (``load_data``) which of its subsets its data holds; a
    task whose data cannot be read becomes a `Failure` and the other tasks are planned as usual.
    """
    if overwrite_strategy not in OVERWRITE_STRATEGIES:
        raise ValueError(f"overwrite_strategy must be one of {OVERWRITE_STRATEGIES}, got {overwrite_strategy!r}.")
    if not callable(getattr(cache, "get_task_result_path", None)):
        raise TypeError(f"cache must be an mteb ResultCache (mteb.cache.ResultCache(folder)), got {type(cache).__name__}.")
    if isinstance(tasks, str):
        raise TypeError(f"tasks must be a list of mteb tasks (mteb.get_tasks(tasks=[...])), got the text {tasks!r}.")
    tasks = list(tasks)  # checked, then planned: a generator would be spent by the check
    if bad := [task for task in tasks if not hasattr(task, "metadata")]:
        raise TypeError(f"tasks must be mteb tasks (mteb.get_tasks(tasks=[...])), got {bad[0]!r}.")
    points = list(points)
    if bad := [point for point in points if not isinstance(point, SweepPoint)]:
        raise TypeError(f"points must be SweepPoints, got {bad[0]!r}.")
    files = [(point.meta().name, point.max_length) for point in points]  # a point's result file: its name and length
    if repeated := [point for number, point in enumerate(points) if files[number] in files[:number]]:
        raise ValueError(f"the grid point {repeated[0].meta().name} (max_length {repeated[0].max_length}) is given twice; "
                         "the two would be run into one result file.")
    plan = SweepPlan(points, {}, {}, overwrite_strategy=overwrite_strategy)
    for task in tasks:
        name = task.metadata.name
        declared = list(task.hf_subsets)
        wanted = {point: _wanted_subsets(cache, point, task, overwrite_strategy) for point in points}
        plan.templates[name] = task if task.data_loaded else copy.deepcopy(task)  # never copy loaded data
        plan.tasks[name] = task
        if not any(wanted.values()):
            continue
        try:
            task.load_data()
        except Exception as err:  # noqa: BLE001 -- named in one line; the other tasks go on
            plan.failures.append(Failure(name, one_line(err)))
            continue
        present = set(task.hf_subsets)
        absent = [subset for subset in declared if subset not in present]
        if absent:
            plan.absent[name] = absent
        for point in points:
            subsets = tuple(subset for subset in wanted[point] if subset in present)
            if subsets:
                plan.units.append(Unit(point, name, subsets))
    return plan


def _wanted_subsets(cache: Any, point: SweepPoint, task: Any, overwrite_strategy: str) -> list[str]:
    """The task's subsets to evaluate for this point under mteb's overwrite strategy."""
    from mteb.results import TaskResult

    path = cache.get_task_result_path(task.metadata.name, point.meta())
    if overwrite_strategy == "always" or not path.is_file():
        return list(task.hf_subsets)
    if overwrite_strategy == "never":
        return []
    try:
        stored = TaskResult.from_disk(path)
    except Exception as err:  # noqa: BLE001 -- JSON, pydantic and mteb's own conversions each raise their own
        raise ValueError(f"{path}: not a readable mteb result ({one_line(err)}); move it away, or rerun it with "
                         "overwrite strategy 'always'.") from None
    missing = stored.get_missing_evaluations(task)
    return [subset for subset in task.hf_subsets if any(subset in subsets for subsets in missing.values())]


def one_line(err: BaseException) -> str:
    """``Type: first line of the message``: how a failed unit is named."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def planned_strategy(plan: SweepPlan, overwrite_strategy: str | None) -> str:
    """The plan's overwrite strategy; another one given to the run is refused (its units were chosen under the plan's)."""
    if overwrite_strategy is not None and overwrite_strategy != plan.overwrite_strategy:
        raise ValueError(f"the plan was made with overwrite strategy {plan.overwrite_strategy!r}, not "
                         f"{overwrite_strategy!r}; make it with plan_sweep(..., overwrite_strategy={overwrite_strategy!r}).")
    return plan.overwrite_strategy


def run_sweep(plan: SweepPlan, cache: Any, *, weights: LoadedWeights | None = None, encode_kwargs: dict[str, Any] | None = None,
              overwrite_strategy: str | None = None, show_progress: bool = True,
              on_point: Callable[[int, SweepPoint, bool], None] | None = None) -> list[Failure]:
    """Evaluate the plan's units in this process; returns the failures (each unit's own).

    The checkpoint is loaded once (``weights``, a `LoadedWeights`; a new one by default) and only
    for a point with work left. ``on_point(number, point, has_work)`` is called before each point.
    """
    import mteb

    from .mteb_models import LoadedWeights, build_encoder

    overwrite_strategy = planned_strategy(plan, overwrite_strategy)
    weights = weights if weights is not None else LoadedWeights()
    failures: list[Failure] = []
    for number, point in enumerate(plan.points, start=1):
        units = plan.pending(point)
        if on_point is not None:
            on_point(number, point, bool(units))
        if not units:
            continue
        meta = point.meta()
        try:
            encoder = build_encoder(meta, weights=weights)
        except Exception as err:  # noqa: BLE001 -- the point fails, the others go on
            failures += [Failure(unit.task, one_line(err), meta.name, unit.subsets) for unit in units]
            continue
        for unit in units:
            try:
                mteb.evaluate(encoder, plan.tasks[unit.task], cache=cache, overwrite_strategy=overwrite_strategy,
                              encode_kwargs={**({} if show_progress else {"show_progress_bar": False}), **(encode_kwargs or {})},
                              show_progress_bar=show_progress)  # quiet: mteb's encode and search read the first
            except Exception as err:  # noqa: BLE001 -- the unit fails, the others go on
                failures.append(Failure(unit.task, one_line(err), meta.name, unit.subsets))
                continue
            if left := left_out(plan.tasks[unit.task], unit.subsets):
                failures.append(Failure(unit.task, LEFT_OUT, meta.name, left))
    return failures


LEFT_OUT = "no query left to evaluate; left out of the result"
"""Why a subset a task evaluated did not land though nothing failed (PosIR: a subset with no query left to score)."""


def left_out(task: Any, subsets: Sequence[str]) -> tuple[str, ...]:
    """Those of ``subsets`` the task evaluated and left out of its result (`LEFT_OUT`)."""
    return tuple(subset for subset in subsets if subset in getattr(task, "skipped_subsets", ()))


def read_results(plan: SweepPlan, cache: Any) -> list[tuple[SweepPoint, Any]]:
    """Every (point, mteb ``TaskResult``) the results folder holds for the plan, in plan order."""
    from mteb.results import TaskResult

    found = []
    for point in plan.points:
        meta = point.meta()
        for name in plan.tasks:
            path = cache.get_task_result_path(name, meta)
            if path.is_file():
                found.append((point, TaskResult.from_disk(path)))
    return found
