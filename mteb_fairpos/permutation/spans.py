"""Where each segment's tokens lie inside a probe document (late chunking, docs/method.md#s2-3).

The layout itself is `mteb_fairpos.segmented.token_layouts`, shared with the Qdrant index. The
probe's rule: a segment is located without its surrounding whitespace, and a token that straddles
two segments belongs to the first, so late chunks partition the document; tokens that overlap no
segment (special tokens, a prompt, a lone whitespace marker between segments) belong to none. A
segment that truncation cut (wholly or partly) is flagged, so it is reported instead of measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..segmented import TokenLayout, token_layouts
from ..spans import assign_tokens

__all__ = ["DocumentTokens", "assign_tokens", "document_tokens"]

DocumentTokens = TokenLayout
"""The model's view of one probe document: ``input_ids``, per-segment ``spans`` and ``truncated``."""


def document_tokens(
    tokenizer: Any,
    texts: Sequence[str],
    char_spans: Sequence[Sequence[tuple[int, int]]],
    max_length: int,
    prompt: str = "",
    batch_size: int = 64,
) -> list[TokenLayout]:
    """Tokenize documents as the model will (``prompt + text``, cut at ``max_length``) and locate
    segments with the probe's rule (module docstring)."""
    return token_layouts(tokenizer, texts, char_spans, max_length, prompt=prompt, straddling="first", strip=True,
                         batch_size=batch_size)
