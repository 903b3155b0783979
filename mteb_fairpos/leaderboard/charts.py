"""The page's charts as inline SVG: per-position profiles and the effectiveness-vs-PSI trade-off.

Built as SVG text rather than through matplotlib so a full sweep (hundreds of panels) stays small
and fast to write, and every mark is an element the page can style, hover and test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
           "#bcbd22", "#393b79", "#637939", "#ad494a", "#7b4173", "#3182bd", "#e6550d", "#31a354")
TWIN_COLOUR = "#555555"
WIDTH, PLOT_HEIGHT = 460, 210
LEFT, RIGHT, TOP = 58, 14, 30
LEGEND_ROW = 15


@dataclass
class Series:
    """One model's line: values per x label (``None`` = no value), and its 95 % band where known."""

    label: str
    values: Sequence[float | None]
    colour: str
    dashed: bool = False
    band: Sequence[tuple[float, float] | None] | None = None
    key: str = ""
    """The legend's text (the panel's title already names the base model); the label when empty."""


@dataclass
class Point:
    label: str
    x: float
    y: float
    colour: str
    twin: bool = False
    key: str = ""


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def line_chart(title: str, labels: Sequence[str], series: Sequence[Series], *, ylabel: str, xlabel: str = "position") -> str:
    """One panel: a line per series over the x labels, the twin dashed, bands drawn under the lines."""
    values = [v for s in series for v in s.values if v is not None]
    values += [b for s in series for pair in (s.band or []) if pair for b in pair]
    rotate = len(labels) > 6 or max((len(label) for label in labels), default=0) > 6
    bottom = 70 if rotate else 42
    frame = _Frame(_limits(values), len(labels), bottom)
    parts = [_axes(frame, title, xlabel, ylabel)]
    for i, label in enumerate(labels):
        x = frame.x(i)
        anchor = f'text-anchor="end" transform="rotate(-45 {x:.0f} {frame.bottom + 14})"' if rotate else 'text-anchor="middle"'
        parts.append(f'<text class="tick" x="{x:.0f}" y="{frame.bottom + 14}" {anchor}>{escape(label)}</text>')
    for s in series:
        if s.band:
            parts.append(_band(frame, s))
    for s in series:
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        for run in _runs(s.values):
            d = " ".join(f"{'M' if j == 0 else 'L'}{frame.x(i):.0f},{frame.y(v):.0f}" for j, (i, v) in enumerate(run))
            parts.append(f'<path class="mark line" d="{d}" stroke="{s.colour}"{dash}><title>{escape(s.label)}</title></path>')
            if len(run) == 1:
                i, v = run[0]
                parts.append(f'<circle class="mark" cx="{frame.x(i):.0f}" cy="{frame.y(v):.0f}" r="3" fill="{s.colour}">'
                             f'<title>{escape(s.label)}</title></circle>')
    return _svg(title, parts + _legend(frame, [(s.key or s.label, s.colour, s.dashed, "line") for s in series]), frame, len(series))


def tradeoff_chart(title: str, points: Sequence[Point], arrows: Sequence[tuple[Point, Point]], *,
                   xlabel: str = "PSI (lower is fairer)", ylabel: str = "main score") -> str:
    """Main score against PSI, one marker per model and an arrow from each twin to its calibrated models."""
    frame = _Frame(_limits([p.y for p in points]), 0, 42, x_limits=_limits([p.x for p in points]))
    parts = [_axes(frame, title, xlabel, ylabel)]
    for tick in _ticks(*frame.x_limits):
        parts.append(f'<line class="grid" x1="{frame.px(tick):.0f}" x2="{frame.px(tick):.0f}" y1="{TOP}" y2="{frame.bottom}"/>'
                     f'<text class="tick" x="{frame.px(tick):.0f}" y="{frame.bottom + 14}" text-anchor="middle">{tick:g}</text>')
    for start, end in arrows:
        x1, y1, x2, y2 = frame.px(start.x), frame.y(start.y), frame.px(end.x), frame.y(end.y)
        shorten = 6 / max(math.hypot(x2 - x1, y2 - y1), 1e-9)  # stop at the marker's edge, not its centre
        x2, y2 = x2 - (x2 - x1) * shorten, y2 - (y2 - y1) * shorten
        parts.append(f'<line class="mark arrow" x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="{end.colour}" marker-end="url(#head)"><title>{escape(start.label)} '
                     f'&#8594; {escape(end.label)}</title></line>')
    for p in points:
        cx, cy = frame.px(p.x), frame.y(p.y)
        text = f"<title>{escape(p.label)}: PSI {p.x:.4f}, main {p.y:.4f}</title>"
        if p.twin:
            parts.append(f'<rect class="mark" x="{cx - 4:.0f}" y="{cy - 4:.0f}" width="8" height="8" fill="{p.colour}">{text}</rect>')
        else:
            parts.append(f'<circle class="mark" cx="{cx:.0f}" cy="{cy:.0f}" r="4" fill="{p.colour}">{text}</circle>')
    legend = _legend(frame, [(p.key or p.label, p.colour, p.twin, "square" if p.twin else "dot") for p in points])
    return _svg(title, parts + legend, frame, len(points))


