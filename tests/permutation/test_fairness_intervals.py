"""The probe's fairness intervals and paired changes (docs/method.md#s5-1), proven by simulation: data with a
known per-position mean profile (hence a known fairness) where segment sets share topics, with topic,
topic-by-position, set-by-position and cell effects, so that resampling sets alone under-covers.

The coverage runs use 300 simulated datasets and 200 resamples each (enough for a bootstrap variance, which
the two-way interval is built from) on a fixed design of 150 sets of 3 topics drawn from 150 topics in all
6 orders (2,700 observations), about 10 s in all. Over the seeds 1, 2, 3 and 2024 of this simulation the
fairness interval covered 93.3-95.7 % and the change's 94-95 %; resampling sets alone covered about 80 %."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.stats import t as student_t

from mteb_fairpos.fairness import min_max_ratio
from mteb_fairpos.permutation.intervals import SETS, SETS_AND_TOPICS, fairness_bootstrap
from mteb_fairpos.permutation.stats import position_means, position_model
from mteb_fairpos.resampling import Resampling

BASE = np.array([0.70, 0.62, 0.55])
CALIBRATED = np.array([0.66, 0.62, 0.57])


def design(sets: int, topics: int, rng: np.random.Generator, n: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(set, topic, position) of every observation: ``sets`` distinct sets of n topics, every order of each."""
    drawn: dict[tuple[int, ...], None] = {}
    while len(drawn) < sets:
        drawn.setdefault(tuple(sorted(rng.choice(topics, n, replace=False).tolist())), None)
    rows = [(s, combo[k], p + 1) for s, combo in enumerate(drawn)
            for order in itertools.permutations(range(n)) for p, k in enumerate(order)]
    return tuple(np.array(rows).T)  # type: ignore[return-value]


def shared_effects(set_of, topic_of, position, rng) -> np.ndarray:
    """What two models scored on the same segments share: topic, topic x position, set x position, cell effects."""
    p = position - 1
    return (rng.normal(0, 0.05, topic_of.max() + 1)[topic_of] + rng.normal(0, 0.03, (topic_of.max() + 1, 3))[topic_of, p]
            + rng.normal(0, 0.02, (set_of.max() + 1, 3))[set_of, p]
            + rng.normal(0, 0.02, (set_of.max() + 1, topic_of.max() + 1))[set_of, topic_of])


def test_nominal_95_intervals_cover_the_true_fairness_and_change_when_sets_share_topics():
    rng = np.random.default_rng(2)
    set_of, topic_of, position = design(150, 150, rng)
    true_fairness = min_max_ratio(CALIBRATED)
    true_change = true_fairness - min_max_ratio(BASE)
    reps, hits, change_hits, set_only_hits = 300, 0, 0, 0
    for rep in range(reps):
        shared = shared_effects(set_of, topic_of, position, rng)
        base = BASE[position - 1] + shared + rng.normal(0, 0.03, len(position))
        calibrated = (CALIBRATED[position - 1] + shared + rng.normal(0, 0.03, len(position))
                      + rng.normal(0, 0.02, (150, 3))[topic_of, position - 1])
        settings = Resampling(resamples=200, seed=rep)
        boot = fairness_bootstrap(calibrated, position, set_of, topic_of, settings, baseline_values=base)
        assert boot.units == SETS_AND_TOPICS
        hits += boot.fairness.ci_low <= true_fairness <= boot.fairness.ci_high
        change_hits += boot.change.ci_low <= true_change <= boot.change.ci_high
        sets_only = fairness_bootstrap(calibrated, position, set_of, set_of, settings).fairness  # topics ignored
        set_only_hits += sets_only.ci_low <= true_fairness <= sets_only.ci_high
    assert 0.93 <= hits / reps <= 0.97, hits / reps
    assert 0.93 <= change_hits / reps <= 0.97, change_hits / reps
    assert set_only_hits / reps < 0.88, set_only_hits / reps  # why topics must be resampled too


