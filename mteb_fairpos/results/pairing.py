"""Intervals and paired changes from a result's per-unit sidecar: the one place where each kind of task
says how its units become its headline figures (docs/method.md#s5).

A kind (the sidecar's ``kind``) is a :class:`Kind`: how a result's sidecar rows become the kind's unit
scores, its headline intervals, and the paired changes of one result against another (the calibrated
model against its twin) on the units both were scored on. ``compare`` and the leaderboard page ask
:func:`headline` and :func:`change` only; the ``retrieval`` kind is implemented here (queries, stratified
as the task pools its subsets, `mteb_fairpos.retrieval_intervals`); another kind (the probe's
observations clustered by segment set and topic) is added to `KINDS`.

A result without a sidecar (one of an earlier release) has no intervals: its change against the twin
is the plain difference of the two numbers, marked as without an interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..resampling import Resampling
from .schema import Estimate

MEASURES = ("main", "psi")
"""What a page column or a compare row shows of a task: its main score and its PSI."""


@dataclass(frozen=True)
class Kind:
    """How one kind of task turns its sidecar into figures."""

    units: Callable[[Any, Any, list[str]], Any]
    """(sidecar, mteb task or ``None``, group labels in order) -> the unit scores."""
    intervals: Callable[[Any, Resampling], dict[str, Estimate]]
    """unit scores -> figure -> estimate with interval."""
    changes: Callable[[Any, Any, Resampling], tuple[dict[str, Estimate], int]]
    """(model's, baseline's unit scores) -> figure -> paired change, and how many units were paired."""
    figure: Callable[[Any, str], str]
    """(mteb task or ``None``, measure) -> the figure name of a measure."""


# ------------------------------------------------------------------------------------- retrieval
def _retrieval_units(sidecar: Any, task: Any, labels: list[str]) -> Any:
    from ..retrieval_intervals import QueryScores

    stratum = getattr(task, "unit_stratum", None) or (lambda subset: subset)
    scores: dict[str, float] = {}
    groups: dict[str, list[str | None]] = {}
    strata: dict[str, str] = {}
    for (split, subset), table in sidecar.tables.items():
        ids = table.column("unit").to_pylist()
        found = table.column("group").to_pylist()
        values = table.column("score").to_numpy().astype(np.float64)
        layer = stratum(subset)
        for qid, group, value in zip(ids, found, values, strict=True):
            key = f"{split}/{subset}/{qid}"
            scores[key] = float(value)
            groups.setdefault(key, []).append(group)
            strata[key] = layer
    ordered = list(labels) + sorted({g for gs in groups.values() for g in gs if g is not None} - set(labels))
    return QueryScores.build(scores, groups, ordered, strata)


def _retrieval_intervals(units: Any, resampling: Resampling) -> dict[str, Estimate]:
    from ..retrieval_intervals import intervals

    return intervals(units, resampling)


def _retrieval_changes(model: Any, baseline: Any, resampling: Resampling) -> tuple[dict[str, Estimate], int]:
    from ..retrieval_intervals import paired_changes

    found = paired_changes(model, baseline, resampling)
    return found.changes, found.paired


def _retrieval_figure(task: Any, measure: str) -> str:
    if measure == "psi":
        return "psi"
    main = getattr(getattr(task, "metadata", None), "main_score", None)
    return main if main in ("harmonic_mean", "ndcg_at_10") else "harmonic_mean"


KINDS: dict[str, Kind] = {"retrieval": Kind(_retrieval_units, _retrieval_intervals, _retrieval_changes, _retrieval_figure)}
"""kind -> how its sidecars become figures."""


# ------------------------------------------------------------------------------------- reports
@dataclass(frozen=True)
class Change:
    """A change against the twin as a report shows it."""

    value: float
    interval: tuple[float, float] | None = None
    pvalue: float | None = None
    paired: int | None = None
    """units paired (the queries both results scored); ``None``: no sidecar, a plain difference."""
    why: str = ""
    """why there is no interval, where there is none."""

    def verdict(self, higher_is_better: bool) -> str:
        """``better`` / ``worse`` only when the interval excludes 0; ``not significant`` when it spans it;
        ``no interval`` without one."""
        if self.interval is None:
            return "no interval"
        low, high = self.interval
        if low <= 0 <= high:
            return "not significant"
        return "better" if (low > 0) == higher_is_better else "worse"

    def text(self) -> str:
        """``+0.0123 [0.0050, 0.0190] p=0.002 (1,000 queries paired)`` or ``+0.0123 (no interval: ...)``."""
        if self.interval is None:
            return f"{self.value:+.4f} (no interval: {self.why})"
        p = "" if self.pvalue is None else (" p<0.001" if self.pvalue < 0.001 else f" p={self.pvalue:.3f}")
        return f"{self.value:+.4f} [{self.interval[0]:+.4f}, {self.interval[1]:+.4f}]{p} ({self.paired:,} paired)"


def headline(units: Any, kind: str, task: Any, resampling: Resampling) -> dict[str, Estimate]:
    """Measure (`MEASURES`) -> its value with interval, from a result's unit scores."""
    known = KINDS[kind]
    found = known.intervals(units, resampling)
    return {measure: found[known.figure(task, measure)] for measure in MEASURES if known.figure(task, measure) in found}


def change(model: Any, baseline: Any, measure: str, *, point: float | None = None) -> Change | None:
    """The change of ``measure`` from ``baseline``'s result to ``model``'s (`TaskScores` of the same task):
    paired on their shared units where both have a valid sidecar of the same kind, else the plain
    difference of the two values (``point``, when given, else their stored values)."""
    plain = point if point is not None else _difference(model, baseline, measure)
    if model.units is None or baseline.units is None or model.unit_kind != baseline.unit_kind:
        missing = "no per-unit scores for " + " or ".join(
            label for label, scores in (("this result", model), ("the twin", baseline)) if scores.units is None) if (
            model.units is None or baseline.units is None) else "the two sidecars are of different kinds"
        return None if plain is None else Change(plain, why=missing)
    known = KINDS[model.unit_kind]
    try:
        changes, paired = _cached_changes(model, baseline)
    except ValueError as err:
        return None if plain is None else Change(plain, why=str(err))
    estimate = changes.get(known.figure(model.task_object, measure))
    if estimate is None or estimate.value is None or estimate.interval is None:
        return None if plain is None else Change(plain, why="undefined in most resamples")
    return Change(estimate.value, estimate.interval, estimate.pvalue, paired)


def _cached_changes(model: Any, baseline: Any) -> tuple[dict[str, Estimate], int]:
    key = id(baseline.units)
    if key not in model.changes_cache:
        known = KINDS[model.unit_kind]
        model.changes_cache[key] = known.changes(model.units, baseline.units, model.resampling or Resampling())
    return model.changes_cache[key]


def _difference(model: Any, baseline: Any, measure: str) -> float | None:
    a, b = (model.main_score, baseline.main_score) if measure == "main" else (model.psi, baseline.psi)
    return None if a is None or b is None else a - b
