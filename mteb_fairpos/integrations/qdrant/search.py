"""Searching the index: queries are encoded uncalibrated (docs/method.md#s1-4), filters work on positions.

Document-level search (``level="document"``) ranks document points by their ``calibrated`` or
``uncalibrated`` vector; a ``position`` / ``language`` restriction keeps documents that have a
segment matching *both* (a nested filter over the payload's ``segments`` list). Segment-level
search (``level="segment"``, needs late-chunk points) ranks segments and filters on their own
position and language. Every hit carries the document id and its segment layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from qdrant_client import models

from ...config import require_positive, whole
from . import store
from .backends import Store
from .records import valid_unicode


class SearchableIndex(Protocol):
    """What searching needs of an index (`FairQdrantIndex` is one); this module imports no index."""

    store: Store
    collection: str
    model: Any

    def searchable_spec(self) -> store.CollectionSpec: ...


@dataclass
class SearchHit:
    """One result: the matching document (and segment, for segment-level search) with its layout."""

    doc_id: str
    score: float
    point_id: str
    n_segments: int
    segments: list[dict[str, Any]]
    position: int | None = None
    text: str | None = None
    payload: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "score": self.score, "position": self.position, "n_segments": self.n_segments,
                "segments": self.segments, "text": self.text, "point_id": self.point_id}


SEEN = ("full", "partial")
"""Coverages of segments the model read (at least in part); ``cut`` ones left no trace in the vector."""


def position_filter(position: int | Sequence[int] | None = None, language: str | Sequence[str] | None = None,
                    *, level: str = "document", coverage: Sequence[str] | None = SEEN) -> models.Filter | None:
    """The Qdrant filter for a position / language restriction at the given level.

    At document level it keeps documents with a segment that matches *all* conditions: at that
    position, in that language and, by default, read by the model (``coverage``: ``None`` for any,
    e.g. also segments the maximum length cut off, of which the document vector holds nothing).
    """
    conditions = []
    if position is not None:
        conditions.append(models.FieldCondition(key="position", match=_match(position, int, "position")))
    if language is not None:
        conditions.append(models.FieldCondition(key="language", match=_match(language, str, "language")))
    if not conditions:
        return None
    if coverage is not None and level == "document":
        unknown = [coverage] if isinstance(coverage, str) else [c for c in coverage if c not in ("full", "partial", "cut")]
        if unknown or not coverage:  # a text would be read letter by letter, an empty list match nothing
            raise ValueError(f"coverage must be a non-empty list among 'full', 'partial', 'cut' (or None for any), got "
                             f"{coverage!r}.")
        conditions.append(models.FieldCondition(key="coverage", match=models.MatchAny(any=list(coverage))))
    if level == "segment":
        return models.Filter(must=conditions)
    if level != "document":
        raise ValueError(f"level must be 'document' or 'segment', got {level!r}.")
    return models.Filter(must=[models.NestedCondition(nested=models.Nested(key="segments", filter=models.Filter(must=conditions)))])


def search(
    index: SearchableIndex,
    query: str,
    *,
    limit: int = 10,
    vector: str | None = None,
    position: int | Sequence[int] | None = None,
    language: str | Sequence[str] | None = None,
    level: str = "document",
    with_text: bool = False,
    coverage: Sequence[str] | None = SEEN,
) -> list[SearchHit]:
    """Search ``index`` for ``query`` (encoded uncalibrated with ``encode_query``); ``position`` /
    ``language`` / ``coverage`` as in `position_filter`."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("the query must be a non-empty string.")
    valid_unicode(query, "search", "the query")
    require_positive(limit, "limit")
    spec = index.searchable_spec()
    if vector is None:  # the calibrated vectors, or the only ones an uncalibrated collection has
        vector = "calibrated" if store.VECTOR_CALIBRATED in spec.vectors else "uncalibrated"
    using = vector_name(spec, vector, level)
    query_vector = index.model.encode_query([query], show_progress_bar=False)[0]
    payload: bool | list[str] = True if with_text else models.PayloadSelectorExclude(exclude=["text"])
    found = index.store.query(index.collection, query_vector.tolist(), using=using, limit=limit,
                              filter=position_filter(position, language, level=level, coverage=coverage),
                              payload=payload)
    if level == "document":
        return [_document_hit(p) for p in found]
    parents = _parents(index, [p.payload.get("parent_id") for p in found])
    return [_segment_hit(p, parents.get(p.payload.get("parent_id")), with_text) for p in found]


