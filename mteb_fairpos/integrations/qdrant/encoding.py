"""Embedding documents for the index: vectors, token layout, truncation, late chunks.

One forward pass per calibration mode gives everything: the document vector
(``sentence_embedding``) and the final-layer token vectors from which the late-chunking
vector of each segment is the mean over that segment's tokens (SPEC 2.3, mean pooling only).
The token span of a segment is computed on exactly the token sequence the model received
(prompt and special tokens included, truncated to the model's maximum length) and checked
against the ``input_ids`` the model returns, so spans and late chunks cannot drift apart.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sentence_transformers import SentenceTransformer

from ...model import TruncationWarning, calibration_off, model_pooling
from ...offline import MINILM_HUB_ID, minilm_path
from ...spans import token_spans
from .records import Document

COUNT_MARGIN = 16
"""Tokens counted beyond the model's maximum before a long document's count stops: enough for the
cut to fall past every token the model reads."""

COVERAGE_FULL = "full"
COVERAGE_PARTIAL = "partial"
COVERAGE_CUT = "cut"


@dataclass(frozen=True)
class SegmentLayout:
    """Where a segment sits in the model input: token span (half-open, ``None`` when cut) and coverage."""

    token_span: tuple[int, int] | None
    coverage: str  # "full", "partial" (its tail was truncated) or "cut" (no token reached the model)


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


def calibration_text(model: SentenceTransformer) -> str:
    """The calibration config's text form, or ``"none"`` for an uncalibrated model."""
    config = getattr(model, "calibration", None)
    if config is None or getattr(model, "plan", None) is None:
        return "none"
    return str(config)


def pooling_of(model: SentenceTransformer) -> str:
    config = getattr(model, "calibration", None)
    if config is not None and config.pooling is not None:
        return config.pooling
    return model_pooling(model)


def document_prompt(model: SentenceTransformer) -> str:
    """The prompt ``encode_document`` prepends (sentence-transformers' rule), or ``""``."""
    prompts = getattr(model, "prompts", None) or {}
    for name in ("document", "passage", "corpus"):
        if name in prompts:
            return prompts[name] or ""
    default = getattr(model, "default_prompt_name", None)
    return (prompts.get(default) or "") if default else ""


def encode_documents(
    model: SentenceTransformer,
    documents: Sequence[Document],
    *,
    uncalibrated_vectors: bool = True,
    late_chunks: bool = False,
    batch_size: int = 32,
) -> list[EncodedDocument]:
    """Embed ``documents``: calibrated (and optionally uncalibrated) vectors, token layout, late chunks."""
    if not documents:
        return []
    if late_chunks and pooling_of(model) != "mean":
        raise ValueError(
            f"late-chunking vectors are defined for mean-pooled models only (SPEC 2.3); this model pools with "
            f"{pooling_of(model)!r}. Index without late chunks."
        )
    prompt = document_prompt(model)
    texts = [model_text(model.tokenizer, prompt, doc.text, model.max_seq_length) for doc in documents]
    token_rows = _tokenize(model, prompt, texts)
    passes = [("calibrated", contextlib.nullcontext())]
    if uncalibrated_vectors:
        passes.append(("uncalibrated", calibration_off(model)))
    outputs: dict[str, list[dict]] = {}
    for name, context in passes:
        with context, warnings.catch_warnings():
            warnings.simplefilter("ignore", TruncationWarning)  # reported per document, with its segments
            outputs[name] = model.encode_document(texts, output_value=None, batch_size=batch_size, show_progress_bar=False)
    encoded = []
    for i, doc in enumerate(documents):
        ids, offsets, special, n_tokens = token_rows[i]
        layout = _layout(prompt, doc, ids, offsets, special, n_tokens)
        vectors: dict[str, np.ndarray] = {}
        chunks: dict[str, dict[int, np.ndarray]] = {}
        for name, _ in passes:
            item = outputs[name][i]
            tokens = _valid_tokens(item, ids, doc.doc_id)
            vectors[name] = item["sentence_embedding"].float().cpu().numpy()
            if late_chunks:
                chunks[name] = _late_chunks(tokens, doc, layout)
        encoded.append(EncodedDocument(
            document=doc,
            calibrated=vectors["calibrated"],
            uncalibrated=vectors.get("uncalibrated"),
            layout=layout,
            n_tokens=n_tokens,
            max_tokens=model.max_seq_length,
            late_chunks=chunks.get("calibrated"),
            late_chunks_uncalibrated=chunks.get("uncalibrated"),
            n_tokens_exact=len(texts[i]) == len(doc.text),
        ))
    return encoded


