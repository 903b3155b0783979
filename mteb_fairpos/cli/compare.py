"""``mteb-fairpos compare RESULTS_DIR``: the leaderboard view of an mteb results folder.

Reads every ``<model>/<revision>/<Task>.json`` (and ``<revision>/experiments/<name>/<Task>.json``)
with mteb's own ``TaskResult`` parser and writes, to ``--out``:

* ``main_scores.md`` / ``main_scores.csv``: models x tasks, the task's main score (mean over its
  splits and subsets);
* ``profiles.md`` / ``profiles.csv``: the per-position profile and PSI of each task that reports one;
* ``profile_<task>.png``: one line per model, calibrated solid and uncalibrated twin dashed;
* ``psi_vs_score.png``: effectiveness (main score) against PSI for retrieval tasks, an arrow from
  each twin to its calibrated model.

Reading and pooling the results (and the position convention task authors follow) is
`mteb_fairpos.results`; this module prints, writes and draws. Missing results (a model without a
task the others have), partial results and foreign or corrupt files are listed, never skipped
silently.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import fairness
from ..results import Collection, ModelKey, collect, model_order, plugin_base

DEFAULT_OUT = Path("fairpos-output") / "compare"


# ---------------------------------------------------------------------------------- tables
def main_rows(found: Collection) -> list[dict[str, Any]]:
    rows = []
    for model in found.models:
        for task in found.tasks:
            scores = found.get(model, task)
            rows.append({
                "model": model.name, "revision": model.revision, "experiment": model.experiment, "task": task,
                "task_type": scores.task_type if scores else "",
                "main_score": scores.main_score if scores else None,
                "psi": scores.psi if scores else None,
                "status": scores.status if scores else "missing",
                "entries": scores.entries if scores else 0,
            })
    return rows


def profile_rows(found: Collection) -> list[dict[str, Any]]:
    rows = []
    for (model, task), scores in sorted(found.scores.items(), key=lambda kv: (kv[0][1], model_order(kv[0][0]))):
        for family, profile in scores.profiles.items():
            for label, value in profile.items():
                rows.append({"model": model.name, "revision": model.revision, "experiment": model.experiment,
                             "task": task, "family": family, "label": label, "value": value})
    return rows


def main_table(found: Collection) -> str:
    """Models x tasks. A probe task's subsets are separate estimates (other languages, other n), so
    it gets one column per subset with that subset's fairness instead of a mean across them."""
    columns: list[tuple[str, str | None]] = []
    for task in found.tasks:
        subsets = [f for f in _families(found, task) if f and not f.startswith("tau ")]
        columns += [(task, subset) for subset in subsets] or [(task, None)]
    header = [task if subset is None else f"{task}: {subset}" for task, subset in columns]
    lines = ["| model | " + " | ".join(header) + " |", "|---|" + "---:|" * len(columns)]
    for model in found.models:
        cells = []
        for task, subset in columns:
            scores = found.get(model, task)
            if scores is None or (subset is not None and not scores.profiles.get(subset)):
                cells.append("—")
            elif subset is not None:
                cells.append(format_score(fairness.min_max_ratio(scores.profiles[subset].values())))
            else:
                cell = format_score(scores.main_score)
                cells.append(cell + (" (partial)" if scores.status == "partial" else ""))
        lines.append(f"| {_md(model.label)} | " + " | ".join(cells) + " |")
    if any(subset is not None for _, subset in columns):
        lines += ["", "Probe tasks: one column per subset (position_fairness of that subset; subsets of other languages "
                  "or n are not averaged)."]
    return "\n".join(lines)


def profile_tables(found: Collection) -> str:
    """One table per task and profile: the pooled profile with PSI and main score, and for results
    whose subsets are separate estimates (the permutation probe) one table per subset, each value
    with its 95 % confidence interval."""
    parts = []
    for task in found.tasks:
        for family in _families(found, task):
            models = [m for m in found.models if (s := found.get(m, task)) is not None and s.profiles.get(family)]
            labels = list(dict.fromkeys(label for m in models for label in found.get(m, task).profiles[family]))
            pooled = family == ""
            tail = " PSI | main |" if pooled else " fairness |"
            lines = [f"### {task}" + ("" if pooled else f": {family}"), "",
                     "| model | " + " | ".join(labels) + f" |{tail}", "|---|" + "---:|" * (len(labels) + (2 if pooled else 1))]
            for model in models:
                scores = found.get(model, task)
                profile, intervals = scores.profiles[family], scores.intervals.get(family, {})
                cells = [_with_interval(profile.get(label), intervals.get(label)) for label in labels]
                ends = (f" {format_score(scores.psi)} | {format_score(scores.main_score)} |" if pooled
                        else f" {format_score(fairness.min_max_ratio(profile.values()))} |")
                lines.append(f"| {_md(model.label)} | " + " | ".join(cells) + f" |{ends}")
            parts.append("\n".join(lines))
    return "\n\n".join(parts)


