"""The per-position representation profile, drawn like the paper's Figure 3.

One panel per configuration (``n3_de``, ``n3_en-de`` ...), position on the x axis, the mean
sigma (or tau) with its 95 % confidence band on the y axis, one line per model (e.g.
uncalibrated vs calibrated). Reads the flat score dicts the permutation tasks write into the
mteb results (``position_<p>``, ``position_<p>_ci_low`` / ``_ci_high``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_POSITION = re.compile(r"^position_(\d+)$")


def profile_from_scores(scores: Mapping[str, Any], measure: str = "sigma") -> dict[str, list[float]] | None:
    """Positions, means and CI bounds from one subset's scores; None when the measure is N/A."""
    prefix = "" if measure == "sigma" else f"{measure}_"
    positions = sorted(
        int(match.group(1))
        for key in scores
        if key.startswith(prefix) and (match := _POSITION.match(key[len(prefix):]))
    )
    if not positions or scores.get(f"{prefix}position_{positions[0]}") is None:
        return None
    get = lambda p, suffix="": scores.get(f"{prefix}position_{p}{suffix}")  # noqa: E731
    return {
        "position": [float(p) for p in positions],
        "mean": [float(get(p)) for p in positions],
        "low": [float(get(p, "_ci_low") if get(p, "_ci_low") is not None else get(p)) for p in positions],
        "high": [float(get(p, "_ci_high") if get(p, "_ci_high") is not None else get(p)) for p in positions],
    }


def plot_profiles(runs: Mapping[str, Mapping[str, Mapping[str, Any]]], path: str | Path, *,
                  measures: Sequence[str] = ("sigma", "tau"), title: str | None = None) -> Path:
    """Write the profile figure: ``runs`` maps a model label to ``{subset: scores}``.

    One colour per model; sigma drawn with circles, tau (where measured) with crosses and a
    lighter band. Labels containing "uncalibrated" (or "plain") are drawn dashed, others solid.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    subsets = list(dict.fromkeys(s for per_subset in runs.values() for s in per_subset))
    if not subsets:
        raise ValueError("nothing to plot: no subset scores given.")
    columns = min(4, len(subsets))
    rows = math.ceil(len(subsets) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 2.9 * rows), squeeze=False, sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, subset in enumerate(subsets):
        ax = axes[index // columns][index % columns]
        for k, (label, per_subset) in enumerate(runs.items()):
            for measure in measures:
                profile = profile_from_scores(per_subset.get(subset, {}), measure)
                if profile is None:
                    continue
                dashed = "uncalibrated" in label or "plain" in label
                color = colors[k % len(colors)]
                sigma = measure == "sigma"
                ax.plot(profile["position"], profile["mean"], marker="o" if sigma else "x",
                        linestyle="--" if dashed else "-", color=color, alpha=1.0 if sigma else 0.6,
                        label=f"{label}: {measure}")
                ax.fill_between(profile["position"], profile["low"], profile["high"], color=color,
                                alpha=0.18 if sigma else 0.08, linewidth=0)
        ax.set_title(subset, fontsize=10)
        ax.set_xlabel("position")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if index % columns == 0:
            ax.set_ylabel("mean cosine (95% CI)")
    for index in range(len(subsets), rows * columns):
        axes[index // columns][index % columns].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), frameon=False, fontsize=8)
    fig.suptitle(title or "Per-position profile: sigma = cos(document, segment), tau = cos(segment, segment in context)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.1 if handles else 0, 1, 0.94))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
