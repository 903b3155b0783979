"""Embedding documents for the index: vectors, token layout, truncation, late chunks.

The work is `mteb_fairpos.segmented`'s: one forward pass per calibration mode gives the document
vector and, with late chunks, each segment's late-chunking vector, with token spans computed on
exactly the tokens the model read. This module adds what the index needs on top: the model's
stable name, the calibration text, and the truncation report of a document.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sentence_transformers import SentenceTransformer

from ...config import CalibrationConfig
from ...model import UncalibratedWarning, naming_the_model, set_max_length
from ...offline import MINILM_HUB_ID, minilm_path
from ...segmented import (
    COVERAGE_CUT,
    COVERAGE_PARTIAL,
    SegmentLayout,
    TokenLayout,
    document_prompt,
    encode_segmented,
    require_mean_pooling,
    token_layouts,
)
from .records import Document

__all__ = ["EncodedDocument", "ModelLoader", "SegmentLayout", "Truncation", "calibration_text", "encode_batches",
           "encode_documents", "model_name", "resolve_model_path"]


@dataclass(frozen=True)
class Truncation:
    """A document longer than the model's maximum: how long, and which segments lost tokens."""

    doc_id: str
    n_tokens: int
    max_tokens: int
    partial: tuple[int, ...]
    cut: tuple[int, ...]
    n_tokens_exact: bool = True
    """False when counting stopped early: the document has at least ``n_tokens`` tokens."""

    def __str__(self) -> str:
        count = f"{self.n_tokens}" if self.n_tokens_exact else f"more than {self.n_tokens}"
        parts = [f"document {self.doc_id!r} has {count} tokens, the model reads {self.max_tokens}"]
        if self.partial:
            parts.append(f"segment(s) {', '.join(map(str, self.partial))} cut short")
        if self.cut:
            parts.append(f"segment(s) {', '.join(map(str, self.cut))} dropped entirely")
        return "; ".join(parts)


@dataclass
class EncodedDocument:
    """A document with its vectors and token layout, ready to become Qdrant points."""

    document: Document
    calibrated: np.ndarray
    uncalibrated: np.ndarray | None
    layout: tuple[SegmentLayout, ...]
    n_tokens: int
    max_tokens: int
    late_chunks: dict[int, np.ndarray] | None = None  # position -> calibrated late-chunking vector
    late_chunks_uncalibrated: dict[int, np.ndarray] | None = None
    n_tokens_exact: bool = True
    """False for a document so long that its tokens were counted only up to past the maximum."""

    @property
    def truncation(self) -> Truncation | None:
        if self.n_tokens <= self.max_tokens:
            return None
        partial = tuple(s.position for s, lay in zip(self.document.segments, self.layout) if lay.coverage == COVERAGE_PARTIAL)
        cut = tuple(s.position for s, lay in zip(self.document.segments, self.layout) if lay.coverage == COVERAGE_CUT)
        return Truncation(self.document.doc_id, self.n_tokens, self.max_tokens, partial, cut, self.n_tokens_exact)


def model_name(model: SentenceTransformer) -> str:
    """A stable name for the model: the Hub id where known (the offline MiniLM maps to its Hub id)."""
    explicit = getattr(model, "fairpos_model_name", None)
    if explicit:
        return str(explicit)
    card = getattr(model, "model_card_data", None)
    base = getattr(card, "base_model", None) if card is not None else None
    if base:
        return str(base)
    transformer = getattr(model, "transformers_model", None)
    name = getattr(getattr(transformer, "config", None), "_name_or_path", "") or ""
    if name and os.path.isdir(name) and os.path.realpath(name) == os.path.realpath(minilm_path()):
        return MINILM_HUB_ID
    return name or type(model).__name__


def resolve_model_path(name: str) -> str:
    """Where to load ``name`` from: the offline MiniLM weights for its Hub id, else ``name`` itself."""
    return minilm_path() if name == MINILM_HUB_ID else name


@dataclass(frozen=True)
class ModelLoader:
    """How a worker gets its model: a Hub id or path and a calibration; picklable, loaded once per worker."""

    name: str
    calibration: str | None = None
    """The calibration's text form (``b128_lhalf_a0.5``), ``"none"`` for the plain model, or ``None`` for the model's
    own, as ``FairSentenceTransformer(name)`` loads it: a folder saved with a calibration keeps it, any other model
    gets the default (``b128_lhalf_a0.5``)."""
    max_length: int | None = None
    device: str | None = None

    def __call__(self, device: str | None = None) -> SentenceTransformer:
        from ...model import FairSentenceTransformer

        kwargs: dict[str, Any] = {}
        if self.calibration is not None:
            kwargs["calibration"] = None if self.calibration == "none" else CalibrationConfig.parse(self.calibration)
        if device or self.device:
            kwargs["device"] = device or self.device
        with naming_the_model(self.name):
            model = FairSentenceTransformer(resolve_model_path(self.name), **kwargs)
        model.fairpos_model_name = self.name
        if self.max_length:
            set_max_length(model, self.max_length)
        return model


def calibration_text(model: SentenceTransformer) -> str:
    """The calibration config's text form, or ``"none"`` for an uncalibrated model."""
    config = getattr(model, "calibration", None)
    if config is None or getattr(model, "plan", None) is None:
        return "none"
    return str(config)


