"""What the leaderboard page shows, as plain data: rows grouped by base model, cells with their
change against the uncalibrated twin, pooled markers, issues and where every number came from.

Everything here is read through :mod:`mteb_fairpos.results` (``collect`` and its ``TaskScores``);
the page and its charts only lay this data out.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..mteb_plugin import registered_task
from ..results import pairing
from ..results.output import check_folder
from ..results.pairing import Change
from ..results import Collection, Issue, ModelKey, TaskScores, collect, is_twin, plugin_base, twin_for
from ..results.reader import GAP_KINDS, report_gaps, unmatched

@dataclass(frozen=True)
class Column:
    """One number per model: a task's main score, its position-fairness measure, or one probe subset's fairness."""

    task: str
    measure: str
    """``main``, ``psi`` (lower is fairer) or ``fairness`` (a probe subset's min/max ratio, higher is fairer)."""
    subset: str = ""
    family: str = ""
    """``probe``, ``retrieval`` or the task's lower-cased mteb type."""
    languages: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return "|".join((self.task, self.measure, self.subset))

    @property
    def title(self) -> str:
        if self.measure == "fairness":
            return f"{self.subset} fairness"
        return {"main": "main", "psi": "PSI"}[self.measure]

    @property
    def higher_is_better(self) -> bool:
        return self.measure != "psi"


@dataclass
class Cell:
    value: float | None
    delta: float | None = None
    """The value minus the twin's (``None`` for the twin itself or without a twin)."""
    interval: tuple[float, float] | None = None
    """The value's 95 % interval, where the result has one (`TaskScores.headline`)."""
    change: Change | None = None
    """The change against the twin with its paired interval and p-value (`pairing.change`), where there is a twin."""
    adjusted: float | None = None
    """The change's p-value adjusted by Holm's method for every change the page tests (`pairing.holm`)."""
    note: str = ""
    """What else the result says about the number (a probe subset's per-position 95 % intervals)."""
    pooled: str = ""
    """Why the value is pooled over subsets (empty when it is not)."""
    status: str = "ok"
    """``ok``, ``partial`` or ``missing``."""
    source: str = ""
    """The result file, relative to the page."""
    drawn: str = ""
    """What the interval's bootstrap draws (`TaskScores.drawn`), where the result says."""


@dataclass
class Row:
    model: ModelKey
    base: str
    twin: bool
    cells: dict[str, Cell] = field(default_factory=dict)
    partner: ModelKey | None = None
    """The twin this row's deltas are taken against."""

    @property
    def config(self) -> str:
        """The calibration in text form: ``none`` for the twin, else the model name's (or, in results of
        earlier releases, the revision's)."""
        if self.twin:
            return "none"
        from ..mteb_models import parse_name

        try:
            calibration = parse_name(self.model.name)[1]
        except KeyError:
            return ""
        if self.model.name == f"fair/{self.base}" and not _is_commit(self.model.revision):
            return self.model.revision  # an earlier release: fair/<model>/<config>/
        return str(calibration)


def _is_commit(revision: str) -> bool:
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision) or revision in ("", "no_revision_available")


@dataclass
class Source:
    """Where one (model, task) result came from and what it records."""

    path: Path | None
    href: str
    mteb_version: str = ""
    dataset_revision: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    experiment: dict[str, Any] = field(default_factory=dict)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Language -> the task's own per-language figures, for tasks that pool their subsets per language
    (PosIR: ``position_<bin>`` and, per length bucket, ``ndcg_at_10_<bucket>``)."""


@dataclass
class Board:
    """The page's content."""

    roots: list[Path]
    columns: list[Column]
    rows: list[Row]
    scores: dict[tuple[ModelKey, str], TaskScores]
    sources: dict[tuple[ModelKey, str], Source]
    issues: list[tuple[str, Issue]]
    """(results folder, issue) for every file or result that is missing, partial, foreign or unreadable, and every
    note on how a number was pooled (`Issue.note`)."""
    families: dict[str, str]
    languages: dict[str, tuple[str, ...]]
    filtered: int = 0
    """Result files left unread because ``tasks`` or ``models`` did not name them."""
    unmatched: str = ""
    """The ``tasks`` and ``models`` names no folder has a result of (`results.reader.unmatched`)."""

    @property
    def problems(self) -> list[tuple[str, Issue]]:
        """The issues that are not notes: what the page and the command count."""
        return [(folder, issue) for folder, issue in self.issues if not issue.note]

    @property
    def notes(self) -> list[tuple[str, Issue]]:
        return [(folder, issue) for folder, issue in self.issues if issue.note]

    @property
    def pools(self) -> dict[tuple[ModelKey, str], dict[str, dict[str, Any]]]:
        return {key: source.pools for key, source in self.sources.items() if source.pools}

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(c.task for c in self.columns))

    @property
    def bases(self) -> list[str]:
        return list(dict.fromkeys(r.base for r in self.rows))

    def row(self, model: ModelKey) -> Row:
        return next(r for r in self.rows if r.model == model)


