"""Intervals of the position-grouped retrieval figures, and paired changes between two models
(docs/method.md#s3-1, #s5).

Every figure (nDCG@10 per position group, their harmonic mean, PSI, the overall nDCG@10) is recomputed from the
queries' nDCG@10 under resamples (`mteb_fairpos.resampling`). The unit drawn is the query, or where queries are
clustered (several questions asked of one passage, as in SQuAD), the cluster with all its queries: queries of one
passage share how well that passage is embedded, so drawing them one by one takes them as more independent than they
are and the intervals too narrow (docs/method.md#s5). Queries fall in *strata* that a task averages with equal weight (PosIR's
query languages, docs/method.md#s3-4); each stratum is resampled within itself (strata that share a cluster, as
cross-lingual PosIR's languages share their English documents, together) and its figures are computed from its own
queries, then averaged over strata as the task averages them. With one stratum
(SQuAD-PosQ, FineWeb-PosQ) the figures are the task's own.

Every resample is a row of counts, so a figure under all resamples is a few matrix products: no loop
over resamples or queries.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from threadpoolctl import ThreadpoolController

from .fairness import min_max_ratios
from .resampling import (Level, Resampling, bias_corrected, flat_differences, interval, level_change, pvalue, require_resampling,
                         stratified_counts, wald, weighted_means)
from .results.schema import CLUSTERS, QUERIES, Estimate

MEAN = "ndcg_at_10"
"""The figure name of the overall nDCG@10 (mean over a stratum's queries, averaged over strata)."""


@dataclass(frozen=True)
class QueryScores:
    """One model's per-query nDCG@10 with each query's position groups and stratum.

    ``members[i, g]`` is whether query ``i`` counts in group ``groups[g]`` (a query may count in none,
    or in two: FineWeb-PosQ); ``strata[i]`` the code of its stratum (index into ``strata_labels``);
    ``clusters[i]`` the cluster the bootstrap draws query ``i`` with (`relevant_clusters`; ``None`` for a query in
    none, drawn on its own), or ``clusters`` ``None`` where every query is drawn on its own.
    """

    ids: np.ndarray
    scores: np.ndarray
    members: np.ndarray
    strata: np.ndarray
    groups: tuple[str, ...]
    strata_labels: tuple[str, ...] = ("",)
    clusters: np.ndarray | None = None

    @classmethod
    def build(cls, scores: Mapping[str, float], memberships: Mapping[str, Iterable[str | None]], groups: Sequence[str],
              strata: Mapping[str, str] | None = None, clusters: Mapping[str, str] | None = None) -> QueryScores:
        """From ``{query id: nDCG@10}``, ``{query id: its groups}`` (a ``None`` group: counts in none) and,
        where there are several, ``{query id: stratum}``; ``clusters``: ``{query id: cluster}`` where queries are
        drawn together (a query without one is a cluster of its own; none at all: queries are drawn one by one);
        queries sorted by (stratum, id)."""
        for name, given in (("scores", scores), ("memberships", memberships), ("strata", strata), ("clusters", clusters)):
            if given is not None and not isinstance(given, Mapping):
                raise TypeError(f"{name} must map each query id to its value, got {type(given).__name__}.")
        if isinstance(groups, (str, bytes)):
            raise TypeError(f"groups must be a list of group names, got the text {groups!r}.")
        strata = strata or {}
        try:
            ids = sorted(scores, key=lambda q: (strata.get(q, ""), q))
        except TypeError:
            raise TypeError("query ids must all be of one kind (all text, say), as must strata; they are sorted.") from None
        labels = tuple(sorted({strata.get(q, "") for q in ids})) or ("",)
        index = {g: i for i, g in enumerate(groups)}
        members = np.zeros((len(ids), len(groups)), dtype=bool)
        for row, qid in enumerate(ids):
            score = scores[qid]
            if isinstance(score, bool) or not isinstance(score, numbers.Real) or not np.isfinite(score):
                raise ValueError(f"query {qid!r}: score {score!r} is not a finite number; every query scored counts "
                                 "(an unanswered query scores 0).")
            found = memberships.get(qid, ())
            if isinstance(found, (str, bytes)):
                raise TypeError(f"query {qid!r}: its groups must be a list, got the text {found!r}.")
            for group in found:
                if group is None:
                    continue
                if group not in index:
                    raise ValueError(f"query {qid!r}: group {group!r} is not one of the groups {list(groups)}.")
                members[row, index[group]] = True
        codes = {label: i for i, label in enumerate(labels)}
        named = clusters is not None and any(clusters.get(q) is not None for q in ids)  # else every query is drawn alone
        drawn = None if not named else np.asarray([None if clusters.get(q) is None else str(clusters[q]) for q in ids],
                                                  dtype=object)
        return cls(np.asarray(ids, dtype=object), np.asarray([scores[q] for q in ids], dtype=np.float64), members,
                   np.asarray([codes[strata.get(q, "")] for q in ids]), tuple(groups), labels, drawn)

    def subset(self, rows: np.ndarray) -> QueryScores:
        return QueryScores(self.ids[rows], self.scores[rows], self.members[rows], self.strata[rows], self.groups,
                           self.strata_labels, None if self.clusters is None else self.clusters[rows])

    @property
    def resampled(self) -> str:
        """What the bootstrap draws (`QUERIES` or `CLUSTERS`), as a result records it."""
        return QUERIES if self.clusters is None else CLUSTERS

    def units(self) -> tuple[np.ndarray, np.ndarray]:
        """The bootstrap's units (`_units`, worked out once: a task asks for them for its note and its intervals)."""
        return self._units

    @functools.cached_property
    def _units(self) -> tuple[np.ndarray, np.ndarray]:
        """The bootstrap's units: each unit's stratum of draws, in the order the draws take them, and each query's
        unit. A unit is a query, or a cluster with all its queries, ordered by its first query, so that the draws
        depend on the queries' order and grouping, not on how the clusters are named (a task and a reader of its
        sidecar name them differently).

        Strata are drawn apart, except where a cluster spans them: a document queried in several languages (PosIR's
        cross-lingual setting) is one unit, drawn with its queries in every language, so strata that share clusters,
        directly or through others, are drawn together (named by the least of their codes)."""
        if self.clusters is None:
            return self.strata, np.arange(len(self.ids))
        unclustered = np.array([cluster is None for cluster in self.clusters])  # a unit of its own
        names = np.where(unclustered, np.char.add("query\x1f", self.ids.astype(str)),
                         np.char.add("cluster\x1f", self.clusters.astype(str)))
        _, first, named = np.unique(names, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        unit_of = rank[named.reshape(-1)]
        layers = len(self.strata_labels)  # strata and units, joined by the queries between them
        component = _components(self.strata, unit_of, layers, len(order))
        least = np.full(component.max() + 1, layers)
        np.minimum.at(least, component[:layers], np.arange(layers))
        return least[component[layers:]], unit_of

    def few_units(self, least: int = 30) -> str | None:
        """A note where a stratum has fewer than ``least`` units: percentile intervals then cover too little (in a
        simulation of a mean, 85 % with 10 units, 94 % with 30)."""
        labels, sizes = _stratum_units(self.strata, self.units()[1])
        if len(sizes) == 0 or sizes.min() >= least:
            return None
        fewest = int(sizes.min())
        where = f" (in {self.strata_labels[int(labels[sizes.argmin()])]})" if len(labels) > 1 else ""
        drawn = "relevant documents" if self.clusters is not None else "queries"
        return (f"only {fewest} {drawn} to draw{where}: the intervals rest on fewer than {least} units and are too "
                "narrow; read them with care.")


def _stratum_units(strata: np.ndarray, unit_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each stratum that holds queries (its code) and how many units its queries are in: what a stratum's figures
    rest on, whether it is drawn alone or with others (`QueryScores.units`)."""
    codes = np.unique(strata)
    return codes, np.array([len(np.unique(unit_of[strata == code])) for code in codes], dtype=np.int64)


def _components(left: np.ndarray, right: np.ndarray, n_left: int, n_right: int) -> np.ndarray:
    """The connected components of the two-sided graph with an edge between ``left[i]`` (of ``n_left`` nodes) and
    ``right[i]`` (of ``n_right``): a component code per node, the left nodes first."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    size = n_left + n_right
    edges = coo_matrix((np.ones(len(left)), (np.asarray(left), n_left + np.asarray(right))), shape=(size, size))
    return connected_components(edges, directed=False)[1]


def relevant_clusters(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """``{query id: cluster}``: queries that share a relevant document (relevance above 0), directly or through other
    queries, form one cluster, named by its least document id; a query with no relevant document is in none."""
    for qid, docs in qrels.items():
        if not isinstance(docs, Mapping):
            raise TypeError(f"qrels of query {qid!r} must map document ids to relevance, got {type(docs).__name__}.")
        for doc, relevance in docs.items():
            if isinstance(relevance, bool) or not isinstance(relevance, numbers.Real):
                raise TypeError(f"qrels of query {qid!r}: the relevance of {doc!r} is {relevance!r}, not a number.")
    pairs = [(qid, doc) for qid, docs in qrels.items() for doc, relevance in docs.items() if relevance > 0]
    if not pairs:
        return {}
    queries = sorted({qid for qid, _ in pairs})
    documents = sorted({doc for _, doc in pairs})
    row = {qid: i for i, qid in enumerate(queries)}
    column = {doc: i for i, doc in enumerate(documents)}
    component = _components(np.array([row[q] for q, _ in pairs]), np.array([column[d] for _, d in pairs]),
                            len(queries), len(documents))
    names: dict[int, str] = {}
    for doc in documents:  # sorted: each component is named by its least document id
        names.setdefault(int(component[len(queries) + column[doc]]), doc)
    return {qid: names[int(component[row[qid]])] for qid in queries}


def figures(queries: QueryScores, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Every figure under each row of ``weights`` ((R, n) counts; a row of ones is the data itself).

    Per stratum: the weighted mean score of each group (NaN where a row leaves it empty), their PSI
    (`min_max_ratios`) and harmonic mean over the non-empty groups, and the mean over all its queries;
    then each averaged over the strata where it is defined (NaN where it is nowhere). A row that leaves out a whole
    stratum the data holds (strata drawn together) is NaN in every figure.

    The products are small ones (a block of resamples by one stratum's queries by the groups), run on one
    BLAS thread: with BLAS's own threads on a busy 2-core machine one took 0.5 s instead of 0.4 ms.
    """
    with _blas().limit(limits=1, user_api="blas"):
        return _figures(queries, weights)


@functools.cache
def _blas() -> ThreadpoolController:
    """The process's thread pools, looked up once (a lookup lists the loaded libraries: milliseconds)."""
    return ThreadpoolController()


def _figures(queries: QueryScores, weights: np.ndarray) -> dict[str, np.ndarray]:
    per_stratum: dict[str, list[np.ndarray]] = {}
    absent = np.zeros(len(weights), dtype=bool)  # resamples that leave out a stratum the data holds
    for code in range(len(queries.strata_labels)):
        columns = np.flatnonzero(queries.strata == code)
        inside, scores = weights[:, columns], queries.scores[columns]
        if len(columns):
            absent |= inside.sum(axis=1) == 0
        members = queries.members[columns].astype(np.float64)
        means = weighted_means(inside, members * scores[:, None], members)
        overall = weighted_means(inside, scores[:, None], np.ones((len(columns), 1)))[:, 0]
        per_stratum.setdefault("groups", []).append(means)
        per_stratum.setdefault("psi", []).append(1.0 - min_max_ratios(means))
        per_stratum.setdefault("harmonic_mean", []).append(_harmonic_means(means))
        per_stratum.setdefault(MEAN, []).append(overall)
    averaged = {name: _nanmean(np.stack(values)) for name, values in per_stratum.items()}
    out = {f"position_{g}": averaged["groups"][:, i] for i, g in enumerate(queries.groups)}
    out.update({name: averaged[name] for name in ("harmonic_mean", "psi", MEAN)})
    out[STRATUM_MEANS] = np.stack(per_stratum["groups"], axis=1)  # (R, strata, groups): what PSI = 0 is tested on
    # strata drawn together (sharing documents) can leave one out of a resample: its mean over the other strata is
    # another figure, so that resample is undefined (left out of intervals, `resampling.defined`)
    return {name: np.where(absent.reshape((-1,) + (1,) * (values.ndim - 1)), np.nan, values) for name, values in out.items()}


STRATUM_MEANS = "stratum_means"
"""Not a figure: each stratum's group means, (R, strata, groups), which the test of a flat profile takes."""


def _harmonic_means(means: np.ndarray) -> np.ndarray:
    """(R,) ``G / sum 1/x`` over each row's non-empty groups; 0 where one is 0; NaN where none is non-empty."""
    present = ~np.isnan(means)
    count = present.sum(axis=1)
    with np.errstate(divide="ignore"):
        inverse = np.where(present, 1.0 / np.where(present & (means > 0), means, 1.0), 0.0)
    zero = (present & (means <= 0)).any(axis=1)
    return np.where(count == 0, np.nan, np.where(zero, 0.0, count / np.where(inverse.sum(axis=1) > 0, inverse.sum(axis=1), 1.0)))


def _nanmean(stack: np.ndarray) -> np.ndarray:
    """Mean over the first axis, ignoring NaN; NaN where every value is NaN (without numpy's warning)."""
    defined = ~np.isnan(stack)
    count = defined.sum(axis=0)
    total = np.where(defined, stack, 0.0).sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _resampled(models: Sequence[QueryScores], resampling: Resampling) -> list[dict[str, np.ndarray]]:
    """Each model's figures under the same resamples of the (shared, identically ordered) queries: a unit's count
    weighs each of its queries (`QueryScores.units`). Undefined (NaN) where a stratum's queries are in one unit: every
    resample draws it whole, or (drawn with other strata) whole or not at all, so the resamples would miss that
    stratum's spread (no spread at all where it is the only one)."""
    parts: list[dict[str, list[np.ndarray]]] = [{} for _ in models]
    strata, unit_of = models[0].units()
    if len(strata) == 0:
        raise ValueError("the bootstrap needs at least one query to resample.")
    for counted in stratified_counts(strata, resampling, width=len(unit_of)):  # the counts spread to every query
        weights = counted if models[0].clusters is None else counted[:, unit_of]
        for model, acc in zip(models, parts, strict=True):
            for name, values in figures(model, weights).items():
                acc.setdefault(name, []).append(values)
    alone = _stratum_units(models[0].strata, unit_of)[1].min() < 2
    return [{name: np.full_like(np.concatenate(values), np.nan) if alone else np.concatenate(values)
             for name, values in acc.items()} for acc in parts]


def _estimate(value: float, samples: np.ndarray, resampling: Resampling, *, test: bool) -> Estimate:
    low, high = interval(samples, resampling.confidence)
    return Estimate(None if np.isnan(value) else float(value), pvalue=pvalue(value, samples) if test else None,
                    ci_low=low, ci_high=high)


def intervals(queries: QueryScores, resampling: Resampling) -> dict[str, Estimate]:
    """Every figure with its percentile interval over ``resampling``'s resamples of the queries; PSI's also holds the
    bias-corrected one and reaches down to 0 where the group means are consistent with a flat profile (`_psi_level`)."""
    require_resampling(resampling)
    point = figures(queries, np.ones((1, len(queries.ids))))
    (samples,) = _resampled([queries], resampling)
    estimates = {name: _estimate(float(point[name][0]), samples[name], resampling, test=False)
                 for name in point if name != STRATUM_MEANS}
    psi = estimates["psi"]
    low, high = _psi_level(point, samples).interval(resampling.confidence)
    estimates["psi"] = Estimate(psi.value, pvalue=psi.pvalue, ci_low=low, ci_high=high)
    return estimates


def _psi_level(point: dict[str, np.ndarray], samples: dict[str, np.ndarray]) -> Level:
    """PSI as a level of a profile: the hull of its percentile and bias-corrected percentile intervals (near a flat
    profile PSI is biased up, and the percentile interval with it: docs/method.md#s5), which reaches 0 where the group
    means are consistent with a flat profile (:func:`flat_pvalue`)."""
    value = float(point["psi"][0])

    def bounds(confidence: float) -> tuple[float, float]:
        (low, high), (low_bc, high_bc) = interval(samples["psi"], confidence), bias_corrected(samples["psi"], value, confidence)
        return float(np.fmin(low, low_bc)), float(np.fmax(high, high_bc))  # either, where the other is undefined

    return Level(bounds, flat_pvalue(point[STRATUM_MEANS][0], samples[STRATUM_MEANS]), 0.0)


def flat_pvalue(means: np.ndarray, resampled: np.ndarray) -> float:
    """The p-value of "every stratum's groups have the same mean" (PSI = 0, PSI being the mean over strata of each
    one's): a Wald test of each stratum's defined groups' differences from its first, with their covariance from the
    resamples, chi-squared with as many degrees of freedom as the resamples vary in. ``means``: (strata, groups),
    NaN for an empty group; ``resampled``: (R, strata, groups). 1 where no stratum has two groups; 0 where a
    difference that the resamples never vary is not 0 (it is known exactly); NaN (no test) where fewer than two
    resamples define every difference.

    Why PSI needs it: 1 - min/max has no smooth estimator where groups tie. Noise always pulls the largest mean up
    and the smallest down, so a percentile interval of a flat profile's PSI lies above 0 every time (docs/method.md#s5,
    `benchmarks/flat_coverage.py`). The interval therefore reaches 0 wherever this test keeps a flat profile: a flat
    profile is covered at least as often as the test keeps it, and an interval only grows, so coverage elsewhere is
    kept."""
    from scipy.stats import chi2

    found = flat_differences(means, resampled)
    if found is None:
        return 1.0
    if len(found[1]) < 2:  # too few resamples to measure a covariance: no test
        return float("nan")
    difference, draws = found
    tested = wald(difference, np.atleast_2d(np.cov(draws, rowvar=False)))
    if tested is None:
        return 0.0
    statistic, rank = tested
    return 1.0 if rank == 0 else float(chi2.sf(statistic, rank))


@dataclass
class PairedChanges:
    """Changes of every figure (model minus baseline) on the queries both were scored on."""

    changes: dict[str, Estimate]
    paired: int
    """queries in both (the intersection of query ids)."""
    only_model: int
    only_baseline: int


def paired_changes(model: QueryScores, baseline: QueryScores, resampling: Resampling) -> PairedChanges:
    """``model``'s figures minus ``baseline``'s, each with a paired interval and p-value: both are
    resampled with the same draws of the queries they share (docs/method.md#s5).

    Both are drawn by the clusters either gives (the relevant document is the data's, not the model's: a result
    written before clusters were recorded pairs with one that records them).

    Raises:
        ValueError: no shared query, or a shared query sits in other groups, strata or clusters in the two.
    """
    require_resampling(resampling)
    shared = np.intersect1d(model.ids.astype(str), baseline.ids.astype(str))
    if len(shared) == 0:
        raise ValueError("the two results share no query id, so nothing can be paired.")
    mine, theirs = _rows(model, shared), _rows(baseline, shared)
    a, b = model.subset(mine), baseline.subset(theirs)
    if len(a.groups) != len(b.groups) or set(a.groups) != set(b.groups):
        raise ValueError(f"the two results have other position groups: {list(a.groups)} and {list(b.groups)}.")
    if a.groups != b.groups:  # the same groups in another order: the baseline's columns in the model's
        b = replace(b, members=b.members[:, [b.groups.index(g) for g in a.groups]], groups=a.groups)
    if not np.array_equal(a.members, b.members) or \
            [a.strata_labels[c] for c in a.strata] != [b.strata_labels[c] for c in b.strata]:
        raise ValueError("the shared queries sit in different position groups or strata in the two results.")
    if a.clusters is not None and b.clusters is not None and not _same_partition(a.clusters, b.clusters):
        raise ValueError("the shared queries sit in different clusters (relevant documents) in the two results.")
    clusters = a.clusters if a.clusters is not None else b.clusters
    a = QueryScores(a.ids, a.scores, a.members, a.strata, a.groups, a.strata_labels, clusters)
    b = QueryScores(b.ids, b.scores, b.members, a.strata, a.groups, a.strata_labels, clusters)
    ones = np.ones((1, len(shared)))
    point_a, point_b = figures(a, ones), figures(b, ones)
    samples_a, samples_b = _resampled([a, b], resampling)
    changes = {name: _estimate(float(point_a[name][0] - point_b[name][0]), samples_a[name] - samples_b[name], resampling, test=True)
               for name in point_a if name != STRATUM_MEANS}
    psi = changes["psi"]  # either model may be flat, where the direct interval is biased (`level_change`)
    resampled = samples_a["psi"] - samples_b["psi"]
    low, high, p = level_change(lambda confidence: interval(resampled, confidence), psi.pvalue,
                                _psi_level(point_a, samples_a), _psi_level(point_b, samples_b), resampling.confidence)
    changes["psi"] = Estimate(psi.value, pvalue=p, ci_low=low, ci_high=high)
    return PairedChanges(changes, len(shared), len(model.ids) - len(shared), len(baseline.ids) - len(shared))


def _same_partition(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two namings of the queries' clusters group them alike (a dataset's passages renumbered between two
    runs name the same clusters otherwise)."""
    pairs = set(zip(first.tolist(), second.tolist()))
    return len(pairs) == len(set(first.tolist())) == len(set(second.tolist()))


def _rows(queries: QueryScores, ids: np.ndarray) -> np.ndarray:
    """Rows of ``queries`` holding ``ids``, ordered by (stratum, id) as `QueryScores.build` orders them."""
    position = {qid: row for row, qid in enumerate(queries.ids.astype(str))}
    rows = np.asarray([position[q] for q in ids])
    return rows[np.lexsort((queries.ids[rows].astype(str), queries.strata[rows]))]
