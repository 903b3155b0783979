"""Intervals and paired changes from a result's per-unit sidecar: the one place where each kind of task
says how its units become its headline figures (docs/method.md#s5).

A kind (the sidecar's ``kind``) is a :class:`Kind`: how a result's sidecar rows become the kind's unit
scores, its headline intervals, and the paired changes of one result against another (the calibrated
model against its twin) on the units both were scored on. ``compare`` and the leaderboard page ask
:func:`headline` and :func:`change` only, for a measure (`MEASURES`, or ``fairness`` of one subset). Two
kinds: ``retrieval`` (queries, stratified as the task pools its subsets, `mteb_fairpos.retrieval_intervals`)
and ``probe`` (each subset's observations, clustered by segment set and topic,
`mteb_fairpos.permutation.fairness_bootstrap`; the probe's main score, the mean over subsets, from all
subsets resampled together, since they share topics across languages).

A result without a sidecar (one of an earlier release) has no intervals: its change against the twin
is the plain difference of the two numbers, marked as without an interval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..resampling import Resampling
from .schema import Estimate

MEASURES = ("main", "psi")
"""What a page column or a compare row shows of a task: its main score and its PSI."""


def measure_key(measure: str, subset: str = "") -> str:
    """The key of a measure in `TaskScores.headline`: ``main``, ``psi``, ``fairness n3_en``."""
    return f"{measure} {subset}" if subset else measure


def measure_of(key: str) -> tuple[str, str]:
    """(measure, subset) of a `measure_key`."""
    measure, _, subset = key.partition(" ")
    return measure, subset


@dataclass(frozen=True)
class Paired:
    """The paired changes of one result against another: figure -> change, how many units each paired, and
    why a figure has none."""

    changes: dict[str, Estimate]
    paired: dict[str, int]
    why: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Kind:
    """How one kind of task turns its sidecar into figures."""

    units: Callable[[Any, Any, list[str]], Any]
    """(sidecar, mteb task or ``None``, group labels in order) -> the unit scores."""
    intervals: Callable[[Any, Resampling], dict[str, Estimate]]
    """unit scores -> figure -> estimate with interval."""
    changes: Callable[[Any, Any, Resampling], Paired]
    """(model's, baseline's unit scores) -> the paired changes."""
    figure: Callable[[Any, str, str], str]
    """(mteb task or ``None``, measure, subset) -> the figure name of a measure."""
    measures: Callable[[Any], list[tuple[str, str]]] = lambda units: [(m, "") for m in MEASURES]
    """unit scores -> the (measure, subset) pairs a result shows."""
    counted: bool = False
    """Whether its changes' p-values are counted from resamples (and so never below ``2 / (R + 1)``), not a t test's."""


# ------------------------------------------------------------------------------------- retrieval
def _retrieval_units(sidecar: Any, task: Any, labels: list[str]) -> Any:
    from ..retrieval_intervals import QueryScores

    stratum = getattr(task, "unit_stratum", None) or (lambda subset: subset)
    corpus = getattr(task, "unit_corpus", None) or (lambda subset: subset)
    scores: dict[str, float] = {}
    groups: dict[str, list[str | None]] = {}
    strata: dict[str, str] = {}
    clusters: dict[str, str] = {}  # a sidecar written before clusters were recorded has none: queries drawn alone
    for (split, subset), table in sidecar.tables.items():
        ids = table.column("unit").to_pylist()
        found = table.column("group").to_pylist()
        values = table.column("score").to_numpy().astype(np.float64)
        cluster_column = table.column("cluster").to_pylist() if "cluster" in table.column_names else [None] * len(ids)
        layer, searched = stratum(subset), corpus(subset)
        for qid, group, value, cluster in zip(ids, found, values, cluster_column, strict=True):
            key = f"{split}/{subset}/{qid}"
            scores[key] = float(value)
            groups.setdefault(key, []).append(group)
            strata[key] = layer
            if cluster is not None:  # a document is shared by the subsets that search its corpus
                clusters[key] = f"{split}/{searched}/{cluster}"
    ordered = list(labels) + sorted({g for gs in groups.values() for g in gs if g is not None} - set(labels))
    return QueryScores.build(scores, groups, ordered, strata, clusters or None)


def _retrieval_intervals(units: Any, resampling: Resampling) -> dict[str, Estimate]:
    from ..retrieval_intervals import intervals

    return intervals(units, resampling)


def _retrieval_changes(model: Any, baseline: Any, resampling: Resampling) -> Paired:
    from ..retrieval_intervals import paired_changes

    found = paired_changes(model, baseline, resampling)
    return Paired(found.changes, dict.fromkeys(found.changes, found.paired))


def _retrieval_figure(task: Any, measure: str, subset: str) -> str:
    if measure == "psi":
        return "psi"
    if measure != "main":  # a probe's fairness: no figure of a retrieval result, so none is paired in its place
        return measure_key(measure, subset)
    main = getattr(getattr(task, "metadata", None), "main_score", None)
    return main if main in ("harmonic_mean", "ndcg_at_10") else "harmonic_mean"


# ------------------------------------------------------------------------------------- probe
@dataclass(frozen=True)
class ProbeRows:
    """One probe subset's observations (sidecar rows), in the sidecar's order."""

    units: np.ndarray
    """``document:position`` ids."""
    positions: np.ndarray
    sets: np.ndarray
    topics: np.ndarray
    values: np.ndarray
    """the measure per observation (sigma, or tau for a ``tau <subset>`` family); NaN: not measured."""

    def take(self, rows: np.ndarray) -> ProbeRows:
        return ProbeRows(self.units[rows], self.positions[rows], self.sets[rows], self.topics[rows], self.values[rows])


def _pooled(parts: dict[str, ProbeRows]) -> tuple[ProbeRows, np.ndarray]:
    """The subsets' rows one after another, and each row's subset: the probe task's main score pools them."""
    order = list(parts)
    rows = ProbeRows(*(np.concatenate([getattr(parts[s], name) for s in order])
                       for name in ("units", "positions", "sets", "topics", "values")))
    return rows, np.repeat(np.asarray(order, dtype=object), [len(parts[s].units) for s in order])