class UncalibratedCount:
    """While active, the model's :class:`UncalibratedWarning` is counted instead of shown, so a run
    reports how many documents were left uncalibrated once, not once per batch or part; other
    warnings pass through as they were."""

    def __init__(self) -> None:
        self.documents = 0
        self._catcher = warnings.catch_warnings(record=True)

    def __enter__(self) -> UncalibratedCount:
        self._caught = self._catcher.__enter__()
        warnings.simplefilter("always", UncalibratedWarning)  # every batch's count, not the first one only
        return self

    @staticmethod
    def line(documents: int) -> str:
        """The report's line for ``documents`` left uncalibrated."""
        return (f"{documents} document(s) left uncalibrated: their content is shorter than one calibration basket, "
                "so their calibrated vector equals the uncalibrated one")

    def __exit__(self, *exc: object) -> None:
        self._catcher.__exit__(*exc)
        for caught in self._caught:
            if isinstance(caught.message, UncalibratedWarning):
                self.documents += caught.message.documents
            else:
                warnings.warn_explicit(caught.message, caught.category, caught.filename, caught.lineno,
                                       source=caught.source)


def encode_documents(
    model: SentenceTransformer,
    documents: Sequence[Document],
    *,
    uncalibrated_vectors: bool = True,
    late_chunks: bool = False,
    batch_size: int = 32,
) -> list[EncodedDocument]:
    """Embed ``documents``: calibrated (and optionally uncalibrated) vectors, token layout, late chunks.

    The documents go through the model as `encode_batches` sends them (longest first); the result
    is in the order given."""
    order = {id(doc): i for i, doc in enumerate(documents)}
    encoded = [enc for batch in encode_batches(model, documents, uncalibrated_vectors=uncalibrated_vectors,
                                               late_chunks=late_chunks, batch_size=batch_size) for enc in batch]
    return sorted(encoded, key=lambda enc: order[id(enc.document)])


def encode_batches(
    model: SentenceTransformer,
    documents: Sequence[Document],
    *,
    uncalibrated_vectors: bool = True,
    late_chunks: bool = False,
    batch_size: int = 32,
) -> Iterator[list[EncodedDocument]]:
    """Embed a window of documents longest first, yielding one model batch at a time.

    Sorting the whole window puts documents of like length into one batch, so little of each
    forward pass is padding; yielding batch by batch lets a caller write one batch while the next
    is embedded. A part (`part_encoder`) and an ``index`` window both embed through here, so the
    two routes run the same forward passes on the same documents.
    """
    if not documents:
        return
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    if late_chunks:
        require_mean_pooling(model)
    if not getattr(model.tokenizer, "is_fast", False):
        raise ValueError("token spans need a fast (Rust) tokenizer with offset mapping; this model's tokenizer is slow.")
    texts = [doc.text for doc in documents]
    spans = [[(segment.start, segment.end) for segment in doc.segments] for doc in documents]
    layouts = token_layouts(model.tokenizer, texts, spans, int(model.max_seq_length), prompt=document_prompt(model),
                            straddling="every")
    lengths = [len(doc.text[:layout.text_chars]) for doc, layout in zip(documents, layouts)]  # what the model reads
    order = [int(i) for i in np.argsort([-n for n in lengths], kind="stable")]
    for begin in range(0, len(order), batch_size):
        picked = order[begin:begin + batch_size]
        yield _encode_batch(model, [documents[i] for i in picked], [texts[i] for i in picked],
                            [spans[i] for i in picked], [layouts[i] for i in picked],
                            uncalibrated_vectors=uncalibrated_vectors, late_chunks=late_chunks)


def _encode_batch(model: SentenceTransformer, documents: list[Document], texts: list[str],
                  spans: list[list[tuple[int, int]]], layouts: list[TokenLayout], *,
                  uncalibrated_vectors: bool, late_chunks: bool) -> list[EncodedDocument]:
    """One forward pass per calibration mode over one batch whose texts, spans and token layouts are known."""
    modes = [True, False] if uncalibrated_vectors else [True]
    passes = [encode_segmented(model, texts, spans, calibrated=mode, late_chunks=late_chunks, layouts=layouts,
                               batch_size=len(documents)) for mode in modes]
    for pass_ in passes:
        if pass_.aligned is not None and not all(pass_.aligned):
            doc_id = documents[pass_.aligned.index(False)].doc_id
            raise RuntimeError(
                f"document {doc_id!r}: the model's input ids differ from the tokenization used for the token spans "
                "(a custom tokenization step in the model?); token spans and late chunks would be wrong."
            )
    encoded = []
    for i, doc in enumerate(documents):
        chunks = [None if p.late_chunks is None else
                  {s.position: v for s, v in zip(doc.segments, p.late_chunks[i]) if v is not None} for p in passes]
        encoded.append(EncodedDocument(
            document=doc,
            calibrated=passes[0].vectors[i],
            uncalibrated=passes[1].vectors[i] if len(passes) > 1 else None,
            layout=layouts[i].segments,
            n_tokens=layouts[i].n_tokens,
            max_tokens=int(model.max_seq_length),
            late_chunks=chunks[0],
            late_chunks_uncalibrated=chunks[1] if len(passes) > 1 else None,
            n_tokens_exact=layouts[i].n_tokens_exact,
        ))
    return encoded
