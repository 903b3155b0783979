"""Position-grouped retrieval metrics (docs/method.md#s3-1 and 3.4).

Every figure here starts from mteb's per-query scores: the ``all_scores`` mapping that
``pytrec_eval`` returns (``{query_id: {"ndcg_cut_10": ..., ...}}``) and that
``AbsTaskRetrieval.task_specific_scores`` receives. A query belongs to zero, one or several
*groups* (a position bin, a FineWeb-PosQ tag); a group's score is the mean nDCG@10 of its
queries. On top of the group scores:

* harmonic mean ``G / sum_g 1 / score_g`` over the non-empty groups (a group scoring 0 makes
  the harmonic mean 0, its limit, instead of dividing by zero);
* Position Sensitivity Index ``PSI = 1 - min_g score_g / max_g score_g`` over the non-empty
  groups (`mteb_fairpos.fairness`: ``None``, with a note, when fewer than two groups are
  non-empty or every group scores 0).

Empty groups are reported (``None`` score, count 0, named in ``empty_groups``) and left out of
both summaries, with a note saying so.

Score keys written into the mteb result (`mteb_fairpos.results.schema`, read by ``compare``):
``position_<group>`` (nDCG@10 of the group, ``None`` when empty), ``harmonic_mean``, ``psi``,
``position_counts`` (queries per group), ``empty_groups`` and ``notes``; with intervals (a bootstrap
over queries, `mteb_fairpos.retrieval_intervals`) ``position_<group>_ci_low/_ci_high``,
``harmonic_mean_ci_low/_ci_high``, ``psi_ci_low/_ci_high`` and the resampling settings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..fairness import psi, undefined_reason
from ..resampling import Resampling
from ..results.schema import Counts, Estimate, Profile, ScoreEntry, Settings, dump, reported

METRIC = "ndcg_cut_10"
"""The pytrec_eval measure the groups are scored with (nDCG@10, binary relevance)."""

# --------------------------------------------------------------------------- bins
def bin_label(lower: float, upper: float, digits: int = 0) -> str:
    """The name of the bin ``[lower, upper)``: ``"0-100"``, ``"0.05-0.10"``."""
    if digits == 0:
        return f"{int(lower)}-{int(upper)}"
    return f"{lower:.{digits}f}-{upper:.{digits}f}"


def bin_index(value: float, edges: Sequence[float], *, close_last: bool = True) -> int | None:
    """The half-open bin ``[edges[i], edges[i + 1])`` holding ``value``, or ``None`` outside.

    With ``close_last`` the last bin also holds its upper edge (``[edges[-2], edges[-1]]``).
    A boundary value belongs to exactly one bin: the one it opens.
    """
    if len(edges) < 2:
        raise ValueError("a binning needs at least two edges.")
    if math.isnan(value) or value < edges[0] or value > edges[-1]:
        return None
    if value == edges[-1]:
        return len(edges) - 2 if close_last else None
    lo, hi = 0, len(edges) - 1
    while hi - lo > 1:  # largest i with edges[i] <= value
        mid = (lo + hi) // 2
        if edges[mid] <= value:
            lo = mid
        else:
            hi = mid
    return lo


# --------------------------------------------------------------------------- per-query scores
def per_query_scores(
    all_scores: Mapping[str, Mapping[str, float]],
    query_ids: Iterable[str],
    metric: str = METRIC,
) -> tuple[dict[str, float], int]:
    """``metric`` for each query in ``query_ids``; queries pytrec_eval did not score count as 0.

    Returns the scores and how many queries were missing from ``all_scores``.
    """
    scores: dict[str, float] = {}
    missing = 0
    for qid in query_ids:
        entry = all_scores.get(qid)
        if entry is None or metric not in entry:
            scores[qid] = 0.0
            missing += 1
        else:
            scores[qid] = float(entry[metric])
    return scores, missing


# --------------------------------------------------------------------------- summaries
def harmonic_mean(scores: Iterable[float]) -> float | None:
    """``G / sum(1 / s)`` over the given scores; 0 if any score is 0; ``None`` if none given."""
    values = list(scores)
    if not values:
        return None
    if any(v < 0 for v in values):
        raise ValueError(f"the harmonic mean needs non-negative scores, got {values}.")
    if any(v == 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


@dataclass
class GroupSummary:
    """Mean score per group plus the harmonic mean and PSI over the non-empty groups."""

    groups: list[str]
    scores: dict[str, float | None]
    counts: dict[str, int]
    harmonic_mean: float | None
    psi: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def empty_groups(self) -> list[str]:
        return [g for g in self.groups if self.counts[g] == 0]

    def to_scores(self, estimates: Mapping[str, Estimate] | None = None, resampling: Resampling | None = None, *,
                  resampled: str | None = None) -> dict[str, Any]:
        """The mteb score entries, stored through `mteb_fairpos.results.schema` (keys: module docstring).

        With ``estimates`` (`mteb_fairpos.retrieval_intervals.intervals` of the same queries), the ``resampling``
        behind them and what it drew (``resampled``: `QueryScores.resampled`), each group's score, the harmonic mean
        and PSI carry their interval.
        """
        if resampling is not None and resampled is None:
            raise ValueError("to_scores: say what the resampling drew (resampled=), as the result records it.")
        estimates = estimates or {}
        profile = Profile({g: _with_interval(self.scores[g], estimates.get(f"position_{g}")) for g in self.groups},
                          counts=dict(self.counts))
        details = {"harmonic_mean": self.harmonic_mean, "notes": list(self.notes)}
        ranges = {name: (estimates[name].ci_low, estimates[name].ci_high) for name in ("harmonic_mean", "psi") if name in estimates}
        settings = Settings(resamples=resampling.resamples, resampling_seed=resampling.seed, resampled=resampled) if resampling else Settings()
        return dump(ScoreEntry({"": profile}, psi=reported(self.psi), intervals=ranges, counts=Counts(empty=self.empty_groups),
                               settings=settings, details=details))


def _with_interval(value: float | None, estimate: Estimate | None) -> Estimate:
    if value is None or estimate is None:
        return Estimate(value)
    return Estimate(value, ci_low=estimate.ci_low, ci_high=estimate.ci_high)


def summarize_groups(
    query_scores: Mapping[str, float],
    memberships: Mapping[str, Iterable[str]],
    groups: Sequence[str],
) -> GroupSummary:
    """Group means of ``query_scores`` with the harmonic mean and PSI over non-empty groups.

    Args:
        query_scores: the score of each evaluated query.
        memberships: the groups of each query; a query listed under two groups counts in both,
            a query without an entry (or with no groups) counts in none.
        groups: every group, in report order; a group no query belongs to is empty.
    """
    known = set(groups)
    sums = dict.fromkeys(groups, 0.0)
    counts = dict.fromkeys(groups, 0)
    for qid, score in query_scores.items():
        for g in set(memberships.get(qid, ())):
            if g not in known:
                raise ValueError(f"query {qid!r} is in unknown group {g!r}; groups are {list(groups)}.")
            sums[g] += score
            counts[g] += 1
    means: dict[str, float | None] = {g: (sums[g] / counts[g] if counts[g] else None) for g in groups}
    present = [means[g] for g in groups if means[g] is not None]
    notes: list[str] = []
    empty = [g for g in groups if counts[g] == 0]
    if empty:
        notes.append(
            f"{len(empty)} empty group(s) {empty}: reported with score None and left out of the "
            "harmonic mean and PSI."
        )
    hm = harmonic_mean(present)  # type: ignore[arg-type]
    if not present:
        notes.append("no query fell in any group: harmonic mean and PSI are undefined.")
    elif (reason := undefined_reason(present)) is not None:
        notes.append(reason)
    return GroupSummary(list(groups), means, counts, hm, psi(present), notes)


# --------------------------------------------------------------------------- PosIR cells
LENGTH_BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("Q1", 0, 512),
    ("Q2", 512, 1024),
    ("Q3", 1024, 1536),
    ("Q4", 1536, math.inf),
)
"""PosIR length buckets on ``pos_token_length``, half-open ``[lower, upper)`` (docs/method.md#s3-4)."""

N_POSITION_BINS = 20
POSITION_BINS: tuple[str, ...] = tuple(
    bin_label(i / N_POSITION_BINS, (i + 1) / N_POSITION_BINS, digits=2) for i in range(N_POSITION_BINS)
)
"""Labels of the 20 relative-position bins: ``"0.00-0.05"`` ... ``"0.95-1.00"``."""


def length_bucket(token_length: float) -> str | None:
    """The PosIR length bucket of a positive document of ``token_length`` tokens."""
    if token_length is None or math.isnan(token_length) or token_length < 0:
        return None
    for name, lower, upper in LENGTH_BUCKETS:
        if lower <= token_length < upper:
            return name
    return None


def relative_position(span: Sequence[float], char_length: float) -> float | None:
    """Midpoint of the reference span over the document length, clipped to [0, 1].

    ``None`` when the position is unusable: no positive length, a span that is not two numbers,
    or a negative midpoint (the benchmark's own analysis drops these queries too).
    """
    if span is None or len(span) != 2 or None in span or char_length is None or not char_length > 0:
        return None
    start, end = float(span[0]), float(span[1])
    middle = (start + end) / 2.0
    if math.isnan(middle) or middle < 0:
        return None
    return min(max(middle / float(char_length), 0.0), 1.0)


def position_bin(relpos: float) -> str:
    """The relative-position bin of ``relpos`` in [0, 1]: ``[k/20, (k+1)/20)``, 1.0 in the last."""
    index = bin_index(relpos, [i / N_POSITION_BINS for i in range(N_POSITION_BINS + 1)])
    if index is None:
        raise ValueError(f"relative position {relpos} is outside [0, 1].")
    return POSITION_BINS[index]


Cells = dict[str, dict[str, list[float]]]
"""``cells[bucket][bin] = [query count, sum of nDCG@10]``: what pooling across domains needs."""


def empty_cells() -> Cells:
    return {name: {} for name, _, _ in LENGTH_BUCKETS}


def add_to_cells(cells: Cells, bucket: str, position: str, score: float) -> None:
    cell = cells[bucket].setdefault(position, [0, 0.0])
    cell[0] += 1
    cell[1] += score


def merge_cells(parts: Iterable[Cells]) -> Cells:
    merged = empty_cells()
    for part in parts:
        for bucket, bins in part.items():
            for position, (count, total) in bins.items():
                cell = merged[bucket].setdefault(position, [0, 0.0])
                cell[0] += count
                cell[1] += total
    return merged


def cell_figures(cells: Cells) -> dict[str, Any]:
    """PosIR's positional figures from pooled cells (docs/method.md#s3-4).

    * per bucket: nDCG@10 = unweighted mean over its non-empty position bins, PSI over them;
    * ``position_<bin>``: mean nDCG@10 of each of the 20 bins pooled across the buckets, with
      the PSI (``psi``) and harmonic mean over its non-empty bins.
    """
    out: dict[str, Any] = {}
    notes: list[str] = []
    pooled: dict[str, list[float]] = {}
    queries: dict[str, int] = {}
    for bucket, _, _ in LENGTH_BUCKETS:
        bins = cells.get(bucket, {})
        means = [total / count for count, total in bins.values() if count > 0]
        out[f"ndcg_at_10_{bucket}"] = sum(means) / len(means) if means else None
        out[f"psi_{bucket}"] = psi(means)
        if means and (reason := undefined_reason(means)) is not None:
            notes.append(f"psi_{bucket}: {reason}")
        queries[bucket] = int(sum(count for count, _ in bins.values()))
        out[f"n_bins_{bucket}"] = len(means)
        for position, (count, total) in bins.items():
            cell = pooled.setdefault(position, [0, 0.0])
            cell[0] += count
            cell[1] += total
    counts = {p: int(pooled.get(p, [0, 0.0])[0]) for p in POSITION_BINS}
    scores = {p: (pooled[p][1] / pooled[p][0] if counts[p] else None) for p in POSITION_BINS}
    present = [s for s in scores.values() if s is not None]
    if any(c == 0 for c in counts.values()):
        notes.append(f"{sum(1 for c in counts.values() if c == 0)} empty position bin(s) left out of PSI.")
    if present and (reason := undefined_reason(present)) is not None:
        notes.append(f"psi: {reason}")
    summary = GroupSummary(list(POSITION_BINS), scores, counts, harmonic_mean(present), psi(present), notes)
    out.update(summary.to_scores())
    out.update(dump(ScoreEntry(counts=Counts(buckets=queries))))
    return out
