"""Segment selection with the evaluated model's own tokenizer (docs/method.md#s2-1).

A text is usable as a segment when its token count (no special tokens) lies in a window
``[low, high]``; by default the window is the paper's 1,000-2,000 tokens of an 8,192-token
model scaled to the model's maximum length (``[62, 125]`` for a 512-token model). A topic is
usable in a language configuration when every language of the configuration has a usable
text and each other-language version lies within +/-70 % of the lead language's length.

``mode="lead"`` is an option for corpora of long articles evaluated with short-context models:
instead of dropping a text longer than the window, it keeps its leading sentences up to
``high`` tokens (a text whose first sentence alone is too long is still dropped).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .corpus import ComparableCorpus, CorpusError

PAPER_WINDOW = (1000, 2000)
PAPER_MAX_LENGTH = 8192
SegmentMode = Literal["filter", "lead"]
_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f\u0964])\s*")


@dataclass(frozen=True)
class SelectionSettings:
    """How segments are chosen; ``None`` values are scaled to the model (see :meth:`resolve`).

    Args:
        segment_window: ``(low, high)`` token counts (inclusive) a segment must have.
        max_document_tokens: the longest document allowed, in tokens including special tokens
            and the prompt; defaults to the model's maximum length.
        length_tolerance: other-language versions must lie within this fraction of the lead
            language's length (0.7 = +/-70 %).
        mode: ``"filter"`` (drop texts outside the window, the paper) or ``"lead"`` (cut long
            texts to their leading sentences).
    """

    segment_window: tuple[int, int] | None = None
    max_document_tokens: int | None = None
    length_tolerance: float = 0.7
    mode: SegmentMode = "filter"

    def __post_init__(self) -> None:
        if self.segment_window is not None:
            low, high = self.segment_window
            if not (isinstance(low, int) and isinstance(high, int) and 0 < low <= high):
                raise ValueError(f"segment_window (--window LOW HIGH) must be (low, high) with 0 < low <= high tokens, "
                                 f"got {self.segment_window!r}.")
        if self.max_document_tokens is not None and self.max_document_tokens <= 0:
            raise ValueError(f"max_document_tokens must be positive, got {self.max_document_tokens}.")
        if not 0 < self.length_tolerance:
            raise ValueError(f"length_tolerance must be positive (0.7 = +/-70 %), got {self.length_tolerance}.")
        if self.mode not in ("filter", "lead"):
            raise ValueError(f"mode must be 'filter' or 'lead', got {self.mode!r}.")

    def resolve(self, model_max_length: int) -> tuple[tuple[int, int], int]:
        """The window and maximum document length for a model with ``model_max_length`` tokens."""
        max_doc = self.max_document_tokens or model_max_length
        if self.segment_window is not None:
            return self.segment_window, max_doc
        scale = max_doc / PAPER_MAX_LENGTH
        low, high = (max(1, round(bound * scale)) for bound in PAPER_WINDOW)
        return (low, high), max_doc


@dataclass
class SegmentPool:
    """The usable segment texts of one corpus for one tokenizer, with token counts."""

    texts: dict[tuple[str, str], str]
    """``(topic_id, language) -> text`` (cut to its lead in ``mode="lead"``)."""
    lengths: dict[tuple[str, str], int]
    window: tuple[int, int]
    max_document_tokens: int
    outside: dict[str, Counter[str]] = field(default_factory=dict)
    """Per language, how many texts were dropped and why (``too_short`` / ``too_long``)."""
    shortest: dict[str, int] = field(default_factory=dict)
    """Per language, the token count of the shortest text seen."""


def count_tokens(tokenizer: Any, texts: Sequence[str], batch_size: int = 256) -> list[int]:
    """Token counts without special tokens, batched."""
    counts: list[int] = []
    for start in range(0, len(texts), batch_size):
        encoded = tokenizer(list(texts[start:start + batch_size]), add_special_tokens=False, truncation=False,
                            return_attention_mask=False, return_token_type_ids=False, verbose=False)
        counts.extend(len(ids) for ids in encoded["input_ids"])
    return counts


def lead_sentences(tokenizer: Any, text: str, high: int) -> str:
    """The longest prefix of whole sentences of ``text`` with at most ``high`` tokens ('' if none)."""
    encoded = tokenizer(text, add_special_tokens=False, truncation=True, max_length=high + 1,
                        return_offsets_mapping=True)
    if len(encoded["input_ids"]) <= high:
        return text
    limit = encoded["offset_mapping"][high][0]  # text before the first token that does not fit
    cuts = [m.start() for m in _SENTENCE_END.finditer(text, 0, limit + 1) if 0 < m.start() <= limit]
    while cuts:
        candidate = text[:cuts.pop()].rstrip()
        if candidate and count_tokens(tokenizer, [candidate])[0] <= high:
            return candidate
    return ""


def build_pool(corpus: ComparableCorpus, languages: Sequence[str], tokenizer: Any, settings: SelectionSettings,
               model_max_length: int) -> SegmentPool:
    """Measure every text of ``languages`` with ``tokenizer`` and keep those in the window."""
    corpus.require_languages(languages)
    window, max_doc = settings.resolve(model_max_length)
    low, high = window
    keys = [(topic.id, lang) for lang in dict.fromkeys(languages) for topic in corpus if lang in topic.texts]
    raw = [corpus.topic(tid).texts[lang] for tid, lang in keys]
    if settings.mode == "lead":
        raw = [lead_sentences(tokenizer, text, high) for text in raw]
    lengths = count_tokens(tokenizer, raw)
    pool = SegmentPool(texts={}, lengths={}, window=window, max_document_tokens=max_doc)
    for (tid, lang), text, length in zip(keys, raw, lengths):
        outside = pool.outside.setdefault(lang, Counter())
        if text:
            pool.shortest[lang] = min(pool.shortest.get(lang, length), length)
        if not text or length < low:
            outside["too_short"] += 1
        elif length > high:
            outside["too_long"] += 1
        else:
            pool.texts[(tid, lang)] = text
            pool.lengths[(tid, lang)] = length
    for lang in dict.fromkeys(languages):
        kept = sum(1 for (_, l) in pool.texts if l == lang)
        if kept == 0:
            counts = pool.outside.get(lang, Counter())
            if counts.get("too_long", 0) and not counts.get("too_short", 0):
                raise CorpusError(
                    f"all {counts['too_long']} '{lang}' texts exceed the segment window [{low}, {high}] tokens "
                    f"(the shortest has {pool.shortest.get(lang)} tokens with this model's tokenizer). Pass a wider "
                    "segment_window (--window LOW HIGH), a larger max_document_tokens or model max length "
                    "(--max-length), or segment_mode='lead' (--mode lead)."
                )
            raise CorpusError(
                f"no '{lang}' text fits the segment window [{low}, {high}] tokens "
                f"({dict(counts)}); pass a different segment_window "
                "(--window LOW HIGH) or segment_mode='lead' (--mode lead)."
            )
    return pool


def eligible_topics(pool: SegmentPool, corpus: ComparableCorpus, lead: str, later: str,
                    tolerance: float) -> tuple[list[str], dict[str, int]]:
    """Topics usable in a configuration led by ``lead`` with later segments in ``later``.

    Returns the topic ids (corpus order) and the count of excluded topics by reason:
    ``missing_language`` (no text), ``outside_window`` (a text outside the window) and
    ``length_mismatch`` (the later-language text is not within +/-tolerance of the lead's length).
    """
    reasons: Counter[str] = Counter()
    chosen: list[str] = []
    for topic in corpus:
        if lead not in topic.texts or later not in topic.texts:
            reasons["missing_language"] += 1
            continue
        if (topic.id, lead) not in pool.texts or (topic.id, later) not in pool.texts:
            reasons["outside_window"] += 1
            continue
        lead_len = pool.lengths[(topic.id, lead)]
        if abs(pool.lengths[(topic.id, later)] - lead_len) > tolerance * lead_len:
            reasons["length_mismatch"] += 1
            continue
        chosen.append(topic.id)
    return chosen, dict(reasons)
