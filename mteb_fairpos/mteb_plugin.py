"""Registration of the plugin's models, tasks and the ``FairPos`` benchmark with mteb.

mteb 2.x has no plugin API, so :func:`register` writes into its private registries (mteb's minor
version is pinned in ``pyproject.toml`` and ``tests/mteb/test_mteb_plugin.py`` proves each step):

* models: ``mteb.models.model_implementations.MODEL_REGISTRY`` (a dict, name -> ModelMeta);
* tasks: ``mteb.get_tasks._TASKS_REGISTRY`` (name -> class), ``mteb.get_tasks.TASK_LIST``
  (a tuple, rebound) and ``mteb.get_tasks._SIMILAR_TASKS``;
* benchmarks: a ``Benchmark`` attribute of ``mteb.benchmarks.benchmarks``, after which the
  ``lru_cache`` of ``mteb.benchmarks.get_benchmark._build_registry`` (and of the alias
  registry) is cleared;
* results: ``mteb.cache.ResultCache.save_to_cache`` is wrapped so that each save also writes the
  per-unit sidecar beside the result file (`mteb_fairpos.results.units.install`).

An installed package calls :func:`register` automatically whenever mteb is imported (the
``mteb_fairpos_hook.pth`` file and the top-level module ``_mteb_fairpos_hook``). Calling it again is
harmless: every step is idempotent and picks up tasks added since.

Extra tasks for the plain ``mteb`` command: ``MTEB_FAIRPOS_EXTRA_TASKS=pkg.module,other.module``
registers the tasks of those modules too (their ``TASKS`` list, else every task class they define).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

BENCHMARK_NAME = "FairPos"
SMALL_BENCHMARK_NAME = "FairPosSmall"
_BENCHMARKS = {
    BENCHMARK_NAME: ("MTEB_FAIRPOS_BENCHMARK", "Position fairness (mteb-fairpos)",
                     "Positional bias of document embeddings, each measurement once: the permutation fairness probe "
                     "and the position-aware retrieval tasks SQuAD-PosQ, FineWeb-PosQ and PosIR (both settings) of "
                     "the mteb-fairpos plugin."),
    SMALL_BENCHMARK_NAME: ("MTEB_FAIRPOS_BENCHMARK_SMALL", "Position fairness, small (mteb-fairpos)",
                           "A quick look at positional bias: the Tiny samples of SQuAD-PosQ and FineWeb-PosQ and the "
                           "permutation probe on the bundled sample."),
}
ENV_EXTRA_TASKS = "MTEB_FAIRPOS_EXTRA_TASKS"
MODEL_PROVIDERS: list[str] = [
    "mteb_fairpos.mteb_models:model_metas",  # fair/<model> and the twins fair-off/<model>
    "mteb_fairpos.sea:SEA_MODELS",  # the Segment Embed Average baseline, sea/<model>
]
"""``module:attribute`` of each list (or function returning a list) of ModelMeta entries to register."""


class RegistrationWarning(UserWarning):
    """Something of the plugin could not be registered with mteb."""


@dataclass
class Registration:
    """What one :func:`register` call did."""

    models: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    benchmark: str | None = None
    skipped: list[str] = field(default_factory=list)


def register() -> Registration:
    """Register the plugin's models, tasks and benchmark with mteb (idempotent).

    With an mteb outside the range this package pins, nothing is registered and one warning says
    so: the private registries written here may have changed, and half a plugin is worse than none.
    """
    report = Registration()
    unsupported = unsupported_mteb()
    if unsupported is not None:
        report.skipped.append(unsupported)
        warnings.warn(f"mteb-fairpos: {unsupported}", RegistrationWarning, stacklevel=2)
        return report
    report.models = register_models(_plugin_model_metas(report), report)
    from .tasks import TASKS

    report.tasks = register_tasks(TASKS, report)
    extra = _extra_tasks()
    if extra:
        report.tasks += register_tasks(extra, report)
    from .tasks import BENCHMARK_TASKS, SMALL_BENCHMARK_TASKS

    report.benchmark = register_benchmark([cls.metadata.name for cls in BENCHMARK_TASKS], report)
    register_benchmark([cls.metadata.name for cls in SMALL_BENCHMARK_TASKS], report, name=SMALL_BENCHMARK_NAME)
    from .results import units

    units.install()
    for problem in report.skipped:
        warnings.warn(f"mteb-fairpos: {problem}", RegistrationWarning, stacklevel=2)
    _warn_invalid_calibration()
    return report


def unsupported_mteb() -> str | None:
    """Why the installed mteb is outside the range this package pins (its own metadata), or None."""
    import importlib.metadata

    import mteb
    from packaging.requirements import Requirement

    try:
        pinned = next(Requirement(r) for r in importlib.metadata.requires("mteb-fairpos") or []
                      if Requirement(r).name == "mteb")
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        return None  # run from a source tree without metadata: nothing to compare with
    version = getattr(mteb, "__version__", "unknown")
    if pinned.specifier.contains(version, prereleases=True):
        return None
    return (f"mteb {version} is installed, but this release of mteb-fairpos supports mteb{pinned.specifier} only "
            "(it registers into mteb's private registries); nothing was registered. Install a matching mteb "
            f'(pip install "mteb{pinned.specifier}") or a newer mteb-fairpos.')


# ---------------------------------------------------------------------------------- models
def _plugin_model_metas(report: Registration) -> list:
    metas = []
    for spec in MODEL_PROVIDERS:
        module_name, _, attribute = spec.partition(":")
        try:
            provided = getattr(importlib.import_module(module_name), attribute)
            metas.extend(provided() if callable(provided) else provided)
        except Exception as err:  # one broken provider must not hide the others
            report.skipped.append(f"models of {spec} not registered: {type(err).__name__}: {err}")
    return metas


def register_models(metas: Iterable, report: Registration | None = None) -> list[str]:
    """Add ModelMeta entries to mteb's model registry; a foreign entry of the same name is kept."""
    from mteb.models.model_implementations import MODEL_REGISTRY

    added = []
    for meta in metas:
        current = MODEL_REGISTRY.get(meta.name)
        if current is not None and not _is_ours(current.loader):
            if report is not None:
                report.skipped.append(f"model {meta.name} is already an mteb model; the plugin's entry is not registered.")
            continue
        MODEL_REGISTRY[meta.name] = meta
        added.append(meta.name)
    return added


