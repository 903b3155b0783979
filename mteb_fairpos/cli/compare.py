"""``mteb-fairpos compare RESULTS_DIR``: the leaderboard view of an mteb results folder.

Reads every ``<model>/<revision>/<Task>.json`` (and ``<revision>/experiments/<name>/<Task>.json``)
with mteb's own ``TaskResult`` parser and writes, to ``--out``:

* ``main_scores.md`` / ``main_scores.csv``: models x tasks, the task's main score (mean over its
  splits and subsets);
* ``profiles.md`` / ``profiles.csv``: the per-position profile and PSI of each task that reports one;
* ``profile_<task>.png``: one line per model, calibrated solid and uncalibrated twin dashed;
* ``psi_vs_score.png``: effectiveness (main score) against PSI for retrieval tasks, an arrow from
  each twin to its calibrated model.

Missing results (a model without a task the others have), partial results (splits or subsets that
the task defines but the file lacks) and foreign or corrupt files are listed, never skipped silently.

Position convention (what task authors write into a score entry, one entry per split x subset):

* ``position_<label>``: the profile's value at position ``<label>`` (a number, or ``null`` for an
  empty group), in order; ``<family>_position_<label>`` is a second profile named ``<family>``
  (e.g. ``tau_position_2``). Not positions: the labels ``fairness`` and ``counts``, labels ending
  in ``_se``, ``_ci_low``, ``_ci_high``, ``_pvalue``, ``_n``, and values that are not numbers;
* or a mapping ``"positions": {"<label>": value, ...}`` (``"<family>_positions"`` likewise);
* ``psi``: the Position Sensitivity Index; without it, ``1 - position_fairness``, else computed
  from the profile as ``1 - min / max``.

Main score, PSI and profile are plain means over a result's entries, unless the task class says
how to pool its subsets: ``summarize_scores(entries)`` returning ``main_score``, ``psi`` and
``positions`` (PosIR pools its (language, domain) subsets per language, as its papers report).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import fairness

DEFAULT_OUT = Path("fairpos-output") / "compare"
_NOT_LABELS = {"fairness", "counts"}
_STAT_SUFFIXES = ("_se", "_ci_low", "_ci_high", "_pvalue", "_n")
_POSITION_KEY = re.compile(r"^(?:(?P<family>.+?)_)?position_(?P<label>.+)$")
_POSITIONS_MAP = re.compile(r"^(?:(?P<family>.+?)_)?positions$")
_RESULT_SIDE_FILES = {"model_meta.json"}


# ---------------------------------------------------------------------------------- data
@dataclass(frozen=True, order=True)
class ModelKey:
    """One evaluated model: its name, revision (the calibration config for fair/* models) and experiment."""

    name: str
    revision: str
    experiment: str = ""

    @property
    def label(self) -> str:
        text = self.name if self.revision in ("", "no_revision_available") else f"{self.name} [{self.revision}]"
        return f"{text} ({self.experiment})" if self.experiment else text


@dataclass
class TaskScores:
    """What one result file says: main score, position profiles and PSI, averaged over entries."""

    task: str
    task_type: str | None
    main_score: float | None
    psi: float | None
    profiles: dict[str, dict[str, float | None]]
    """family ("" = the main profile) -> label -> mean value over the entries that report it."""
    entries: int
    status: str = "ok"
    notes: list[tuple[str, str]] = field(default_factory=list)
    """(issue kind, message): ``partial`` for missing scores, ``unchecked`` for an unknown task."""

    @property
    def profile(self) -> dict[str, float | None]:
        return self.profiles.get("", {})


@dataclass(frozen=True)
class Issue:
    kind: str
    """``corrupt``, ``foreign``, ``partial``, ``missing``, ``no-meta``, ``no-twin``, ``unchecked``."""
    where: str
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where}: {self.message}"


@dataclass
class Collection:
    """Everything read from one results folder."""

    root: Path
    scores: dict[tuple[ModelKey, str], TaskScores] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)

    @property
    def models(self) -> list[ModelKey]:
        return sorted({key for key, _ in self.scores}, key=_model_order)

    @property
    def tasks(self) -> list[str]:
        return sorted({task for _, task in self.scores})

    def get(self, model: ModelKey, task: str) -> TaskScores | None:
        return self.scores.get((model, task))


def _model_order(key: ModelKey) -> tuple:
    org, _, rest = key.name.partition("/")
    base = rest if org in ("fair", "fair-off") else key.name
    return (base, org != "fair-off", key.name, key.revision, key.experiment)


# ---------------------------------------------------------------------------------- reading
def results_root(path: Path) -> Path:
    """The folder holding ``<model>/<revision>/`` folders: ``path`` or its ``results`` subfolder."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"results folder {path} does not exist.")
    inner = path / "results"
    if inner.is_dir() and not list(path.glob("*/*/*.json")):
        return inner
    return path


def collect(path: Path, *, tasks: Sequence[str] | None = None, models: Sequence[str] | None = None) -> Collection:
    """Read an mteb results folder, reporting what cannot be read or is incomplete."""
    root = results_root(path)
    found = Collection(root)
    for model_dir in sorted(root.iterdir()):
        if not model_dir.is_dir():
            if not model_dir.name.startswith("."):
                found.issues.append(Issue("foreign", _rel(model_dir, root), "not a model folder; skipped."))
            continue
        for revision_dir in sorted(model_dir.iterdir()):
            if not revision_dir.is_dir():
                found.issues.append(Issue("foreign", _rel(revision_dir, root), "expected <model>/<revision>/<Task>.json; skipped."))
                continue
            folders = [(revision_dir, "")]
            experiments = revision_dir / "experiments"
            if experiments.is_dir():
                folders += [(d, d.name) for d in sorted(experiments.iterdir()) if d.is_dir()]
            for folder, experiment in folders:
                _read_folder(found, root, model_dir, revision_dir, folder, experiment, tasks, models)
    _report_missing(found)
    _report_twins(found)
    return found


def _read_folder(found: Collection, root: Path, model_dir: Path, revision_dir: Path, folder: Path, experiment: str,
                 tasks: Sequence[str] | None, models: Sequence[str] | None) -> None:
    files = sorted(p for p in folder.glob("*.json") if p.name not in _RESULT_SIDE_FILES)
    if not files:
        return
    key = _model_key(found, root, model_dir, revision_dir, folder, experiment)
    if models and key.name not in models:
        return
    for file in files:
        if tasks and file.stem not in tasks:
            continue
        scores = read_result(file, found.issues, where=_rel(file, root))
        if scores is None:
            continue
        if scores.task != file.stem:
            found.issues.append(Issue("foreign", _rel(file, root), f"holds task {scores.task!r}, not {file.stem!r}; skipped."))
            continue
        for kind, note in scores.notes:
            found.issues.append(Issue(kind, f"{key.label}: {_rel(file, root)}", note))
        found.scores[(key, scores.task)] = scores


def _model_key(found: Collection, root: Path, model_dir: Path, revision_dir: Path, folder: Path, experiment: str) -> ModelKey:
    name = model_dir.name.replace("__", "/")
    revision = revision_dir.name
    meta_file = folder / "model_meta.json"
    if meta_file.is_file():
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            name = meta.get("name") or name
            revision = meta.get("revision") or revision
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as err:
            found.issues.append(Issue("corrupt", _rel(meta_file, root), f"unreadable ({err}); model name taken from the folder."))
    else:
        found.issues.append(Issue("no-meta", _rel(folder, root), "no model_meta.json; model name and revision taken from the folders."))
    return ModelKey(name, revision, experiment)


def read_result(file: Path, issues: list[Issue] | None = None, *, where: str | None = None) -> TaskScores | None:
    """One mteb result file as :class:`TaskScores`; ``None`` (with an issue) when it is not one."""
    from mteb.results.task_result import TaskResult

    where = where or str(file)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        _add(issues, Issue("corrupt", where, f"not valid JSON ({err}); skipped."))
        return None
    if not isinstance(raw, dict) or "task_name" not in raw or "scores" not in raw:
        _add(issues, Issue("foreign", where, "not an mteb task result (no task_name/scores); skipped."))
        return None
    try:
        result = TaskResult.from_disk(file)
    except Exception as err:  # mteb's parser: pydantic validation and format conversions
        _add(issues, Issue("foreign", where, f"mteb cannot read it ({type(err).__name__}: {_first_line(err)}); skipped."))
        return None
    return summarize(result)


def summarize(result) -> TaskScores:
    """Main score, profiles and PSI of an mteb ``TaskResult``, with completeness notes."""
    mains: list[float] = []
    psis: list[float] = []
    sums: dict[str, dict[str, list[float]]] = {}
    labels_seen: dict[str, dict[str, None]] = {}
    notes: list[tuple[str, str]] = []
    entries = 0
    for split, split_scores in result.scores.items():
        for entry in split_scores:
            entries += 1
            subset = entry.get("hf_subset", "default")
            main = _number(entry.get("main_score"))
            if main is None:
                notes.append(("partial", f"split {split}, subset {subset}: no numeric main score."))
            else:
                mains.append(main)
            profiles = position_profiles(entry)
            for family, profile in profiles.items():
                order = labels_seen.setdefault(family, {})
                for label, value in profile.items():
                    order.setdefault(label, None)
                    if value is not None:
                        sums.setdefault(family, {}).setdefault(label, []).append(value)
            psi = entry_psi(entry, profiles.get(""))
            if psi is not None:
                psis.append(psi)
    averaged = {
        family: {label: _mean(sums.get(family, {}).get(label, [])) for label in order}
        for family, order in labels_seen.items()
    }
    status = "partial" if notes else "ok"
    task_type = None
    main_score, psi = _mean(mains), _mean(psis)
    try:
        task = result.task
        task_type = task.metadata.type
        missing = result.get_missing_evaluations(task)
        if missing:
            status = "partial"
            notes.append(("partial", "missing " + "; ".join(f"split {s}: {_some(v, 'subset')}" for s, v in sorted(missing.items())) + "."))
    except Exception:  # noqa: BLE001 - a task mteb does not know: completeness cannot be checked
        task = None
        notes.append(("unchecked", f"task {result.task_name} is not registered with mteb; completeness not checked."))
    pool = getattr(task, "summarize_scores", None)
    if pool is not None:
        try:
            pooled = pool([entry for split_scores in result.scores.values() for entry in split_scores])
        except ValueError as err:  # e.g. a file written before the task stored what its pooling needs
            status = "partial"
            notes.append(("partial", f"cannot pool the subsets as {result.task_name} does ({err}); plain means shown."))
        else:
            main_score, psi = pooled["main_score"], pooled["psi"]
            averaged[""] = dict(pooled["positions"])
    return TaskScores(
        task=result.task_name,
        task_type=task_type,
        main_score=main_score,
        psi=psi,
        profiles=averaged,
        entries=entries,
        status=status,
        notes=notes,
    )


def position_profiles(entry: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """The per-position profiles of one score entry (see the module docstring for the convention)."""
    profiles: dict[str, dict[str, float | None]] = {}
    for key, value in entry.items():
        mapping = _POSITIONS_MAP.match(key)
        if mapping and isinstance(value, Mapping):
            family = mapping.group("family") or ""
            for label, item in value.items():
                if _is_value(item):
                    profiles.setdefault(family, {})[str(label)] = _number(item)
            continue
        match = _POSITION_KEY.match(key)
        if not match or not _is_value(value):
            continue
        label = match.group("label")
        if label in _NOT_LABELS or label.endswith(_STAT_SUFFIXES):
            continue
        profiles.setdefault(match.group("family") or "", {})[label] = _number(value)
    return profiles


def entry_psi(entry: Mapping[str, Any], profile: Mapping[str, float | None] | None) -> float | None:
    """``psi``; else ``1 - position_fairness``; else ``1 - min/max`` of the profile."""
    psi = _number(entry.get("psi"))
    if psi is not None:
        return psi
    fairness = _number(entry.get("position_fairness"))
    if fairness is not None:
        return 1.0 - fairness
    return profile_psi(profile or {})


def profile_psi(profile: Mapping[str, float | None]) -> float | None:
    return fairness.psi(profile.values())


def _report_missing(found: Collection) -> None:
    tasks = found.tasks
    for model in found.models:
        absent = [t for t in tasks if found.get(model, t) is None]
        if absent:
            found.issues.append(Issue("missing", model.label, f"no results for {', '.join(absent)}."))


def _report_twins(found: Collection) -> None:
    from ..mteb_models import twin_of

    names = {m.name for m in found.models}
    for name in sorted(names):
        twin = twin_of(name)
        if twin is not None and twin not in names:
            found.issues.append(Issue("no-twin", name, f"its counterpart {twin} has no results here, so the calibration's effect cannot be isolated."))


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
    for (model, task), scores in sorted(found.scores.items(), key=lambda kv: (kv[0][1], _model_order(kv[0][0]))):
        for family, profile in scores.profiles.items():
            for label, value in profile.items():
                rows.append({"model": model.name, "revision": model.revision, "experiment": model.experiment,
                             "task": task, "family": family, "label": label, "value": value})
    return rows


def main_table(found: Collection) -> str:
    tasks = found.tasks
    lines = ["| model | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for model in found.models:
        cells = []
        for task in tasks:
            scores = found.get(model, task)
            if scores is None:
                cells.append("—")
            else:
                cell = _fmt(scores.main_score)
                cells.append(cell + (" (partial)" if scores.status == "partial" else ""))
        lines.append(f"| {_md(model.label)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile_tables(found: Collection) -> str:
    parts = []
    for task in found.tasks:
        models = [m for m in found.models if (s := found.get(m, task)) is not None and s.profile]
        if not models:
            continue
        labels = list(dict.fromkeys(label for m in models for label in found.get(m, task).profile))
        lines = [f"### {task}", "", "| model | " + " | ".join(labels) + " | PSI | main |",
                 "|---|" + "---:|" * (len(labels) + 2)]
        for model in models:
            scores = found.get(model, task)
            cells = [_fmt(scores.profile.get(label)) for label in labels]
            lines.append(f"| {_md(model.label)} | " + " | ".join(cells) + f" | {_fmt(scores.psi)} | {_fmt(scores.main_score)} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


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


def _style(found: Collection) -> dict[ModelKey, dict[str, Any]]:
    """Same colour for a calibrated model and its twin; twins dashed."""
    bases: dict[str, int] = {}
    styles = {}
    for model in found.models:
        org, _, rest = model.name.partition("/")
        base = rest if org in ("fair", "fair-off") else model.name
        colour = f"C{bases.setdefault(base, len(bases)) % 10}"
        twin = org == "fair-off" or model.revision == "off"
        styles[model] = {"color": colour, "linestyle": "--" if twin else "-", "marker": "o" if not twin else "s"}
    return styles


def plot_profiles(found: Collection, out: Path) -> list[Path]:
    plt = _pyplot()
    styles = _style(found)
    written = []
    for task in found.tasks:
        models = [m for m in found.models if (s := found.get(m, task)) is not None and len(s.profile) >= 2]
        if not models:
            continue
        labels = list(dict.fromkeys(label for m in models for label in found.get(m, task).profile))
        fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(labels) + 3), 4.2))
        for model in models:
            profile = found.get(model, task).profile
            xs = [i for i, label in enumerate(labels) if profile.get(label) is not None]
            ys = [profile[labels[i]] for i in xs]
            ax.plot(xs, ys, label=model.label, **styles[model])
        ax.set_xticks(range(len(labels)), labels, rotation=45 if len(labels) > 6 else 0, ha="right" if len(labels) > 6 else "center")
        ax.set_xlabel("position")
        ax.set_ylabel("score")
        ax.set_title(f"{task}: per-position profile")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
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
        from ..mteb_models import twin_of

        for model, s in points.items():
            partner = [m for m in points if m.name == twin_of(model.name)]
            if model.name.startswith("fair-off/"):
                for target in partner:
                    t = points[target]
                    ax.annotate("", xy=(t.psi, t.main_score), xytext=(s.psi, s.main_score),
                                arrowprops={"arrowstyle": "->", "color": styles[model]["color"], "alpha": 0.6})
        ax.set_xlabel("PSI (lower is fairer)")
        ax.set_ylabel("main score")
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
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where tables and plots go (default: {DEFAULT_OUT})")
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
    profiles_md = profile_tables(found)
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
    return 0


def _register_plugin() -> None:
    """Task metadata (types, expected splits) of the plugin's tasks needs them registered."""
    try:
        from ..mteb_plugin import register

        register()
    except Exception:  # noqa: BLE001 - comparison still works, completeness checks get weaker
        pass


# ---------------------------------------------------------------------------------- helpers
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _is_value(value: Any) -> bool:
    return value is None or _number(value) is not None


def _some(names: Iterable[str], noun: str, shown: int = 5) -> str:
    """``"3 subsets [a, b, c]"``; long lists (PosIR has 310 subsets) end in ``"... and N more"``."""
    items = sorted(names)
    listed = ", ".join(items[:shown]) + (f", ... and {len(items) - shown} more" if len(items) > shown else "")
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'} [{listed}]"


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def _add(issues: list[Issue] | None, issue: Issue) -> None:
    if issues is not None:
        issues.append(issue)
