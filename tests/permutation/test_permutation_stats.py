"""Statistics of the probe against hand-checkable synthetic data."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_fairpos.permutation import (
    language_effect,
    lead_contrast,
    position_fairness,
    position_means,
    position_model,
    profile_scores,
)

PROFILE = {1: 0.90, 2: 0.60, 3: 0.70}
OFFSETS = [0.00, 0.02, -0.01, 0.03]  # one shift per segment set (cluster)


def _data(profile=PROFILE, offsets=OFFSETS, orders=6, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    values, positions, clusters = [], [], []
    for s, offset in enumerate(offsets):
        for _ in range(orders):
            for p, mean in profile.items():
                values.append(mean + offset + noise * rng.standard_normal())
                positions.append(p)
                clusters.append(f"set{s}")
    return np.array(values), np.array(positions), np.array(clusters)


def test_known_profile_gives_known_betas_and_means():
    y, pos, cl = _data()
    shift = float(np.mean(OFFSETS))  # 0.01
    betas = position_model(y, pos, cl, 3)
    assert betas[0].estimate == pytest.approx(0.90 + shift)
    assert betas[2].estimate == pytest.approx(-0.30)
    assert betas[3].estimate == pytest.approx(-0.20)
    means = position_means(y, pos, cl, 3)
    assert [means[p].estimate for p in (1, 2, 3)] == pytest.approx([0.91, 0.61, 0.71])
    assert position_fairness([0.91, 0.61, 0.71]) == pytest.approx(0.61 / 0.91)
    # the cluster shifts move every position of a set alike, so the differences have no error at all
    assert betas[2].se == pytest.approx(0.0, abs=1e-8) and betas[3].se == pytest.approx(0.0, abs=1e-8)


def _manual_cluster_se(x, y, groups):
    """Cluster-robust sandwich with statsmodels' small-sample factor G/(G-1) * (N-1)/(N-K), by hand."""
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    bread = np.linalg.inv(x.T @ x)
    meat = np.zeros((x.shape[1], x.shape[1]))
    for g in np.unique(groups):
        score = x[groups == g].T @ resid[groups == g]
        meat += np.outer(score, score)
    n, k, g = len(y), x.shape[1], len(np.unique(groups))
    cov = bread @ meat @ bread * (g / (g - 1)) * ((n - 1) / (n - k))
    return beta, np.sqrt(np.diag(cov))


def test_cluster_robust_standard_errors_match_the_sandwich_formula():
    y, pos, cl = _data(noise=0.05, seed=3)
    x = np.column_stack([np.ones_like(y), pos == 2, pos == 3]).astype(float)
    beta, se = _manual_cluster_se(x, y, cl)
    fitted = position_model(y, pos, cl, 3)
    assert [fitted[k].estimate for k in (0, 2, 3)] == pytest.approx(beta)
    assert [fitted[k].se for k in (0, 2, 3)] == pytest.approx(se)
    # t inference with G - 1 = 3 degrees of freedom
    from scipy import stats

    t = fitted[2].estimate / fitted[2].se
    assert fitted[2].pvalue == pytest.approx(2 * stats.t.sf(abs(t), df=3))
    half = stats.t.ppf(0.975, df=3) * fitted[2].se
    assert (fitted[2].ci_low, fitted[2].ci_high) == pytest.approx((fitted[2].estimate - half, fitted[2].estimate + half))


def test_mean_of_each_position_with_clustered_ci():
    y, pos, cl = _data(noise=0.05, seed=4)
    means = position_means(y, pos, cl, 3)
    for p in (1, 2, 3):
        assert means[p].estimate == pytest.approx(y[pos == p].mean())
        assert means[p].ci_low < means[p].estimate < means[p].ci_high


def test_fair_model_has_fairness_one_and_null_betas():
    y, pos, cl = _data(profile={1: 0.8, 2: 0.8, 3: 0.8}, noise=0.01, seed=5)
    scores = profile_scores(y, pos, cl, 3)
    assert scores["position_fairness"] == pytest.approx(1.0, abs=0.02)
    assert abs(scores["beta_2"]) < 0.02 and scores["beta_2_pvalue"] > 0.01
    assert set(scores) >= {"position_1", "position_3_ci_high", "beta_0_se", "beta_3_pvalue", "beta_2_ci_low"}
    assert "position_1_pvalue" not in scores  # "mean = 0" is no hypothesis worth testing for a cosine


def test_lead_contrast_and_language_effect():
    # mixed (lead language at position 1): +0.10 for the lead language on top of the positional profile
    base = {1: 0.70, 2: 0.50, 3: 0.45}
    mixed_profile = {1: base[1] + 0.10, 2: base[2], 3: base[3]}
    y_mix, p_mix, c_mix = _data(profile=mixed_profile, offsets=[0.0, 0.01, -0.01])
    contrast = lead_contrast(y_mix, p_mix, c_mix)
    assert contrast.estimate == pytest.approx(0.80 - (0.50 + 0.45) / 2)
    # pooled with the monolingual later-language run, the language effect is recovered exactly
    y_mono, p_mono, c_mono = _data(profile=base, offsets=[0.02, 0.0, -0.02])
    values = np.concatenate([y_mix, y_mono])
    positions = np.concatenate([p_mix, p_mono])
    clusters = np.concatenate([np.char.add("mix", c_mix), np.char.add("mono", c_mono)])
    lead = np.concatenate([p_mix == 1, np.zeros(len(y_mono), dtype=bool)])
    effect = language_effect(values, positions, clusters, lead, 3)
    assert effect.estimate == pytest.approx(0.10)
    with pytest.raises(ValueError, match="not identified"):
        language_effect(y_mix, p_mix, c_mix, p_mix == 1, 3)