TAU = "tau "
"""The prefix of a probe family measured with tau (`TaskScores.profiles`): its rows are the sidecar's ``tau`` column."""


def subsets_of(families: Iterable[str]) -> list[str]:
    """The probe subsets among profile ``families``, sorted: each subset's sigma family, without the pooled one
    (``""``) and the tau ones."""
    return sorted({family for family in families if family and not family.startswith(TAU)})


def _probe_units(sidecar: Any, task: Any, labels: list[str]) -> dict[str, ProbeRows]:
    """Each subset's sigma rows, and as family ``tau <subset>`` its tau rows where the sidecar holds measured tau
    (mean-pooled models; sidecars of earlier releases hold sigma only)."""
    found: dict[str, ProbeRows] = {}
    for (split, subset), table in sidecar.tables.items():
        missing = {"segment_set", "topic"} - set(table.column_names)
        if missing:
            raise ValueError(f"the probe's rows of split {split}, subset {subset} lack column(s) {sorted(missing)}.")
        if subset in found:
            raise ValueError(f"subset {subset} has rows in more than one split; the probe evaluates one.")
        ids = [np.asarray(table.column(name).to_pylist(), dtype=kind)
               for name, kind in (("unit", str), ("group", np.int64), ("segment_set", object), ("topic", object))]
        named, counts = np.unique(ids[0], return_counts=True)
        if (counts > 1).any():  # pairing would keep one of the rows, unsaid
            raise ValueError(f"subset {subset} holds observation {str(named[counts > 1][0])!r} {counts.max()} times; each "
                             "is one row.")
        found[subset] = ProbeRows(*ids, table.column("score").to_numpy().astype(np.float64))
        if "tau" in table.column_names:
            tau = table.column("tau").to_numpy(zero_copy_only=False).astype(np.float64)
            if np.isfinite(tau).any():
                found[TAU + subset] = ProbeRows(*ids, tau)
    return found


def _sigma(units: dict[str, Any]) -> dict[str, Any]:
    """The sigma subsets' entries: what the probe task's main score pools."""
    return {subset: rows for subset, rows in units.items() if not subset.startswith(TAU)}


def _missing(side: str, subset: str) -> str:
    """Why a family has no paired change when one side's sidecar holds no rows of it."""
    if subset.startswith(TAU):
        return (f"{side}'s per-unit scores hold no tau for subset {subset[len(TAU):]} (sidecars of earlier releases, and "
                "of cls or last-token models, hold sigma only)")
    return f"{side}'s per-unit scores hold no rows of subset {subset}"


