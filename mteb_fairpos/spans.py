"""Character spans of segments: where each segment sits once joined into a document
(`join_segments`), and the half-open token spans they map to, from a fast tokenizer's character
offsets.

Shared by the permutation probe (late chunking, :mod:`mteb_fairpos.permutation.spans`) and the
Qdrant indexer (payload token spans and late chunks, :mod:`mteb_fairpos.integrations.qdrant.encoding`).

A token belongs to a segment when its character range ``[start, end)`` overlaps the segment's.
Tokens with an empty range (special tokens added by the tokenizer), tokens flagged in a special
tokens mask, and tokens that lie wholly inside a prefix put before the text (a prompt) belong to
no segment. The segments' character spans must be in document order and must not overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

Straddling = Literal["first", "every"]


def join_segments(segments: Sequence[str], separator: str = " ") -> tuple[str, tuple[tuple[int, int], ...]]:
    """The document the segments make, joined with ``separator``, and each segment's ``[start, end)``
    in it: the one place a segmented document's text and spans are made together, so they agree."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for i, segment in enumerate(segments):
        if i:
            cursor += len(separator)
        spans.append((cursor, cursor + len(segment)))
        cursor += len(segment)
    return separator.join(segments), tuple(spans)


class TokenSpans(NamedTuple):
    """The token span of each segment over one tokenization."""

    spans: list[tuple[int, int] | None]
    """Per segment, ``[start, end)`` token indices; ``None`` when the segment has no token or its
    tokens are interleaved with another segment's."""
    counts: np.ndarray
    """Per segment, how many tokens belong to it (int64)."""


def _token_ranges(
    offsets: Sequence[Sequence[int]],
    char_spans: Sequence[Sequence[int]],
    special: Sequence[int] | None,
    shift: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per token, the half-open range ``[first, stop)`` of segment indices it overlaps (empty for none)."""
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2) - shift
    starts, ends = offs[:, 0], offs[:, 1]
    seg = np.asarray(char_spans, dtype=np.int64).reshape(-1, 2)
    first = np.searchsorted(seg[:, 1], starts, side="right")  # first segment ending after the token starts
    stop = np.searchsorted(seg[:, 0], ends, side="left")  # first segment starting at or after the token ends
    live = ends > starts
    if special is not None:
        live &= ~np.asarray(special, dtype=bool).reshape(-1)
    return first, np.where(live, stop, first)


def assign_tokens(
    offsets: Sequence[Sequence[int]],
    char_spans: Sequence[Sequence[int]],
    *,
    special: Sequence[int] | None = None,
    shift: int = 0,
) -> np.ndarray:
    """For each token, the index of the first segment its ``[start, end)`` overlaps, or -1 (int64).

    ``special`` and ``shift`` as in :func:`token_spans`.
    """
    first, stop = _token_ranges(offsets, char_spans, special, shift)
    return np.where(stop > first, first, -1).astype(np.int64)


def token_spans(
    offsets: Sequence[Sequence[int]],
    char_spans: Sequence[Sequence[int]],
    *,
    special: Sequence[int] | None = None,
    shift: int = 0,
    straddling: Straddling = "first",
) -> TokenSpans:
    """The half-open token span of each segment (``None`` for a segment with no token).

    ``offsets`` are the tokenizer's per-token character offsets into the string it tokenized;
    ``char_spans`` are the segments' ``[start, end)`` in the text, which starts ``shift``
    characters into that string (after a prompt of that length). ``special`` is an optional
    special tokens mask (1 = special); such tokens, like tokens with an empty offset range,
    belong to no segment.

    ``straddling`` decides where a token that overlaps two segments goes (a tokenizer that
    merges characters across a segment boundary): ``"first"`` gives it to the first segment
    only, so spans never share a token (the permutation probe, whose late chunks partition the
    document); ``"every"`` gives it to each segment it overlaps, so neighbouring spans may share
    that token (the Qdrant indexer, where a segment's span covers all of its characters).

    A segment's span runs from its first to its last token; tokens in between must belong to
    it or to no segment, else its span is ``None`` (its tokens are not contiguous).
    """
    if straddling not in ("first", "every"):
        raise ValueError(f"straddling must be 'first' or 'every', got {straddling!r}.")
    first, stop = _token_ranges(offsets, char_spans, special, shift)
    if straddling == "first":
        stop = np.minimum(stop, first + 1)
    unassigned = stop <= first
    count = len(char_spans)
    spans: list[tuple[int, int] | None] = []
    counts = np.zeros(count, dtype=np.int64)
    for k in range(count):
        member = (first <= k) & (k < stop)
        where = np.flatnonzero(member)
        counts[k] = len(where)
        if len(where) == 0:
            spans.append(None)
            continue
        lo, hi = int(where[0]), int(where[-1]) + 1
        contiguous = np.all(member[lo:hi] | unassigned[lo:hi])
        spans.append((lo, hi) if contiguous else None)
    return TokenSpans(spans, counts)
