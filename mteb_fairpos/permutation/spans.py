"""Where each segment's tokens lie inside a document (late chunking, SPEC 2.3).

The spans come from the tokenizer's character offsets (:func:`mteb_fairpos.spans.token_spans`,
shared with the Qdrant indexer), so they do not depend on how a tokenizer treats whitespace:
a token belongs to the first segment whose text (without surrounding whitespace) its
character range overlaps, and tokens that overlap no segment (special tokens,
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

from ..spans import assign_tokens, token_spans

__all__ = ["DocumentTokens", "assign_tokens", "document_tokens"]


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
            spans = [_stripped(texts[index], start, end) for start, end in char_spans[index]]
            ids = full["input_ids"][row]
            whole = token_spans(full["offset_mapping"][row], spans, shift=shift)
            located, truncated = whole.spans, (False,) * len(spans)
            if len(ids) > max_length:
                kept = tokenizer(text, add_special_tokens=True, truncation=True, max_length=max_length,
                                 return_offsets_mapping=True, return_attention_mask=False, return_token_type_ids=False)
                ids = kept["input_ids"]
                seen = token_spans(kept["offset_mapping"], spans, shift=shift)
                located = seen.spans
                truncated = tuple(bool(s < f) for s, f in zip(seen.counts, whole.counts))
            results.append(DocumentTokens(np.asarray(ids, dtype=np.int64), tuple(located), truncated))
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
