"""Intervals of the probe's position fairness and paired changes against a baseline (docs/method.md#s5-1).

An observation is one segment at one position of one document; it belongs to one segment set and one
topic (the segment's). Documents of one set share their segments, and where sets share topics a
topic's segment recurs across sets, so the units of the bootstrap are sets *and* topics:

* sets do not share topics: a cluster bootstrap over segment sets gives the figure's variance;
* sets share topics: the **two-way bootstrap**. Three one-way bootstraps (over sets, over topics, over
  their intersections, the (set, topic) cells) give three variances; the figure's variance is
  ``V_set + V_topic - V_cell`` (pairs of observations that share a set, plus those that share a topic,
  less those counted twice), at least the larger one-way variance. It is the bootstrap form of two-way
  cluster-robust errors (`stats`).

The interval is ``estimate +- t * SE``, widened to hold the same around the bias-corrected estimate, and a fairness
interval ends at 1 (see `_combine`, `_bias`). The coverage simulation in docs/method.md#s5-1 is
why: the pigeonhole bootstrap (sets and topics drawn together) over-covered, resampling sets alone
under-covered where sets share topics, and percentile intervals under-covered with few sets.

A statistic of the per-position means is a function of the cells' sums and sizes per position, so every
observation of a cell shares its weight and all resamples are one product of a ``(R, cells)`` weight
matrix with the ``(cells, positions)`` sums: no loop over resamples or observations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..config import whole
from ..fairness import min_max_ratios
from ..resampling import (Bounds, Level, Resampling, counts, defined, flat_differences, level_change, require_resampling,
                          stratified_counts, wald, weighted_means)
from ..results.schema import SETS, SETS_AND_TOPICS, Estimate

_STREAMS = {"sets": 0, "topics": 1, "cells": 2}
"""Each factor's random stream: independent factors, and the same draws for every model of a comparison."""


@dataclass(frozen=True)
class Bootstrapped:
    """A figure with its bootstrap: ``samples`` maps each resampled factor (``sets``, and ``topics``,
    ``cells`` where sets share topics) to the figure's (R,) resampled values."""

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    pvalue: float
    samples: dict[str, np.ndarray] = field(repr=False)
    bias: float = 0.0
    """the bootstrap's estimate of the figure's bias (`_bias`); the interval also holds the estimate less it."""

    def as_estimate(self) -> Estimate:
        """The stored form of a change; NaN (undefined) becomes ``null``."""
        return Estimate(self.estimate, self.se, self.pvalue, self.ci_low, self.ci_high)


@dataclass(frozen=True)
class FairnessBootstrap:
    """``fairness`` of the measured values, ``change`` (values minus baseline) when a baseline was given;
    ``profiles`` the resampled per-position means, factor -> (R, positions) (subset after subset where
    several are pooled); ``units`` what was resampled."""

    fairness: Bootstrapped
    change: Bootstrapped | None
    profiles: dict[str, np.ndarray] = field(repr=False)
    units: str


def whole_positions(positions: Any) -> np.ndarray:
    """``positions`` as integers, refusing any that is not a whole number (1.3 would be read as 1)."""
    raw = np.asarray(positions)
    whole = raw.astype(np.int64) if raw.dtype.kind in "iuf" else raw
    if raw.ndim != 1 or raw.dtype.kind not in "iuf" or (raw.dtype.kind == "f" and not np.array_equal(raw, whole)):
        raise ValueError("positions must be one whole number per observation (1..n).")
    return whole


def require_coverage(positions: np.ndarray, n: int, what: str = "observations") -> None:
    """Refuse ``what`` unless they cover positions 1..n, each of them."""
    present = set(np.unique(positions).tolist())
    if present != set(range(1, n + 1)):
        raise ValueError(f"{what} must cover positions 1..{n}; got {sorted(present)}.")


def _measures(values: Any, name: str) -> np.ndarray:
    """One value per observation, NaN where unmeasured; an infinite one would pass for unmeasured (dropped unseen)."""
    measured = np.asarray(values, dtype=np.float64)
    if measured.ndim != 1:
        raise ValueError(f"{name} must hold one value per observation, got an array of shape {measured.shape}.")
    if np.isinf(measured).any():
        raise ValueError(f"{name}: observation {int(np.flatnonzero(np.isinf(measured))[0])} is infinite; a value is "
                         "finite, or NaN where it was not measured.")
    return measured


