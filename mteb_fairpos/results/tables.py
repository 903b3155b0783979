"""Markdown and CSV tables of a :class:`~mteb_fairpos.results.Collection`.

Main scores (models x tasks; a probe task's subsets are separate columns, never averaged) with their
95 % intervals where the results carry them, each calibrated model's changes against its twin (paired,
`pairing`), the per-position profiles with their confidence intervals, the probe's fitted effects, and the list
of issues. ``compare`` writes them; ``probe`` and ``sweep`` print them.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import pairing
from .output import made_folder
from .reader import Collection, model_order, twin_for

MAIN_COLUMNS = ("model", "revision", "experiment", "task", "task_type", "main_score", "psi", "status", "entries")
PROFILE_COLUMNS = ("model", "revision", "experiment", "task", "family", "label", "value")


def report(found: Collection) -> str:
    """The Markdown report: main scores, changes against the twin, per-position profiles and effects, issues."""
    details, changes = profiles_text(found), changes_table(found)
    return (f"## Main scores\n\n{main_table(found)}\n"
            + (f"\n## Changes against the twin\n\n{changes}\n" if changes else "")
            + (f"\n## Per-position profiles\n\n{details}\n" if details else "")
            + f"\n## Issues\n\n{issues_text(found)}\n")


def changes_table(found: Collection) -> str:
    """Each calibrated model's change of main score and PSI (a probe's: of each subset's fairness) against its
    twin, task by task: paired on the units both results scored (interval, p-value, how many were paired)
    where both have per-unit scores, else the plain difference marked as without an interval; better or
    worse only when the interval excludes 0. The last column is each p-value adjusted by Holm's method for all the
    changes the table tests, so that a sweep of many configs does not find a change by testing many."""
    rows: list[tuple[str, pairing.Change]] = []
    for model in found.models:
        twin = twin_for(model, found.models)
        for task in found.tasks if twin is not None else ():
            mine, theirs = found.get(model, task), found.get(twin, task)
            if mine is None or theirs is None:
                continue
            for measure, subset in [(m, "") for m in pairing.MEASURES] + [("fairness", f) for f in _subsets(mine)]:
                if subset and not theirs.profiles.get(subset):
                    continue
                change = pairing.change(mine, theirs, measure, subset=subset)
                if change is not None:
                    rows.append((f"| {_md(model.label)} | {_md(twin.label)} | {task} | {pairing.measure_key(measure, subset)} | "
                                 f"{change.text()} | {change.verdict(measure != 'psi')} |", change))
    if not rows:
        return ""
    adjusted = pairing.holm([change.pvalue for _, change in rows])
    lines = [f"{row} {'' if p is None else pairing.format_p(p)} |" for (row, _), p in zip(rows, adjusted, strict=True)]
    table = "\n".join(["| model | twin | task | measure | change (95 % CI, p) | verdict | p, Holm over the table |",
                       "|---|---|---|---|---|---|---|", *lines])
    return table + _resolution([change for _, change in rows if change.pvalue is not None])


def _resolution(tested: list[pairing.Change]) -> str:
    """A note where Holm cannot reach 0.05: a p-value counted from ``R`` resamples is at least ``2 / (R + 1)``,
    and Holm multiplies the least p-value by the number of changes tested."""
    least = min((change.resamples for change in tested if change.resamples), default=0)
    if not least or len(tested) * 2 / (least + 1) < 0.05:
        return ""
    return (f"\n\nWith {least:,} resamples a bootstrap p-value is at least 2/(R + 1) = {2 / (least + 1):.4f}, so Holm's "
            f"adjustment for these {len(tested)} changes cannot bring one below 0.05; compare fewer at once (--tasks, --models) "
            f"to test at most {math.ceil((least + 1) / 40) - 1} together.")


def write_tables(found: Collection, out: str | Path) -> list[Path]:
    """``main_scores.md`` (with the issues), ``main_scores.csv``, ``profiles.md``, ``profiles.csv`` in ``out``."""
    out = made_folder(out)
    main_md, profiles_md = out / "main_scores.md", out / "profiles.md"
    main_md.write_text(f"## Main scores\n\n{main_table(found)}\n\n## Issues\n\n{issues_text(found)}\n", encoding="utf-8")
    profiles_md.write_text((profiles_text(found) or "No task reports a per-position profile.") + "\n", encoding="utf-8")
    return [main_md, write_csv(main_rows(found), out / "main_scores.csv", MAIN_COLUMNS),
            profiles_md, write_csv(profile_rows(found), out / "profiles.csv", PROFILE_COLUMNS)]


def profiles_text(found: Collection) -> str:
    """The profile tables and the effect tables, or ``""`` when no task reports a profile."""
    return "\n\n".join(part for part in (profile_tables(found), effect_tables(found)) if part)


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


def _subsets(scores: Any) -> list[str]:
    """The families a probe result profiles apart, each its own estimate: its subsets, then their ``tau`` ones."""
    return sorted((f for f in scores.intervals if f and scores.profiles.get(f)), key=lambda f: (f.startswith(pairing.TAU), f))


def main_table(found: Collection) -> str:
    """Models x tasks. A probe task's subsets are separate estimates (other languages, other n), so
    it gets one column per subset with that subset's fairness instead of a mean across them."""
    if not found.scores:  # a table of no columns is no Markdown table
        return "No result could be read."
    columns: list[tuple[str, str | None]] = []
    for task in found.tasks:
        subsets = pairing.subsets_of(families(found, task))
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
                estimate = scores.headline.get(pairing.measure_key("fairness", subset))
                cells.append(_with_interval(scores.figure("fairness", subset), estimate and estimate.interval))
            else:
                cell = _with_interval(scores.main_score, (estimate := scores.headline.get("main")) and estimate.interval)
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
        for family in families(found, task):
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
                psi, main = (scores.headline.get(m) for m in ("psi", "main"))
                ratio = scores.headline.get(pairing.measure_key("fairness", family))
                ends = (f" {_with_interval(scores.psi, psi and psi.interval)} | {_with_interval(scores.main_score, main and main.interval)} |" if pooled
                        else f" {_with_interval(scores.figure('fairness', family), ratio and ratio.interval)} |")
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
        lines = [f"### {task}: effects (estimate (SE) p; standard errors clustered by segment set, and by topic where sets share topics)", "",
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
    return text + ("" if p is None else f" {pairing.format_p(p)}")


def families(found: Collection, task: str) -> list[str]:
    """The profile families of ``task`` with values: the pooled one first, then subsets, then tau's."""
    families = [f for m in found.models if (s := found.get(m, task)) is not None for f, p in s.profiles.items() if p]
    return sorted(dict.fromkeys(families), key=lambda f: (f != "", f.startswith(pairing.TAU), f))


def _with_interval(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None or interval is None:
        return format_score(value)
    return f"{value:.4f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def issues_text(found: Collection) -> str:
    """The issues, then the notes on how numbers were pooled (`Issue.note`), which are not problems."""
    problems, notes = found.problems, found.notes
    text = "\n".join(f"- {issue}" for issue in problems) if problems else "No missing, partial or unreadable results."
    return text + ("\n\nNotes:\n" + "\n".join(f"- {issue}" for issue in notes) if notes else "")


def write_csv(rows: list[dict[str, Any]], path: str | Path, columns: Sequence[str]) -> Path:
    path = Path(path)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def format_score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _md(text: str) -> str:
    return text.replace("|", "\\|")
