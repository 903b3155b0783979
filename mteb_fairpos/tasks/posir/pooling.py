"""The PosIR papers' figures from a TaskResult: subsets pooled per query language (docs/method.md#s3-4),
then averaged over languages. What ``mteb-fairpos compare`` shows for the PosIR tasks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...results.schema import Counts, ScoreEntry, dump, load
from ..grouped_metrics import Cells, cell_figures, merge_cells
from .dataset import split_subset


def language_figures(entries: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per query language, its (language, domain) subsets pooled as docs/method.md#s3-4 says.

    ``entries`` are the score entries of a PosIR TaskResult (``result.scores["test"]``). For each
    language: ``ndcg_at_10`` over all its queries (the query-weighted mean over its domains),
    the per-bucket figures and ``psi`` from the merged (bucket, bin) cells, ``n_queries`` and
    ``n_domains``. Subsets without queries add nothing.
    """
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        language = entry.get("language") or split_subset(str(entry.get("hf_subset", "")))[0]
        grouped.setdefault(language, []).append(entry)
    out: dict[str, dict[str, Any]] = {}
    for language, rows in grouped.items():
        scored = [(r, n) for r in rows if (n := load(r).counts.queries) and r.get("ndcg_at_10") is not None]
        n_queries = sum(n for _, n in scored)
        figures = cell_figures(merge_cells(_cells(r) for r, _ in scored))
        figures["ndcg_at_10"] = sum(r["ndcg_at_10"] * n for r, n in scored) / n_queries if n_queries else None
        figures.update(dump(ScoreEntry(counts=Counts(queries=n_queries))))
        figures["n_domains"] = len(scored)
        out[language] = figures
    return dict(sorted(out.items()))


def _cells(entry: Mapping[str, Any]) -> Cells:
    cells = entry.get("cells")
    if not isinstance(cells, Mapping):
        raise ValueError(f"PosIR subset {entry.get('hf_subset')!r} has no 'cells'; was it written by this task?")
    return {bucket: {position: list(cell) for position, cell in bins.items()} for bucket, bins in cells.items()}


def average_over_languages(language_scores: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The papers' final figures: the plain mean over languages of each language-level figure.

    ``language_scores`` are per-language figures (the values of `language_figures`). Figures a
    language lacks (``None``) are left out of that mean.
    """
    rows = list(language_scores)
    keys = ["ndcg_at_10", "psi"] + [f"{m}_Q{i}" for m in ("ndcg_at_10", "psi") for i in range(1, 5)]
    out: dict[str, Any] = {"n_languages": len(rows)}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = sum(values) / len(values) if values else None
    return out


def summarize_scores(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What the PosIR papers report, from a TaskResult's score entries.

    ``main_score`` and ``psi`` are the means over languages of the per-language nDCG@10 and PSI;
    ``positions`` the mean over languages of each relative-position bin; ``languages`` and
    ``average`` the per-language figures and their means.
    """
    per_language = language_figures(entries)
    average = average_over_languages(per_language.values())
    profiles = [load(figures).profile().values for figures in per_language.values()]
    positions: dict[str, float | None] = {}
    for label in profiles[0] if profiles else ():
        values = [profile[label] for profile in profiles if profile.get(label) is not None]
        positions[label] = sum(values) / len(values) if values else None
    return {
        "main_score": average["ndcg_at_10"],
        "psi": average["psi"],
        "positions": positions,
        "languages": per_language,
        "average": average,
    }