def vector_name(spec: store.CollectionSpec, vector: str, level: str) -> str:
    """The named vector to search: ``calibrated`` / ``uncalibrated`` at document or segment level."""
    if vector not in ("calibrated", "uncalibrated"):
        raise ValueError(f"vector must be 'calibrated' or 'uncalibrated', got {vector!r}.")
    if level == "document":
        name = store.VECTOR_CALIBRATED if vector == "calibrated" else store.VECTOR_UNCALIBRATED
    elif level == "segment":
        name = store.VECTOR_LATE if vector == "calibrated" else store.VECTOR_LATE_UNCALIBRATED
    else:
        raise ValueError(f"level must be 'document' or 'segment', got {level!r}.")
    if name not in spec.vectors:
        hint = ("late_chunks=True (mteb-fairpos index --late-chunks; mean-pooled models)" if level == "segment"
                else "a calibration (mteb-fairpos index --calibration CONFIG, not none)" if vector == "calibrated"
                else "uncalibrated=True (mteb-fairpos index without --no-uncalibrated)")
        raise ValueError(f"the collection has no {name!r} vectors (it has {list(spec.vectors)}); index the documents "
                         f"into a new collection with {hint}.")
    return name


def _match(value: Any, kind: type, name: str) -> models.MatchValue | models.MatchAny:
    """One value or a list of them; an empty list or text would match nothing, unseen."""
    one = isinstance(value, str) or (kind is int and whole(value))
    values = list(value) if isinstance(value, Iterable) and not one else [value]
    for v in values:
        if not (whole(v) if kind is int else isinstance(v, str) and v.strip()):
            raise ValueError(f"{name} must be {'an integer' if kind is int else 'a non-empty string'} or a list of "
                             f"them, got {v!r}.")
    if not values:
        raise ValueError(f"{name} is an empty list, which no {name} matches; give one or more, or None for any.")
    if kind is int and any(v < 1 for v in values):
        raise ValueError(f"positions are 1-based, got {values}.")
    values = [int(v) for v in values] if kind is int else values
    return models.MatchValue(value=values[0]) if len(values) == 1 else models.MatchAny(any=values)


def _document_hit(point: models.ScoredPoint) -> SearchHit:
    payload = dict(point.payload or {})
    return SearchHit(doc_id=payload.get("doc_id"), score=float(point.score), point_id=str(point.id),
                     n_segments=int(payload.get("n_segments", 0)), segments=list(payload.get("segments", [])),
                     text=payload.get("text"), payload=payload)


def _segment_hit(point: models.ScoredPoint, parent: dict | None, with_text: bool) -> SearchHit:
    payload = dict(point.payload or {})
    return SearchHit(doc_id=payload.get("doc_id"), score=float(point.score), point_id=str(point.id),
                     n_segments=int(payload.get("n_segments", 0)),
                     segments=list((parent or {}).get("segments", [])), position=payload.get("position"),
                     text=payload.get("text") if with_text else None, payload=payload)


def _parents(index: SearchableIndex, ids: list[str | None]) -> dict[str, dict]:
    wanted = sorted({i for i in ids if i})
    if not wanted:
        return {}
    found = index.store.retrieve(index.collection, wanted, payload=["doc_id", "n_segments", "segments"])
    return {str(p.id): dict(p.payload or {}) for p in found}