def test_identical_models_change_by_exactly_zero_with_zero_width_and_p_one():
    rng = np.random.default_rng(1)
    set_of, topic_of, position = design(30, 40, rng)
    values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng)
    for topics in (topic_of, set_of):  # two-way, and sets alone
        change = fairness_bootstrap(values, position, set_of, topics, Resampling(500), baseline_values=values.copy()).change
        assert (change.estimate, change.ci_low, change.ci_high, change.pvalue) == (0.0, 0.0, 0.0, 1.0)


def test_a_constant_shift_moves_every_resampled_profile_by_exactly_that_shift():
    rng = np.random.default_rng(2)
    set_of, topic_of, position = design(30, 40, rng)
    values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng)
    shifted = fairness_bootstrap(values + 0.1, position, set_of, topic_of, Resampling(300))
    plain = fairness_bootstrap(values, position, set_of, topic_of, Resampling(300))
    for factor in ("sets", "topics", "cells"):
        assert np.allclose(shifted.profiles[factor] - plain.profiles[factor], 0.1, rtol=0, atol=1e-12)
    scaled = fairness_bootstrap(values, position, set_of, topic_of, Resampling(300), baseline_values=values * 2)
    assert scaled.change.estimate == pytest.approx(0, abs=1e-12)  # min/max ignores a common scale
    assert scaled.change.ci_high - scaled.change.ci_low == pytest.approx(0, abs=1e-12)


def test_pairing_narrows_the_interval_of_a_change_on_correlated_models():
    rng = np.random.default_rng(3)
    set_of, topic_of, position = design(40, 60, rng)
    shared = shared_effects(set_of, topic_of, position, rng)
    base = BASE[position - 1] + shared + rng.normal(0, 0.01, len(position))
    calibrated = CALIBRATED[position - 1] + shared + rng.normal(0, 0.01, len(position))
    paired = fairness_bootstrap(calibrated, position, set_of, topic_of, Resampling(1000), baseline_values=base).change
    # unpaired: each model's fairness from its own, independent draws
    alone = [fairness_bootstrap(v, position, set_of, topic_of, Resampling(1000, seed=s)).fairness
             for v, s in ((calibrated, 0), (base, 1))]
    unpaired_width = 2 * 1.96 * np.hypot(alone[0].se, alone[1].se)
    assert paired.ci_high - paired.ci_low < 0.5 * unpaired_width
    assert paired.ci_low > 0  # the calibrated profile is fairer, and pairing sees it


def test_the_same_seed_gives_identical_intervals_and_another_moves_them_by_monte_carlo_error():
    rng = np.random.default_rng(4)
    set_of, topic_of, position = design(40, 60, rng)
    values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng)
    first, again, other = (fairness_bootstrap(values, position, set_of, topic_of, Resampling(2000, seed=s)).fairness
                           for s in (0, 0, 1))
    assert (first.ci_low, first.ci_high) == (again.ci_low, again.ci_high)
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    # an SE from R resamples has relative Monte Carlo error about 1/sqrt(2R) (1.6 % at R = 2000); allow 5x
    assert abs(first.se - other.se) <= 5 * first.se / np.sqrt(2 * 2000)
    for a, b in ((first.ci_low, other.ci_low), (first.ci_high, other.ci_high)):
        assert abs(a - b) <= 5 * 1.96 * first.se / np.sqrt(2 * 2000)


def test_sets_without_shared_topics_are_resampled_by_set_and_cover_the_truth():
    rng = np.random.default_rng(1)
    set_of, topic_of, position = design(20, 90, rng)
    topic_of = set_of * 3 + topic_of % 3  # every set its own topics
    truth, hits, reps = min_max_ratio(CALIBRATED), 0, 300
    for rep in range(reps):
        values = CALIBRATED[position - 1] + shared_effects(set_of, topic_of, position, rng) + rng.normal(0, 0.03, len(position))
        boot = fairness_bootstrap(values, position, set_of, topic_of, Resampling(400, seed=rep))
        assert boot.units == SETS and set(boot.profiles) == {"sets"}
        hits += boot.fairness.ci_low <= truth <= boot.fairness.ci_high
    assert 0.93 <= hits / reps <= 0.97, hits / reps
    assert boot.fairness.estimate == pytest.approx(min_max_ratio([values[position == p].mean() for p in (1, 2, 3)]))


