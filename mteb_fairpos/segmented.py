"""How a multi-segment document becomes a vector with positions: one module, read top to bottom.

A *segmented document* is a text and the character spans of its segments (a newspaper page and its
articles). Everything that turns one into what the package measures or stores lives here:

1. the model's rules: which document prompt ``encode_document`` puts in front (`document_prompt`),
   how the model pools (`model_pooling`), where the SentenceTransformer inside a wrapper is;
2. the token layout (`token_layouts`): the token ids the model reads (prompt and special tokens
   included, cut at the maximum length), each segment's half-open token span in them and its
   coverage (``full``, ``partial`` when truncation cut its tail, ``cut`` when no token of it is
   left), and the token count. A very long document is tokenized only a little past the maximum
   (`model_text`), so a 3 MB text costs what a 3 kB one does;
3. one forward pass per document (`encode_segmented`): the document vector and, for mean-pooled
   models, each segment's late-chunking vector (docs/method.md#s2-3: the normalised mean of its final-layer
   token vectors), checked against the layout's token ids so spans and vectors cannot drift apart.

Two callers want two span rules, explicit as parameters: the permutation probe strips whitespace
from its segments and gives a token that straddles two segments to the first (``straddling=
"first"``: late chunks partition the document), the Qdrant index gives it to both (``"every"``: a
segment's span covers all its characters).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .config import ConfigError, Pooling
from .spans import Straddling, token_spans

Coverage = Literal["full", "partial", "cut"]
COVERAGE_FULL: Coverage = "full"
COVERAGE_PARTIAL: Coverage = "partial"
COVERAGE_CUT: Coverage = "cut"

DOCUMENT_PROMPTS = ("document", "passage", "corpus")
"""The prompt names sentence-transformers' ``encode_document`` looks for, in its order."""

COUNT_MARGIN = 16
"""Tokens counted past the model's maximum before a long document's count stops: enough for the
cut to fall beyond every token the model reads."""

_ST_POOLING = {"cls": "cls", "lasttoken": "last", "mean": "mean"}


class TruncationWarning(UserWarning):
    """Some inputs were longer than the model's maximum length and were cut."""


# ------------------------------------------------------------------------------ 1. the model's rules
def find_sentence_transformer(model: Any) -> Any | None:
    """The ``SentenceTransformer`` behind ``model`` (itself, or an mteb wrapper's ``.model``), else None."""
    from sentence_transformers import SentenceTransformer

    for candidate in (model, getattr(model, "model", None), getattr(model, "_model", None)):
        if isinstance(candidate, SentenceTransformer):
            return candidate
    return None


def document_prompt(model: Any) -> str:
    """The prompt ``model.encode_document`` puts before every document (sentence-transformers' rule:
    the first of `DOCUMENT_PROMPTS` the model has, else its default prompt), ``""`` for none."""
    prompts = getattr(model, "prompts", None) or {}
    name = next((candidate for candidate in DOCUMENT_PROMPTS if candidate in prompts), None)
    if name is None:
        name = getattr(model, "default_prompt_name", None)
    return (prompts.get(name) or "") if name else ""


def model_pooling(model: Any) -> Pooling:
    """The pooling of a sentence-transformers model in docs/method.md#s1-1 terms (``cls``, ``last`` or ``mean``)."""
    from sentence_transformers.sentence_transformer.modules import Pooling as PoolingModule

    modules = [m for m in model if isinstance(m, PoolingModule)]
    if not modules:
        raise ConfigError("the model has no sentence-transformers Pooling module; pass CalibrationConfig(pooling=...).")
    mode = modules[0].pooling_mode
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if len(modes) != 1 or modes[0] not in _ST_POOLING:
        raise ConfigError(
            f"the model pools with {modes}; calibration supports cls, lasttoken and mean pooling. "
            "Pass CalibrationConfig(pooling=...) to calibrate as one of these."
        )
    return _ST_POOLING[modes[0]]  # type: ignore[return-value]