# ---------------------------------------------------------------------------------- building
def build(folders: Sequence[str | Path], site: str | Path, *, tasks: Sequence[str] | None = None,
          models: Sequence[str] | None = None) -> Board:
    """Read every results folder and lay it out for a page written to ``site``."""
    if isinstance(folders, (str, bytes, Path)):  # read letter by letter, '/' first
        raise TypeError(f"folders is a list of results folders; got the path {str(folders)!r} (write [{str(folders)!r}]).")
    given: dict[str, str | Path] = {}
    for folder in folders:  # one folder twice would report each of its results as a duplicate of itself
        if (real := os.path.realpath(folder)) in given:
            raise ValueError(f"results folder {str(folder)!r} is given twice (as {str(given[real])!r} too); give each once.")
        given[real] = folder
    site = check_folder(site)  # before the folders are read
    scores: dict[tuple[ModelKey, str], TaskScores] = {}
    sources: dict[tuple[ModelKey, str], Source] = {}
    issues: list[tuple[str, Issue]] = []
    roots, filtered, seen = [], 0, {"tasks": set(), "models": set()}
    for folder in folders:
        found = collect(folder, tasks=tasks, models=models)
        roots.append(found.root)
        filtered += found.filtered
        for kind, names in found.seen.items():
            seen[kind] |= names
        issues += [(str(folder), issue) for issue in found.issues if issue.kind not in GAP_KINDS]  # found below
        for key, task_scores in found.scores.items():
            if key in scores:
                issues.append((str(folder), Issue("duplicate", f"{key[0].label}: {key[1]}",
                                                  "also in an earlier results folder; the earlier one is shown.")))
                continue
            scores[key] = task_scores
            sources[key] = read_source(found, *key, site=site)
    merged = Collection(roots[0] if roots else Path("."), scores)
    report_gaps(merged)  # a twin or a task in another folder is not missing
    issues += [(", ".join(map(str, folders)), issue) for issue in merged.issues]
    families = {task: task_family(merged, task) for task in merged.tasks}
    languages = {task: task_languages(merged, task) for task in merged.tasks}
    columns = make_columns(merged, families, languages)
    rows = make_rows(merged, columns, sources)
    for row in rows:
        for column in columns:
            source = sources.get((row.model, column.task))
            if source is not None and source.pools and column.measure in ("main", "psi"):
                row.cells[column.key].pooled = (f"pooled per language as {column.task} does: the mean over "
                                                f"{len(source.pools)} languages of each one's figure over its domains")
    return Board(roots, columns, rows, scores, sources, issues, families, languages, filtered,
                 unmatched(seen, tasks, models))


def make_columns(found: Collection, families: dict[str, str], languages: dict[str, tuple[str, ...]]) -> list[Column]:
    """Per task its main score and PSI; a probe task its main score and each subset's fairness (subsets of
    other languages or n are separate estimates, never averaged, as ``compare`` shows them)."""
    columns = []
    for task in sorted(found.tasks, key=lambda t: (families[t] == "probe", t)):
        family = families[task]
        columns.append(Column(task, "main", family=family, languages=languages[task]))
        subsets = probe_subsets(found, task)
        if subsets:
            columns += [Column(task, "fairness", subset, family, subset_languages(subset)) for subset in subsets]
        elif any(s.psi is not None for s in _task_scores(found, task)):
            columns.append(Column(task, "psi", family=family, languages=languages[task]))
    return columns


def make_rows(found: Collection, columns: Sequence[Column], sources: dict[tuple[ModelKey, str], Source]) -> list[Row]:
    rows = [Row(model, plugin_base(model.name) or model.name, is_twin(model)) for model in found.models]
    for row in rows:
        row.partner = twin_for(row.model, found.models)
    by_model = {row.model: row for row in rows}
    for row in rows:
        for column in columns:
            row.cells[column.key] = cell(found.get(row.model, column.task), column, sources.get((row.model, column.task)))
    for row in rows:
        if row.partner is None:
            continue
        twin = by_model[row.partner]
        for column in columns:
            value, other = row.cells[column.key], twin.cells[column.key].value
            if value.value is not None and other is not None:
                value.delta = value.value - other
                mine, theirs = found.get(row.model, column.task), found.get(row.partner, column.task)
                value.change = pairing.change(mine, theirs, column.measure, subset=column.subset)
    changed = [row.cells[column.key] for row in rows for column in columns if row.cells[column.key].change is not None]
    for value, adjusted in zip(changed, pairing.holm([value.change.pvalue for value in changed]), strict=True):
        value.adjusted = adjusted
    return rows


