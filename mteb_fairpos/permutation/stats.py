"""Statistics of the permutation probe (docs/method.md#s2-3), with statsmodels.

* :func:`position_model`: OLS ``y ~ beta_0 + sum_{p>=2} beta_p 1[i = p]`` (position 1 the
  baseline) with standard errors clustered by segment set, or by set and topic (two-way) where sets
  share topics; beta, SE, p-value (H0: beta = 0) and 95 % confidence interval per coefficient.
* :func:`position_means`: the mean of ``y`` at each position with a cluster-robust 95 % CI
  (the same regression without intercept, one dummy per position).
* ``position_fairness = min_p mean_p / max_p mean_p`` (1 = fair; ``1 - PSI``).
* :func:`lead_contrast` (mixed configurations): position 1 (lead language) against the later
  positions (later language) pooled; :func:`language_effect`: the lead language's effect net
  of position, estimated when monolingual observations of the same ``n`` are pooled in.

Every function takes the observations' ``clusters`` (segment sets) and, optionally, their ``topics``:
where a topic occurs in more than one set the errors are two-way cluster-robust (statsmodels'
``V_set + V_topic - V_set&topic``), otherwise clustered by set. Inference uses t distributions with
``G - 1`` degrees of freedom for ``G`` clusters (the smaller factor's count when two-way; statsmodels
``use_t=True``), honest for the few clusters of small runs. With few clusters the two-way subtraction can
leave a coefficient a negative variance (statsmodels then gives no standard error); that coefficient takes
the larger one-way variance instead. (The fairness bootstrap, `intervals`, takes it wherever the two-way
variance is smaller than it, negative or not.) Where the model fits every value up to rounding (constant values),
every standard error is 0, and an effect that is 0 up to rounding is 0 with no p-value: statsmodels' figures would
be rounding noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import whole
from ..fairness import min_max_ratio
from ..resampling import Resampling
from ..results.schema import Estimate, ScoreEntry, Settings, dump
from .intervals import cluster_codes, fairness_bootstrap, require_coverage, sets_share_topics, whole_positions


@dataclass(frozen=True)
class Coefficient:
    estimate: float
    se: float
    pvalue: float
    ci_low: float
    ci_high: float

    def as_estimate(self, *, pvalue: bool = True) -> Estimate:
        """The stored form (`mteb_fairpos.results.schema`): NaN (e.g. a zero standard error) is ``null``."""
        return Estimate(self.estimate, self.se, self.pvalue if pvalue else None, self.ci_low, self.ci_high)


def _inputs(values, positions, clusters, n: Any, topics=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``values`` and ``positions`` as arrays, and the cluster codes statsmodels takes: (N,) set codes, or (N, 2)
    set and topic codes where sets share topics."""
    if not whole(n) or n < 1:
        raise ValueError(f"n (the number of positions) must be a positive integer, got {n!r}.")
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"values must hold one value per observation, got an array of shape {y.shape}.")
    pos = whole_positions(positions)
    for name, column in (("clusters", clusters), ("topics", topics)):
        if isinstance(column, (str, bytes)) or (column is None and name == "clusters"):
            raise TypeError(f"{name} must hold one id per observation, got {type(column).__name__}.")
    if not (len(y) == len(pos) == len(clusters)) or (topics is not None and len(topics) != len(y)):
        raise ValueError("values, positions, clusters and topics must have the same length.")
    require_coverage(pos, int(n))
    if not np.all(np.isfinite(y)):
        raise ValueError("values contain NaN or infinity; drop unmeasured observations first.")
    codes = cluster_codes(clusters)
    if codes.max() < 1:
        raise ValueError("cluster-robust standard errors need at least two segment sets (clusters).")
    if topics is None or not sets_share_topics(clusters, topics):
        return y, pos, codes
    return y, pos, np.column_stack([codes, cluster_codes(topics)])