def test_two_way_errors_equal_statsmodels_one_way_fits_combined_and_exceed_the_one_way_error():
    rng = np.random.default_rng(6)
    set_of, topic_of, position = design(12, 10, rng)  # 12 sets on 10 topics: topics repeat across sets
    values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng) + rng.normal(0, 0.02, len(position))
    two_way = position_model(values, position, set_of, 3, topics=topic_of)
    one_way = position_model(values, position, set_of, 3)
    x = np.column_stack([np.ones(len(values))] + [(position == p).astype(float) for p in (2, 3)])
    cell = set_of * 1000 + topic_of

    def cov(groups):
        return sm.OLS(values, x).fit(cov_type="cluster", cov_kwds={"groups": groups}).cov_params()

    textbook = np.sqrt(np.diag(cov(set_of) + cov(topic_of) - cov(cell)))
    assert [two_way[k].se for k in (0, 2, 3)] == pytest.approx(textbook, rel=1e-10)
    assert two_way[0].se > one_way[0].se
    means = position_means(values, position, set_of, 3, topics=topic_of)
    assert means[1].se > position_means(values, position, set_of, 3)[1].se


def test_a_negative_two_way_variance_takes_the_larger_one_way_one():
    """With three segment sets the two-way subtraction can leave a mean a negative variance, where statsmodels gives
    no standard error: that mean takes the larger one-way variance, with the two-way t interval (min(3 sets, 5
    topics) - 1 degrees of freedom); the other means keep statsmodels' two-way errors."""
    rng = np.random.default_rng(58)
    set_of, topic_of, position = design(3, 5, rng)
    values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng) + rng.normal(0, 0.02, len(position))
    x = np.column_stack([(position == p).astype(float) for p in (1, 2, 3)])

    def fit(groups):
        return sm.OLS(values, x).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)

    with np.errstate(invalid="ignore"):
        two_way = fit(np.column_stack([set_of, topic_of])).bse
    assert np.isnan(two_way[2]) and np.isfinite(two_way[:2]).all()  # the case: statsmodels gives the third mean none
    means = position_means(values, position, set_of, 3, topics=topic_of)
    larger = max(fit(set_of).bse[2], fit(topic_of).bse[2])
    assert means[3].se == pytest.approx(larger, rel=1e-12)
    half = student_t.ppf(0.975, 2) * larger
    assert (means[3].ci_low, means[3].ci_high) == pytest.approx((means[3].estimate - half, means[3].estimate + half), rel=1e-12)
    assert [means[p].se for p in (1, 2)] == pytest.approx(list(two_way[:2]), rel=1e-12)


def test_per_position_intervals_are_defined_and_cover_with_three_segment_sets():
    """2,000 datasets, each on its own draw of 3 segment sets of 3 of 5 topics (topics shared, 18 observations): every
    mean gets an interval (about 1.5 % of them from the one-way floor above) and the nominal 95 % intervals cover the
    true per-position mean 97 % of the time (the t quantile of 2 degrees of freedom is wide)."""
    hits, reps = np.zeros(3), 2000
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        set_of, topic_of, position = design(3, 5, rng)
        values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng) + rng.normal(0, 0.02, len(position))
        means = position_means(values, position, set_of, 3, topics=topic_of)
        assert all(np.isfinite(means[p].se) for p in (1, 2, 3)), rep
        hits += [means[p].ci_low <= BASE[p - 1] <= means[p].ci_high for p in (1, 2, 3)]
    assert ((0.95 <= hits / reps) & (hits / reps <= 0.99)).all(), hits / reps