def model_text(tokenizer, prompt: str, text: str, limit: int) -> str:
    """``text``, or for a very long one the shortest doubling prefix that still tokenizes to more
    than ``limit`` + `COUNT_MARGIN` tokens: the model reads exactly the same tokens, and a 3 MB
    document is not tokenized in full only to be cut at ``limit``."""
    chars = max(64, 16 * limit)
    while chars < len(text):
        prefix = text[:chars]
        if len(tokenizer(prompt + prefix, add_special_tokens=True, verbose=False)["input_ids"]) > limit + COUNT_MARGIN:
            return prefix
        chars *= 2
    return text


# ---------------------------------------------------------------------------- internals
def _tokenize(model: SentenceTransformer, prompt: str, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]], list[int], int]]:
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("token spans need a fast (Rust) tokenizer with offset mapping; this model's tokenizer is slow.")
    limit = model.max_seq_length
    full_texts = [prompt + t for t in texts]
    enc = tokenizer(full_texts, truncation=True, max_length=limit, return_offsets_mapping=True,
                    return_special_tokens_mask=True, add_special_tokens=True)
    rows = []
    long_rows = [i for i, ids in enumerate(enc["input_ids"]) if len(ids) >= limit]
    full_lengths: dict[int, int] = {}
    if long_rows:
        lengths = tokenizer([full_texts[i] for i in long_rows], add_special_tokens=True, truncation=False, verbose=False)
        full_lengths = {i: len(ids) for i, ids in zip(long_rows, lengths["input_ids"])}
    for i, ids in enumerate(enc["input_ids"]):
        rows.append((list(ids), [tuple(o) for o in enc["offset_mapping"][i]], list(enc["special_tokens_mask"][i]),
                     full_lengths.get(i, len(ids))))
    return rows


def _spans(offsets: Sequence[tuple[int, int]], special: Sequence[int], shift: int, doc: Document) -> list[tuple[int, int] | None]:
    """Half-open token spans of the segments over one tokenization (``None`` for a segment with no token).

    A token that straddles two segments belongs to each one it overlaps (``straddling="every"``).
    """
    char_spans = [(segment.start, segment.end) for segment in doc.segments]
    return token_spans(offsets, char_spans, special=special, shift=shift, straddling="every").spans


def _layout(prompt: str, doc: Document, ids: list[int], offsets: list[tuple[int, int]],
            special: list[int], n_tokens: int) -> tuple[SegmentLayout, ...]:
    """Each segment's kept token span and coverage; a truncated document is judged on characters:
    a segment whose text goes on past the last kept token lost its tail."""
    kept = _spans(offsets, special, len(prompt), doc)
    if n_tokens <= len(ids):
        return tuple(SegmentLayout(span, COVERAGE_FULL if span else COVERAGE_CUT) for span in kept)
    covered = max((end for (_, end), is_special in zip(offsets, special) if not is_special), default=0) - len(prompt)
    layout = []
    for segment, span in zip(doc.segments, kept):
        if span is None:
            layout.append(SegmentLayout(None, COVERAGE_CUT))
        elif doc.text[max(covered, segment.start):segment.end].strip():
            layout.append(SegmentLayout(span, COVERAGE_PARTIAL))
        else:
            layout.append(SegmentLayout(span, COVERAGE_FULL))
    return tuple(layout)


def _valid_tokens(item: dict, ids: list[int], doc_id: str):
    mask = item["attention_mask"].bool()
    model_ids = item["input_ids"][mask].tolist()
    if model_ids != ids:
        raise RuntimeError(
            f"document {doc_id!r}: the model's input ids differ from the tokenization used for the token spans "
            "(a custom tokenization step in the model?); token spans and late chunks would be wrong."
        )
    return item["token_embeddings"][mask]


def _late_chunks(tokens, doc: Document, layout: tuple[SegmentLayout, ...]) -> dict[int, np.ndarray]:
    chunks = {}
    for segment, lay in zip(doc.segments, layout):
        if lay.token_span is None:
            continue
        start, end = lay.token_span
        vector = tokens[start:end].float().mean(dim=0)
        norm = vector.norm()
        chunks[segment.position] = (vector / norm if norm > 0 else vector).cpu().numpy()
    return chunks