def calibration_pooling(model: Any) -> Pooling:
    """The pooling that decides the calibrated rows: the model's calibration config, else its Pooling module."""
    config = getattr(model, "calibration", None)
    if config is not None and config.pooling is not None:
        return config.pooling
    return model_pooling(model)


def require_mean_pooling(model: Any) -> None:
    """Refuse late chunks for a model that does not mean-pool: a segment's late-chunking vector is
    the mean of its token vectors, an embedding only for a model trained to mean-pool (docs/method.md#s2-3
    defines it for those alone)."""
    pooling = calibration_pooling(model)
    if pooling != "mean":
        raise ValueError(
            f"late-chunking vectors are defined for mean-pooled models only (docs/method.md#s2-3); this model pools with "
            f"{pooling!r}. Leave late chunks off."
        )


@contextlib.contextmanager
def calibration_mode(model: Any, calibrated: bool) -> Iterator[None]:
    """Inside the block ``model.encode_document`` is calibrated or not; a plain model is never calibrated."""
    if calibrated:
        yield
        return
    disabled = getattr(model, "calibration_disabled", None)
    with disabled() if disabled is not None else contextlib.nullcontext():
        yield


# ------------------------------------------------------------------------------ 2. the token layout
@dataclass(frozen=True)
class SegmentLayout:
    """Where one segment sits in the model input: its token span (half-open; ``None`` when it has no
    token there or its tokens are interleaved with another's) and its coverage."""

    token_span: tuple[int, int] | None
    coverage: Coverage


@dataclass(frozen=True, eq=False)
class TokenLayout:
    """The model's view of one segmented document."""

    input_ids: np.ndarray
    """The token ids the model reads (prompt and special tokens included, truncated), int64."""
    segments: tuple[SegmentLayout, ...]
    n_tokens: int
    """Tokens before truncation; counted only up to a little past the maximum for very long texts."""
    n_tokens_exact: bool = True
    text_chars: int | None = None
    """Characters of the text that were tokenized (`model_text`'s prefix); ``None``: all of it."""

    @property
    def spans(self) -> tuple[tuple[int, int] | None, ...]:
        return tuple(s.token_span for s in self.segments)

    @property
    def coverage(self) -> tuple[Coverage, ...]:
        return tuple(s.coverage for s in self.segments)

    @property
    def truncated(self) -> tuple[bool, ...]:
        """Per segment, whether truncation removed any of its tokens."""
        return tuple(s.coverage != COVERAGE_FULL for s in self.segments)


def model_text(tokenizer: Any, prompt: str, text: str, limit: int) -> str:
    """``text``, or for a very long one the shortest doubling prefix that still tokenizes to more than
    ``limit`` + `COUNT_MARGIN` tokens: the model reads exactly the same tokens from it."""
    chars = max(64, 16 * limit)
    while chars < len(text):
        prefix = text[:chars]
        if len(tokenizer(prompt + prefix, add_special_tokens=True, verbose=False)["input_ids"]) > limit + COUNT_MARGIN:
            return prefix
        chars *= 2
    return text


