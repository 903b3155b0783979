"""Discoverability by position (docs/method.md#s4): can each segment find its own document?

Every indexed segment (or a supplied query about it) is used as a query, encoded uncalibrated;
the rank of its parent document among the document points is recorded, once for the
``calibrated`` and once for the ``uncalibrated`` vectors. Grouped by the segment's position:
recall@k (parent within the top k) and MRR (reciprocal rank, 0 beyond ``depth``). A fair index
has the same recall at every position; ``PSI = 1 - min/max`` of MRR over positions summarises
the spread (lower is fairer).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdrant_client import models

from ...config import whole
from ...fairness import psi, undefined_reason
from ...jsonl import jsonl_lines
from . import store
from ...segmented import COVERAGE_CUT
from .listing import some
from .records import Document, InputError, check_keys, valid_unicode
from .search import SearchableIndex


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


@dataclass(frozen=True)
class PositionQuery:
    """A query whose answer is document ``doc_id``, about its segment at ``position``."""

    doc_id: str
    position: int
    text: str


@dataclass
class DiscoverabilityReport:
    """Per-vector, per-position recall@k and MRR, with the raw ranks."""

    collection: str
    model: str
    calibration: str
    ks: tuple[int, ...]
    depth: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    ranks: dict[str, list[tuple[str, int, int | None]]] = field(default_factory=dict)
    cut: dict[int, int] = field(default_factory=dict)
    """Per position, queries left out because the model's maximum length cut their segment entirely:
    the document vector holds nothing of it, so a miss would say nothing about position."""

    @property
    def vectors(self) -> list[str]:
        return list(self.ranks)

    def metric(self, vector: str, name: str) -> dict[int, float]:
        """``{position: value}`` of one metric (``"recall@5"``, ``"mrr"``) for one vector."""
        return {r["position"]: r[name] for r in self.rows if r["vector"] == vector and r["position"] != "all"}

    def psi(self, vector: str, name: str = "mrr") -> float | None:
        """PSI of ``name`` over positions (`mteb_fairpos.fairness`); ``None`` when undefined."""
        return psi(self.metric(vector, name).values())

    def table(self) -> str:
        """A Markdown table: one row per vector and position, plus an overall row per vector."""
        heads = ["vector", "position", "n"] + [f"recall@{k}" for k in self.ks] + ["MRR"]
        lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
        for r in self.rows:
            cells = [r["vector"], str(r["position"]), str(r["n"])]
            cells += [f"{r[f'recall@{k}']:.3f}" for k in self.ks] + [f"{r['mrr']:.3f}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("PSI of MRR over positions (1 - min/max, lower is fairer): "
                     + ", ".join(f"{v} {_fmt(self.psi(v))}" for v in self.vectors))
        reasons = {undefined_reason(self.metric(v, "mrr").values()) for v in self.vectors} - {None}
        lines.extend(f"note: {reason}" for reason in sorted(reasons))
        if self.cut:
            counts = ", ".join(f"position {p}: {n}" for p, n in sorted(self.cut.items()))
            lines.append(f"left out: {sum(self.cut.values())} segment(s) the model never saw (cut by its maximum "
                         f"length; {counts}); re-index with a longer --max-length to measure them.")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection, "model": self.model, "calibration": self.calibration,
            "ks": list(self.ks), "depth": self.depth, "rows": self.rows,
            "psi_mrr": {v: self.psi(v) for v in self.vectors},
            "cut_segments": {str(p): n for p, n in sorted(self.cut.items())},
            "ranks": {v: [{"doc_id": d, "position": p, "rank": r} for d, p, r in ranks] for v, ranks in self.ranks.items()},
        }

    def save(self, folder: str | Path) -> dict[str, Path]:
        """Write ``discoverability.md``, ``discoverability.json`` and ``discoverability.png`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"table": folder / "discoverability.md", "json": folder / "discoverability.json",
                 "plot": folder / "discoverability.png"}
        paths["table"].write_text(self.table() + "\n", encoding="utf-8")
        paths["json"].write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        self.plot(paths["plot"])
        return paths

    def plot(self, path: str | Path) -> Path:
        """A PNG: one panel per metric, x = segment position, one line per vector (matplotlib Agg)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        names = [f"recall@{k}" for k in self.ks] + ["mrr"]
        fig = Figure(figsize=(3.2 * len(names), 3.2), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(names), squeeze=False)[0]
        styles = {store.VECTOR_CALIBRATED: dict(color="tab:blue", linestyle="-", marker="o"),
                  store.VECTOR_UNCALIBRATED: dict(color="tab:orange", linestyle="--", marker="s")}
        for ax, name in zip(axes, names):
            for vector in self.vectors:
                values = self.metric(vector, name)
                xs = sorted(values)
                ax.plot(xs, [values[x] for x in xs], label=vector, **styles.get(vector, {}))
            ax.set_title("MRR" if name == "mrr" else name)
            ax.set_xlabel("segment position")
            ax.set_ylim(0, 1.02)
            positions = sorted({r["position"] for r in self.rows if r["position"] != "all"})
            ax.set_xticks(positions)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("segments finding their document")
        axes[-1].legend(loc="lower left")
        fig.suptitle(f"Discoverability by position: {self.collection} ({self.model}, {self.calibration})", fontsize=9)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        return path


def discoverability(
    index: SearchableIndex,
    *,
    queries: Iterable[PositionQuery | dict] | None = None,
    documents: Sequence[Document] | None = None,
    ks: Sequence[int] = (1, 5, 10),
    depth: int = 100,
    vectors: Sequence[str] | None = None,
    batch_size: int = 64,
    show_progress: bool = False,
) -> DiscoverabilityReport:
    """Rank of each segment's parent document, grouped by position, per vector.

    Queries: ``queries`` if given (``{"doc_id", "position", "query"}``), else every segment of
    ``documents``, else every segment of the indexed documents (their stored text).
    """
    cutoffs = list(ks) if isinstance(ks, Iterable) and not isinstance(ks, (str, bytes)) else []  # '15' was 1 and 5
    if not cutoffs or not all(whole(k) and k >= 1 for k in cutoffs):
        raise ValueError(f"ks must be a list of positive integers (the cut-offs of recall@k), got {ks!r}.")
    ks = tuple(sorted(set(int(k) for k in cutoffs)))
    if depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth}.")
    depth = max(depth, ks[-1])  # the ranks searched cover every cut-off
    spec = index.searchable_spec()
    if isinstance(vectors, str) or (vectors is not None and not list(vectors)):  # a name read letter by letter
        raise ValueError(f"vectors must be a list of vector names, got {vectors!r}.")
    names = list(vectors) if vectors is not None else [v for v in (store.VECTOR_CALIBRATED, store.VECTOR_UNCALIBRATED) if v in spec.vectors]
    for name in names:
        if name not in (store.VECTOR_CALIBRATED, store.VECTOR_UNCALIBRATED) or name not in spec.vectors:
            raise ValueError(f"cannot rank documents by vector {name!r}; the collection's document vectors are "
                             f"{[v for v in spec.vectors if v in (store.VECTOR_CALIBRATED, store.VECTOR_UNCALIBRATED)]}.")
    if queries is not None:
        items = _distinct((_as_query(q, i), f"query {i}") for i, q in enumerate(queries, start=1))
    elif documents is not None:
        items = [PositionQuery(d.doc_id, s.position, d.segment_text(s)) for d in documents for s in d.segments]
    else:
        items = stored_segment_queries(index)
    if not items:
        raise ValueError("there are no queries: " + ("none were given." if queries is not None else "the documents given hold none."
                         if documents is not None else f"collection {index.collection!r} holds no documents."))
    sourced = queries is None and documents is not None  # the documents given are the queries' source
    stored = _stored_payloads(index, sorted({q.doc_id for q in items}), ["segments", "text"] if sourced else ["segments"])
    layouts = {doc_id: list(payload.get("segments") or []) for doc_id, payload in stored.items()}
    if queries is not None or documents is not None:
        _check_targets(index, items, layouts)
    if sourced:
        _check_documents(documents, stored)
    report = DiscoverabilityReport(index.collection, spec.model, spec.calibration, ks, depth)
    seen = []
    for q in items:
        if layouts[q.doc_id][q.position - 1].get("coverage") == COVERAGE_CUT:
            report.cut[q.position] = report.cut.get(q.position, 0) + 1
        else:
            seen.append(q)
    if not seen:
        raise ValueError(f"every queried segment was cut by the model's maximum length ({index.collection!r}); "
                         "nothing the model saw is left to measure. Re-index with a longer maximum length.")
    items = seen
    encoded = index.model.encode_query([q.text for q in items], batch_size=batch_size, show_progress_bar=show_progress)
    from tqdm.auto import tqdm

    progress = tqdm(total=len(names) * len(items), desc="ranking segment queries", unit="query", disable=not show_progress)
    for name in names:
        ranks = []
        for begin in range(0, len(items), batch_size):
            chunk = items[begin:begin + batch_size]
            requests = [models.QueryRequest(query=vec.tolist(), using=name, limit=depth, with_payload=["doc_id"])
                        for vec in encoded[begin:begin + batch_size]]
            responses = index.store.query_batch(index.collection, requests)
            for q, response in zip(chunk, responses):
                hits = [p.payload.get("doc_id") for p in response]
                ranks.append((q.doc_id, q.position, hits.index(q.doc_id) + 1 if q.doc_id in hits else None))
            progress.update(len(chunk))
        report.ranks[name] = ranks
        report.rows.extend(_rows(name, ranks, ks))
    progress.close()
    return report


def _stored_payloads(index: SearchableIndex, doc_ids: Sequence[str], fields: list[str]) -> dict[str, dict[str, Any]]:
    """The document point's ``fields`` (the segment layout: position, coverage, ...; the text) of each of ``doc_ids``
    that is indexed."""
    payloads: dict[str, dict[str, Any]] = {}
    for begin in range(0, len(doc_ids), 1000):
        ids = [store.point_id(index.collection, doc_id, 0) for doc_id in doc_ids[begin:begin + 1000]]
        for point in index.store.retrieve(index.collection, ids, payload=["doc_id", *fields]):
            payloads[str(point.payload["doc_id"])] = point.payload
    return payloads


def _check_targets(index: SearchableIndex, items: Sequence[PositionQuery], layouts: dict[str, list[dict[str, Any]]]) -> None:
    """Every query must name an indexed document and one of its positions: a typo scored as a
    miss would pass for a finding about position."""
    wanted = sorted({q.doc_id for q in items})
    segments = {doc_id: len(layout) for doc_id, layout in layouts.items()}
    unknown = [doc_id for doc_id in wanted if doc_id not in segments]
    if unknown:
        raise InputError(f"{len(unknown)} quer(ies) name document(s) that are not in collection {index.collection!r}: "
                         f"{some(unknown, 5, quote=True)}; check the ids (or index those documents first).")
    beyond = sorted({(q.doc_id, q.position) for q in items if q.position > segments[q.doc_id]})
    if beyond:
        listed = [f"{doc_id!r} position {position} (it has {segments[doc_id]})" for doc_id, position in beyond]
        raise InputError(f"{len(beyond)} quer(ies) name a position the document does not have: {some(listed, 5)}.")


def _check_documents(documents: Sequence[Any], stored: dict[str, dict[str, Any]]) -> None:
    """Documents given as the queries' source must be the ones indexed (``stored``: their points' payloads): others
    with the same ids and segment counts would be scored against vectors of other texts. Their segments' character
    spans are compared with the stored ones, and their text with the stored text where the collection keeps it."""
    differ = []
    for doc in documents:
        payload = stored[doc.doc_id]
        spans = [[s.start, s.end] for s in doc.segments]
        if spans != [list(seg.get("char_span") or []) for seg in payload.get("segments") or []] or \
                payload.get("text") not in (None, doc.text):
            differ.append(doc.doc_id)
    if differ:
        raise InputError(f"{len(differ)} document(s) given differ from the ones indexed under their ids (their text or "
                         f"segment spans): {some(differ, 5, quote=True)}; give the documents as indexed, or index them "
                         "again.")


def stored_segment_queries(index: SearchableIndex) -> list[PositionQuery]:
    """Every segment of every indexed document, its text cut from the stored document text."""
    items: list[PositionQuery] = []
    flt = models.Filter(must=[models.FieldCondition(key="kind", match=models.MatchValue(value=store.KIND_DOCUMENT))])
    offset = None
    while True:
        points, offset = index.store.scroll(index.collection, filter=flt, limit=256, offset=offset,
                                            payload=["doc_id", "text", "segments"])
        for p in points:
            payload = p.payload or {}
            text = payload.get("text")
            if text is None:
                raise ValueError(f"collection {index.collection!r} stores no document text (indexed with store_text=False, "
                                 "--no-store-text); pass the input documents (documents=, mteb-fairpos discoverability "
                                 "--input) or a queries file (queries=, --queries).")
            for seg in payload.get("segments", []):
                start, end = seg["char_span"]
                items.append(PositionQuery(str(payload["doc_id"]), int(seg["position"]), text[start:end]))
        if offset is None:
            break
    items.sort(key=lambda q: (q.doc_id, q.position))
    return items


QUERY_KEYS = ("doc_id", "position", "query")


def read_queries(path: str | Path) -> list[PositionQuery]:
    """A JSONL file of ``{"doc_id", "position", "query"}`` lines; a bad line raises naming the line."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"queries file {str(path)!r} is a folder; give the JSONL file.")
    if not path.is_file():
        raise FileNotFoundError(f"queries file {str(path)!r} does not exist.")
    def lines() -> Iterator[tuple[PositionQuery, str]]:
        for number, record, malformed in jsonl_lines(path):
            where = f"{path.name} line {number}"
            if malformed:
                raise InputError(f"{where}: malformed JSON ({malformed}).")
            yield _as_query(record, where), where

    items = _distinct(lines())
    if not items:
        raise InputError(f"queries file {str(path)!r} holds no queries (one JSON object per line: doc_id, position, query).")
    return items


def _distinct(queries: Iterable[tuple[PositionQuery, str]]) -> list[PositionQuery]:
    """The queries, each once: counted twice, one would weigh twice in its position's recall."""
    items, first = [], {}
    for item, where in queries:
        if first.setdefault(item, where) != where:
            earlier = " ".join(first[item].split(" ")[-2:])  # "line 1" of a file, "query 1" of a list
            raise InputError(f"{where}: repeats {earlier} (the same doc_id, position and query).")
        items.append(item)
    return items


def _as_query(item: PositionQuery | dict, where: Any) -> PositionQuery:
    if isinstance(item, PositionQuery):  # checked as a line is
        item = {"doc_id": item.doc_id, "position": item.position, "query": item.text}
    label = where if isinstance(where, str) else f"query {where}"
    if not isinstance(item, dict):
        raise InputError(f"{label}: expected an object with 'doc_id', 'position' and 'query'.")
    check_keys(item, QUERY_KEYS, label, "query")
    doc_id, position, text = item.get("doc_id"), item.get("position"), item.get("query")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise InputError(f"{label}: 'doc_id' must be a string or integer, got {doc_id!r}.")
    if isinstance(position, bool) or not isinstance(position, int) or position < 1:
        raise InputError(f"{label}: 'position' must be a 1-based integer, got {position!r}.")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{label}: 'query' must be a non-empty string.")
    valid_unicode(text, label, "the 'query'")
    return PositionQuery(str(doc_id), position, text)


def _rows(vector: str, ranks: list[tuple[str, int, int | None]], ks: tuple[int, ...]) -> list[dict[str, Any]]:
    groups: dict[Any, list[int | None]] = defaultdict(list)
    for _, position, rank in ranks:
        groups[position].append(rank)
    rows = []
    for position in sorted(groups) + ["all"]:
        values = [r for _, _, r in ranks] if position == "all" else groups[position]
        row: dict[str, Any] = {"vector": vector, "position": position, "n": len(values)}
        for k in ks:
            row[f"recall@{k}"] = sum(1 for r in values if r is not None and r <= k) / len(values)
        row["mrr"] = sum(1.0 / r for r in values if r is not None) / len(values)
        rows.append(row)
    return rows
