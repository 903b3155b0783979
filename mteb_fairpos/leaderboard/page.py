"""``SITE/index.html``: one self-contained page (styles, script and SVG charts inline), so it opens from
``file://`` and any static host without fetching anything."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from importlib import resources
from pathlib import Path

from ..results import Issue
from ..results.output import made_folder
from ..results.pairing import Change, format_p
from ..results.schema import QUERIES, SETS_AND_TOPICS
from .data import Board, Cell, Column, Row, Source
from .figures import task_figures

TITLE = "Position-fairness leaderboard"


def write(board: Board, site: str | Path) -> Path:
    path = made_folder(site) / "index.html"
    path.write_text(render(board), encoding="utf-8")
    return path


def render(board: Board) -> str:
    assets = resources.files(__package__)
    style = assets.joinpath("page.css").read_text(encoding="utf-8")
    script = assets.joinpath("page.js").read_text(encoding="utf-8")
    body = "".join([_header(board), _filters(board), _overview(board), _tasks(board), _issues(board), _provenance(board)])
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{TITLE}</title><style>{style}</style></head><body>"
            '<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs><marker id="head" viewBox="0 0 10 10" refX="9" '
            'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker>'
            f"</defs></svg>{body}<script>{script}</script></body></html>\n")


# ---------------------------------------------------------------------------------- sections
def _header(board: Board) -> str:
    versions = sorted({s.mteb_version for s in board.sources.values() if s.mteb_version})
    folders = ", ".join(f"<code>{escape(str(root))}</code>" for root in board.roots)
    return (f"<header><h1>{TITLE}</h1><p class=\"lede\">How much each embedding model's quality depends on <em>where</em> in a "
            "long document the relevant text sits, and what attention calibration changes. Every calibrated model is shown "
            "next to its uncalibrated twin (same weights, calibration off, dashed in the charts); the small numbers are the "
            "change against that twin, paired query by query: green where it is better and red where it is worse only when "
            "its 95 % interval excludes 0, grey and marked n.s. (not significant) where the interval spans 0, and marked no CI "
            "where the results hold no per-query scores (earlier releases). A number's own 95 % interval, where the result "
            "has one, stands in brackets beside it, and so does a change's paired interval (hover a change for its p-value, and for that p-value adjusted by Holm's method for all the changes on the "
            "page: a page of many configs finds some changes by chance, and the adjusted one keeps the whole page's error "
            "rate at 5 %). <b>PSI</b> (position sensitivity index, lower is fairer) is "
            "1 &minus; min/max of the per-position profile; a probe subset's <b>fairness</b> is min/max (higher is fairer).</p>"
            f'<dl class="facts"><dt>results</dt><dd>{folders}</dd><dt>models</dt><dd>{len(board.rows)} in {len(board.bases)} base '
            f"model{'s' if len(board.bases) != 1 else ''}</dd><dt>tasks</dt><dd>{len(board.tasks)}</dd>"
            f"<dt>mteb</dt><dd>{escape(', '.join(versions) or 'not recorded')}</dd>"
            f'<dt>issues</dt><dd><a href="#issues">{len(board.problems)}</a></dd></dl></header>')


def _filters(board: Board) -> str:
    families = sorted(set(board.families.values()))
    languages = sorted({lang for c in board.columns for lang in c.languages})
    return ('<nav class="filters" aria-label="filters">'
            + _select("family", "Task family", families) + _select("language", "Language", languages)
            + _select("base", "Base model", board.bases) + '<span id="shown" aria-live="polite"></span></nav>')


def _select(name: str, label: str, options: Iterable[str]) -> str:
    items = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in options)
    return f'<label>{label} <select id="filter-{name}" data-filter="{name}"><option value="">all</option>{items}</select></label>'


def _overview(board: Board) -> str:
    tasks = board.tasks
    top = ['<th rowspan="2" class="sortable" data-col="" aria-sort="none" scope="col">model</th>'
           '<th rowspan="2" scope="col">calibration</th>']
    for task in tasks:
        columns = [c for c in board.columns if c.task == task]
        top.append(f'<th colspan="{len(columns)}" class="task" data-task="{escape(task)}" scope="colgroup">'
                   f'<a href="#{_anchor(task)}">{escape(task)}</a></th>')
    pooled = {c.key for c in board.columns if any(r.cells[c.key].pooled for r in board.rows)}
    second = "".join(f'<th class="sortable num" scope="col" aria-sort="none" data-best="{"high" if c.higher_is_better else "low"}" '
                     f'{_column_data(c)} title="{"higher" if c.higher_is_better else "lower"} is better; click to sort">'
                     f'{escape(c.title)}{"<sup class=pooled-mark>&dagger;</sup>" if c.key in pooled else ""}</th>'
                     for c in board.columns)
    body = []
    width = 2 + len(board.columns)
    for base in board.bases:
        body.append(f'<tr class="group" data-base="{escape(base)}"><th colspan="{width}" scope="rowgroup">{escape(base)}</th></tr>')
        body += [_row(board, row, len(body)) for row in board.rows if row.base == base]
    return ('<section id="overview"><h2>Overview</h2><p class="hint">Click a column to sort (again to reverse; '
            '&ldquo;model&rdquo; restores the grouping). Every number links to the result file it comes from. '
            '<sup class="pooled-mark">&dagger;</sup> marks a pooled value (hover it for how it was pooled: the probe\'s mean over subsets of '
            'different languages or sizes, PosIR\'s mean over languages); '
            '<span class="partial">partial</span> a result that misses some of its splits or subsets.</p>'
            f'<div class="scroll"><table id="board"><thead><tr>{"".join(top)}</tr><tr>{second}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div></section>')


def _row(board: Board, row: Row, order: int) -> str:
    partner = f' title="changes against {escape(row.partner.label)}"' if row.partner else ""
    cells = "".join(_cell(row.cells[c.key], c) for c in board.columns)
    kind = "twin" if row.twin else "calibrated"
    return (f'<tr class="model {kind}" data-base="{escape(row.base)}" data-order="{order}">'
            f'<th scope="row" class="name"{partner}>{escape(row.model.label)}</th><td class="config">{escape(row.config)}</td>{cells}</tr>')


def _cell(cell: Cell, column: Column) -> str:
    data = f'data-col="{escape(column.key)}"'
    if cell.value is None:
        text = "missing" if cell.status == "missing" else "no value"
        return f'<td class="num empty" {data} title="{text}">&mdash;</td>'
    number = f"{cell.value:.4f}"
    if cell.source:
        title = f' title="{escape(cell.note)}"' if cell.note else ""
        number = f'<a href="{escape(cell.source)}"{title}>{number}</a>'
    marks = f'<sup class="pooled-mark" title="{escape(cell.pooled)}">&dagger;</sup>' if cell.pooled else ""
    if cell.interval is not None:
        units = cell.drawn or (SETS_AND_TOPICS if column.family == "probe" else QUERIES)
        marks += f'<span class="ci" title="95 % interval (bootstrap over {units})">[{cell.interval[0]:.4f}, {cell.interval[1]:.4f}]</span>'
    if cell.change is not None:
        marks += _change(cell.change, cell.adjusted, column)
    else:
        marks += '<span class="delta"></span>'  # keeps the twin's numbers in line with the others'
    if cell.status == "partial":
        marks += '<span class="partial" title="see the issues below">partial</span>'
    return f'<td class="num" {data} data-value="{cell.value!r}">{number}{marks}</td>'


def _change(change: Change, adjusted: float | None, column: Column) -> str:
    """The change against the twin, coloured better/worse only when its interval excludes 0; otherwise
    neutral: ``n.s.`` when the interval spans 0, ``no CI`` without an interval (a result of an earlier release).
    Its title gives the p-value, and that p-value adjusted for all the page's changes."""
    verdict = change.verdict(column.higher_is_better)
    holm = "" if adjusted is None else f"; adjusted for every change on the page (Holm): {format_p(adjusted)}"
    tone = {"better": "better", "worse": "worse", "not significant": "ns"}.get(verdict, "unknown")
    tag = {"ns": '<span class="verdict">n.s.</span>', "unknown": '<span class="verdict">no CI</span>'}.get(tone, "")
    interval = change.bracket() and f'<span class="change-ci">{change.bracket()}</span>'
    return (f'<span class="delta {tone}" data-verdict="{escape(verdict)}" title="change against the twin: {escape(change.text() + holm)}">'
            f'{change.value:+.4f}{interval}{tag}</span>')


