"""Which charts each task gets: profile panels per base model (per probe subset, per PosIR language)
and the trade-off panels, with one colour per calibration config across the whole page."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..results import ModelKey
from .charts import TWIN_COLOUR, Point, Series, colour, line_chart, tradeoff_chart
from .data import Board, Row


@dataclass
class Figure:
    """A titled group of panels (SVG) about one task."""

    heading: str
    panels: list[str] = field(default_factory=list)


def colours(board: Board) -> dict[ModelKey, str]:
    """Grey for the twins; each calibration config its colour, the same for every base model."""
    configs = list(dict.fromkeys(r.config or r.model.label for r in board.rows if not r.twin))
    index = {config: k for k, config in enumerate(configs)}
    return {r.model: TWIN_COLOUR if r.twin else colour(index[r.config or r.model.label]) for r in board.rows}


def task_figures(board: Board, task: str) -> list[Figure]:
    palette = colours(board)
    figures = [profile_figure(board, task, family, palette) for family in _families(board, task)]
    figures += language_figures(board, task, palette)
    tradeoff = tradeoff_figure(board, task, palette)
    return [f for f in figures + [tradeoff] if f.panels]


def profile_figure(board: Board, task: str, family: str, palette: dict[ModelKey, str]) -> Figure:
    """One panel per base model: a line per model, bands where the result has 95 % intervals."""
    ylabel = _metric(board, task, family)
    figure = Figure(f"Per-position profile{f': {family}' if family else ''}")
    for base in board.bases:
        rows = [r for r in board.rows if r.base == base and _profile(board, r, task, family)]
        labels = list(dict.fromkeys(label for r in rows for label in _profile(board, r, task, family)))
        if len(labels) < 2:
            continue
        series = []
        for row in rows:
            profile = _profile(board, row, task, family)
            intervals = board.scores[(row.model, task)].intervals.get(family, {})
            series.append(Series(row.model.label, [profile.get(label) for label in labels], palette[row.model], row.twin,
                                 [intervals.get(label) for label in labels] if intervals else None, _key(row)))
        figure.panels.append(line_chart(f"{base}{f' · {family}' if family else ''}", labels, series, ylabel=ylabel))
    return figure


def language_figures(board: Board, task: str, palette: dict[ModelKey, str]) -> list[Figure]:
    """For a task pooled per language (PosIR): each language's profile over the position bins and its
    nDCG@10 per length bucket, one panel per base model."""
    every = {model: pools for (model, name), pools in board.pools.items() if name == task}
    languages = sorted({lang for pools in every.values() for lang in pools})
    figures = []
    for language in languages:
        figure = Figure(f"{language}: pooled over its domains")
        for base in board.bases:
            rows = [r for r in board.rows if r.base == base and language in every.get(r.model, {})]
            if not rows:
                continue
            pools = [every[r.model][language] for r in rows]
            bins = list(dict.fromkeys(k for p in pools for k in p if k.startswith("position_") and k != "position_counts"))
            buckets = list(dict.fromkeys(k for p in pools for k in p if k.startswith("ndcg_at_10_")))
            for keys, xlabel, what in ((bins, "relative position of the answer", "profile"),
                                       (buckets, "document length bucket", "by length")):
                if len(keys) < 2:
                    continue
                series = [Series(r.model.label, [_number(p.get(k)) for k in keys], palette[r.model], r.twin, key=_key(r))
                          for r, p in zip(rows, pools)]
                labels = [k.removeprefix("position_").removeprefix("ndcg_at_10_") for k in keys]
                figure.panels.append(line_chart(f"{base} · {language} · {what}", labels, series, ylabel="nDCG@10", xlabel=xlabel))
        figures.append(figure)
    return figures


def tradeoff_figure(board: Board, task: str, palette: dict[ModelKey, str]) -> Figure:
    """Main score against PSI per base model, an arrow from the twin to each calibrated model."""
    figure = Figure("Effectiveness vs position sensitivity")
    if board.families.get(task) == "probe":
        return figure
    for base in board.bases:
        points: dict[ModelKey, Point] = {}
        for row in (r for r in board.rows if r.base == base):
            scores = board.scores.get((row.model, task))
            if scores is not None and scores.psi is not None and scores.main_score is not None:
                points[row.model] = Point(row.model.label, scores.psi, scores.main_score, palette[row.model], row.twin,
                                              _key(row))
        if not points:
            continue
        arrows = [(points[r.partner], points[r.model]) for r in board.rows
                  if r.model in points and r.partner in points]
        figure.panels.append(tradeoff_chart(base, list(points.values()), arrows, ylabel=f"main score ({_metric(board, task, '')})"))
    return figure


def _key(row: Row) -> str:
    """A model in its base model's panel: its calibration, the experiment when it has one."""
    text = "uncalibrated twin" if row.twin else (row.config or row.model.label)
    return f"{text} ({row.model.experiment})" if row.model.experiment else text


def _families(board: Board, task: str) -> list[str]:
    found = {f for (m, t), s in board.scores.items() if t == task for f, p in s.profiles.items() if p}
    return sorted(found, key=lambda f: (f.startswith("tau"), f))


def _profile(board: Board, row: Row, task: str, family: str) -> dict[str, float | None]:
    scores = board.scores.get((row.model, task))
    return scores.profiles.get(family, {}) if scores is not None else {}


def _metric(board: Board, task: str, family: str) -> str:
    if family.startswith("tau"):
        return "late-chunk tau"
    if board.families.get(task) == "probe":
        return "mean sigma"
    if board.families.get(task) == "retrieval":
        return "nDCG@10"
    return "score"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
