"""The bootstrap every interval and paired test of this package uses (docs/method.md#s5).

A bootstrap resample draws units (queries, segment sets, topics) with replacement. Drawing
``n`` of ``n`` units is a vector of counts, so ``R`` resamples are one ``(R, n)`` count matrix
(:func:`counts`) and a statistic that is a weighted sum over units is one matrix product for all
resamples together: no Python loop over resamples or units. Two models scored on the same units
are paired by giving both the *same* count matrix, so their difference is resampled unit by unit.

* :class:`Resampling`: how many resamples, the seed and the confidence level; recorded with every
  interval so that it can be reproduced;
* :func:`counts`: the count matrix of one resampling over ``n`` units;
* :func:`stratified_counts`: the same, each stratum drawn within itself, in blocks of resamples;
* :func:`weighted_means`: per-group means under every resample;
* :func:`interval`: the percentile interval of a statistic's resampled values;
* :func:`pvalue`: the two-sided bootstrap p-value of "the statistic is 0" that the percentile interval inverts;
* :func:`flat_differences`, :func:`wald`: what a test of a flat profile takes (PSI 0, fairness 1);
* :class:`Level`, :func:`level_change`: the interval of a profile's figure that reaches its flat value where a flat
  profile is kept, and the interval and p-value of a change between two models, either of which may be flat.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .config import whole


def require_confidence(confidence: object) -> None:
    """Refuse a confidence level outside (0, 1): 95 for 0.95 would fail in numpy, -0.2 invert the interval."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence!r}.")


MAX_RESAMPLES = 1_000_000
"""The most resamples one bootstrap draws: each is a row of counts over every unit (8 bytes a unit), and a percentile
interval or a p-value gains nothing measurable beyond this."""


def drawable(resampling: Resampling) -> Resampling:
    """``resampling`` for a bootstrap still to be drawn, refused above `MAX_RESAMPLES` before any work (a stored
    result's settings are read as they are)."""
    if resampling.resamples > MAX_RESAMPLES:
        raise ValueError(f"resamples must be at most {MAX_RESAMPLES:,}; got {resampling.resamples:,}.")
    return resampling


def require_resampling(resampling: object) -> None:
    """Refuse anything but a :class:`Resampling` where one is needed (``None`` failed on an attribute)."""
    if not isinstance(resampling, Resampling):
        raise TypeError(f"resampling must be a Resampling (resamples, seed, confidence), got {type(resampling).__name__}.")


@dataclass(frozen=True)
class Resampling:
    """Settings of one bootstrap: ``resamples`` draws from ``seed``, intervals at ``confidence``."""

    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        # checked here, not by numpy after every document was embedded; numpy's integers are stored as int
        if not whole(self.resamples) or self.resamples < 1:
            raise ValueError(f"resamples must be an integer of at least 1; got {self.resamples!r}.")
        if not whole(self.seed) or self.seed < 0:
            raise ValueError(f"the resampling seed must be an integer of at least 0; got {self.seed!r}.")
        require_confidence(self.confidence)
        object.__setattr__(self, "resamples", int(self.resamples))
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "confidence", float(self.confidence))

    def generator(self, stream: int = 0) -> np.random.Generator:
        """The random stream ``stream`` of this resampling: independent streams for independent factors
        (sets and topics), the same stream wherever the same units are resampled for a paired comparison."""
        return np.random.default_rng([self.seed, stream])


def counts(n_units: int, resampling: Resampling, stream: int = 0) -> np.ndarray:
    """(R, n) float64: how often each of ``n_units`` units is drawn in each of R resamples (rows sum to n)."""
    if not whole(n_units) or n_units < 1:
        raise ValueError(f"the bootstrap needs a whole number of at least one unit to resample; got {n_units!r}.")
    rng = resampling.generator(stream)
    return rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=resampling.resamples).astype(np.float64)