def test_bad_inputs_are_refused_with_what_is_wrong():
    rng = np.random.default_rng(7)
    set_of, topic_of, position = design(3, 5, rng)
    values = BASE[position - 1]
    with pytest.raises(ValueError, match="same length"):
        fairness_bootstrap(values[:-1], position, set_of, topic_of, Resampling(10))
    with pytest.raises(ValueError, match="one value per observation"):
        fairness_bootstrap(values, position, set_of, topic_of, Resampling(10), baseline_values=values[:-1])
    with pytest.raises(ValueError, match="at least two segment sets"):
        fairness_bootstrap(values, position, np.zeros_like(set_of), topic_of, Resampling(10))



def test_values_and_positions_that_would_be_misread_are_refused():
    """An infinite value passed for unmeasured (left out unseen), a position of 2.5 was cut to 2, a table of values
    failed in the cell sums, and resampling=None on an attribute."""
    rng = np.random.default_rng(7)
    set_of, topic_of, position = design(3, 5, rng)
    values = BASE[position - 1]
    infinite = values.copy()
    infinite[4] = np.inf
    with pytest.raises(ValueError, match="values: observation 4 is infinite; a value is finite, or NaN where it was not measured"):
        fairness_bootstrap(infinite, position, set_of, topic_of, Resampling(10))
    with pytest.raises(ValueError, match="baseline_values: observation 4 is infinite"):
        fairness_bootstrap(values, position, set_of, topic_of, Resampling(10), baseline_values=infinite)
    with pytest.raises(ValueError, match=r"positions must be one whole number per observation \(1..n\)"):
        fairness_bootstrap(values, position + 0.5, set_of, topic_of, Resampling(10))
    with pytest.raises(ValueError, match=r"values must hold one value per observation, got an array of shape \(\d+, 2\)"):
        fairness_bootstrap(np.column_stack([values, values]), position, set_of, topic_of, Resampling(10))
    with pytest.raises(TypeError, match="resampling must be a Resampling"):
        fairness_bootstrap(values, position, set_of, topic_of, None)
    for gap in (np.where(position == 2, 1, position), np.where(position == 3, 5, position)):  # the fairness of the rest
        with pytest.raises(ValueError, match=r"observations must cover positions 1..\d; got \[1, (3|2, 5)\]"):
            fairness_bootstrap(values, gap, set_of, topic_of, Resampling(10))
    unmeasured = np.where(position == 2, np.nan, values)  # a position without one measured value is a gap too
    with pytest.raises(ValueError, match=r"measured observations must cover positions 1..3; got \[1, 3\]"):
        fairness_bootstrap(unmeasured, position, set_of, topic_of, Resampling(10))
    last = position < position.max()  # a missing last position, where n is known
    with pytest.raises(ValueError, match=rf"must cover positions 1..{position.max()}; got"):
        fairness_bootstrap(values[last], position[last], set_of[last], topic_of[last], Resampling(10), n=int(position.max()))
    as_floats = fairness_bootstrap(values, position.astype(float), set_of, topic_of, Resampling(10)).profiles  # 2.0 is 2
    as_ints = fairness_bootstrap(values, position, set_of, topic_of, Resampling(10)).profiles
    assert as_floats.keys() == as_ints.keys() and all(np.array_equal(as_floats[k], as_ints[k]) for k in as_ints)