def _is_ours(obj: object) -> bool:
    target = getattr(obj, "func", obj)  # functools.partial loaders
    return getattr(target, "__module__", "").split(".")[0] == "mteb_fairpos"


# ---------------------------------------------------------------------------------- tasks
def register_tasks(task_classes: Iterable[type], report: Registration | None = None) -> list[str]:
    """Add task classes to mteb's task registry (``get_task``/``get_tasks``/``mteb run -t``)."""
    registry = importlib.import_module("mteb.get_tasks")
    tasks = registry._TASKS_REGISTRY
    added: list[type] = []
    replaced: set[str] = set()
    for cls in task_classes:
        name = cls.metadata.name
        current = tasks.get(name)
        if current is cls:
            continue
        if current is not None:
            if not (_is_ours(current) or current.__module__ == cls.__module__):
                if report is not None:
                    report.skipped.append(f"task {name} is already registered by {current.__module__}; "
                                          f"{cls.__module__}.{cls.__qualname__} is not registered.")
                continue
            replaced.add(name)  # a newer definition of the same task (e.g. after a reload)
        tasks[name] = cls
        added.append(cls)
        for parent in (cls.metadata.adapted_from or []):
            registry._SIMILAR_TASKS[parent].append(name)
        if cls.metadata.superseded_by:
            registry._SIMILAR_TASKS[cls.metadata.superseded_by].append(name)
    if added:
        kept = tuple(t for t in registry.TASK_LIST if t.metadata.name not in replaced)
        registry.TASK_LIST = kept + tuple(added)
        routes = sys.modules.get("mteb.api.routes")  # the API server imports TASK_LIST by value
        if routes is not None and hasattr(routes, "TASK_LIST"):
            routes.TASK_LIST = registry.TASK_LIST
    return [cls.metadata.name for cls in added]


def _extra_tasks() -> list[type]:
    names = [n.strip() for n in os.environ.get(ENV_EXTRA_TASKS, "").split(",") if n.strip()]
    if not names:
        return []
    from mteb.abstasks import AbsTask

    found: list[type] = []
    for module_name in names:
        module = importlib.import_module(module_name)
        listed = getattr(module, "TASKS", None)
        if listed is None:
            listed = [
                obj for obj in vars(module).values()
                if isinstance(obj, type) and issubclass(obj, AbsTask) and obj.__module__ == module.__name__
                and getattr(obj, "metadata", None) is not None
            ]
        found.extend(listed)
    return found


# ---------------------------------------------------------------------------------- benchmark
def registered_task(name: str) -> Any:
    """The mteb task ``name`` names: mteb's own, or for a task of this package run with settings other than its
    defaults, whose name carries them (``PermutationFairness.sets-3``, ``SQuADPosQ.queries-500``), the task it
    varies. Raises mteb's ``KeyError`` for a name it does not know either way."""
    from mteb.get_tasks import get_task

    try:
        return get_task(name)
    except KeyError:
        base, dot, _ = name.partition(".")
        if not dot:
            raise
        task = get_task(base)
        if not _is_ours(task):
            raise
        return task


def register_benchmark(task_names: list[str], report: Registration | None = None, *,
                       name: str = BENCHMARK_NAME) -> str | None:
    """The ``FairPos`` (full tasks, each measurement once) or ``FairPosSmall`` (the small samples)
    benchmark over ``task_names``; ``None`` while there are none."""
    if not task_names:
        return None
    from mteb.benchmarks.benchmark import Benchmark
    from mteb.get_tasks import get_tasks

    attribute, display_name, description = _BENCHMARKS[name]
    module = importlib.import_module("mteb.benchmarks.benchmarks")
    existing = getattr(module, attribute, None)
    if existing is not None and [t.metadata.name for t in existing.tasks] == list(task_names):
        return existing.name
    clash = [v for k, v in vars(module).items() if isinstance(v, Benchmark) and v.name == name and k != attribute]
    if clash:
        if report is not None:
            report.skipped.append(f"benchmark {name} already exists in mteb; the plugin's is not registered.")
        return None
    setattr(module, attribute, Benchmark(
        name=name,
        display_name=display_name,
        tasks=get_tasks(tasks=list(task_names)),
        description=description,
        reference="https://arxiv.org/abs/2601.16934",
    ))
    cache = importlib.import_module("mteb.benchmarks.get_benchmark")
    cache._build_registry.cache_clear()
    cache._build_aliases_registry.cache_clear()
    return name


def _warn_invalid_calibration() -> None:
    from .mteb_models import configured_calibrations

    _, problems = configured_calibrations()
    for problem in problems:
        warnings.warn(f"mteb-fairpos: {problem}; that config is not registered.", RegistrationWarning, stacklevel=3)