def _column_data(column: Column) -> str:
    return (f'data-col="{escape(column.key)}" data-family="{escape(column.family)}" '
            f'data-languages="{escape(" ".join(column.languages))}"')


def _tasks(board: Board) -> str:
    parts = ['<section id="tasks"><h2>Per task</h2>']
    for task in board.tasks:
        family = board.families.get(task, "")
        languages = board.languages.get(task, ())
        figures = "".join(f'<h4>{escape(f.heading)}</h4><div class="panels">{"".join(f.panels)}</div>' for f in task_figures(board, task))
        parts.append(f'<section class="task" id="{_anchor(task)}" data-family="{escape(family)}" data-languages="{escape(" ".join(languages))}">'
                     f'<h3>{escape(task)}</h3><p class="meta">{escape(family)}'
                     f'{" &middot; " + escape(", ".join(languages)) if languages else ""}</p>'
                     f'{figures or "<p>No per-position profile or PSI in these results.</p>"}{_sources(board, task)}</section>')
    return "".join(parts) + "</section>"


def _sources(board: Board, task: str) -> str:
    rows = []
    for row in board.rows:
        source = board.sources.get((row.model, task))
        if source is None:
            continue
        rows.append(f'<tr data-base="{escape(row.base)}"><th scope="row">{escape(row.model.label)}</th><td>{_file(source)}</td>'
                    f"<td>{escape(source.mteb_version)}</td><td><code>{escape(row.model.revision)}</code></td>"
                    f"<td>{escape(row.config)}</td><td>{_settings(source)}</td></tr>")
    return ('<details class="sources"><summary>Result files and recorded settings</summary><table><thead><tr><th>model</th>'
            '<th>file</th><th>mteb</th><th>weights revision</th><th>calibration</th><th>settings</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></details>')