def test_pooled_subsets_are_the_mean_of_their_fairness_and_one_subset_pools_to_itself():
    """The probe task's main score: the mean over subsets of each subset's fairness, bootstrapped with the
    subsets together; a single subset gives exactly the plain bootstrap (the same draws)."""
    from mteb_fairpos.permutation import fairness_bootstrap
    from mteb_fairpos.resampling import Resampling

    rng = np.random.default_rng(4)
    n = 240
    positions = np.tile([1, 2, 3], n // 3)
    sets = np.repeat(np.arange(n // 6), 6) % 20
    topics = rng.integers(0, 15, n)
    values = 0.7 - 0.05 * positions + rng.normal(0, 0.05, n)
    subsets = np.where(np.arange(n) < n // 2, "en", "de")
    settings = Resampling(resamples=300, seed=3)
    alone = fairness_bootstrap(values, positions, sets, topics, settings)
    one = fairness_bootstrap(values, positions, sets, topics, settings, strata=["en"] * n)
    assert (one.fairness.estimate, one.fairness.ci_low, one.fairness.ci_high) == (
        alone.fairness.estimate, alone.fairness.ci_low, alone.fairness.ci_high)
    pooled = fairness_bootstrap(values, positions, sets, topics, settings, strata=subsets)
    parts = [fairness_bootstrap(values[subsets == s], positions[subsets == s], sets[subsets == s], topics[subsets == s],
                                settings).fairness.estimate for s in ("en", "de")]
    assert pooled.fairness.estimate == pytest.approx(np.mean(parts), rel=1e-12)
    assert pooled.fairness.ci_low < pooled.fairness.estimate < pooled.fairness.ci_high


def pooled_coverage(seed: int, reps: int = 300) -> tuple[float, float]:
    """Coverage of the pooled fairness (mean over two subsets) and its paired change, where the two subsets'
    segment sets draw on the same topics and share the topics' effects (as translated pages do)."""
    rng = np.random.default_rng(seed)
    first, second = design(60, 60, rng), design(60, 60, rng)
    set_of = np.concatenate([first[0], second[0]])
    topic_of = np.concatenate([first[1], second[1]])
    position = np.concatenate([first[2], second[2]])
    subset = np.repeat(["en", "de"], [len(first[0]), len(second[0])])
    other = np.array([0.60, 0.58, 0.50])  # the second subset's calibrated profile
    truth = np.where(subset == "en", 0, 1)
    true_fairness = (min_max_ratio(CALIBRATED) + min_max_ratio(other)) / 2
    true_change = true_fairness - (min_max_ratio(BASE) + min_max_ratio(BASE - 0.05)) / 2
    hits = change_hits = 0
    for rep in range(reps):
        shared = shared_effects(np.where(truth == 0, set_of, set_of + 60), topic_of, position, rng)
        base = np.where(truth == 0, BASE[position - 1], BASE[position - 1] - 0.05) + shared + rng.normal(0, 0.03, len(position))
        calibrated = (np.where(truth == 0, CALIBRATED[position - 1], other[position - 1]) + shared
                      + rng.normal(0, 0.03, len(position)) + rng.normal(0, 0.02, (60, 3))[topic_of, position - 1])
        boot = fairness_bootstrap(calibrated, position, set_of, topic_of, Resampling(resamples=200, seed=rep),
                                  baseline_values=base, strata=subset)
        hits += boot.fairness.ci_low <= true_fairness <= boot.fairness.ci_high
        change_hits += boot.change.ci_low <= true_change <= boot.change.ci_high
    return hits / reps, change_hits / reps


def test_nominal_95_intervals_cover_the_pooled_fairness_of_subsets_that_share_topics():
    """The probe task's main score (the mean over subsets) and its change: two subsets of 60 sets each on the
    same 60 topics, whose effects both subsets share. Over the seeds 5-8 of this simulation the pooled
    fairness interval covered 93.0-96.7 % and the change's 93.3-96.7 % (300 datasets, 200 resamples each)."""
    fairness_coverage, change_coverage = pooled_coverage(5)
    assert 0.93 <= fairness_coverage <= 0.97, fairness_coverage
    assert 0.93 <= change_coverage <= 0.97, change_coverage


def test_one_resample_gives_no_interval_and_no_test():
    """One resample has no spread to measure: the change gets no interval and no p-value, where a t test divided by
    its zero error called any change certain (p = 0)."""
    rng = np.random.default_rng(4)
    set_of, topic_of, position = design(30, 40, rng)
    values = BASE[position - 1] + shared_effects(set_of, topic_of, position, rng)
    other = values + rng.normal(0, 0.05, len(values))
    for topics in (topic_of, set_of):
        boot = fairness_bootstrap(other, position, set_of, topics, Resampling(1), baseline_values=values)
        assert boot.change.estimate != 0
        assert all(np.isnan(x) for x in (boot.change.se, boot.change.ci_low, boot.change.ci_high, boot.change.pvalue))
        assert np.isnan(boot.fairness.pvalue) and np.isnan(boot.fairness.ci_low)


def test_pooled_subsets_draw_their_sets_within_themselves():
    """Eight subsets of two segment sets each: a draw of sets across subsets left some subset without a set in most
    resamples (its fairness undefined, and the interval with it). Drawn within each subset, every resample holds every
    subset with its two sets: the interval is defined, and each resample keeps each subset's number of sets."""
    rng = np.random.default_rng(5)
    parts = [design(2, 12, rng) for _ in range(8)]
    set_of = np.concatenate([p[0] for p in parts])
    topic_of = np.concatenate([p[1] for p in parts])
    position = np.concatenate([p[2] for p in parts])
    subset = np.repeat(np.arange(8), [len(p[0]) for p in parts]).astype(str)
    values = BASE[position - 1] + shared_effects(set_of + 100 * subset.astype(int), topic_of, position, rng)
    boot = fairness_bootstrap(values, position, set_of, topic_of, Resampling(500), strata=subset)
    assert np.isfinite(boot.profiles["sets"]).all() and np.isfinite(boot.fairness.samples["sets"]).all()
    assert boot.fairness.ci_low < boot.fairness.estimate < boot.fairness.ci_high


def test_a_strong_set_effect_is_why_sets_are_resampled_too():
    """The other half of the two-way design: with a strong set x position effect (sd 0.07) on 60 sets that share 60
    topics, errors from the topics alone cover too little, and the two-way interval still covers at its nominal
    95 %. (In the test above the set effects are small next to the topic effects, so topics alone would pass there.)"""
    rng = np.random.default_rng(1)
    set_of, topic_of, position = design(60, 60, rng)
    true_fairness = min_max_ratio(CALIBRATED)
    topics = len(np.unique(topic_of))
    reps, hits, topic_hits = 300, 0, 0
    p = position - 1
    for rep in range(reps):
        effects = (rng.normal(0, 0.05, 60)[topic_of] + rng.normal(0, 0.03, (60, 3))[topic_of, p]
                   + rng.normal(0, 0.07, (60, 3))[set_of, p] + rng.normal(0, 0.02, (60, 60))[set_of, topic_of])
        values = CALIBRATED[p] + effects + rng.normal(0, 0.03, len(p))
        boot = fairness_bootstrap(values, position, set_of, topic_of, Resampling(resamples=200, seed=rep)).fairness
        hits += boot.ci_low <= true_fairness <= boot.ci_high
        # the same bootstrap's topic factor alone, in the same t form (G / (G - 1), G - 1 degrees of freedom)
        half = student_t.ppf(0.975, min(60, topics) - 1) * (np.var(boot.samples["topics"]) * topics / (topics - 1)) ** 0.5
        topic_hits += abs(boot.estimate - true_fairness) <= half
    assert 0.93 <= hits / reps <= 0.97, hits / reps
    assert topic_hits / reps < 0.88, topic_hits / reps


def test_a_flat_profiles_fairness_interval_covers_one_95_percent():
    """min/max of a flat profile: noise pulls the largest mean up and the smallest down, so the t interval alone
    covered a fairness of 1 in about 77 % of datasets. Reaching up to 1 where the test of equal position means keeps
    a flat profile, it covers 1 at the nominal 95 %."""
    rng = np.random.default_rng(6)
    set_of, topic_of, position = design(150, 150, rng)
    flat = np.full(3, 0.62)
    reps, hits = 300, 0
    for rep in range(reps):
        values = flat[position - 1] + shared_effects(set_of, topic_of, position, rng) + rng.normal(0, 0.03, len(position))
        boot = fairness_bootstrap(values, position, set_of, topic_of, Resampling(resamples=200, seed=rep)).fairness
        hits += boot.ci_low <= 1.0 <= boot.ci_high
    assert 0.93 <= hits / reps <= 0.97, hits / reps


def pooled_flat_coverage(sizes: list[int], seed: int, reps: int, profile: tuple[float, ...] = (0.62, 0.62, 0.62)) -> float:
    """How often the pooled fairness interval covers the true fairness of ``profile`` (1 for the flat default) in
    every subset, subsets of ``sizes`` segment sets each on 24 shared topics."""
    rng = np.random.default_rng(seed)
    parts = [design(sets, 24, rng) for sets in sizes]
    set_of = np.concatenate([part[0] + 12 * k for k, part in enumerate(parts)])
    topic_of = np.concatenate([part[1] for part in parts])
    position = np.concatenate([part[2] for part in parts])
    subset = np.repeat(["en", "de", "fr"][:len(sizes)], [len(part[0]) for part in parts])
    means, hits = np.asarray(profile), 0
    for rep in range(reps):
        values = means[position - 1] + shared_effects(set_of, topic_of, position, rng) + rng.normal(0, 0.03, len(position))
        boot = fairness_bootstrap(values, position, set_of, topic_of, Resampling(resamples=200, seed=rep),
                                  strata=subset).fairness
        hits += boot.ci_low <= min_max_ratio(means) <= boot.ci_high
    return hits / reps


def test_a_pooled_flat_profiles_fairness_interval_covers_one_95_percent():
    """The task's main score pools subsets, each with few segment sets (three of 12 sets on 24 shared topics here).
    One joint test of flatness with the degrees of freedom of all subsets' sets rejected a flat profile too often
    (coverage of 1 about 85 % over the seeds 1-4 of this simulation); each subset tested with its own sets, the tests
    combined by Simes', it covers 1 at the nominal 95 % (95.3-96.7 % over the same seeds)."""
    coverage = pooled_flat_coverage([12, 12, 12], seed=1, reps=300)
    assert 0.93 <= coverage <= 0.97, coverage


def test_a_pooled_profile_near_flat_is_covered_with_the_bias_corrected_interval():
    """Near a flat profile min/max is biased low, and the pooled score's subsets add their biases while its standard
    error shrinks: a pooled 0.62/0.62/0.60 of three subsets of 12 sets was covered in 89.4 % of 2,400 datasets (seeds
    1-8 of this simulation; 89.7 % over the seeds 1-4 asserted here). The interval now also holds the t interval
    around the estimate less its bootstrap bias: 93.3 % (93.2 % here), still short of 95 %, since the bootstrap
    sees only part of the bias where positions tie (docs/method.md#s5)."""
    coverage = np.mean([pooled_flat_coverage([12, 12, 12], seed, 300, (0.62, 0.62, 0.60)) for seed in (1, 2, 3, 4)])
    assert 0.915 <= coverage <= 0.97, coverage


def test_a_subset_too_small_to_test_does_not_reject_a_pooled_flat_profile():
    """Subsets of 12, 12 and 2 segment sets: the third has fewer sets than its two position differences need, so no
    test. It used to count as rejecting a flat profile (the resamples vary in one direction only, and a difference
    off it looked known exactly): a pooled flat profile was covered in 57 % of datasets. Counted as not rejecting, the
    others decide, and a flat profile is covered at least at the nominal 95 % (96-98 % over the seeds 2-4); a tilted other
    subset is still rejected, and with no subset testable there is no test."""
    from mteb_fairpos.permutation.intervals import _flat_pvalue

    coverage = pooled_flat_coverage([12, 12, 2], seed=2, reps=200)
    assert 0.93 <= coverage <= 0.99, coverage
    resampled = {"sets": np.random.default_rng(3).normal(0, 0.01, (200, 6))}
    tilted = np.array([[0.6, 0.6, 0.6], [0.9, 0.6, 0.3]])
    assert _flat_pvalue(tilted, resampled, [{"sets": 1}, {"sets": 20}]) < 1e-6
    assert np.isnan(_flat_pvalue(tilted, resampled, [{"sets": 1}, {"sets": 2}]))


def test_subsets_of_few_sets_take_their_own_small_sample_factor():
    """The main score pools subsets, and each subset's segment sets are drawn within it, so a subset of ``n`` sets'
    resampled figure varies by ``(n - 1) / n`` of its variance. Four subsets of 4 sets each (no shared topics), a
    calibrated model and its twin both well apart from flat, 2,000 datasets: with the factor of all 16 sets pooled
    (16/15) and 15 degrees of freedom, the calibrated model's standard error was 0.86 of its estimate's spread over
    datasets, its interval covered the truth in 91.9 % and the change's in 92.6 %; with each subset's own 4/3
    and 12 degrees of freedom (16 sets less 4 subsets), 0.96, 94.9 % and 95.2 %."""
    rng = np.random.default_rng(1)
    calibrated, twin = np.array([0.80, 0.65, 0.55]), np.array([0.80, 0.60, 0.45])
    rows = [(s, p + 1) for s in range(16) for order in itertools.permutations(range(3)) for p in order]
    set_of, position = (np.array(column) for column in zip(*rows))
    found = []
    for rep in range(2000):
        effect = rng.normal(0, 0.03, (16, 3))[set_of, position - 1]
        noise = rng.normal(0, 0.03, len(position))  # the models share half of it, as a model and its twin do
        values = calibrated[position - 1] + effect + 0.5 * noise + rng.normal(0, 0.03 * 0.75 ** 0.5, len(position))
        boot = fairness_bootstrap(values, position, set_of, set_of, Resampling(resamples=400, seed=rep),
                                  baseline_values=twin[position - 1] + effect + noise, strata=set_of // 4)
        change = min_max_ratio(calibrated) - min_max_ratio(twin)
        found.append((boot.fairness.estimate, boot.fairness.se,
                      boot.fairness.ci_low <= min_max_ratio(calibrated) <= boot.fairness.ci_high,
                      boot.change.ci_low <= change <= boot.change.ci_high))
    estimates, errors, level, paired = np.array(found).T
    assert 0.92 <= np.mean(errors) / np.std(estimates) <= 1.08
    assert 0.935 <= np.mean(level) <= 0.965
    assert 0.935 <= np.mean(paired) <= 0.965


def test_the_change_to_a_flat_profile_is_covered_95_percent():
    """A calibrated model with a flat profile (fairness 1) against a twin that is not: the flat model's fairness is
    biased below 1, so the change's t interval alone covered the true change in 88-91 % of datasets. With the flat
    model's route (1 less the twin's fairness, each at half the level, `resampling.level_change`) it covers at least
    at the nominal 95 % (96-97 % over the seeds 1-4 of this simulation; Bonferroni's halves lean conservative), and
    the interval and the p-value agree on every dataset."""
    rng = np.random.default_rng(1)
    set_of, topic_of, position = design(40, 40, rng)
    flat = np.full(3, 0.62)
    true_change = 1.0 - min_max_ratio(CALIBRATED)
    reps, hits = 300, 0
    for rep in range(reps):
        shared = shared_effects(set_of, topic_of, position, rng)
        twin = CALIBRATED[position - 1] + shared + rng.normal(0, 0.03, len(position))
        calibrated = (flat[position - 1] + shared + rng.normal(0, 0.03, len(position))
                      + rng.normal(0, 0.02, (40, 3))[topic_of, position - 1])
        change = fairness_bootstrap(calibrated, position, set_of, topic_of, Resampling(resamples=200, seed=rep),
                                    baseline_values=twin).change
        hits += change.ci_low <= true_change <= change.ci_high
        assert (change.pvalue < 0.05) == (not change.ci_low <= 0 <= change.ci_high), change
    assert 0.93 <= hits / reps <= 0.99, hits / reps
