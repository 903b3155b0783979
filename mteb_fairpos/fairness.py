"""The one spread measure of this package: the min/max ratio over groups, and PSI = 1 - ratio.

Both papers summarise a per-position profile by how far its weakest group falls behind its
strongest: the permutation probe's ``position_fairness = min/max`` (1 = fair) and the retrieval
paper's Position Sensitivity Index ``PSI = 1 - min/max`` (0 = flat). Every writer and reader of
those figures (the retrieval tasks, the probe, ``compare``, the Qdrant discoverability report, the
``segments`` command) calls this module, so they share one rule for the undefined case:

* groups without a value (``None`` or NaN: empty groups) are left out;
* with fewer than two groups left, there is no spread to measure: a single group is not "flat";
* when the largest value is not positive the ratio has no meaning.

In those cases the figure is ``None`` and `undefined_reason` says why (for a result's notes).
`min_max_ratios` applies the same rule to many profiles at once (the resamples of a bootstrap), with
NaN for ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def _defined(values: Iterable[float | None]) -> list[float]:
    values = [values] if isinstance(values, (str, bytes)) else list(values)  # '0.5' was read letter by letter
    if any(isinstance(v, (str, bytes)) for v in values):
        raise TypeError(f"a profile is a list of numbers (None or NaN for an empty group), got {values!r:.60}.")
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def undefined_reason(values: Iterable[float | None]) -> str | None:
    """Why `min_max_ratio` of ``values`` is undefined, or ``None`` when it is defined."""
    present = _defined(values)
    if len(present) < 2:
        return f"PSI and min/max are undefined: {len(present)} non-empty group(s), at least 2 are needed."
    if max(present) <= 0:
        return "PSI and min/max are undefined: no group scored above 0."
    return None


def min_max_ratio(values: Iterable[float | None]) -> float | None:
    """``min / max`` over the non-empty groups (1 = every group equal); ``None`` when undefined."""
    present = _defined(values)
    if undefined_reason(present) is not None:
        return None
    return min(present) / max(present)


def psi(values: Iterable[float | None]) -> float | None:
    """Position Sensitivity Index ``1 - min/max`` over the non-empty groups; ``None`` when undefined."""
    ratio = min_max_ratio(values)
    return None if ratio is None else 1.0 - ratio


def min_max_ratios(profiles: np.ndarray) -> np.ndarray:
    """`min_max_ratio` of every row of a (R, G) array of profiles at once, NaN where it is undefined."""
    profiles = np.asarray(profiles, dtype=np.float64)
    if profiles.ndim != 2:
        raise ValueError(f"profiles must be an (R, G) array, one profile a row; got shape {profiles.shape} "
                         "(use min_max_ratio for one profile).")
    present = ~np.isnan(profiles)
    low = np.where(present, profiles, np.inf).min(axis=1)
    high = np.where(present, profiles, -np.inf).max(axis=1)
    defined = (present.sum(axis=1) >= 2) & (high > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(defined, low / np.where(defined, high, 1.0), np.nan)