def _file(source: Source) -> str:
    if not source.href:
        return "not found"
    return f'<a href="{escape(source.href)}">{escape(source.path.name if source.path else source.href)}</a>'


def _settings(source: Source) -> str:
    items = {**source.settings, **{f"model {k}": v for k, v in source.experiment.items()}}
    if source.dataset_revision:
        items = {"dataset revision": source.dataset_revision, **items}
    return "; ".join(f"{escape(k.replace('_', ' '))} <code>{escape(str(v))}</code>" for k, v in items.items())


def _issues(board: Board) -> str:
    problems, notes = board.problems, board.notes
    if problems:
        body = ('<p class="hint">Files and results that are missing, partial, foreign or unreadable: listed here rather than '
                f"dropped.</p>{_issue_table(problems)}")
    else:
        body = "<p>No missing, partial or unreadable results.</p>"
    if notes:
        body += f'<h3>Notes</h3><p class="hint">How some numbers were made (the &dagger; marks).</p>{_issue_table(notes)}'
    return f'<section id="issues"><h2>Issues</h2>{body}</section>'


def _issue_table(listed: list[tuple[str, Issue]]) -> str:
    rows = "".join(f'<tr class="issue {escape(i.kind)}"><td><span class="kind">{escape(i.kind)}</span></td><td>{escape(i.where)}</td>'
                   f"<td>{escape(i.message)}</td><td><code>{escape(folder)}</code></td></tr>" for folder, i in listed)
    return (f"<table><thead><tr><th>kind</th><th>where</th><th>what</th><th>results folder</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _provenance(board: Board) -> str:
    revisions = sorted({(r.base, r.model.revision) for r in board.rows})
    items = "".join(f"<li>{escape(base)}: <code>{escape(revision)}</code></li>" for base, revision in revisions)
    return ('<footer id="provenance"><h2>Provenance</h2><p>Weights revisions recorded in the results (earlier releases '
            f"recorded the calibration here):</p><ul>{items}</ul><p>Each task's settings are under &ldquo;Result files and "
            "recorded settings&rdquo;. Written by <code>mteb-fairpos leaderboard</code>; links to result files are relative to "
            "this page, so publish the results folder beside it.</p></footer>")


def _anchor(task: str) -> str:
    return "task-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in task)
