"""Figures of a :class:`~mteb_fairpos.results.Collection`, with matplotlib.

Per-position profiles (a panel per profile, a line per model, a band per confidence interval)
and effectiveness against PSI (an arrow from each uncalibrated twin to its calibrated models).
Calibrated models each get a colour and marker, twins are grey and dashed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from .output import made_folder
from .reader import Collection, ModelKey, plugin_base
from .tables import families


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_MARKERS = "o^DvP*X<>hp"


def style(found: Collection) -> dict[ModelKey, dict[str, Any]]:
    """Every calibrated model (every config of a sweep) its own colour and marker; twins grey, dashed, square."""
    styles = {}
    calibrated = 0
    for model in found.models:
        twin = model.name.startswith("fair-off/") or model.revision == "off"  # "off": results of earlier releases
        if twin:
            styles[model] = {"color": "0.45", "linestyle": "--", "marker": "s"}
        else:
            styles[model] = {"color": f"C{calibrated % 10}", "linestyle": "-", "marker": _MARKERS[calibrated % len(_MARKERS)]}
            calibrated += 1
    return styles


def metric_label(found: Collection, task: str) -> str:
    """What a task's profile and main score measure, for the axes."""
    types = {s.task_type for m in found.models if (s := found.get(m, task)) is not None}
    if "Retrieval" in types:
        return "nDCG@10"
    if task.startswith("PermutationFairness"):
        return "mean sigma (cosine to the standalone segment)"
    return "score"


def readable_limits(set_limits: Any, values: list[float], span: float = 0.05) -> None:
    """Axis limits spanning at least ``span``, so a 0.003 difference does not look like a cliff."""
    if not values:
        return
    low, high = min(values), max(values)
    middle, half = (low + high) / 2, max(high - low, span) / 2 * 1.15
    set_limits(middle - half, middle + half)


def write_plots(found: Collection, out: str | Path) -> list[Path]:
    """Every figure of ``found`` in ``out``: the profiles per task and, where PSI exists, the scatter."""
    if not found.scores:
        return []
    scatter = plot_psi_scatter(found, out)
    return plot_profiles(found, out) + ([] if scatter is None else [scatter])


def plot_profiles(found: Collection, out: str | Path) -> list[Path]:
    """One PNG per task: a panel per profile (the pooled one, or one per subset of the probe), a line
    per model, and a band for each 95 % confidence interval the results carry."""
    out = made_folder(out)
    plt = _pyplot()
    styles = style(found)
    written = []
    for task in found.tasks:
        panels = [f for f in families(found, task)
                  if any((s := found.get(m, task)) is not None and len(s.profiles.get(f, {})) >= 2 for m in found.models)]
        if not panels:
            continue
        columns = min(3, len(panels))
        rows = math.ceil(len(panels) / columns)
        width = max(6.0, 0.45 * max(len(found.get(m, task).profiles.get(f, {})) for f in panels for m in found.models
                                        if found.get(m, task) is not None) + 3)
        fig, axes = plt.subplots(rows, columns, figsize=(width * min(columns, 2), 4.2 * rows), squeeze=False)
        for ax, family in zip(axes.flat, panels):
            models = [m for m in found.models if (s := found.get(m, task)) is not None and s.profiles.get(family)]
            labels = list(dict.fromkeys(label for m in models for label in found.get(m, task).profiles[family]))
            for model in models:
                scores = found.get(model, task)
                profile, intervals = scores.profiles[family], scores.intervals.get(family, {})
                xs = [i for i, label in enumerate(labels) if profile.get(label) is not None]
                ax.plot(xs, [profile[labels[i]] for i in xs], label=model.label, **styles[model])
                banded = [i for i in xs if labels[i] in intervals]
                if banded:
                    ax.fill_between(banded, [intervals[labels[i]][0] for i in banded], [intervals[labels[i]][1] for i in banded],
                                    color=styles[model]["color"], alpha=0.15, linewidth=0)
            rotate = len(labels) > 6
            ax.set_xticks(range(len(labels)), labels, rotation=45 if rotate else 0, ha="right" if rotate else "center")
            ax.set_xlabel("position")
            ax.set_ylabel(("late-chunk tau" if family.startswith("tau") else metric_label(found, task)))
            ax.set_title(f"{task}: {family or 'per-position profile'}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        fig.tight_layout()
        path = out / f"profile_{_safe(task)}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def plot_psi_scatter(found: Collection, out: str | Path) -> Path | None:
    """Effectiveness vs PSI, one panel per retrieval task (or any task with a PSI when types are unknown)."""
    tasks = [t for t in found.tasks if _scatter_task(found, t)]
    if not tasks:
        return None
    out = made_folder(out)
    plt = _pyplot()
    styles = style(found)
    columns = min(3, len(tasks))
    rows = math.ceil(len(tasks) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        points = {m: found.get(m, task) for m in found.models}
        points = {m: s for m, s in points.items() if s is not None and s.psi is not None and s.main_score is not None}
        for model, s in points.items():
            ax.scatter([s.psi], [s.main_score], color=styles[model]["color"], marker=styles[model]["marker"], label=model.label)
        for model, s in points.items():
            if model.name.startswith("fair-off/"):
                partner = [m for m in points if m is not model and plugin_base(m.name) == plugin_base(model.name)]
                for target in partner:
                    t = points[target]
                    ax.annotate("", xy=(t.psi, t.main_score), xytext=(s.psi, s.main_score),
                                arrowprops={"arrowstyle": "->", "color": styles[target]["color"], "alpha": 0.6})
        readable_limits(ax.set_xlim, [s.psi for s in points.values()])
        readable_limits(ax.set_ylim, [s.main_score for s in points.values()])
        ax.set_xlabel("PSI (lower is fairer)")
        ax.set_ylabel(f"main score ({metric_label(found, task)})")
        ax.set_title(task)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(tasks):]:
        ax.axis("off")
    fig.tight_layout()
    path = out / "psi_vs_score.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _scatter_task(found: Collection, task: str) -> bool:
    scores = [s for m in found.models if (s := found.get(m, task)) is not None]
    if not any(s.psi is not None for s in scores):
        return False
    types = {s.task_type for s in scores if s.task_type}
    return not types or any("Retrieval" in t or "Reranking" in t for t in types)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)
