"""Where each segment's tokens lie inside a document (late chunking, SPEC 2.3).

The spans come from the tokenizer's character offsets, so they do not depend on how a
tokenizer treats whitespace: a token belongs to the segment whose text (without surrounding
whitespace) its character range overlaps, and tokens that overlap no segment (special tokens,
a prompt, a lone whitespace marker between segments) belong to none. When the document is
longer than the model's maximum length, the tokens the model actually sees are compared with
the full tokenization, and every segment that lost tokens is marked truncated, so it is
reported instead of measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class DocumentTokens:
    """The model's view of one document and the token span of each segment."""

    input_ids: np.ndarray
    """The token ids the model sees (special tokens and truncation included), int64."""
    spans: tuple[tuple[int, int] | None, ...]
    """Per segment, ``[start, end)`` token indices into :attr:`input_ids`; ``None`` when the
    segment has no token in view or its tokens are not contiguous."""
    truncated: tuple[bool, ...]
    """Per segment, whether truncation removed any of its tokens."""


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def assign_tokens(offsets: Sequence[Sequence[int]], char_spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """For each token, the index of the first segment its ``[start, end)`` overlaps, or -1.

    ``char_spans`` must be sorted and non-overlapping; empty offsets (special tokens) get -1.
    """
    if len(offsets) == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    starts, ends = offs[:, 0], offs[:, 1]
    seg = np.asarray(char_spans, dtype=np.int64).reshape(-1, 2)
    candidate = np.searchsorted(seg[:, 1], starts, side="right")  # first segment ending after the token starts
    inside = candidate < len(seg)
    safe = np.minimum(candidate, len(seg) - 1)
    overlaps = inside & (ends > seg[safe, 0]) & (ends > starts)
    return np.where(overlaps, candidate, -1)


def _spans_of(assignment: np.ndarray, count: int) -> tuple[list[tuple[int, int] | None], np.ndarray]:
    spans: list[tuple[int, int] | None] = []
    sizes = np.zeros(count, dtype=np.int64)
    for k in range(count):
        where = np.flatnonzero(assignment == k)
        sizes[k] = len(where)
        if len(where) == 0:
            spans.append(None)
            continue
        start, end = int(where[0]), int(where[-1]) + 1
        between = assignment[start:end]
        spans.append((start, end) if np.all((between == k) | (between == -1)) else None)
    return spans, sizes


def document_tokens(
    tokenizer: Any,
    texts: Sequence[str],
    char_spans: Sequence[Sequence[tuple[int, int]]],
    max_length: int,
    prompt: str = "",
    batch_size: int = 64,
) -> list[DocumentTokens]:
    """Tokenize documents as the model will (``prompt + text``, cut at ``max_length``) and locate segments.

    Needs a fast tokenizer (character offsets).
    """
    if not getattr(tokenizer, "is_fast", False):
        return _without_offsets(tokenizer, texts, char_spans, max_length, prompt)
    shift = len(prompt)
    results: list[DocumentTokens] = []
    for begin in range(0, len(texts), batch_size):
        chunk = [prompt + text for text in texts[begin:begin + batch_size]]
        full = tokenizer(chunk, add_special_tokens=True, truncation=False, return_offsets_mapping=True,
                         return_attention_mask=False, return_token_type_ids=False)
        for row, text in enumerate(chunk):
            index = begin + row
            spans = [_stripped(text, start + shift, end + shift) for start, end in char_spans[index]]
            ids, offsets = full["input_ids"][row], full["offset_mapping"][row]
            assignment = assign_tokens(offsets, spans)
            if len(ids) > max_length:
                kept = tokenizer(text, add_special_tokens=True, truncation=True, max_length=max_length,
                                 return_offsets_mapping=True, return_attention_mask=False, return_token_type_ids=False)
                full_sizes = np.bincount(assignment[assignment >= 0], minlength=len(spans))
                ids = kept["input_ids"]
                assignment = assign_tokens(kept["offset_mapping"], spans)
                token_spans, sizes = _spans_of(assignment, len(spans))
                truncated = tuple(bool(s < f) for s, f in zip(sizes, full_sizes))
            else:
                token_spans, _ = _spans_of(assignment, len(spans))
                truncated = (False,) * len(spans)
            results.append(DocumentTokens(np.asarray(ids, dtype=np.int64), tuple(token_spans), truncated))
    return results


def _without_offsets(tokenizer: Any, texts: Sequence[str], char_spans: Sequence[Sequence[tuple[int, int]]],
                     max_length: int, prompt: str) -> list[DocumentTokens]:
    """Slow tokenizers: no spans (so no late chunking), truncation from prefix token counts."""
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    results = []
    for text, spans in zip(texts, char_spans):
        ids = tokenizer(prompt + text, add_special_tokens=True, truncation=True, max_length=max_length)["input_ids"]
        whole = len(tokenizer(prompt + text, add_special_tokens=False)["input_ids"])
        if whole <= budget:
            truncated = (False,) * len(spans)
        else:
            truncated = tuple(len(tokenizer(prompt + text[:end], add_special_tokens=False)["input_ids"]) > budget
                              for _, end in spans)
        results.append(DocumentTokens(np.asarray(ids, dtype=np.int64), (None,) * len(spans), truncated))
    return results