def effect_tables(found: Collection) -> str:
    """The probe's fitted effects per subset: beta_p (vs position 1), tau's, lead-vs-later and the
    language effect, each as estimate (standard error) and p-value."""
    parts = []
    for task in found.tasks:
        rows = [(m, subset, effects) for m in found.models if (s := found.get(m, task)) is not None
                for subset, effects in s.effects.items()]
        if not rows:
            continue
        keys = list(dict.fromkeys(k for _, _, effects in rows for k in effects))
        lines = [f"### {task}: effects (estimate (SE) p; standard errors clustered by segment set)", "",
                 "| model | subset | " + " | ".join(keys) + " |", "|---|---|" + "---:|" * len(keys)]
        for model, subset, effects in sorted(rows, key=lambda r: (r[1], model_order(r[0]))):
            cells = [_effect(effects.get(k)) for k in keys]
            lines.append(f"| {_md(model.label)} | {subset} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _effect(value: tuple[float, float | None, float | None] | None) -> str:
    if value is None:
        return ""
    estimate, se, p = value
    text = f"{estimate:+.4f}" + ("" if se is None else f" ({se:.4f})")
    return text + ("" if p is None else (" p<0.001" if p < 0.001 else f" p={p:.3f}"))


def _families(found: Collection, task: str) -> list[str]:
    families = [f for m in found.models if (s := found.get(m, task)) is not None for f, p in s.profiles.items() if p]
    return sorted(dict.fromkeys(families), key=lambda f: (f != "", f.startswith("tau "), f))


def _with_interval(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None or interval is None:
        return format_score(value)
    return f"{value:.4f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def issues_text(found: Collection) -> str:
    if not found.issues:
        return "No missing, partial or unreadable results."
    return "\n".join(f"- {issue}" for issue in found.issues)


def write_csv(rows: list[dict[str, Any]], path: Path, columns: Sequence[str]) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------- plots
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_MARKERS = "o^DvP*X<>hp"


def _style(found: Collection) -> dict[ModelKey, dict[str, Any]]:
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


def _metric_label(found: Collection, task: str) -> str:
    """What a task's profile and main score measure, for the axes."""
    types = {s.task_type for m in found.models if (s := found.get(m, task)) is not None}
    if "Retrieval" in types:
        return "nDCG@10"
    if task.startswith("PermutationFairness"):
        return "mean sigma (cosine to the standalone segment)"
    return "score"


def _readable_limits(set_limits: Any, values: list[float], span: float = 0.05) -> None:
    """Axis limits spanning at least ``span``, so a 0.003 difference does not look like a cliff."""
    if not values:
        return
    low, high = min(values), max(values)
    middle, half = (low + high) / 2, max(high - low, span) / 2 * 1.15
    set_limits(middle - half, middle + half)


def plot_profiles(found: Collection, out: Path) -> list[Path]:
    """One PNG per task: a panel per profile (the pooled one, or one per subset of the probe), a line
    per model, and a band for each 95 % confidence interval the results carry."""
    plt = _pyplot()
    styles = _style(found)
    written = []
    for task in found.tasks:
        panels = [f for f in _families(found, task)
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
            ax.set_ylabel(("late-chunk tau" if family.startswith("tau") else _metric_label(found, task)))
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


def plot_psi_scatter(found: Collection, out: Path) -> Path | None:
    """Effectiveness vs PSI, one panel per retrieval task (or any task with a PSI when types are unknown)."""
    tasks = [t for t in found.tasks if _scatter_task(found, t)]
    if not tasks:
        return None
    plt = _pyplot()
    styles = _style(found)
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
        _readable_limits(ax.set_xlim, [s.psi for s in points.values()])
        _readable_limits(ax.set_ylim, [s.main_score for s in points.values()])
        ax.set_xlabel("PSI (lower is fairer)")
        ax.set_ylabel(f"main score ({_metric_label(found, task)})")
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


# ---------------------------------------------------------------------------------- command
def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("compare", help="models x tasks table, per-position profiles and plots of an mteb results folder",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, metavar="RESULTS_DIR", help="mteb results folder (the --output-folder of `mteb run`)")
    parser.add_argument("--output", "--out", dest="out", type=Path, default=DEFAULT_OUT, help=f"where tables and plots go (default: {DEFAULT_OUT})")
    parser.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    parser.add_argument("--models", nargs="+", default=None, help="only these model names")
    parser.add_argument("--no-plots", action="store_true", help="tables only")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    _register_plugin()
    found = collect(args.results, tasks=args.tasks, models=args.models)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    main_md = f"## Main scores\n\n{main_table(found)}\n"
    profiles_md = "\n\n".join(part for part in (profile_tables(found), effect_tables(found)) if part)
    report = main_md + (f"\n## Per-position profiles\n\n{profiles_md}\n" if profiles_md else "") + f"\n## Issues\n\n{issues_text(found)}\n"
    (out / "main_scores.md").write_text(main_md + f"\n## Issues\n\n{issues_text(found)}\n", encoding="utf-8")
    (out / "profiles.md").write_text((profiles_md or "No task reports a per-position profile.") + "\n", encoding="utf-8")
    write_csv(main_rows(found), out / "main_scores.csv",
              ["model", "revision", "experiment", "task", "task_type", "main_score", "psi", "status", "entries"])
    write_csv(profile_rows(found), out / "profiles.csv", ["model", "revision", "experiment", "task", "family", "label", "value"])
    plots: list[Path] = []
    if not args.no_plots and found.scores:
        plots = plot_profiles(found, out)
        scatter = plot_psi_scatter(found, out)
        if scatter is not None:
            plots.append(scatter)
    print(f"results: {found.root}   models: {len(found.models)}   tasks: {len(found.tasks)}   issues: {len(found.issues)}")
    print()
    print(report)
    print(f"written to {out}: main_scores.md, main_scores.csv, profiles.md, profiles.csv"
          + (", " + ", ".join(p.name for p in plots) if plots else ""))
    if not found.scores:
        print("no readable mteb results found.")
        return 1
    print(f"a page to look at (sortable, filterable, with charts): mteb-fairpos leaderboard {args.results} -o {out / 'site'}")
    return 0


def _register_plugin() -> None:
    """Task metadata (types, expected splits) of the plugin's tasks needs them registered."""
    try:
        from ..mteb_plugin import register

        register()
    except Exception:  # noqa: BLE001 - comparison still works, completeness checks get weaker
        pass


# ---------------------------------------------------------------------------------- helpers
def format_score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)
