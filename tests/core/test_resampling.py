"""The shared bootstrap: reproducible count matrices, paired differences that are exactly paired, and
intervals and p-values that behave at the edges (identical models, a constant shift, undefined resamples)."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_fairpos.fairness import min_max_ratio, min_max_ratios
from mteb_fairpos.resampling import Resampling, bias_corrected, counts, interval, pvalue, weighted_means


def test_counts_draw_n_of_n_units_and_are_reproducible_by_seed_and_stream():
    settings = Resampling(resamples=300, seed=5)
    drawn = counts(17, settings)
    assert drawn.shape == (300, 17) and np.all(drawn.sum(axis=1) == 17)
    assert np.array_equal(drawn, counts(17, settings))
    assert not np.array_equal(drawn, counts(17, settings, stream=1))
    assert not np.array_equal(drawn, counts(17, Resampling(resamples=300, seed=6)))


def test_weighted_means_of_groups_match_a_loop_over_resamples():
    rng = np.random.default_rng(0)
    scores, groups = rng.random(40), rng.integers(0, 3, 40)
    weights = counts(40, Resampling(resamples=50, seed=1))
    members = np.eye(4)[groups]  # group 3 holds no unit
    means = weighted_means(weights, members * scores[:, None], members)
    for row, resample in zip(weights, means, strict=True):
        for g in range(3):
            chosen = np.repeat(np.arange(40), row.astype(int))
            chosen = chosen[groups[chosen] == g]
            assert resample[g] == pytest.approx(scores[chosen].mean()) if len(chosen) else np.isnan(resample[g])
        assert np.isnan(resample[3])


def test_identical_models_give_a_zero_width_interval_and_p_one_and_a_shift_gives_the_shift():
    rng = np.random.default_rng(1)
    scores = rng.random(60)
    weights = counts(60, Resampling(resamples=500))
    same = weights @ scores / 60 - weights @ scores / 60
    assert interval(same, 0.95) == (0.0, 0.0) and pvalue(0.0, same) == 1.0
    shifted = weights @ (scores + 0.25) / 60 - weights @ scores / 60
    low, high = interval(shifted, 0.95)
    assert low == pytest.approx(0.25) and high == pytest.approx(0.25)
    assert pvalue(0.25, shifted) == pytest.approx(2 / 501)  # the smallest p-value of 500 resamples


def test_the_p_value_and_the_interval_agree_on_a_skewed_bootstrap_distribution():
    """A centred p-value (the basic bootstrap's) can call 0 plausible while the percentile interval excludes
    it (seen on a PSI change: interval [-0.040, -0.006], centred p = 0.108); the p-value the interval
    inverts cannot."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        samples = -rng.gamma(rng.uniform(0.5, 4), 0.01, 1000) + rng.uniform(-0.02, 0.03)
        low, high = interval(samples, 0.95)
        excluded = not low <= 0 <= high
        p = pvalue(float(np.median(samples)), samples)
        assert (p < 0.05) == excluded or abs(p - 0.05) < 0.005, (low, high, p)


def test_the_bias_corrected_interval_moves_against_the_resamples_bias_and_is_the_percentile_one_without():
    """Resamples normal around ``estimate + d`` with spread ``s``: the share below the estimate is ``Phi(-d/s)``, so
    ``z0 = -d/s`` and the BC interval is ``estimate - d +- 1.96 s``, the percentile interval moved by twice the bias.
    Centred on the estimate, the resamples give the percentile interval itself."""
    from scipy.stats import norm

    quantiles = norm.ppf((np.arange(200_000) + 0.5) / 200_000)  # an exact normal sample
    estimate, d, s = 0.3, 0.005, 0.01
    low, high = bias_corrected(estimate + d + s * quantiles, estimate, 0.95)
    assert low == pytest.approx(estimate - d - 1.959964 * s, abs=2e-5)
    assert high == pytest.approx(estimate - d + 1.959964 * s, abs=2e-5)
    centred = estimate + s * quantiles
    assert bias_corrected(centred, estimate, 0.95) == pytest.approx(interval(centred, 0.95), abs=1e-9)
    assert all(np.isnan(bias_corrected(centred[:1], estimate, 0.95)))
    assert all(np.isnan(bias_corrected(centred, float("nan"), 0.95)))


def test_an_interval_is_undefined_when_most_resamples_are():
    samples = np.array([np.nan] * 6 + [0.1, 0.2, 0.3, 0.4])
    assert np.isnan(interval(samples, 0.95)).all() and np.isnan(pvalue(0.2, samples))
    assert interval(samples[3:], 0.5) == (pytest.approx(0.175), pytest.approx(0.325))


def test_min_max_ratios_follow_the_one_rule_row_by_row():
    rows = np.array([[0.5, 1.0, np.nan], [np.nan, np.nan, 0.3], [-0.2, 0.0, np.nan], [0.2, 0.4, 0.8]])
    expected = [min_max_ratio([None if np.isnan(v) else v for v in row]) for row in rows]
    got = min_max_ratios(rows)
    assert [None if np.isnan(v) else v for v in got] == expected


@pytest.mark.parametrize("bad", [dict(resamples=0), dict(confidence=1.0), dict(confidence=0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        Resampling(**bad)


def _t_bounds(estimate: float, se: float):
    from scipy.stats import norm

    return lambda confidence: (estimate - norm.ppf(0.5 + confidence / 2) * se, estimate + norm.ppf(0.5 + confidence / 2) * se)


def test_a_change_between_levels_that_may_be_flat_has_an_interval_and_p_value_that_agree():
    """`level_change` widens a change's interval by the routes of a flat model (its flat value less the other's
    interval): on random changes and levels, p < 1 - confidence exactly where the widened interval leaves out 0, at
    every confidence, and the interval always holds the change's own."""
    from scipy.stats import norm

    from mteb_fairpos.resampling import Level, level_change

    rng = np.random.default_rng(8)
    for _ in range(300):
        model = Level(_t_bounds(rng.uniform(0.8, 1.0), rng.uniform(0.01, 0.05)), rng.uniform(0, 0.2), 1.0)
        baseline = Level(_t_bounds(rng.uniform(0.8, 1.0), rng.uniform(0.01, 0.05)), rng.uniform(0, 0.2), 1.0)
        estimate, se = rng.normal(0, 0.05), rng.uniform(0.01, 0.05)
        direct, p_direct = _t_bounds(estimate, se), float(2 * norm.sf(abs(estimate) / se))
        for confidence in (0.8, 0.9, 0.95, 0.99):
            low, high, p = level_change(direct, p_direct, model, baseline, confidence)
            assert low <= direct(confidence)[0] and direct(confidence)[1] <= high
            assert p >= p_direct
            if abs(p - (1 - confidence)) > 1e-9:
                assert (p < 1 - confidence) == (not low <= 0 <= high), (p, confidence, low, high)


def test_a_change_known_exactly_or_between_levels_never_flat_is_the_changes_own_interval():
    from mteb_fairpos.resampling import Level, level_change

    flat = Level(_t_bounds(0.99, 0.02), 0.9, 1.0)
    assert level_change(lambda confidence: (0.0, 0.0), 1.0, flat, flat, 0.95) == (0.0, 0.0, 1.0)
    never = Level(_t_bounds(0.8, 0.02), 0.0, 1.0)
    direct = _t_bounds(0.05, 0.02)
    assert level_change(direct, 0.012, never, never, 0.95) == (*direct(0.95), 0.012)
    # the model may be flat: the change reaches 1 less the baseline's interval at half the level
    low, high, _ = level_change(direct, 0.012, Level(_t_bounds(0.97, 0.01), 0.5, 1.0), never, 0.95)
    assert (low, high) == (direct(0.95)[0], pytest.approx(1 - never.interval(0.975)[0]))


def test_helpers_refuse_what_numpy_would_fail_on_or_turn_around():
    """A confidence of 1.5 failed in numpy's quantile and one of -0.2 gave an inverted interval; one profile where
    a table of them belongs was an AxisError; 3.5 units failed in numpy's multinomial."""
    samples = np.linspace(0.0, 1.0, 101)
    for confidence in (1.5, -0.2, 95, True):
        for call in (lambda: interval(samples, confidence), lambda: bias_corrected(samples, 0.5, confidence)):
            with pytest.raises(ValueError, match="confidence must lie strictly between 0 and 1"):
                call()
    with pytest.raises(ValueError, match=r"profiles must be an \(R, G\) array, one profile a row; got shape \(2,\)"):
        min_max_ratios(np.array([0.5, 0.25]))
    with pytest.raises(ValueError, match="a whole number of at least one unit to resample; got 3.5"):
        counts(3.5, Resampling(resamples=10))
    assert counts(np.int64(3), Resampling(resamples=10)).shape == (10, 3)
    from mteb_fairpos.fairness import psi

    for text in ("0.5", ["0.5", "0.25"]):  # letter by letter, and text silently taken as numbers
        with pytest.raises(TypeError, match="a profile is a list of numbers"):
            psi(text)
    assert psi(value for value in (0.5, 0.25)) == 0.5  # any iterable of numbers


def test_more_resamples_than_a_bootstrap_can_hold_are_refused_when_set_up():
    """10**12 passed, and numpy failed to allocate 14.6 TiB after every document was embedded; a stored result's
    settings are still read as they are."""
    from mteb_fairpos.resampling import MAX_RESAMPLES, drawable
    from mteb_fairpos.tasks.permutation import PermutationFairnessSample

    assert drawable(Resampling(resamples=MAX_RESAMPLES)).resamples == MAX_RESAMPLES
    with pytest.raises(ValueError, match="resamples must be at most 1,000,000; got 1,000,000,000,000"):
        PermutationFairnessSample(resamples=10**12)
    assert Resampling(resamples=10**7).resamples == 10**7  # as a stored result records it
