"""The retrieval tasks' intervals and paired changes, proven on simulated data with a known truth: each
nominal 95 % interval covers the truth 93-97 % of the time; the paired test is paired; the same seed
gives the same intervals; and the figures are the tasks' own (PosIR pooled per language)."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_fairpos.fairness import psi
from mteb_fairpos.resampling import Resampling, interval, stratified_counts
from mteb_fairpos.retrieval_intervals import MEAN, QueryScores, figures, intervals, paired_changes
from mteb_fairpos.tasks.grouped_metrics import harmonic_mean, summarize_groups

GROUPS = ("begin", "middle", "end")
TRUE_MEANS = np.array([0.70, 0.55, 0.40])
"""Each group's true mean nDCG@10 in the simulations (well apart, so min and max are the same groups
in nearly every resample and PSI behaves as a smooth figure)."""
PER_GROUP = 200
DATASETS = 600
SETTINGS = Resampling(resamples=400, seed=11)


def _queries(scores: np.ndarray, groups: np.ndarray, strata: list[str] | None = None) -> QueryScores:
    ids = [f"q{i:04d}" for i in range(len(scores))]
    memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
    layers = dict(zip(ids, strata, strict=True)) if strata else None
    return QueryScores.build(dict(zip(ids, scores.tolist(), strict=True)), memberships, GROUPS, layers)


def _draw(rng: np.random.Generator, means: np.ndarray, n: int = PER_GROUP) -> tuple[np.ndarray, np.ndarray]:
    """``3 n`` queries, each in a group drawn at random (as a dataset's queries are), with nDCG-like scores
    in [0, 1]: Beta with the group's mean. Returns scores and group codes."""
    groups = rng.integers(0, len(means), 3 * n)
    per_query = means[groups]
    return rng.beta(2 * per_query, 2 * (1 - per_query)), groups


def _truth(means: np.ndarray) -> dict[str, float]:
    out = {f"position_{g}": float(m) for g, m in zip(GROUPS, means, strict=True)}
    out.update(harmonic_mean=harmonic_mean(means.tolist()), psi=psi(means.tolist()), **{MEAN: float(means.mean())})
    return out


def _coverage(truth: dict[str, float], estimate) -> dict[str, float]:
    """The share of DATASETS simulated datasets whose interval (``estimate()`` draws one dataset and returns the
    estimates by name) covers each true value."""
    hits = dict.fromkeys(truth, 0)
    for _ in range(DATASETS):
        found = estimate()
        for name, value in truth.items():
            hits[name] += found[name].ci_low <= value <= found[name].ci_high
    coverage = {name: count / DATASETS for name, count in hits.items()}
    print("coverage", coverage)
    return coverage


def test_intervals_of_group_means_harmonic_mean_and_psi_cover_the_truth_95_percent():
    rng = np.random.default_rng(2024)
    coverage = _coverage(_truth(TRUE_MEANS), lambda: intervals(_queries(*_draw(rng, TRUE_MEANS)), SETTINGS))
    assert all(0.93 <= share <= 0.97 for share in coverage.values()), coverage


def test_a_flat_profiles_psi_interval_covers_zero_95_percent():
    """PSI's percentile interval alone covered a flat profile's PSI of 0 in no dataset (noise pulls every resample's
    min and max apart). Reaching down to 0 where the test of equal group means keeps a flat profile, it covers 0 as
    often as the test keeps it: at the nominal 95 %."""
    rng = np.random.default_rng(3)
    coverage = _coverage({"psi": 0.0}, lambda: intervals(_queries(*_draw(rng, np.full(3, 0.55))), SETTINGS))
    assert 0.93 <= coverage["psi"] <= 0.97, coverage


def test_psi_near_a_flat_profile_is_covered_with_the_bias_corrected_interval():
    """Three groups of 200 queries scored 0 or 1 with means 0.57/0.55/0.53 (PSI 0.07): the flat test often keeps a
    flat profile, but where it does not, the percentile interval, biased up as PSI is, missed the truth (89-91 %
    coverage over the seeds 1-3 of this simulation, 89.8 % on this test's data). Its hull with Efron's bias-corrected
    percentile interval covers 92.9-95.5 %, at 1 % more width."""
    rng = np.random.default_rng(1)
    means = np.array([0.57, 0.55, 0.53])
    groups = np.repeat(np.arange(3), PER_GROUP)
    datasets, hits = 1200, 0
    for _ in range(datasets):
        scores = (rng.random(len(groups)) < means[groups]).astype(float)
        found = intervals(_queries(scores, groups), Resampling(resamples=400, seed=int(rng.integers(2**31))))["psi"]
        hits += found.ci_low <= psi(means.tolist()) <= found.ci_high
    print("coverage", hits / datasets)
    assert 0.92 <= hits / datasets <= 0.97, hits / datasets


def test_the_test_of_a_flat_profile_takes_each_stratum_and_what_the_data_fix():
    """PSI is the mean over strata of each one's: two strata with opposite profiles average to a flat one, yet
    neither is flat, so PSI's interval does not reach 0. And a difference the resamples never vary (a group scored 1
    by every query, another 0) is known exactly: no test keeps it flat."""
    rng = np.random.default_rng(12)
    scores, groups = [], []
    for means in (np.array([0.65, 0.55, 0.45]), np.array([0.45, 0.55, 0.65])):
        drawn = _draw(rng, means)
        scores.append(drawn[0])
        groups.append(drawn[1])
    strata = ["deu"] * len(groups[0]) + ["fra"] * len(groups[1])
    found = intervals(_queries(np.concatenate(scores), np.concatenate(groups), strata), SETTINGS)
    assert found["position_begin"].ci_low < 0.55 < found["position_begin"].ci_high  # the averaged profile is flat
    assert found["psi"].ci_low > 0.2
    fixed_groups = np.repeat([0, 1, 2], 50)
    fixed = np.concatenate([rng.random(50), np.ones(50), np.zeros(50)])
    psi_fixed = intervals(_queries(fixed, fixed_groups), SETTINGS)["psi"]
    assert (psi_fixed.value, psi_fixed.ci_low, psi_fixed.ci_high) == (1.0, 1.0, 1.0)


def test_paired_changes_cover_the_true_differences_95_percent():
    """A calibrated model that lifts the late groups (multiplying the twin's query scores, plus noise of
    mean 0): correlated per query, with known true changes of every figure."""
    rng = np.random.default_rng(7)
    lift = np.array([1.0, 1.1, 1.3])
    truth = {name: value - _truth(TRUE_MEANS)[name] for name, value in _truth(TRUE_MEANS * lift).items()}

    def changes():
        twin, groups = _draw(rng, TRUE_MEANS)
        calibrated = twin * lift[groups] + rng.normal(0, 0.05, twin.shape)
        return paired_changes(_queries(calibrated, groups), _queries(twin, groups), SETTINGS).changes

    coverage = _coverage(truth, changes)
    assert all(0.93 <= share <= 0.97 for share in coverage.values()), coverage


def test_stratified_figures_cover_the_mean_over_strata():
    """PosIR's figures are means over languages: two strata of other sizes and other means."""
    rng = np.random.default_rng(5)
    other = TRUE_MEANS - 0.1
    truth = {name: (a + b) / 2 for (name, a), b in zip(_truth(TRUE_MEANS).items(), _truth(other).values(), strict=True)}
    strata = ["deu"] * (3 * PER_GROUP) + ["eng"] * (3 * 150)

    def stratified():
        (first, in_first), (second, in_second) = _draw(rng, TRUE_MEANS), _draw(rng, other, 150)
        return intervals(_queries(np.concatenate([first, second]), np.concatenate([in_first, in_second]), strata), SETTINGS)

    coverage = _coverage(truth, stratified)
    assert all(0.93 <= share <= 0.97 for share in coverage.values()), coverage


def test_identical_scores_give_a_zero_change_of_zero_width_and_p_one():
    scores, groups = _draw(np.random.default_rng(1), TRUE_MEANS, 40)
    found = paired_changes(_queries(scores, groups), _queries(scores.copy(), groups), Resampling(resamples=500))
    for name, change in found.changes.items():
        assert (change.value, change.ci_low, change.ci_high, change.pvalue) == (0.0, 0.0, 0.0, 1.0), name
    assert (found.paired, found.only_model, found.only_baseline) == (120, 0, 0)


def test_a_constant_shift_is_that_shift_exactly():
    scores, groups = _draw(np.random.default_rng(2), TRUE_MEANS, 40)
    changes = paired_changes(_queries(scores + 0.05, groups), _queries(scores, groups), Resampling(resamples=500)).changes
    for name in [f"position_{g}" for g in GROUPS] + [MEAN]:
        assert changes[name].value == pytest.approx(0.05)
        assert changes[name].ci_low == pytest.approx(0.05) and changes[name].ci_high == pytest.approx(0.05)
        assert changes[name].pvalue == pytest.approx(2 / 501)  # the smallest p-value of 500 resamples


def test_pairing_narrows_the_interval_against_an_unpaired_bootstrap():
    rng = np.random.default_rng(3)
    twin, groups = _draw(rng, TRUE_MEANS, 100)
    calibrated = twin + rng.normal(0.02, 0.05, twin.shape)  # strongly correlated per query
    a, b = _queries(calibrated, groups), _queries(twin, groups)
    paired = paired_changes(a, b, SETTINGS).changes
    apart = [np.concatenate([figures(q, block)[MEAN] for block in stratified_counts(q.strata, Resampling(1000, seed))])
             for q, seed in ((a, 1), (b, 2))]
    low, high = interval(apart[0] - apart[1], 0.95)
    assert paired[MEAN].ci_high - paired[MEAN].ci_low < 0.5 * (high - low)
    assert paired[MEAN].ci_low > 0 > low  # the paired test sees the small lift the unpaired one cannot


def test_only_shared_queries_are_paired():
    a = _queries(*_draw(np.random.default_rng(4), TRUE_MEANS, 20))
    b = a.subset(np.arange(10, 60))
    found = paired_changes(a, b, Resampling(resamples=200))
    assert (found.paired, found.only_model, found.only_baseline) == (50, 10, 0)
    assert found.changes[MEAN].value == 0.0


def test_the_same_seed_gives_identical_intervals_and_another_moves_them_by_monte_carlo_error():
    queries = _queries(*_draw(np.random.default_rng(6), TRUE_MEANS))
    first = intervals(queries, Resampling(resamples=2000, seed=1))
    assert first == intervals(queries, Resampling(resamples=2000, seed=1))
    other = intervals(queries, Resampling(resamples=2000, seed=2))
    for name, estimate in first.items():
        width = estimate.ci_high - estimate.ci_low
        moved = max(abs(estimate.ci_low - other[name].ci_low), abs(estimate.ci_high - other[name].ci_high))
        # a 2.5 % quantile of 2,000 resamples moves by about 2 % of the interval's width between seeds
        assert 0 < moved < 0.1 * width, name


def test_point_figures_are_the_tasks_own():
    rng = np.random.default_rng(8)
    scores, groups = _draw(rng, TRUE_MEANS, 30)
    queries = _queries(scores, groups)
    summary = summarize_groups(dict(zip(queries.ids, queries.scores, strict=True)),
                               {q: (GROUPS[g],) for q, g in zip(queries.ids, groups, strict=True)}, GROUPS)
    point = {name: values[0] for name, values in figures(queries, np.ones((1, len(scores)))).items()}
    assert point["harmonic_mean"] == pytest.approx(summary.harmonic_mean) and point["psi"] == pytest.approx(summary.psi)
    assert [point[f"position_{g}"] for g in GROUPS] == pytest.approx([summary.scores[g] for g in GROUPS])


def test_posir_figures_pool_per_language_as_the_papers_do():
    """The strata are PosIR's languages: the point figures equal `summarize_scores` of the task's subsets."""
    from mteb_fairpos.tasks.grouped_metrics import POSITION_BINS
    from mteb_fairpos.tasks.posir import summarize_scores
    from mteb_fairpos.tasks.posir.task import position_scores

    rng = np.random.default_rng(9)
    entries, scores, groups, strata = [], {}, {}, {}
    for subset, n in (("deu-Latn.law", 40), ("deu-Latn.game", 25), ("eng-Latn.law", 30)):
        ids = [f"{subset}/q{i}" for i in range(n)]
        values = dict(zip(ids, rng.random(n).tolist(), strict=True))
        places = {q: (("Q1", "Q3")[i % 2], POSITION_BINS[rng.integers(0, 4)]) for i, q in enumerate(ids[:-3])}  # 3 unplaced
        entry = position_scores(values, {**places, **dict.fromkeys(ids[-3:])})
        entry.update(hf_subset=subset, ndcg_at_10=float(np.mean(list(values.values()))))
        entries.append(entry)
        scores.update(values)
        groups.update({q: (bin_,) for q, (_, bin_) in places.items()})
        strata.update(dict.fromkeys(ids, subset.split(".")[0]))
    pooled = summarize_scores(entries)
    point = figures(QueryScores.build(scores, groups, POSITION_BINS, strata), np.ones((1, len(scores))))
    assert point[MEAN][0] == pytest.approx(pooled["main_score"]) and point["psi"][0] == pytest.approx(pooled["psi"])
    for label, value in pooled["positions"].items():
        assert (np.isnan(point[f"position_{label}"][0]) if value is None else point[f"position_{label}"][0] == pytest.approx(value))


def test_the_change_of_psi_to_a_flat_profile_is_covered_95_percent():
    """A calibrated model that makes the twin's profile flat (0.55 in every group). Its own PSI is biased up, away
    from 0, so the change's percentile interval alone covered the true change in 3 % of datasets. With the flat
    model's route (0 less the twin's PSI, each at half the level, `resampling.level_change`) it covers at least at
    the nominal 95 % (93.7-97.5 % over the seeds 7-10 of this simulation; Bonferroni's halves lean conservative)."""
    rng = np.random.default_rng(7)
    lift = 0.55 / TRUE_MEANS
    truth = {"psi": 0.0 - psi(TRUE_MEANS.tolist())}

    def changes():
        twin, groups = _draw(rng, TRUE_MEANS)
        calibrated = twin * lift[groups] + rng.normal(0, 0.05, twin.shape)
        return paired_changes(_queries(calibrated, groups), _queries(twin, groups), SETTINGS).changes

    coverage = _coverage(truth, changes)
    assert 0.93 <= coverage["psi"] <= 0.99, coverage


def test_queries_of_one_passage_are_drawn_together_and_then_cover_95_percent():
    """SQuAD asks several questions of one passage, and how well the passage is embedded is shared by all of them.
    Simulated: 150 passages of 6 questions, a passage effect on every question's mean score. Drawing queries one by
    one covered the overall nDCG@10 in about 80 % of datasets and the harmonic mean in 79 %; drawing each passage with
    its questions covers every figure at the nominal 95 % (93.2-96.3 % over the seeds 3-6 of this simulation)."""
    rng = np.random.default_rng(4)
    passages, per = 150, 6
    ids = [f"q{i:04d}" for i in range(passages * per)]
    clusters = {q: f"passage-{i // per}" for i, q in enumerate(ids)}
    truth = _truth(TRUE_MEANS)
    hits = {kind: dict.fromkeys(truth, 0) for kind in ("passages", "queries")}
    for _ in range(DATASETS):
        groups = rng.integers(0, 3, len(ids))
        means = TRUE_MEANS[groups] + rng.uniform(-0.25, 0.25, passages)[np.arange(len(ids)) // per]
        scores = dict(zip(ids, rng.beta(4 * means, 4 * (1 - means)).tolist()))
        memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
        for kind, drawn in (("passages", clusters), ("queries", None)):
            found = intervals(QueryScores.build(scores, memberships, GROUPS, clusters=drawn), SETTINGS)
            for name, value in truth.items():
                hits[kind][name] += found[name].ci_low <= value <= found[name].ci_high
    coverage = {kind: {name: count / DATASETS for name, count in found.items()} for kind, found in hits.items()}
    assert all(0.93 <= share <= 0.97 for share in coverage["passages"].values()), coverage
    assert coverage["queries"][MEAN] < 0.85 and coverage["queries"]["harmonic_mean"] < 0.85, coverage


def test_a_document_queried_in_several_languages_is_drawn_with_all_its_queries_and_then_covers_95_percent():
    """Cross-lingual PosIR: 300 English documents, each queried once in each of four languages, a document effect
    shared by its queries in every language, and the figures averaged over languages. Each language's documents
    drawn apart covered every figure in only 76-86 % of datasets (seeds 1-4 of this simulation): what a document
    shares across languages was missing from the intervals. Drawn once with all its queries, 92.5-96.2 %."""
    rng = np.random.default_rng(2)
    documents, languages = 300, ("deu", "fra", "spa", "rus")
    offsets = np.linspace(-0.05, 0.05, len(languages))
    truth = {f"position_{g}": float(np.mean(TRUE_MEANS[i] + offsets)) for i, g in enumerate(GROUPS)}
    truth.update(harmonic_mean=float(np.mean([harmonic_mean((TRUE_MEANS + o).tolist()) for o in offsets])),
                 psi=float(np.mean([psi((TRUE_MEANS + o).tolist()) for o in offsets])),
                 **{MEAN: float(np.mean(TRUE_MEANS.mean() + offsets))})
    ids = [f"{language}/q{d:04d}" for language in languages for d in range(documents)]
    document = np.tile(np.arange(documents), len(languages))
    language = np.repeat(np.arange(len(languages)), documents)
    strata = {q: languages[code] for q, code in zip(ids, language, strict=True)}
    drawn = {"together": {q: f"d{d}" for q, d in zip(ids, document, strict=True)},
             "apart": {q: f"{strata[q]}/d{d}" for q, d in zip(ids, document, strict=True)}}
    hits = {kind: dict.fromkeys(truth, 0) for kind in drawn}
    for _ in range(DATASETS):
        groups = rng.integers(0, 3, documents)  # where the answer sits is the document's, in every language
        means = TRUE_MEANS[groups[document]] + offsets[language] + rng.uniform(-0.25, 0.25, documents)[document]
        scores = dict(zip(ids, rng.beta(4 * means, 4 * (1 - means)).tolist()))
        memberships = {q: (GROUPS[groups[d]],) for q, d in zip(ids, document, strict=True)}
        for kind, clusters in drawn.items():
            found = intervals(QueryScores.build(scores, memberships, GROUPS, strata, clusters), SETTINGS)
            for name, value in truth.items():
                hits[kind][name] += found[name].ci_low <= value <= found[name].ci_high
    coverage = {kind: {name: count / DATASETS for name, count in found.items()} for kind, found in hits.items()}
    assert all(0.92 <= share <= 0.97 for share in coverage["together"].values()), coverage
    assert all(share < 0.87 for share in coverage["apart"].values()), coverage


def test_a_resample_that_leaves_out_a_language_drawn_with_others_is_undefined_and_one_unit_gives_no_interval():
    """Languages that share documents are drawn together, so a small one can be left out of a resample. Its mean over
    the other languages is another figure (here far higher: the small language scores 0.05), so such a resample is
    undefined; averaged anyway, the overall nDCG@10's interval spread from 0.015 to 0.118 wide. A language whose
    queries are in one unit gives no interval, as a stratum of one unit always has."""
    from mteb_fairpos.retrieval_intervals import _resampled

    rng = np.random.default_rng(0)
    scores, memberships, strata, clusters = {}, {}, {}, {}
    for language, documents, value in (("deu", 300, None), ("fra", 300, None), ("spa", 300, None), ("ita", 3, 0.05)):
        for d in range(documents):
            query = f"{language}/{d}"
            scores[query] = float(rng.beta(5, 5)) if value is None else value
            memberships[query], strata[query], clusters[query] = (GROUPS[d % 3],), language, f"d{d}"
    queries = QueryScores.build(scores, memberships, GROUPS, strata, clusters)
    (samples,) = _resampled([queries], SETTINGS)
    left_out = np.isnan(samples["stratum_means"][:, queries.strata_labels.index("ita")]).all(axis=1)
    assert 0 < left_out.sum() < len(left_out) / 5
    assert np.array_equal(np.isnan(samples[MEAN]), left_out)
    found = intervals(queries, SETTINGS)[MEAN]
    assert found.ci_low < found.value < found.ci_high and found.ci_high - found.ci_low < 0.03
    one = QueryScores.build({q: v for q, v in scores.items() if not q.startswith("ita/") or q == "ita/0"}, memberships,
                            GROUPS, strata, clusters)
    assert all(np.isnan(e.ci_low) for e in intervals(one, SETTINGS).values())


def test_clusters_are_the_queries_that_share_a_relevant_document():
    from mteb_fairpos.retrieval_intervals import relevant_clusters

    qrels = {"q1": {"d2": 1}, "q2": {"d2": 1, "d9": 1}, "q3": {"d9": 1}, "q4": {"d5": 1}, "q5": {"d1": 0}, "q6": {}}
    assert relevant_clusters(qrels) == {"q1": "d2", "q2": "d2", "q3": "d2", "q4": "d5"}  # q5, q6: no relevant one
    assert relevant_clusters({}) == {}


def test_without_clusters_the_draws_are_the_queries_and_one_cluster_has_no_interval():
    """Every query its own cluster draws exactly as queries drawn alone (the same counts, the same intervals); a
    stratum of one cluster is drawn whole by every resample, so it gets no interval rather than one of no width."""
    rng = np.random.default_rng(9)
    scores, groups = _draw(rng, TRUE_MEANS, 40)
    ids = [f"q{i:04d}" for i in range(len(scores))]
    memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
    values = dict(zip(ids, scores.tolist()))
    alone = intervals(QueryScores.build(values, memberships, GROUPS), SETTINGS)
    own = intervals(QueryScores.build(values, memberships, GROUPS, clusters={q: q for q in ids}), SETTINGS)
    assert {k: (e.ci_low, e.ci_high) for k, e in alone.items()} == {k: (e.ci_low, e.ci_high) for k, e in own.items()}
    one = intervals(QueryScores.build(values, memberships, GROUPS, clusters=dict.fromkeys(ids, "d")), SETTINGS)
    assert one[MEAN].value == pytest.approx(float(np.mean(scores)))
    assert all(np.isnan(e.ci_low) and np.isnan(e.ci_high) for e in one.values())


def test_a_paired_change_draws_the_clusters_either_result_records_and_refuses_two_that_differ():
    rng = np.random.default_rng(10)
    twin, groups = _draw(rng, TRUE_MEANS, 60)
    ids = [f"q{i:04d}" for i in range(len(twin))]
    memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
    passages = {q: f"p{i // 6}" for i, q in enumerate(ids)}
    calibrated = dict(zip(ids, (twin + rng.normal(0, 0.05, len(twin))).tolist()))
    plain = dict(zip(ids, twin.tolist()))
    recorded = paired_changes(QueryScores.build(calibrated, memberships, GROUPS, clusters=passages),
                              QueryScores.build(plain, memberships, GROUPS), SETTINGS).changes
    both = paired_changes(QueryScores.build(calibrated, memberships, GROUPS, clusters=passages),
                          QueryScores.build(plain, memberships, GROUPS, clusters=passages), SETTINGS).changes
    alone = paired_changes(QueryScores.build(calibrated, memberships, GROUPS),
                           QueryScores.build(plain, memberships, GROUPS), SETTINGS).changes
    assert recorded[MEAN].ci_low == both[MEAN].ci_low and recorded[MEAN].ci_low != alone[MEAN].ci_low
    other = {q: f"p{i // 5}" for i, q in enumerate(ids)}
    with pytest.raises(ValueError, match="different clusters"):
        paired_changes(QueryScores.build(calibrated, memberships, GROUPS, clusters=passages),
                       QueryScores.build(plain, memberships, GROUPS, clusters=other), SETTINGS)


def test_one_resample_gives_no_interval_and_no_test():
    """One resample has no spread to measure: no interval (a percentile interval of one value had no width), PSI's
    not widened to 0 by a flat-profile test that had nothing to test, and a change without p-value."""
    rng = np.random.default_rng(11)
    scores, groups = _draw(rng, np.full(3, 0.55))
    one = Resampling(1)
    found = intervals(_queries(scores, groups), one)
    assert all(np.isnan(e.ci_low) and np.isnan(e.ci_high) for e in found.values())
    change = paired_changes(_queries(scores + 0.01, groups), _queries(scores, groups), one).changes["psi"]
    assert np.isnan(change.ci_low) and np.isnan(change.pvalue)


def test_a_cluster_in_two_strata_is_one_unit_that_draws_them_together_and_draws_follow_the_grouping_not_the_names():
    """Cross-lingual PosIR asks of one English document in several languages: the document is one unit, drawn with
    its queries in every language, so the languages it joins are drawn together, and a language that shares no
    document stays apart. And the draws depend on how the queries are grouped, not on the clusters' names: a dataset
    whose passages were renumbered between two runs gives the same intervals, and its results pair."""
    rng = np.random.default_rng(12)
    scores, groups = _draw(rng, TRUE_MEANS, 30)
    ids = [f"q{i:04d}" for i in range(len(scores))]
    memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
    values = dict(zip(ids, scores.tolist()))
    strata = {q: ("deu" if i % 2 else "fra") for i, q in enumerate(ids)}
    passages = {q: f"p{i // 6}" for i, q in enumerate(ids)}  # each passage asked in both languages
    queries = QueryScores.build(values, memberships, GROUPS, strata, passages)
    unit_strata, unit_of = queries.units()
    assert len(unit_strata) == len(set(passages.values())) and len(set(unit_strata.tolist())) == 1
    assert all({strata[q] for q in queries.ids[unit_of == u]} == {"deu", "fra"} for u in range(len(unit_strata)))
    alone = {**strata, **{q: "spa" for q in ids[-12:]}}  # the last two passages are asked in Spanish only
    unit_strata, _ = QueryScores.build(values, memberships, GROUPS, alone, passages).units()
    assert sorted(np.unique(unit_strata, return_counts=True)[1].tolist()) == [2, len(unit_strata) - 2]
    renamed = {q: f"passage-{99 - int(c[1:])}" for q, c in passages.items()}
    again = QueryScores.build(values, memberships, GROUPS, strata, renamed)
    first, second = intervals(queries, SETTINGS), intervals(again, SETTINGS)
    assert {k: (e.ci_low, e.ci_high) for k, e in first.items()} == {k: (e.ci_low, e.ci_high) for k, e in second.items()}
    shifted = dict(zip(ids, (scores * 0.9).tolist()))
    change = paired_changes(QueryScores.build(shifted, memberships, GROUPS, strata, renamed), queries, SETTINGS).changes
    assert change[MEAN].ci_low < change[MEAN].value < change[MEAN].ci_high


def test_few_units_to_draw_are_noted():
    rng = np.random.default_rng(13)
    scores, groups = _draw(rng, TRUE_MEANS, 20)
    ids = [f"q{i:04d}" for i in range(len(scores))]
    memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
    values = dict(zip(ids, scores.tolist()))
    assert QueryScores.build(values, memberships, GROUPS).few_units() is None  # 60 queries drawn one by one
    note = QueryScores.build(values, memberships, GROUPS, clusters={q: f"p{i // 6}" for i, q in enumerate(ids)}).few_units()
    assert note is not None and note.startswith("only 10 relevant documents to draw")


def test_a_query_in_no_cluster_is_its_own_unit_whatever_the_clusters_are_named_and_no_query_is_refused():
    from mteb_fairpos.retrieval_intervals import QueryScores as Scores

    memberships = {q: ("begin",) for q in ("q1", "q2", "q3")}
    queries = Scores.build({"q1": 0.5, "q2": 0.6, "q3": 0.7}, memberships, GROUPS, clusters={"q1": "query q2", "q3": "d"})
    assert len(queries.units()[0]) == 3  # a document named like a query's own unit is another unit
    with pytest.raises(ValueError, match="at least one query"):
        intervals(Scores.build({}, {}, GROUPS), SETTINGS)


def test_holm_keeps_the_chance_of_any_false_change_in_a_table_near_5_percent_and_finds_a_real_one():
    """A table of three configs against one twin, each tested on the harmonic mean and the overall mean: two change
    nothing (the twin's scores plus noise of mean 0, true change 0), one lifts every query by 0.02. Unadjusted, some
    null change comes out significant in about 13 % of tables; Holm's adjustment over the table's six tests keeps
    that chance at or under 5 % (Monte Carlo error about 1.8 % over 150 tables), and still finds the real lift."""
    from mteb_fairpos.results.pairing import holm

    rng = np.random.default_rng(12)
    tables, raw, adjusted, found = 150, 0, 0, 0
    for _ in range(tables):
        twin, groups = _draw(rng, TRUE_MEANS)
        baseline, pvalues = _queries(twin, groups), []
        for shift in (0.0, 0.0, 0.02):
            changes = paired_changes(_queries(twin + shift + rng.normal(0, 0.05, twin.shape), groups), baseline, SETTINGS).changes
            pvalues += [changes[name].pvalue for name in ("harmonic_mean", MEAN)]
        holms = holm(pvalues)
        raw += min(pvalues[:4]) < 0.05
        adjusted += min(holms[:4]) < 0.05
        found += max(holms[4:]) < 0.05
    print("family-wise error: unadjusted", raw / tables, "Holm", adjusted / tables, "power", found / tables)
    assert raw / tables >= 0.08 and adjusted / tables <= 0.06 and found / tables >= 0.9


def test_scores_groups_and_settings_that_would_be_misread_are_refused():
    """An infinite score gave a harmonic mean of 1 with a zero-width interval and a NaN made every figure None; a
    group written as text was read letter by letter, an unknown one was a bare KeyError, and resampling=None failed
    on an attribute."""
    from mteb_fairpos.retrieval_intervals import relevant_clusters

    memberships = {"q1": ("begin",), "q2": ("end",)}
    for bad in (float("inf"), float("nan"), None, "0.5", True):
        with pytest.raises(ValueError, match=rf"query 'q1': score {bad!r} is not a finite number".replace("(", r"\(")):
            QueryScores.build({"q1": bad, "q2": 0.5}, memberships, GROUPS)
    with pytest.raises(TypeError, match="query 'q1': its groups must be a list, got the text 'begin'"):
        QueryScores.build({"q1": 0.5}, {"q1": "begin"}, GROUPS)
    with pytest.raises(ValueError, match=r"query 'q1': group 'nowhere' is not one of the groups \['begin', 'middle', 'end'\]"):
        QueryScores.build({"q1": 0.5}, {"q1": ("nowhere",)}, GROUPS)
    with pytest.raises(TypeError, match="groups must be a list of group names, got the text 'begin'"):
        QueryScores.build({"q1": 0.5}, memberships, "begin")
    with pytest.raises(TypeError, match="scores must map each query id to its value, got list"):
        QueryScores.build([0.5], memberships, GROUPS)
    with pytest.raises(TypeError, match="query ids must all be of one kind"):
        QueryScores.build({"q1": 0.5, 2: 0.6}, memberships, GROUPS)
    with pytest.raises(TypeError, match="the relevance of 'd1' is '1', not a number"):
        relevant_clusters({"q1": {"d1": "1"}})
    queries = QueryScores.build({"q1": 0.5, "q2": np.float32(0.25)}, memberships, GROUPS)  # numpy numbers are numbers
    for call in (lambda: intervals(queries, None), lambda: paired_changes(queries, queries, 400)):
        with pytest.raises(TypeError, match="resampling must be a Resampling"):
            call()
    with pytest.raises(ValueError, match="confidence must lie strictly between 0 and 1; got -0.2"):
        interval(np.arange(10.0), -0.2)  # it returned an inverted interval


def test_clusters_that_name_no_query_are_no_clustering():
    """A clusters mapping that names none of the queries draws them one by one, and says so: it was recorded as
    'queries by relevant document', a clustered bootstrap that did not happen."""
    from mteb_fairpos.results.schema import QUERIES

    memberships = {"q1": ("begin",), "q2": ("end",)}
    for clusters in ({"q1": None, "q2": None}, {"other": "d1"}):
        assert QueryScores.build({"q1": 0.5, "q2": 0.6}, memberships, GROUPS, clusters=clusters).resampled == QUERIES


def test_the_same_groups_in_another_order_pair_as_they_are():
    """Two results that list the same groups in another order pair query by query (they were said to sit in
    different groups); other groups are named."""
    scores, groups = _draw(np.random.default_rng(12), TRUE_MEANS, 30)
    ids = [f"q{i:04d}" for i in range(len(scores))]
    memberships = {q: (GROUPS[g],) for q, g in zip(ids, groups, strict=True)}
    values = dict(zip(ids, scores.tolist()))
    lifted = {q: v + 0.05 for q, v in values.items()}
    expected = paired_changes(QueryScores.build(lifted, memberships, GROUPS), QueryScores.build(values, memberships, GROUPS),
                              Resampling(resamples=200)).changes
    found = paired_changes(QueryScores.build(lifted, memberships, GROUPS),
                           QueryScores.build(values, memberships, GROUPS[::-1]), Resampling(resamples=200)).changes
    assert {k: (e.value, e.ci_low, e.ci_high) for k, e in found.items()} == \
        {k: (e.value, e.ci_low, e.ci_high) for k, e in expected.items()}
    with pytest.raises(ValueError, match=r"other position groups: \['begin', 'middle', 'end'\] and \['begin', 'end'\]"):
        paired_changes(QueryScores.build(lifted, memberships, GROUPS), QueryScores.build(
            {q: values[q] for q in ids if memberships[q] != ("middle",)}, memberships, ("begin", "end")),
            Resampling(resamples=200))