@pytest.mark.parametrize("case", ["one_cluster", "missing_position", "nan", "lengths"])
def test_bad_inputs_raise(case):
    y, pos, cl = _data()
    if case == "one_cluster":
        cl = np.array(["only"] * len(y))
        match = "two segment sets"
    elif case == "missing_position":
        keep = pos != 2
        y, pos, cl = y[keep], pos[keep], cl[keep]
        match = "cover positions"
    elif case == "nan":
        y = y.copy()
        y[0] = np.nan
        match = "NaN"
    else:
        y = y[:-1]
        match = "same length"
    with pytest.raises(ValueError, match=match):
        position_model(y, pos, cl, 3)


def test_a_profile_that_fits_exactly_has_no_spurious_significance():
    """Constant values (or any profile without noise) fit exactly: statsmodels' standard errors are then rounding
    noise (~1e-17) and gave zero effects p-values down to 1e-152, stored as significant position effects."""
    for y, pos, cl in (_data(profile={1: 0.7, 2: 0.7, 3: 0.7}, offsets=[0.0] * 4), _data(offsets=[0.0] * 4)):
        betas = position_model(y, pos, cl, 3)
        for p in (2, 3):
            expected = y[pos == p].mean() - y[pos == 1].mean()
            assert betas[p].se == 0.0 and betas[p].ci_low == betas[p].ci_high == betas[p].estimate
            if abs(expected) < 1e-12:  # no effect at all: estimate 0, and no p-value (0/0)
                assert betas[p].estimate == 0.0 and np.isnan(betas[p].pvalue)
            else:  # an effect without noise is certain
                assert betas[p].estimate == pytest.approx(expected) and betas[p].pvalue == 0.0
    y, pos, cl = _data(profile={1: 0.7, 2: 0.7, 3: 0.7}, offsets=[0.0] * 4)
    flat = lead_contrast(y, pos, cl)
    assert (flat.estimate, flat.se) == (0.0, 0.0) and np.isnan(flat.pvalue)
    scores = profile_scores(y, pos, cl, 3)
    assert scores["beta_2"] == 0.0 and scores["beta_2_pvalue"] is None and scores["position_fairness"] == 1.0
    noisy = position_model(*_data(noise=0.01, seed=3), 3)  # real noise is far above rounding: statsmodels' figures
    assert 0 < noisy[2].se and 0 < noisy[2].pvalue < 1


def test_arguments_that_would_be_misread_are_refused():
    """A position of 1.3 was cut to 1, a lead contrast without later positions split the mean over two collinear
    columns (p = 4e-21), and a wrong-length language flag, n or clusters failed inside numpy."""
    y, pos, cl = _data()
    with pytest.raises(ValueError, match=r"positions must be one whole number per observation \(1..n\)"):
        position_model(y, pos + 0.3, cl, 3)
    with pytest.raises(ValueError, match="the lead contrast needs observations at positions >= 2"):
        lead_contrast(y[pos == 1], pos[pos == 1], cl[pos == 1])
    with pytest.raises(ValueError, match=r"is_lead_language must hold one flag per observation \(72\), got shape \(1,\)"):
        language_effect(y, pos, cl, [True], 3)
    for n in ("3", 3.0, True, 0):
        with pytest.raises(ValueError, match=r"n \(the number of positions\) must be a positive integer"):
            position_means(y, pos, cl, n)
    with pytest.raises(TypeError, match="clusters must hold one id per observation, got NoneType"):
        position_model(y, pos, None, 3)
    assert position_model(y, pos.astype(float), cl, 3)[2].estimate == pytest.approx(-0.30)  # 2.0 is 2


def test_fairness_undefined_for_non_positive_profiles():
    assert position_fairness([0.5, 1.0]) == 0.5
    assert np.isnan(position_fairness([-0.2, -0.1]))


def test_profile_read_back_for_plots():
    from mteb_fairpos.permutation.plot import profile_from_scores

    y, pos, cl = _data(noise=0.02, seed=9)
    scores = profile_scores(y, pos, cl, 3)
    scores.update(profile_scores(y * 0.5, pos, cl, 3, prefix="tau_"))
    sigma = profile_from_scores(scores)
    tau = profile_from_scores(scores, "tau")
    assert sigma["position"] == [1.0, 2.0, 3.0] and tau["mean"] == pytest.approx([m * 0.5 for m in sigma["mean"]])
    assert all(lo <= m <= hi for lo, m, hi in zip(sigma["low"], sigma["mean"], sigma["high"]))
    assert profile_from_scores({"tau_status": "n/a", "tau_position_fairness": None}, "tau") is None