def weighted_means(weights: np.ndarray, sums: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(R, G) the mean of each of G groups under each row of ``weights``.

    ``weights`` is (R, n): the weight of each of n units in each resample (rows of :func:`counts`, or a
    product of several factors' counts); ``sums`` and ``sizes`` are (n, G): each unit's total score in each
    group and how many scores that total holds (a query's score and 1 where it counts in the group, a cell's
    sum and count of observations). A group that a resample leaves without weight is NaN there.
    """
    totals, numbers = weights @ sums, weights @ sizes
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(numbers > 0, totals / np.where(numbers > 0, numbers, 1.0), np.nan)


def defined(samples: np.ndarray) -> np.ndarray | None:
    """A statistic's resampled values where it is defined (finite); ``None`` when more than half of the resamples
    (or all) leave it undefined, so that no interval, p-value or variance rests on a minority of them."""
    samples = np.asarray(samples, dtype=np.float64)
    kept = samples[np.isfinite(samples)]
    return None if 2 * len(kept) < len(samples) or len(kept) == 0 else kept


def interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of a statistic's resampled values; resamples where it is undefined (NaN) are
    left out, and the interval is (NaN, NaN) when more than half of them are (`defined`) or fewer than two are left."""
    require_confidence(confidence)
    samples = defined(samples)
    if samples is None or len(samples) < 2:  # one resample has no spread to measure
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    low, high = np.quantile(samples, [tail, 1 - tail])
    return float(low), float(high)


def bias_corrected(samples: np.ndarray, estimate: float, confidence: float) -> tuple[float, float]:
    """Efron's bias-corrected (BC) percentile interval: the percentile interval's levels moved by ``2 z0``, ``z0``
    the normal quantile of the share of resampled values below the estimate (half of those equal to it), kept within
    half a resample of 0 and 1. Where the resamples centre on the estimate it is the percentile interval; where they
    lie mostly on one side of it, as a figure biased away from a flat profile's lie, it moves to the other side.
    (NaN, NaN) where `interval` is, or the estimate is undefined."""
    from scipy.stats import norm

    require_confidence(confidence)
    samples = defined(samples)
    if samples is None or len(samples) < 2 or not np.isfinite(estimate):
        return float("nan"), float("nan")
    below = np.count_nonzero(samples < estimate) + 0.5 * np.count_nonzero(samples == estimate)
    share = min(max(below / len(samples), 0.5 / len(samples)), 1 - 0.5 / len(samples))
    shift, half = 2 * norm.ppf(share), norm.ppf(0.5 + confidence / 2)
    low, high = np.quantile(samples, norm.cdf([shift - half, shift + half]))
    return float(low), float(high)


def pvalue(estimate: float, samples: np.ndarray) -> float:
    """Two-sided p-value of H0 "the statistic is 0", the one the percentile interval inverts: twice the
    smaller share of resampled values on either side of 0 (each side counting 0 itself),
    ``min(1, 2 (1 + hits) / (1 + R))``, so never 0, and 1 for a statistic that is 0 in every resample
    (identical models). p < 1 - confidence exactly when the interval at that confidence excludes 0, up to
    the counting at the ends, so a report never calls a change significant by one and not by the other.
    NaN where the estimate or most resamples are undefined (`defined`), or fewer than two resamples are left."""
    samples = defined(samples)
    if not np.isfinite(estimate) or samples is None or len(samples) < 2:
        return float("nan")
    hits = min(np.count_nonzero(samples <= 0), np.count_nonzero(samples >= 0))
    return float(min(1.0, 2 * (1 + hits) / (1 + len(samples))))


BLOCK_CELLS = 2_000_000
"""Counts held at once by `stratified_counts` (16 MB of float64): the block of resamples shrinks as units grow."""


def stratified_counts(strata: np.ndarray, resampling: Resampling, stream: int = 0, *, block: int | None = None,
                      width: int | None = None) -> Iterator[np.ndarray]:
    """The (R, n) count matrix of a bootstrap that draws each stratum's units from that stratum only,
    in blocks of ``block`` resamples (default: as many as `BLOCK_CELLS` values of ``width`` columns hold, at most
    250; ``width``: the columns a caller spreads the counts to, the units by default; ``strata``: (n,) codes; the
    blocks stack to R rows).

    A figure that averages strata with equal weight (PosIR's mean over languages) keeps every stratum
    whole in every resample, as the data keeps it whole; one stratum is the plain bootstrap. Blocks keep
    memory bounded however many queries (PosIR's hundred thousand). Every block comes from the one
    stream in stratum-code order, so the same units in the same order get the same counts: what a
    paired comparison relies on. Each unit is drawn as an index and the draws are counted (``bincount``):
    the same multinomial counts as :func:`counts`, several times faster for thousands of units.
    """
    strata = np.asarray(strata)
    if len(strata) < 1:
        raise ValueError("the bootstrap needs at least one unit to resample.")
    rng = resampling.generator(stream)
    members = [np.flatnonzero(strata == code) for code in np.unique(strata)]
    block = block or max(1, min(250, BLOCK_CELLS // max(width or 0, len(strata))))
    for start in range(0, resampling.resamples, block):
        size = min(block, resampling.resamples - start)
        rows = (np.arange(size) * len(strata))[:, None]
        picks = np.concatenate([units[rng.integers(0, len(units), size=(size, len(units)))] + rows for units in members], axis=1)
        yield np.bincount(picks.ravel(), minlength=size * len(strata)).reshape(size, len(strata)).astype(np.float64)


def flat_differences(means: np.ndarray, resampled: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """What a test of a flat profile takes (PSI 0, fairness 1): each stratum's defined groups' differences from its
    first, ``(q,)``, and the same under every resample where all are defined, ``(R', q)``. ``means``: (strata, groups),
    NaN for an empty group; ``resampled``: (R, strata, groups). ``None`` where no stratum has two defined groups."""
    points, draws = [], []
    for stratum, row in enumerate(np.asarray(means, dtype=np.float64)):
        present = np.flatnonzero(np.isfinite(row))
        if len(present) >= 2:
            points.append(row[present[1:]] - row[present[0]])
            draws.append(resampled[:, stratum, present[1:]] - resampled[:, stratum, present[:1]])
    if not points:
        return None
    together = np.concatenate(draws, axis=1)
    return np.concatenate(points), together[np.isfinite(together).all(axis=1)]


def wald(difference: np.ndarray, spread: np.ndarray) -> tuple[float, int] | None:
    """The Wald statistic ``d' S+ d`` of ``difference`` with covariance ``spread``, and the rank of ``spread`` (the
    directions the resamples vary in); ``None`` where a difference lies where they never vary and is not 0: it is
    known exactly, and no test keeps it at 0."""
    inverse = np.linalg.pinv(spread)
    if np.abs(difference - spread @ inverse @ difference).max() > 1e-9 * max(np.abs(difference).max(), 1e-12):
        return None
    return float(difference @ inverse @ difference), int(np.linalg.matrix_rank(spread))


Bounds = Callable[[float], tuple[float, float]]
"""An interval at any confidence: ``confidence -> (low, high)``, nested (a higher confidence, a wider interval)."""


@dataclass(frozen=True)
class Level:
    """One model's figure of a profile (PSI, the probe's fairness): its interval at any confidence (``bounds``), the
    p-value of a flat profile (``flat_pvalue``; NaN where there is no test) and the figure's value there (``flat``:
    0 for PSI, 1 for fairness)."""

    bounds: Bounds
    flat_pvalue: float
    flat: float

    def interval(self, confidence: float) -> tuple[float, float]:
        """``bounds`` at ``confidence``, reaching ``flat`` wherever the test keeps a flat profile at that level: a flat
        profile is then covered at least as often as the test keeps it (docs/method.md#s5)."""
        low, high = self.bounds(confidence)
        if self.flat_pvalue > 1 - confidence and np.isfinite(low) and np.isfinite(high):
            low, high = min(low, self.flat), max(high, self.flat)
        return low, high


def level_change(direct: Bounds, pvalue: float, model: Level, baseline: Level, confidence: float) -> tuple[float, float, float]:
    """(low, high, p) of the change ``model - baseline`` of a profile's figure, where either model may be flat.

    ``direct`` is the change's own interval (from its resampled values) and ``pvalue`` the test of "no change" it
    inverts. Near a flat profile both figures are biased away from flat, so ``direct`` misses a flat model's change
    (PSI: 3-62 % coverage where the model is flat and the baseline is not, docs/method.md#s5). The interval is the hull
    of ``direct`` and, at level ``alpha = 1 - confidence``:

    * where the model's flat test keeps a flat profile at ``alpha / 2``: the model's flat value less the baseline's
      interval at ``1 - alpha / 2`` (if the model is flat, the change is exactly that);
    * where the baseline's does, symmetrically.

    If the model is flat, both hold with probability at least ``1 - alpha`` (Bonferroni), so the change is covered at
    least that often; where neither is flat ``direct`` covers as before, and a change the resamples never vary is
    known exactly, so ``direct`` stays. The p-value is the largest ``alpha`` whose interval still holds 0 (by
    bisection: the intervals are nested), at least ``pvalue``: interval and p-value agree as far as ``direct`` and
    ``pvalue`` do (exactly for a t interval; up to the counting of resamples at the ends for a percentile one)."""

    def bounds(alpha: float) -> tuple[float, float]:
        parts = [direct(1 - alpha)]
        if model.flat_pvalue > alpha / 2:
            low, high = baseline.interval(1 - alpha / 2)
            parts.append((model.flat - high, model.flat - low))
        if baseline.flat_pvalue > alpha / 2:
            low, high = model.interval(1 - alpha / 2)
            parts.append((low - baseline.flat, high - baseline.flat))
        if not np.isfinite(parts[0]).all():
            return float("nan"), float("nan")
        kept = [part for part in parts if np.isfinite(part).all()]
        return min(low for low, _ in kept), max(high for _, high in kept)

    low, high = direct(confidence)
    if low == high:  # resamples that never vary: the change is known exactly (identical models)
        return low, high, pvalue
    low, high = bounds(1 - confidence)
    if not np.isfinite(pvalue) or not (model.flat_pvalue > 0 or baseline.flat_pvalue > 0):
        return low, high, pvalue  # no test of "no change" to invert, or no level is ever flat (the hull is ``direct``)
    inside, outside = 0.0, 1.0  # 0 lies in the widest interval; find the level where it leaves
    for _ in range(40):
        middle = (inside + outside) / 2
        low_m, high_m = bounds(middle)
        inside, outside = (middle, outside) if low_m <= 0 <= high_m else (inside, middle)
    return low, high, max(pvalue, inside)