# ---------------------------------------------------------------------------------- geometry
class _Frame:
    def __init__(self, y_limits: tuple[float, float], n: int, bottom_margin: int, *, x_limits: tuple[float, float] = (0.0, 1.0)):
        self.y_limits, self.x_limits, self.n = y_limits, x_limits, n
        self.bottom = TOP + PLOT_HEIGHT
        self.height = self.bottom + bottom_margin

    def x(self, i: int) -> float:
        step = (WIDTH - LEFT - RIGHT) / max(self.n, 1)
        return LEFT + step * (i + 0.5)

    def px(self, value: float) -> float:
        low, high = self.x_limits
        return LEFT + (value - low) / (high - low) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        low, high = self.y_limits
        return self.bottom - (value - low) / (high - low) * PLOT_HEIGHT


def _limits(values: Sequence[float], span: float = 0.05) -> tuple[float, float]:
    """At least ``span`` wide, so a 0.003 difference does not look like a cliff."""
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    middle, half = (low + high) / 2, max(high - low, span) / 2 * 1.15
    return middle - half, middle + half


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if raw <= step * m)
    first = math.ceil(low / step)
    return [round(k * step, 10) for k in range(first, int(math.floor(high / step)) + 1)]


def _axes(frame: _Frame, title: str, xlabel: str, ylabel: str) -> str:
    parts = [f'<text class="title" x="{LEFT}" y="18">{escape(title)}</text>']
    for tick in _ticks(*frame.y_limits):
        y = frame.y(tick)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.0f}" y2="{y:.0f}"/>'
                     f'<text class="tick" x="{LEFT - 5}" y="{y + 3.5:.0f}" text-anchor="end">{tick:g}</text>')
    parts.append(f'<path class="axis" d="M{LEFT},{TOP} V{frame.bottom} H{WIDTH - RIGHT}"/>')
    parts.append(f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{frame.height - 6}" text-anchor="middle">{escape(xlabel)}</text>')
    parts.append(f'<text class="label" transform="rotate(-90)" x="{-(TOP + frame.bottom) / 2:.0f}" y="14" text-anchor="middle">'
                 f'{escape(ylabel)}</text>')
    return "".join(parts)


def _band(frame: _Frame, s: Series) -> str:
    known = [(i, pair) for i, pair in enumerate(s.band or []) if pair is not None]
    if not known:
        return ""
    upper = " ".join(f"{frame.x(i):.0f},{frame.y(pair[1]):.0f}" for i, pair in known)
    lower = " ".join(f"{frame.x(i):.0f},{frame.y(pair[0]):.0f}" for i, pair in reversed(known))
    return f'<polygon class="mark band" points="{upper} {lower}" fill="{s.colour}"><title>{escape(s.label)}: 95 % interval</title></polygon>'


def _runs(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Consecutive known values: a missing one breaks the line instead of bridging it."""
    runs: list[list[tuple[int, float]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            runs.append([])
        else:
            runs[-1].append((i, v))
    return [run for run in runs if run]


def _legend(frame: _Frame, entries: Sequence[tuple[str, str, bool, str]]) -> list[str]:
    parts = []
    columns = 2
    for k, (label, col, twin, kind) in enumerate(entries):
        x = LEFT + (k % columns) * (WIDTH - LEFT) / columns
        y = frame.height + 4 + (k // columns) * LEGEND_ROW
        if kind == "line":
            dash = ' stroke-dasharray="6 4"' if twin else ""
            key = f'<line class="key" x1="{x:.0f}" x2="{x + 22:.0f}" y1="{y:.0f}" y2="{y:.0f}" stroke="{col}"{dash}/>'
        elif kind == "square":
            key = f'<rect x="{x + 7:.0f}" y="{y - 4:.0f}" width="8" height="8" fill="{col}"/>'
        else:
            key = f'<circle cx="{x + 11:.0f}" cy="{y:.0f}" r="4" fill="{col}"/>'
        short = _short(label)
        full = f"<title>{escape(label)}</title>" if short != label else ""
        parts.append(f'{key}<text class="legend" x="{x + 27:.0f}" y="{y + 4:.0f}">{escape(short)}{full}</text>')
    return parts


def _short(label: str, limit: int = 34) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def _svg(title: str, parts: list[str], frame: _Frame, entries: int) -> str:
    height = frame.height + 8 + math.ceil(entries / 2) * LEGEND_ROW
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
            f'role="img" aria-label="{escape(title)}">' + "".join(parts) + "</svg>")