@dataclass(frozen=True)
class _Fit:
    """A clustered OLS fit, with the one-way variances that stand in for a negative two-way one."""

    fit: Any
    """statsmodels' results."""
    floor: np.ndarray | None
    """Per coefficient, the larger one-way variance where the two-way one is negative, else NaN; ``None`` when no
    coefficient needs it."""
    exact: float | None = None
    """Where the model fits every value up to rounding (constant values, say), the size of that rounding."""


_ROUNDING = 1e3 * np.finfo(np.float64).eps
"""Residuals below this share of the largest value are rounding: no measured value is that close to a fit."""


def _fit(y: np.ndarray, x: np.ndarray, codes: np.ndarray) -> _Fit:
    import statsmodels.api as sm  # here, not at import: `import mteb` loads this module via the task

    def fitted(groups: np.ndarray):
        return sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)

    fit = fitted(codes)
    rounding = _ROUNDING * max(float(np.abs(y).max()), np.finfo(np.float64).tiny)
    if np.abs(fit.resid).max() <= rounding:
        return _Fit(fit, None, rounding)
    variances = np.diag(fit.cov_params())
    if codes.ndim == 1 or not (variances < 0).any():
        return _Fit(fit, None)
    one_way = np.maximum(*(np.diag(fitted(codes[:, k]).cov_params()) for k in (0, 1)))
    return _Fit(fit, np.where(variances < 0, one_way, np.nan))


def _coefficients(fitted: _Fit, index: int) -> Coefficient:
    fit = fitted.fit
    estimate = float(fit.params[index])
    if fitted.exact is not None:
        # the model fits every value up to rounding: the variance is 0 and what statsmodels computes from the
        # rounding noise (SE ~1e-17, any p-value) means nothing; an estimate that is zero up to rounding is 0
        # and has no p-value (0/0), any other is certain
        if abs(estimate) <= fitted.exact:
            return Coefficient(0.0, 0.0, float("nan"), 0.0, 0.0)
        return Coefficient(estimate, 0.0, 0.0, estimate, estimate)
    if fitted.floor is not None and np.isfinite(fitted.floor[index]):
        from scipy.stats import t as student_t

        se = float(fitted.floor[index]) ** 0.5
        half = float(student_t.ppf(0.975, fit.df_resid_inference)) * se
        pvalue = float(2 * student_t.sf(abs(estimate) / se, fit.df_resid_inference)) if se > 0 else float("nan")
        return Coefficient(estimate, se, pvalue, estimate - half, estimate + half)
    with np.errstate(invalid="ignore", divide="ignore"):  # a perfect fit has zero (or -0 rounded) variance
        ci = np.asarray(fit.conf_int(alpha=0.05))
        return Coefficient(estimate, float(fit.bse[index]), float(fit.pvalues[index]), float(ci[index, 0]), float(ci[index, 1]))


def position_model(values, positions, clusters, n: int, topics=None) -> dict[int, Coefficient]:
    """beta_0 (key 0) and beta_p for p = 2..n (keys p); cluster-robust by ``clusters`` (and ``topics``)."""
    y, pos, codes = _inputs(values, positions, clusters, n, topics)
    x = np.column_stack([np.ones_like(y)] + [(pos == p).astype(np.float64) for p in range(2, n + 1)])
    fit = _fit(y, x, codes)
    out = {0: _coefficients(fit, 0)}
    out.update({p: _coefficients(fit, p - 1) for p in range(2, n + 1)})
    return out


def position_means(values, positions, clusters, n: int, topics=None) -> dict[int, Coefficient]:
    """Mean per position (keys 1..n) with cluster-robust SE and 95 % CI."""
    y, pos, codes = _inputs(values, positions, clusters, n, topics)
    x = np.column_stack([(pos == p).astype(np.float64) for p in range(1, n + 1)])
    fit = _fit(y, x, codes)
    return {p: _coefficients(fit, p - 1) for p in range(1, n + 1)}


def position_fairness(means: Sequence[float]) -> float:
    """``min / max`` of the per-position means (1 = fair); NaN where `min_max_ratio` is undefined."""
    ratio = min_max_ratio(means)
    return float("nan") if ratio is None else ratio


