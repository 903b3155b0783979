"""The probe command's console report of one run: per-position means with their confidence
intervals, the OLS position effects and the mixed instances' lead-language contrasts.

``runs`` maps a model label to ``{subset: score entry}`` as mteb returns them; every entry is
read through `mteb_fairpos.results.schema`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..results.schema import Estimate, ScoreEntry, load
from .instances import LanguageConfig

Runs = Mapping[str, Mapping[str, Mapping[str, Any]]]


def format_profiles(runs: Runs, subsets: list[str], measure: str) -> str:
    """Per-position means with 95 % CI half-widths, the fairness ratio with its 95 % interval and, for a model
    paired with the uncalibrated one, the change in fairness with its interval, p-value and verdict."""
    family = _family(measure)
    width = max(len(name) for name in runs)
    top = max(_n_of(s) for s in subsets)
    what = "cosine(document, standalone segment)" if measure == "sigma" else "cosine(standalone, late-chunked segment)"
    lines = [f"mean {measure} = {what} by position; (+-) half-width of the 95% CI; fairness [95% CI]; "
             "change: fairness minus the uncalibrated model's on the same documents [95% CI], p"]
    lines.append(f"{'subset':<10} {'model':<{width}} {'docs':>5}  " + "  ".join(f"{'pos ' + str(i):>15}" for i in range(1, top + 1))
                 + f"  {'fairness [95% CI]':>22}  change")
    for subset in subsets:
        for k, (name, per_subset) in enumerate(runs.items()):
            entry = _entry(per_subset, subset)
            profile = entry.profiles.get(family) if entry else None
            if profile is None or profile.values.get("1") is None:
                continue
            cells = []
            for i in range(1, top + 1):
                point = profile.points.get(str(i))
                if point is None or point.value is None:
                    cells.append(f"{'':>15}")
                    continue
                half = (point.ci_high - point.ci_low) / 2
                cells.append(f"{point.value:.3f} (+-{half:.3f})".rjust(15))
            figure = f"{_family(measure)}_position_fairness".lstrip("_")
            lines.append(f"{subset if k == 0 else '':<10} {name:<{width}} {entry.counts.documents:>5}  " + "  ".join(cells)
                         + f"  {_with_interval(profile.fairness, entry.intervals.get(figure)):>22}"
                         + _change(entry.changes.get(figure)))
    return "\n".join(lines) + "\n"


def _with_interval(value: float | None, bounds: tuple[float, float] | None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if bounds is None or any(b is None or math.isnan(b) for b in bounds):
        return f"{value:.3f}"
    return f"{value:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]"


def _change(change: Estimate | None) -> str:
    """``+0.061 [+0.032, +0.090] p=0.001 better``: better or worse only when the interval excludes 0."""
    if change is None or change.value is None:
        return ""
    if change.ci_low is None or change.ci_high is None:
        return f"  {change.value:+.3f} (interval undefined)"
    verdict = "better" if change.ci_low > 0 else "worse" if change.ci_high < 0 else "not significant"
    return f"  {change.value:+.3f} [{change.ci_low:+.3f}, {change.ci_high:+.3f}] {_pvalue(change.pvalue)} {verdict}"


def format_betas(runs: Runs, subsets: list[str], measure: str) -> str:
    """beta_0 and beta_p (SE) with p-values: OLS with position dummies, SE clustered by segment set (and topic)."""
    prefix = f"{_family(measure)}_" if _family(measure) else ""
    width = max(len(name) for name in runs)
    top = max(_n_of(s) for s in subsets)
    lines = [f"OLS {measure} ~ beta_0 + sum_p beta_p [position = p] (position 1 = baseline); SE clustered by segment set, "
             "and by topic too where sets share topics"]
    lines.append(f"{'subset':<10} {'model':<{width}} {'beta_0':>15}  " + "  ".join(f"{'beta_' + str(i):>24}" for i in range(2, top + 1)))
    for subset in subsets:
        for k, (name, per_subset) in enumerate(runs.items()):
            entry = _entry(per_subset, subset)
            base = entry.terms.get(f"{prefix}beta_0") if entry else None
            if base is None or base.value is None:
                continue
            cells = []
            for i in range(2, top + 1):
                beta = entry.terms.get(f"{prefix}beta_{i}")
                cells.append(f"{'':>24}" if beta is None or beta.value is None else
                             f"{beta.value:+.3f} ({_se(beta)}) {_pvalue(beta.pvalue)}".rjust(24))
            lines.append(f"{subset if k == 0 else '':<10} {name:<{width}} {base.value:>7.3f} ({_se(base)})  " + "  ".join(cells))
    return "\n".join(lines) + "\n"


def format_mixed(runs: Runs, subsets: list[str]) -> str:
    """Position 1 (lead language) minus the later positions, and the lead language's effect net of position."""
    lines = []
    for subset in subsets:
        for name, per_subset in runs.items():
            entry = _entry(per_subset, subset)
            if entry is None or not entry.details.get("mixed"):
                continue
            lead, later = entry.details["lead_language"], entry.details["later_language"]
            contrast = entry.terms["lead_vs_later"]
            text = (f"{subset} {name}: position 1 ({lead}) minus later positions ({later}) = {contrast.value:+.3f} "
                    f"({_se(contrast)}) {_pvalue(contrast.pvalue)}")
            effect = entry.terms.get("language_effect")
            if effect is not None and effect.value is not None:
                text += (f"; {lead} instead of {later}, net of position = {effect.value:+.3f} "
                         f"({_se(effect)}) {_pvalue(effect.pvalue)}"
                         f" [pooled with {', '.join(entry.details['language_effect_pooled_with'])}]")
            lines.append(text)
    return ("lead vs later language (mixed instances)\n" + "\n".join(lines) + "\n") if lines else ""


def _entry(per_subset: Mapping[str, Mapping[str, Any]], subset: str) -> ScoreEntry | None:
    scores = per_subset.get(subset)
    return load(scores) if scores else None


def _family(measure: str) -> str:
    return "" if measure == "sigma" else measure


def _n_of(subset: str) -> int:
    return LanguageConfig.parse(subset).n


def _se(estimate: Estimate) -> str:
    return "n/a" if estimate.se is None or math.isnan(estimate.se) else f"{estimate.se:.3f}"


def _pvalue(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "p=n/a"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"
