"""The per-position representation profile, drawn like the paper's Figure 3.

One panel per configuration (``n3_de``, ``n3_en-de`` ...), position on the x axis, the mean
sigma (or tau) with its 95 % confidence band on the y axis, one line per model (e.g.
uncalibrated vs calibrated). Reads the flat score dicts the permutation tasks write into the
mteb results through `mteb_fairpos.results.schema`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results.schema import load


def profile_from_scores(scores: Mapping[str, Any], measure: str = "sigma") -> dict[str, list[float]] | None:
    """Positions, means and CI bounds from one subset's scores; None when the measure is N/A."""
    profile = load(scores).profiles.get("" if measure == "sigma" else measure)
    points = sorted((int(label), point) for label, point in (profile.points.items() if profile else ()) if label.isdigit())
    if not points or points[0][1].value is None:
        return None
    return {
        "position": [float(p) for p, _ in points],
        "mean": [float(point.value) for _, point in points],
        "low": [float((point.interval or (point.value,))[0]) for _, point in points],
        "high": [float((point.interval or (point.value, point.value))[1]) for _, point in points],
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