def lead_contrast(values, positions, clusters, topics=None) -> Coefficient:
    """Mean at position 1 minus the mean at positions >= 2 (pooled), cluster-robust."""
    pos = whole_positions(positions)
    if len(pos) == 0 or pos.max() < 2:
        raise ValueError("the lead contrast needs observations at positions >= 2 as well as at position 1.")
    y, pos, codes = _inputs(values, pos, clusters, int(pos.max()), topics)
    x = np.column_stack([np.ones_like(y), (pos == 1).astype(np.float64)])
    return _coefficients(_fit(y, x, codes), 1)


def language_effect(values, positions, clusters, is_lead_language, n: int, topics=None) -> Coefficient:
    """Effect of a segment being written in the lead language, net of position.

    OLS ``y ~ C(position) + 1[lead language]``, clustered. Identified when the observations mix
    the mixed configuration (lead language only at position 1) with a monolingual one of the
    same ``n`` (one language at every position).
    """
    y, pos, codes = _inputs(values, positions, clusters, n, topics)
    lead = np.asarray(is_lead_language, dtype=np.float64)
    if lead.shape != y.shape:
        raise ValueError(f"is_lead_language must hold one flag per observation ({len(y)}), got shape {lead.shape}.")
    x = np.column_stack([np.ones_like(y)] + [(pos == p).astype(np.float64) for p in range(2, n + 1)] + [lead])
    if np.linalg.matrix_rank(x) < x.shape[1]:
        raise ValueError("the lead-language effect is not identified: pool a monolingual configuration of the same n.")
    return _coefficients(_fit(y, x, codes), x.shape[1] - 1)


def profile_entry(values, positions, clusters, n: int, family: str = "", topics=None, resampling: Resampling | None = None,
                  baseline_values=None) -> ScoreEntry:
    """One measure's profile (mean per position with SE and CI, fairness) and its betas.

    ``family`` names the profile (``""`` for sigma, ``"tau"``) and prefixes the betas
    (``tau_beta_<p>``). A mean's p-value is left out: H0 "mean = 0" is meaningless for a cosine.
    With ``resampling`` the fairness gets its bootstrap interval (`intervals.fairness_bootstrap`, over
    sets and, where they share them, topics) and, given ``baseline_values`` on the same observations,
    its paired change against that baseline.
    """
    means = position_means(values, positions, clusters, n, topics)
    betas = position_model(values, positions, clusters, n, topics)
    entry = ScoreEntry()
    profile = entry.profile(family)
    profile.fairness = position_fairness([means[p].estimate for p in means])
    profile.points = {str(p): coef.as_estimate(pvalue=False) for p, coef in means.items()}
    prefix = f"{family}_" if family else ""
    entry.terms = {f"{prefix}beta_{p}": coef.as_estimate() for p, coef in betas.items()}
    if resampling is not None:
        boot = fairness_bootstrap(values, positions, clusters, clusters if topics is None else topics, resampling,
                                  baseline_values, n=n)
        entry.intervals[f"{prefix}position_fairness"] = (boot.fairness.ci_low, boot.fairness.ci_high)
        if boot.change is not None:
            entry.changes[f"{prefix}position_fairness"] = boot.change.as_estimate()
        entry.settings = Settings(resamples=resampling.resamples, resampling_seed=resampling.seed, resampled=boot.units)
    return entry


def profile_scores(values, positions, clusters, n: int, prefix: str = "") -> dict[str, float | None]:
    """`profile_entry` as stored: ``[<prefix>]position_fairness``, ``[<prefix>]position_<p>`` (+ ``_se``,
    ``_ci_low``, ``_ci_high``) and ``[<prefix>]beta_0``, ``beta_<p>`` for p >= 2 (+ ``_pvalue`` too)."""
    return dump(profile_entry(values, positions, clusters, n, family=prefix.removesuffix("_")))