def token_layouts(
    tokenizer: Any,
    texts: Sequence[str],
    char_spans: Sequence[Sequence[tuple[int, int]]],
    max_length: int,
    *,
    prompt: str = "",
    straddling: Straddling = "every",
    strip: bool = False,
    batch_size: int = 64,
) -> list[TokenLayout]:
    """Tokenize documents as the model will (``prompt + text``, cut at ``max_length``) and locate segments.

    ``strip`` drops whitespace around each segment before locating it. A truncated document is
    judged on characters: a segment whose text goes on past the last token the model reads lost its
    tail (``partial``); one with no token left is ``cut``. A slow tokenizer (no character offsets)
    gives no spans, and coverage from prefix token counts.
    """
    if not getattr(tokenizer, "is_fast", False):
        return [_layout_without_offsets(tokenizer, t, s, max_length, prompt, strip) for t, s in zip(texts, char_spans)]
    layouts: list[TokenLayout] = []
    for begin in range(0, len(texts), batch_size):
        chunk = texts[begin:begin + batch_size]
        bounded = [model_text(tokenizer, prompt, text, max_length) for text in chunk]
        full_texts = [prompt + text for text in bounded]
        kept = tokenizer(full_texts, add_special_tokens=True, truncation=True, max_length=max_length,
                         return_offsets_mapping=True, return_special_tokens_mask=True, return_attention_mask=False,
                         return_token_type_ids=False)
        for row, text in enumerate(chunk):
            spans = [_stripped(text, a, b) if strip else (a, b) for a, b in char_spans[begin + row]]
            ids = kept["input_ids"][row]
            n_tokens = len(ids)
            if n_tokens >= max_length:  # maybe truncated: count the (bounded) input
                n_tokens = len(tokenizer(full_texts[row], add_special_tokens=True, truncation=False, verbose=False)["input_ids"])
            offsets, special = kept["offset_mapping"][row], kept["special_tokens_mask"][row]
            located = token_spans(offsets, spans, special=special, shift=len(prompt), straddling=straddling).spans
            if n_tokens <= len(ids):
                segments = tuple(SegmentLayout(span, COVERAGE_FULL) for span in located)
            else:
                covered = max((end for (_, end), flag in zip(offsets, special) if not flag), default=0) - len(prompt)
                segments = tuple(_cut_layout(text, span, located_span, covered) for span, located_span in zip(spans, located))
            exact = len(bounded[row]) == len(text)
            layouts.append(TokenLayout(np.asarray(ids, dtype=np.int64), segments, n_tokens, exact,
                                       None if exact else len(bounded[row])))
    return layouts


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _cut_layout(text: str, span: tuple[int, int], token_span: tuple[int, int] | None, covered: int) -> SegmentLayout:
    if not text[max(covered, span[0]):span[1]].strip():
        return SegmentLayout(token_span, COVERAGE_FULL)
    return SegmentLayout(token_span, COVERAGE_CUT if token_span is None else COVERAGE_PARTIAL)


def _layout_without_offsets(tokenizer: Any, text: str, spans: Sequence[tuple[int, int]], max_length: int,
                            prompt: str, strip: bool) -> TokenLayout:
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    ids = tokenizer(prompt + text, add_special_tokens=True, truncation=True, max_length=max_length)["input_ids"]
    whole = len(tokenizer(prompt + text, add_special_tokens=False)["input_ids"])

    def reaches(end: int) -> bool:
        return len(tokenizer(prompt + text[:end], add_special_tokens=False)["input_ids"]) <= budget

    segments = []
    for start, end in (_stripped(text, a, b) if strip else (a, b) for a, b in spans):
        if whole <= budget or reaches(end):
            segments.append(SegmentLayout(None, COVERAGE_FULL))
        else:
            segments.append(SegmentLayout(None, COVERAGE_PARTIAL if reaches(start) and start < end else COVERAGE_CUT))
    return TokenLayout(np.asarray(ids, dtype=np.int64), tuple(segments), whole + tokenizer.num_special_tokens_to_add(pair=False))


# ------------------------------------------------------------------------------ 3. the forward pass
@dataclass
class SegmentedEncoding:
    """What one pass over segmented documents gives, in input order."""

    vectors: np.ndarray
    """(N, D) document vectors as the model returns them (normalised only if the model normalises)."""
    layouts: list[TokenLayout]
    """Per document, its token layout (empty when the documents came without segment spans)."""
    late_chunks: list[list[np.ndarray | None]] | None = None
    """Per document and segment, the normalised late-chunking vector (``None`` where the segment has no
    token span); ``None`` unless asked for."""
    aligned: list[bool] | None = None
    """Per document, whether the model's token ids matched the layout (late chunks only where they did)."""