def _probe_intervals(units: dict[str, ProbeRows], resampling: Resampling) -> dict[str, Estimate]:
    from ..permutation import fairness_bootstrap

    found = {}
    for subset, rows in units.items():
        try:
            boot = fairness_bootstrap(rows.values, rows.positions, rows.sets, rows.topics, resampling)
        except ValueError:  # one segment set or topic: no interval, the point stays the entry's
            continue
        found[measure_key("fairness", subset)] = boot.fairness.as_estimate()
    rows, strata = _pooled(_sigma(units))
    try:  # the main score: the mean over subsets, resampled together (they share topics across languages)
        found["main"] = fairness_bootstrap(rows.values, rows.positions, rows.sets, rows.topics, resampling,
                                           strata=strata).fairness.as_estimate()
    except ValueError:
        pass
    else:
        found["psi"] = _mirrored(found["main"], 1.0)
    return found


def _mirrored(estimate: Estimate, offset: float) -> Estimate:
    """``offset - estimate``, its interval turned round: the probe's PSI is one minus its main score (the mean
    fairness over subsets, docs/method.md#s5-1), so its interval and change are the main score's mirrored."""
    return dataclasses.replace(estimate, value=offset - estimate.value, ci_low=offset - estimate.ci_high,
                               ci_high=offset - estimate.ci_low)


def _probe_changes(model: dict[str, ProbeRows], baseline: dict[str, ProbeRows], resampling: Resampling) -> Paired:
    """Per subset, the change of fairness on the observations both results hold (same ``document:position``,
    same segment set and topic), resampled with the same draws for both (`fairness_bootstrap`)."""
    from ..permutation import fairness_bootstrap

    changes, paired, why = {}, {}, {}
    aligned: dict[str, tuple[ProbeRows, ProbeRows]] = {}
    for subset, mine in model.items():
        figure = measure_key("fairness", subset)
        theirs = baseline.get(subset)
        if theirs is None:
            why[figure] = _missing("the twin", subset)
            continue
        shared, at_mine, at_theirs = np.intersect1d(mine.units, theirs.units, return_indices=True)
        if len(shared) == 0:
            why[figure] = f"the two results share no observations of subset {subset}"
            continue
        a, b = mine.take(at_mine), theirs.take(at_theirs)
        differ = int(np.sum((a.sets != b.sets) | (a.topics != b.topics)))
        if differ:
            why[figure] = (f"{differ} of the {len(shared):,} shared observation ids of subset {subset} have another segment "
                           "set or topic in the twin's result (another corpus or selection): not the same observations")
            continue
        aligned[subset] = (a, b)
        try:
            boot = fairness_bootstrap(a.values, a.positions, a.sets, a.topics, resampling, baseline_values=b.values)
        except ValueError as err:
            why[figure] = f"subset {subset}: {err}"
            continue
        changes[figure], paired[figure] = boot.change.as_estimate(), len(shared)
    for subset in set(baseline) - set(model):
        why[measure_key("fairness", subset)] = _missing("this result", subset)
    aligned = _sigma(aligned)
    unpaired = sorted(set(_sigma(model)) - set(aligned))
    if unpaired:
        why["main"] = f"subset(s) {', '.join(unpaired)} could not be paired, so the mean over subsets is not either"
    else:
        (mine_rows, strata), (their_rows, _) = _pooled({s: a for s, (a, _) in aligned.items()}), \
            _pooled({s: b for s, (_, b) in aligned.items()})
        try:
            boot = fairness_bootstrap(mine_rows.values, mine_rows.positions, mine_rows.sets, mine_rows.topics, resampling,
                                      baseline_values=their_rows.values, strata=strata)
            changes["main"], paired["main"] = boot.change.as_estimate(), len(mine_rows.units)
        except ValueError as err:
            why["main"] = str(err)
    if "main" in changes:
        changes["psi"], paired["psi"] = _mirrored(changes["main"], 0.0), paired["main"]
    else:
        why["psi"] = why["main"]
    return Paired(changes, paired, why)


def _probe_figure(task: Any, measure: str, subset: str) -> str:
    return measure_key(measure, subset)


def _probe_measures(units: dict[str, ProbeRows]) -> list[tuple[str, str]]:
    return [("main", ""), ("psi", "")] + [("fairness", subset) for subset in units]


KINDS: dict[str, Kind] = {
    "retrieval": Kind(_retrieval_units, _retrieval_intervals, _retrieval_changes, _retrieval_figure, counted=True),
    "probe": Kind(_probe_units, _probe_intervals, _probe_changes, _probe_figure, _probe_measures),
}
"""kind -> how its sidecars become figures."""


