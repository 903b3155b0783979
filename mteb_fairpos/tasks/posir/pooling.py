"""The PosIR papers' figures from a TaskResult: subsets pooled per query language (docs/method.md#s3-4),
then averaged over languages. What ``mteb-fairpos compare`` shows for the PosIR tasks."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from ...config import whole
from ...results.schema import Counts, ScoreEntry, dump, load, stored_key
from ..grouped_metrics import LENGTH_BUCKETS, POSITION_BINS, Cells, cell_figures, merge_cells
from .dataset import split_subset


def language_figures(entries: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per query language, its (language, domain) subsets pooled as docs/method.md#s3-4 says.

    ``entries`` are the score entries of a PosIR TaskResult (``result.scores["test"]``). For each
    language: ``ndcg_at_10`` over all its queries (the query-weighted mean over its domains),
    the per-bucket figures and ``psi`` from the merged (bucket, bin) cells, ``n_queries`` and
    ``n_domains``. Subsets without queries add nothing. Entries that are not one split's, or are damaged (a
    count or a cell of the wrong shape), are a TypeError; a subset given twice, or one that records no count of
    queries, a ValueError, naming the subset.
    """
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for entry in _entries(entries):
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


_QUERIES = stored_key(Counts, "queries")


def _entries(entries: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The entries, each a subset's once with a count of queries: a subset given twice would weigh double."""
    if isinstance(entries, Mapping):
        raise TypeError(f"expected the score entries of one split (result.scores['test']), got a mapping with keys "
                        f"{sorted(map(str, entries))[:5]}.")
    rows = list(entries)
    first: dict[str, int] = {}
    for number, entry in enumerate(rows):
        if not isinstance(entry, Mapping):
            raise TypeError(f"score entry {number} is a {type(entry).__name__}, not a mapping of scores.")
        subset = str(entry.get("hf_subset", ""))
        if first.setdefault(subset, number) != number:
            raise ValueError(f"PosIR subset {subset!r} is given twice (entries {first[subset]} and {number}); it would "
                             "be pooled twice.")
        queries = entry.get(_QUERIES)  # read alone: the whole entry is loaded once, where it is pooled
        if queries is None:  # an entry of another writer: the pooling cannot weigh it (a reader shows plain means)
            raise ValueError(f"PosIR subset {subset!r} records no {_QUERIES}; was it written by this task?")
        if not whole(queries) or queries < 0:  # a damaged entry (a reader skips the file)
            raise TypeError(f"PosIR subset {subset!r} records {_QUERIES} {queries!r}, not a count of queries.")
    return rows


def _cells(entry: Mapping[str, Any]) -> Cells:
    cells = entry.get("cells")
    subset = entry.get("hf_subset")
    if not isinstance(cells, Mapping):
        raise ValueError(f"PosIR subset {subset!r} has no 'cells'; was it written by this task?")
    buckets = [name for name, _, _ in LENGTH_BUCKETS]
    for bucket, bins in cells.items():
        if bucket not in buckets or not isinstance(bins, Mapping):
            raise TypeError(f"PosIR subset {subset!r}: cells[{bucket!r}] is not the bins of a length bucket "
                             f"({', '.join(buckets)}).")
        for position, cell in bins.items():
            if position not in POSITION_BINS or not (isinstance(cell, (list, tuple)) and len(cell) == 2 and whole(cell[0])
                                                     and cell[0] >= 0 and _finite(cell[1])):
                raise TypeError(f"PosIR subset {subset!r}: cells[{bucket!r}][{position!r}] is not a position bin's "
                                 f"[count, sum of nDCG@10]: {cell!r}.")
    return {bucket: {position: list(cell) for position, cell in bins.items()} for bucket, bins in cells.items()}


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


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
