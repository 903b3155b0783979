"""What an encoded document becomes in Qdrant: its points, ids, vectors and payloads.

One function builds them for every writer (the single-process index, the Parquet parts of a
distributed encode, the bulk loader), so a document stored through any route is the same point.
The document point has position 0; with late chunks, every segment that reached the model also
has a point (position 1..n). ``content_hash`` covers everything a document's points are built
from, so a re-run can tell an unchanged document from a changed one without re-embedding it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from qdrant_client import models

from . import store
from ...segmented import calibration_pooling
from .encoding import EncodedDocument, calibration_text
from .records import Document


@dataclass(frozen=True)
class PointRecord:
    """One point before it meets a client: id, named vectors (float32 arrays) and payload."""

    id: str
    vectors: dict[str, np.ndarray]
    payload: dict[str, Any]

    @property
    def is_document(self) -> bool:
        return self.payload["kind"] == store.KIND_DOCUMENT

    def to_point(self) -> models.PointStruct:
        """A ``PointStruct`` without pydantic validation: it would only re-check values built here,
        and it is the largest per-point cost of a writer. qdrant-client serialises it as usual."""
        vectors = {name: vector.tolist() for name, vector in self.vectors.items()}
        return models.PointStruct.model_construct(id=self.id, vector=vectors, payload=self.payload)


def refuse_no_uncalibrated(model: Any, uncalibrated: bool | None) -> None:
    """Refuse asking an uncalibrated model (calibration ``"none"``) for no uncalibrated vector: it has no other
    kind to store, and ignoring the ask would store what was declined. (``None``: not asked.)"""
    if uncalibrated is False and calibration_text(model) == "none":
        raise ValueError("an uncalibrated model (calibration 'none') stores only uncalibrated vectors; "
                         "drop --no-uncalibrated (uncalibrated=False) or give a calibration.")


def collection_spec(model: Any, name: str, *, uncalibrated: bool, late_chunks: bool,
                    store_text: bool = True) -> store.CollectionSpec:
    """The collection spec ``model`` (stored under ``name``) produces with these options.

    An uncalibrated model (calibration ``"none"``) has one kind of vector: it is stored once,
    under the ``uncalibrated`` names, instead of twice with one copy mislabelled ``calibrated``.
    """
    if calibration_text(model) == "none":
        vectors = [store.VECTOR_UNCALIBRATED] + ([store.VECTOR_LATE_UNCALIBRATED] if late_chunks else [])
    else:
        vectors = [store.VECTOR_CALIBRATED]
        if uncalibrated:
            vectors.append(store.VECTOR_UNCALIBRATED)
        if late_chunks:
            vectors.append(store.VECTOR_LATE)
            if uncalibrated:
                vectors.append(store.VECTOR_LATE_UNCALIBRATED)
    return store.CollectionSpec(
        model=name,
        calibration=calibration_text(model),
        pooling=calibration_pooling(model),
        dimension=int(model.get_embedding_dimension()),
        distance=store.distance_for(getattr(model, "similarity_fn_name", None)),
        vectors=tuple(vectors),
        max_tokens=int(model.max_seq_length),
        store_text=store_text,
    )


def content_hash(doc: Document, spec: store.CollectionSpec, *, store_text: bool) -> str:
    """Hash of a document's text, layout and metadata and of the collection settings its points depend on."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(json.dumps([spec.model, spec.calibration, list(spec.vectors), store_text]).encode("utf-8"))
    digest.update(f"{len(doc.doc_id)}:{doc.doc_id}{len(doc.text)}:".encode("utf-8"))
    digest.update(doc.text.encode("utf-8"))
    digest.update(repr([(s.start, s.end, s.language, s.segment_id) for s in doc.segments]).encode("utf-8"))
    if doc.metadata:
        digest.update(json.dumps(doc.metadata, sort_keys=True, default=str).encode("utf-8"))
    return digest.hexdigest()


def document_points(enc: EncodedDocument, spec: store.CollectionSpec, collection: str, *, store_text: bool,
                    digest: str | None = None) -> list[PointRecord]:
    """The points of one encoded document, segment points first and the document point last.

    The order is what makes a killed run resumable: a document point exists only once its
    segment points were written, so a stored document point means a complete document.
    """
    doc = enc.document
    digest = digest or content_hash(doc, spec, store_text=store_text)
    calibrated = store.VECTOR_CALIBRATED in spec.vectors
    uncalibrated = store.VECTOR_UNCALIBRATED in spec.vectors
    doc_pid = store.point_id(collection, doc.doc_id, 0)
    n = len(doc.segments)
    layout = [{
        "position": seg.position,
        "char_span": [seg.start, seg.end],
        "token_span": None if lay.token_span is None else [lay.token_span[0], lay.token_span[1]],
        "language": seg.language,
        "segment_id": seg.segment_id,
        "coverage": lay.coverage,
    } for seg, lay in zip(doc.segments, enc.layout)]
    points = []
    if spec.late_chunks:
        for entry, seg in zip(layout, doc.segments):
            vector = (enc.late_chunks or {}).get(seg.position)
            if vector is None:
                continue  # cut by truncation: no token, no contextual vector
            if not calibrated:  # an uncalibrated model: its one pass is the uncalibrated vector
                vectors = {store.VECTOR_LATE_UNCALIBRATED: vector}
            else:
                vectors = {store.VECTOR_LATE: vector}
                if uncalibrated and enc.late_chunks_uncalibrated is not None:
                    vectors[store.VECTOR_LATE_UNCALIBRATED] = enc.late_chunks_uncalibrated[seg.position]
            payload = {"kind": store.KIND_SEGMENT, "doc_id": doc.doc_id, "parent_id": doc_pid, "n_segments": n,
                       **entry, "model": spec.model, "calibration": spec.calibration, "content_hash": digest}
            if store_text:
                payload["text"] = doc.segment_text(seg)
            points.append(PointRecord(store.point_id(collection, doc.doc_id, seg.position), vectors, payload))
    vectors = {store.VECTOR_CALIBRATED if calibrated else store.VECTOR_UNCALIBRATED: enc.calibrated}
    if uncalibrated and calibrated:
        if enc.uncalibrated is None:
            raise ValueError(f"document {doc.doc_id!r} was encoded without its uncalibrated vector, "
                             "which this collection stores.")
        vectors[store.VECTOR_UNCALIBRATED] = enc.uncalibrated
    payload = {"kind": store.KIND_DOCUMENT, "doc_id": doc.doc_id, "n_segments": n, "segments": layout,
               "n_tokens": enc.n_tokens, "n_tokens_exact": enc.n_tokens_exact, "max_tokens": enc.max_tokens,
               "truncated": enc.n_tokens > enc.max_tokens,
               "model": spec.model, "calibration": spec.calibration, "content_hash": digest}
    if store_text:
        payload["text"] = doc.text
    if doc.metadata:
        payload["metadata"] = dict(doc.metadata)
    points.append(PointRecord(doc_pid, vectors, payload))
    return points