# ------------------------------------------------------------------------------------- reports
@dataclass(frozen=True)
class Change:
    """A change against the twin as a report shows it."""

    value: float
    interval: tuple[float, float] | None = None
    pvalue: float | None = None
    paired: int | None = None
    """units paired (the queries or probe observations both results hold); ``None``: no sidecar, a plain difference."""
    why: str = ""
    """why there is no interval, where there is none."""
    resamples: int = 0
    """the resamples its p-value was counted from (0: a t test's, or no p-value)."""

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
        p = "" if self.pvalue is None else f" {format_p(self.pvalue)}"
        return f"{self.value:+.4f} {self.bracket()}{p} ({self.paired:,} paired)"

    def bracket(self) -> str:
        """The paired interval as :meth:`text` writes it, ``[-0.0050, +0.0190]``; ``""`` without one."""
        return "" if self.interval is None else f"[{self.interval[0]:+.4f}, {self.interval[1]:+.4f}]"


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the p-values that are there (``None`` or NaN: a change without a test, left out of
    the family); valid whatever the dependence between the changes, as a model's main score and PSI changes have."""
    from statsmodels.stats.multitest import multipletests

    outside = [p for p in pvalues if p is not None and p == p and not 0 <= p <= 1]
    if outside:
        raise ValueError(f"p-values lie in [0, 1]; got {outside[0]!r} (give None for a change without a test).")
    tested = [i for i, p in enumerate(pvalues) if p is not None and p == p]  # NaN: undefined, so no test either
    adjusted: list[float | None] = [None] * len(pvalues)
    if tested:
        for i, p in zip(tested, multipletests([pvalues[i] for i in tested], method="holm")[1], strict=True):
            adjusted[i] = float(p)
    return adjusted


def format_p(p: float) -> str:
    """``p<0.001`` or ``p=0.042``, as every table of the results writes a p-value (``p undefined`` for NaN)."""
    if p != p:
        return "p undefined"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def headline(units: Any, kind: str, task: Any, resampling: Resampling) -> dict[str, Estimate]:
    """Measure (`measure_key`) -> its value with interval, from a result's unit scores."""
    known = KINDS[kind]
    found = known.intervals(units, resampling)
    figures = {measure_key(m, s): known.figure(task, m, s) for m, s in known.measures(units)}
    return {key: found[figure] for key, figure in figures.items() if figure in found}


def change(model: Any, baseline: Any, measure: str, *, subset: str = "") -> Change | None:
    """The change of ``measure`` (of ``subset``, for a per-subset one) from ``baseline``'s result to
    ``model``'s (`TaskScores` of the same task): paired on their shared units where both have a valid sidecar
    of the same kind, else the plain difference of the two values (`TaskScores.figure`'s)."""
    plain = _difference(model, baseline, measure, subset)
    if model.units is None or baseline.units is None or model.unit_kind != baseline.unit_kind:
        missing = "no per-unit scores for " + " or ".join(
            label for label, scores in (("this result", model), ("the twin", baseline)) if scores.units is None) if (
            model.units is None or baseline.units is None) else "the two sidecars are of different kinds"
        return None if plain is None else Change(plain, why=missing)
    key = measure_key(measure, subset)
    unmatched = [label for label, scores in (("this result", model), ("the twin", baseline)) if key in scores.unmatched]
    if unmatched:
        return None if plain is None else Change(plain, why=f"the per-unit scores do not reproduce {' or '.join(unmatched)}'s "
                                                           f"{key} (a result edited or written otherwise)")
    known = KINDS[model.unit_kind]
    try:
        found = _cached_changes(model, baseline)
    except ValueError as err:
        return None if plain is None else Change(plain, why=str(err))
    figure = known.figure(model.task_object, measure, subset)
    estimate = found.changes.get(figure)
    if estimate is None or estimate.value is None or estimate.interval is None:
        why = found.why.get(figure, f"neither result's per-unit scores hold {key}" if estimate is None else "undefined in most resamples")
        return None if plain is None else Change(plain, why=why)
    counted = (model.resampling or Resampling()).resamples if known.counted else 0
    return Change(estimate.value, estimate.interval, estimate.pvalue, found.paired[figure], resamples=counted)


def _cached_changes(model: Any, baseline: Any) -> Paired:
    key = id(baseline.units)
    if key not in model.changes_cache:
        known = KINDS[model.unit_kind]
        model.changes_cache[key] = known.changes(model.units, baseline.units, model.resampling or Resampling())
    return model.changes_cache[key]


def _difference(model: Any, baseline: Any, measure: str, subset: str) -> float | None:
    a, b = model.figure(measure, subset), baseline.figure(measure, subset)
    return None if a is None or b is None else a - b