def encode_segmented(
    model: Any,
    texts: Sequence[str],
    char_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
    *,
    calibrated: bool = True,
    late_chunks: bool = False,
    layouts: Sequence[TokenLayout] | None = None,
    prompt: str | None = None,
    straddling: Straddling = "every",
    strip: bool = False,
    batch_size: int = 32,
    chunk_size: int | None = None,
    show_progress: bool = False,
) -> SegmentedEncoding:
    """Embed segmented documents with ``model.encode_document``, one forward pass each.

    Args:
        model: a SentenceTransformer; a `FairSentenceTransformer` is calibrated unless ``calibrated``
            is False (same prompt and routing either way).
        texts / char_spans: the documents and their segments' character spans (``None``: vectors only,
            no layout).
        late_chunks: also return each segment's late-chunking vector (mean-pooled models).
        layouts: the documents' `token_layouts`, when the caller already has them.
        prompt: the document prompt; default the model's own (`document_prompt`).
        straddling / strip: the span rule (module docstring).
        chunk_size: documents whose token vectors are held at once (default ``2 * batch_size``).
    """
    if late_chunks:
        require_mean_pooling(model)
    prompt = document_prompt(model) if prompt is None else prompt
    limit = int(model.max_seq_length)
    if layouts is None and char_spans is not None:
        layouts = token_layouts(model.tokenizer, texts, char_spans, limit, prompt=prompt, straddling=straddling, strip=strip)
    if late_chunks and layouts is None:
        raise ValueError("late chunks need the segments: pass char_spans or layouts.")
    inputs = ([text[:layout.text_chars] for text, layout in zip(texts, layouts)] if layouts is not None
              else [model_text(model.tokenizer, prompt, text, limit) for text in texts])  # each long text cut once
    vectors: list[np.ndarray | None] = [None] * len(texts)
    chunks: list[list[np.ndarray | None]] = [[] for _ in texts]
    aligned = [True] * len(texts)
    order = [int(i) for i in np.argsort([-len(t) for t in inputs], kind="stable")]
    step = chunk_size or max(2 * batch_size, 1)
    with calibration_mode(model, calibrated), warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)  # the layouts report truncation, per segment
        for begin in range(0, len(order), step):
            indices = order[begin:begin + step]
            rows = model.encode_document([inputs[i] for i in indices], prompt=prompt, batch_size=batch_size,
                                         output_value=None if late_chunks else "sentence_embedding",
                                         convert_to_numpy=not late_chunks, show_progress_bar=show_progress)
            for index, row in zip(indices, rows):
                if not late_chunks:
                    vectors[index] = np.asarray(row, dtype=np.float32)
                    continue
                vectors[index] = row["sentence_embedding"].float().cpu().numpy()
                chunks[index], aligned[index] = _late_chunks(row, layouts[index])
    dimension = int(model.get_embedding_dimension())
    matrix = np.stack(vectors) if vectors else np.zeros((0, dimension), dtype=np.float32)
    return SegmentedEncoding(matrix, list(layouts or []), chunks if late_chunks else None,
                             aligned if late_chunks else None)


def _late_chunks(row: dict[str, Any], layout: TokenLayout) -> tuple[list[np.ndarray | None], bool]:
    mask = row["attention_mask"].bool()
    ids = row["input_ids"][mask].cpu().numpy().astype(np.int64)
    if not np.array_equal(ids, layout.input_ids):
        return [None] * len(layout.segments), False
    tokens = row["token_embeddings"][mask].float().cpu().numpy()
    chunks: list[np.ndarray | None] = []
    for span in layout.spans:
        if span is None:
            chunks.append(None)
            continue
        context = tokens[span[0]:span[1]].mean(axis=0)
        chunks.append(context / max(float(np.linalg.norm(context)), 1e-12))
    return chunks, True