def fairness_bootstrap(values, positions, sets, topics, resampling: Resampling,
                       baseline_values=None, strata=None, n: int | None = None) -> FairnessBootstrap:
    """The bootstrap of ``position_fairness`` (min/max of the per-position means) of ``values``.

    Args:
        values: (N,) the measure per observation (sigma or tau); NaN marks an unmeasured one.
        positions: (N,) positions 1..n.
        sets, topics: (N,) the observation's segment set and topic (any hashable ids).
        resampling: resamples, seed and confidence.
        baseline_values: (N,) a baseline model's values on the *same* observations (row by row): the
            change ``fairness(values) - fairness(baseline)`` is resampled with the same draws.
        strata: (N,) the subset of each observation, where several are pooled: the figure is then the mean
            over subsets of each one's fairness (the probe task's main score), and the subsets are resampled
            together: a subset's segment sets are drawn within it (every resample holds each subset with its
            number of sets, as the data does), a topic that several subsets share is drawn once for all of them
            (so the dependence between subsets counts).
        n: the positions a document has, where known (one subset): a last position without a measured value is
            refused too, not only a gap.
    """
    require_resampling(resampling)
    values = _measures(values, "values")
    positions = whole_positions(positions)
    if not (len(values) == len(positions) == len(sets) == len(topics)):
        raise ValueError("values, positions, sets and topics must have the same length.")
    if len(values) == 0 or positions.min() < 1:
        raise ValueError("the bootstrap needs observations at positions 1..n.")
    stratum = np.zeros(len(values), dtype=np.int64) if strata is None else cluster_codes(strata)
    if len(stratum) != len(values):
        raise ValueError("strata must hold one subset per observation, as values does.")
    if n is not None and (strata is not None or not whole(n) or n < 1):
        raise ValueError(f"n is the positions of one subset's documents (a positive integer, without strata), got {n!r}.")
    measured = ~np.isnan(values)
    for code in np.unique(stratum):  # a position unmeasured would leave the fairness of the others, as if n were smaller
        rows = stratum == code
        require_coverage(positions[rows & measured], int(positions[rows].max()) if n is None else n, "measured observations")
    n_strata, n_positions = int(stratum.max()) + 1, int(positions.max())
    columns = stratum * n_positions + positions  # one profile column per (subset, position)
    # a segment set belongs to its subset (the same prefix for all where there is one: the same codes, the same draws)
    set_code = cluster_codes(np.char.add(stratum.astype(str), np.char.add("/", np.asarray(sets, dtype=object).astype(str))))
    topic_code = cluster_codes(topics)
    cell, cell_of = np.unique(np.column_stack([set_code, topic_code]), axis=0, return_inverse=True)
    cell_of = cell_of.reshape(-1)
    shared = len(cell) > topic_code.max() + 1  # some topic sits in more than one set
    factors = {"sets": cell[:, 0]}
    if shared:
        factors.update(topics=cell[:, 1], cells=np.arange(len(cell)))
    clusters = {name: int(units.max()) + 1 for name, units in factors.items()}
    if min(clusters.values()) < 2:
        raise ValueError("the bootstrap needs at least two segment sets (and two topics): one unit has no variance.")
    clusters["subsets"] = n_strata  # sets are drawn within them: they take a degree of freedom each (`_df`)
    # a subset's segment sets (and cells) are drawn within it, so every resample holds each subset with as many sets
    # as the data; topics that subsets share are drawn once for all of them
    set_subset = np.zeros(clusters["sets"], dtype=np.int64)
    set_subset[set_code] = stratum
    within = {"sets": set_subset, "cells": set_subset[cell[:, 0]]}
    weights = {name: _draws(clusters[name], within.get(name) if n_strata > 1 else None, resampling, _STREAMS[name])[:, units]
               for name, units in factors.items()}

    def profiles(measured: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        sums, sizes = _cell_sums(measured, columns, cell_of, len(cell), n_strata * n_positions)
        return weighted_means(np.ones((1, len(cell))), sums, sizes)[0], {name: weighted_means(w, sums, sizes) for name, w in weights.items()}

    def per_subset(profile: np.ndarray) -> np.ndarray:
        """(R, S * n) profiles -> (R, S) each subset's min/max; the figure is their mean over subsets."""
        return min_max_ratios(profile.reshape(-1, n_positions)).reshape(len(profile), n_strata)

    # each subset's own clusters of each factor: what its flat test's degrees of freedom rest on
    subset_clusters = [{"sets": int(np.count_nonzero(set_subset == s))} for s in range(n_strata)]
    if shared:
        for s, number in enumerate(subset_clusters):
            number.update(topics=len(np.unique(cell[within["cells"] == s, 1])),
                          cells=int(np.count_nonzero(within["cells"] == s)))

    # each factor's units per subset where they are drawn within subsets (sets, cells); topics are drawn across them
    units_within = {name: np.array([number[name] for number in subset_clusters]) for name in factors if name != "topics"}

    def level(measured: np.ndarray) -> tuple[Bootstrapped, dict[str, np.ndarray], Level, dict[str, np.ndarray]]:
        """The figure of ``measured`` with its interval reaching 1 where a flat profile is kept (`_flat_pvalue`), as
        a `Level`, its resampled subsets' figures (factor -> (R, S)) and its resampled profiles."""
        point, resampled = profiles(measured)
        parts = {name: per_subset(p) for name, p in resampled.items()}
        figure = _combine(float(per_subset(point[None]).mean()), parts, clusters, units_within, resampling)
        flat = _flat_pvalue(point.reshape(n_strata, n_positions), resampled, subset_clusters)
        figure_level = Level(_t_bounds(figure.estimate, figure.se, clusters, figure.bias, highest=1.0), flat, 1.0)
        low, high = figure_level.interval(resampling.confidence)
        return replace(figure, ci_low=low, ci_high=high), parts, figure_level, resampled

    fairness, parts, flat, resampled = level(values)
    change = None
    if baseline_values is not None:
        baseline_values = _measures(baseline_values, "baseline_values")
        if baseline_values.shape != values.shape:
            raise ValueError("baseline_values must hold one value per observation, as values does.")
        base, base_parts, base_flat, _ = level(baseline_values)
        change = _combine(fairness.estimate - base.estimate, {name: parts[name] - base_parts[name] for name in parts},
                          clusters, units_within, resampling)
        # either model may be flat, where the change's own interval is biased (`level_change`)
        low, high, p = level_change(_t_bounds(change.estimate, change.se, clusters, change.bias), change.pvalue, flat, base_flat,
                                    resampling.confidence)
        change = replace(change, ci_low=low, ci_high=high, pvalue=p)
    return FairnessBootstrap(fairness, change, resampled, SETS_AND_TOPICS if shared else SETS)


def _flat_pvalue(point: np.ndarray, resampled: dict[str, np.ndarray], clusters: list[dict[str, int]]) -> float:
    """The p-value of "every subset's positions have the same mean" (fairness 1): each subset's Hotelling test
    (`_subset_flat_pvalue`, its own clusters ``clusters[s]``), combined by Simes' test of them all, ``min_k S p_(k) / k``
    over the S p-values in ascending order (valid where the subsets are independent or positively dependent, as
    subsets that share topics are). A subset with too few clusters for its differences has no test and counts as
    not rejecting (p = 1): it cannot speak against a flat profile, and a kept flat profile only widens the interval.
    NaN (no test) where no subset has one. ``point``: (subsets, n); ``resampled``: factor -> (R, subsets * n).

    Why per subset: each subset's differences rest on its own segment sets, so one joint test with the degrees of
    freedom of all subsets' sets takes their covariance as better known than it is, and rejects a flat profile too
    often (a pooled flat profile was covered in 85-91 % of datasets)."""
    n_strata, n_positions = point.shape
    pvalues = np.array([_subset_flat_pvalue(point[s:s + 1], {name: profiles.reshape(len(profiles), n_strata, n_positions)[:, s]
                                                             for name, profiles in resampled.items()}, clusters[s])
                        for s in range(n_strata)])
    if not np.isfinite(pvalues).any():
        return float("nan")
    from statsmodels.stats.multitest import multipletests  # here, not at import: `import mteb` loads this module

    # Simes' global p-value is the least of the Benjamini-Hochberg adjusted p-values
    return float(multipletests(np.where(np.isfinite(pvalues), pvalues, 1.0), method="fdr_bh")[1].min())


def _subset_flat_pvalue(point: np.ndarray, resampled: dict[str, np.ndarray], clusters: dict[str, int]) -> float:
    """The p-value of "one subset's positions have the same mean": Hotelling's T2 of its position differences from
    its first position, their covariance combined over the resampled factors (two-way where sets share topics, as the
    figure's variance is, `_combine`; the larger one-way covariance where the two-way one is not positive
    semi-definite), as an F with the subset's degrees of freedom; NaN (no test) where its clusters are too few for the
    differences (fewer than one more than the differences: the resamples cannot vary in all their directions) or the
    resamples too few to measure a covariance. ``point``: (1, n); ``resampled``: factor -> (R, n).

    Why: min/max has no smooth estimator where positions tie; noise pulls the largest mean up and the smallest down,
    so the t interval of a flat profile's fairness lies below 1 too often (docs/method.md#s5). The interval reaches
    up to 1 wherever this test keeps a flat profile, which only widens it."""
    from scipy.stats import f as fisher

    found = {name: flat_differences(point, profiles[:, None]) for name, profiles in resampled.items()}
    if any(value is None for value in found.values()):
        return 1.0  # fewer than two positions measured: nothing to differ
    df = _df(clusters)
    if df < len(found["sets"][0]) or any(len(draws) < 2 for _, draws in found.values()):
        return float("nan")
    one_way = {name: np.atleast_2d(np.cov(draws, rowvar=False)) * clusters[name] / (clusters[name] - 1)
               for name, (_, draws) in found.items()}
    spread = one_way["sets"]
    if "topics" in one_way:
        spread = one_way["sets"] + one_way["topics"] - one_way["cells"]
        if np.linalg.eigvalsh(spread).min() < 0:
            spread = max(one_way["sets"], one_way["topics"], key=np.trace)
    tested = wald(found["sets"][0], spread)
    if tested is None:
        return 0.0
    statistic, rank = tested
    if rank == 0:
        return 1.0
    # Hotelling's T2 with df degrees of freedom, as an F
    return float(fisher.sf(statistic * (df - rank + 1) / (df * rank), rank, df - rank + 1))


def _draws(n_units: int, strata: np.ndarray | None, resampling: Resampling, stream: int) -> np.ndarray:
    """(R, n_units) counts: the plain bootstrap, or with ``strata`` each stratum's units drawn within it."""
    if strata is None:
        return counts(n_units, resampling, stream)
    return np.concatenate(list(stratified_counts(strata, resampling, stream)))


def cluster_codes(ids: Sequence) -> np.ndarray:
    """Integer codes 0..G-1 of cluster ids (sets or topics), the form statsmodels and the bootstrap take."""
    return np.unique(np.asarray(ids, dtype=object).astype(str), return_inverse=True)[1].reshape(-1)


def sets_share_topics(clusters: Sequence, topics: Sequence) -> bool:
    """Whether some topic occurs in more than one segment set."""
    pairs = np.unique(np.column_stack([cluster_codes(clusters), cluster_codes(topics)]), axis=0)
    return len(pairs) > len(np.unique(pairs[:, 1]))


def _cell_sums(values: np.ndarray, columns: np.ndarray, cell_of: np.ndarray, n_cells: int,
               n_columns: int) -> tuple[np.ndarray, np.ndarray]:
    """(cells, columns) sums and numbers of the measured values per cell and profile column (1-based)."""
    measured = np.isfinite(values)
    shape = (n_cells, n_columns)
    sums, sizes = np.zeros(shape), np.zeros(shape)
    np.add.at(sums, (cell_of[measured], columns[measured] - 1), values[measured])
    np.add.at(sizes, (cell_of[measured], columns[measured] - 1), 1.0)
    return sums, sizes


def _combine(estimate: float, parts: dict[str, np.ndarray], clusters: dict[str, int], units_within: dict[str, np.ndarray],
             resampling: Resampling) -> Bootstrapped:
    """The figure (the mean over subsets of each subset's figure) from its subsets' resampled figures, ``parts``:
    factor -> (R, S). Its variance is ``V_set``, or where sets share topics the two-way ``V_set + V_topic - V_cell``
    (at least the larger one-way one), each one-way variance with its small-sample factor (`_one_way`); the interval
    and p-value are t ones (`_df`), as the regression's clustered errors (`stats`) are, and the interval is the hull
    of the t intervals around the estimate and around the estimate less its bootstrap bias (`_bias`)."""
    from scipy.stats import t as student_t  # here, not at import: `import mteb` loads this module via the task

    samples = {name: values.mean(axis=1) for name, values in parts.items()}
    one_way = {name: _one_way(parts[name], units_within.get(name, clusters[name])) for name in parts}
    if "topics" in one_way:
        variance = max(one_way["sets"] + one_way["topics"] - one_way["cells"], one_way["sets"], one_way["topics"])
    else:
        variance = one_way["sets"]
    if not np.isfinite(estimate) or not np.isfinite(variance):
        return Bootstrapped(estimate, float("nan"), float("nan"), float("nan"), float("nan"), samples)
    se = variance ** 0.5
    bias = _bias(estimate, samples, one_way, se)
    low, high = _t_bounds(estimate, se, clusters, bias)(resampling.confidence)
    if se > 0:  # the hull holds 0 where either interval does
        p = max(float(2 * student_t.sf(abs(centre) / se, _df(clusters))) for centre in (estimate, estimate - bias))
    else:  # resamples that never vary (identical models: a change of exactly 0)
        p = 1.0 if estimate == 0 else 0.0
    return Bootstrapped(estimate, se, low, high, p, samples, bias)


def _one_way(parts: np.ndarray, units: int | np.ndarray) -> float:
    """One factor's bootstrap variance of the mean over subsets of ``parts`` ((R, S) resampled subset figures), with the
    small-sample factor of cluster-robust errors, ``G / (G - 1)`` for ``G`` units, which a bootstrap of ``G`` units
    lacks. ``units``: the factor's number of units where they are drawn across subsets (topics), or each subset's
    number, (S,), where they are drawn within each subset (sets, cells): a subset's resampled figure then varies by
    ``(n_s - 1) / n_s`` of its variance, and its share of the mean's variance takes its own ``n_s / (n_s - 1)``, not
    that of all subsets' units (12 sets per subset: 12/11, where 36/35 for the 36 sets pooled left the standard error
    3 % short). A subset of one unit has no variance to correct."""
    variance = _variance(parts.mean(axis=1))
    if np.ndim(units) == 0:
        return variance * units / (units - 1)
    units = np.asarray(units, dtype=np.float64)
    spread = units > 1
    shares = np.array([_variance(column) for column in parts.T])[spread] / len(units) ** 2  # each subset's share
    return variance + float(np.sum(shares / (units[spread] - 1)))  # a share times n/(n-1) is the share plus this


def _bias(estimate: float, samples: dict[str, np.ndarray], one_way: dict[str, float], se: float) -> float:
    """The figure's bias as its bootstrap shows it (the resamples' mean less the estimate, Efron's estimate), in each
    factor's standard errors, the largest of the factors, times ``se``; 0 where it cannot be measured.

    Why: min/max is biased away from a flat profile (noise pulls the largest mean up and the smallest down), and
    where the subsets of the probe's main score are pooled, their biases add while the standard error shrinks. Near a
    flat profile the t interval alone then misses the truth (a pooled 0.62/0.62/0.60 of 3 subsets of 12 sets: 89.4 %
    coverage); the hull with the interval around the bias-corrected estimate covers it (docs/method.md#s5-1). Where
    positions are well apart the bias is close to 0 and the interval as before."""
    ratios = []
    for name, values in samples.items():
        kept = defined(values)
        if kept is not None and one_way[name] > 0:
            ratios.append((float(np.mean(kept)) - estimate) / one_way[name] ** 0.5)
    return max(ratios, key=abs) * se if ratios and se > 0 else 0.0


def _df(clusters: dict[str, int]) -> int:
    """The t degrees of freedom: ``G - S`` for ``G`` segment sets drawn within ``S`` subsets (one per subset, as a
    stratified survey's clusters less its strata), or ``G - 1`` for ``G`` topics where fewer; at least 1."""
    return max(min(clusters["sets"] - clusters.get("subsets", 1), clusters.get("topics", clusters["sets"]) - 1), 1)


def _t_bounds(estimate: float, se: float, clusters: dict[str, int], bias: float = 0.0, *,
              highest: float = np.inf) -> Bounds:
    """The hull of the t intervals ``centre +- t * se`` around ``estimate`` and around ``estimate - bias`` at any
    confidence, up to ``highest`` (fairness, min/max, is at most 1); NaN where ``se`` is undefined."""
    from scipy.stats import t as student_t

    def bounds(confidence: float) -> tuple[float, float]:
        half = float(student_t.ppf(0.5 + confidence / 2, _df(clusters))) * se
        return min(estimate, estimate - bias) - half, min(max(estimate, estimate - bias) + half, highest)

    return bounds


def _variance(samples: np.ndarray) -> float:
    """The variance of the defined resampled values; NaN when more than half are undefined (`resampling.defined`), or
    fewer than two are defined (one resample has no spread to measure)."""
    kept = defined(samples)
    return float("nan") if kept is None or len(kept) < 2 else float(np.var(kept))