def cell(scores: TaskScores | None, column: Column, source: Source | None) -> Cell:
    if scores is None:
        return Cell(None, status="missing")
    href = source.href if source else ""
    if column.measure == "fairness":
        profile = scores.profiles.get(column.subset, {})
        intervals = scores.intervals.get(column.subset, {})
        note = "; ".join(f"position {label}: {value:.4f}" + (f" [{intervals[label][0]:.4f}, {intervals[label][1]:.4f}]"
                                                                if label in intervals else "")
                         for label, value in profile.items() if value is not None)
        estimate = scores.headline.get(pairing.measure_key("fairness", column.subset))
        return Cell(scores.figure("fairness", column.subset), interval=estimate.interval if estimate else None,
                    note=note and f"95 % CI per position: {note}", status=scores.status, source=href,
                    drawn=scores.drawn or "")
    estimate = scores.headline.get(column.measure)
    return Cell(scores.figure(column.measure), interval=estimate.interval if estimate else None, pooled=pooled_marker(scores),
                status=scores.status, source=href, drawn=scores.drawn or "")


def pooled_marker(scores: TaskScores) -> str:
    """The reader's own note when a number pools subsets (the probe's mean over its subsets)."""
    return " ".join(text for kind, text in scores.notes if kind == "pooled")




# ---------------------------------------------------------------------------------- tasks
def task_family(found: Collection, task: str) -> str:
    scores = _task_scores(found, task)
    if task.startswith("PermutationFairness") or any(s.effects or any(f for f in s.intervals) for s in scores):
        return "probe"
    types = {s.task_type for s in scores if s.task_type}
    if any("Retrieval" in t or "Reranking" in t for t in types):
        return "retrieval"
    return (sorted(types)[0].lower() if types else "other")


def task_languages(found: Collection, task: str) -> tuple[str, ...]:
    """Language subtags (``en``) the task covers: its probe subsets', else mteb's metadata."""
    subsets = probe_subsets(found, task)
    if subsets:
        return tuple(sorted({lang for s in subsets for lang in subset_languages(s)}))
    known = _task_class(task)
    return _subtags(known.metadata.languages) if known is not None else ()


def probe_subsets(found: Collection, task: str) -> list[str]:
    """The subsets a probe result profiles apart (one family per subset; ``tau`` ones left out)."""
    return pairing.subsets_of(f for s in _task_scores(found, task) if s.intervals for f, p in s.profiles.items() if p)


def subset_languages(subset: str) -> tuple[str, ...]:
    """``n3_en-de`` -> ``("de", "en")``."""
    _, _, tags = subset.partition("_")
    return _subtags(tags.split("-") if tags else [])


def _subtags(codes: Iterable[str]) -> tuple[str, ...]:
    import langcodes

    found = set()
    for code in codes:
        try:
            found.add(langcodes.Language.get(code).language or code)
        except (ValueError, LookupError):
            found.add(code)
    return tuple(sorted(found))


def _task_scores(found: Collection, task: str) -> list[TaskScores]:
    return [s for m in found.models if (s := found.get(m, task)) is not None]


@functools.lru_cache(maxsize=None)
def _task_class(task: str) -> type | None:
    try:
        return type(registered_task(task))
    except Exception:  # noqa: BLE001 - a task mteb does not know
        return None


# ---------------------------------------------------------------------------------- provenance
def read_source(found: Collection, model: ModelKey, task: str, *, site: Path) -> Source:
    """Where (model, task) came from and what it records, as the reader read it (the file is not opened
    again): its path, versions, settings and, for a task that pools per language, its per-language figures."""
    scores = found.get(model, task)
    if scores is None or scores.path is None:
        return Source(None, "")
    return Source(
        scores.path,
        os.path.relpath(scores.path.resolve(), site.resolve()).replace(os.sep, "/"),
        mteb_version=scores.mteb_version,
        dataset_revision=scores.dataset_revision,
        settings={key: ", ".join(map(str, values)) for key, values in scores.settings.items()},
        experiment=dict(found.experiments.get(model, {})),
        pools=scores.pools,
    )
