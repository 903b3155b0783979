"""Token spans of segments inside a document (late chunking), for three tokenizer families."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_fairpos.permutation import assemble, assign_tokens, document_tokens

SEGMENTS = [
    "The harbour master counted twelve boats before noon.",
    "Snow covered the northern pass for most of March.",
    "A small bakery opened beside the old town hall.",
]
CORPUS = SEGMENTS + [
    "Boats, snow, bakeries and town halls appear in many short stories.",
    "The northern harbour was quiet; the bakery was busy.",
]


@pytest.fixture(scope="module")
def wordpiece(minilm_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module", params=["wordpiece", "bytelevel", "metaspace"])
def tokenizer(request, wordpiece, trained_tokenizer):
    return wordpiece if request.param == "wordpiece" else trained_tokenizer(request.param, CORPUS)


def _standalone_ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_assign_tokens_basic():
    # two segments at [0, 5) and [6, 11); a special token (0, 0) and a separator token (5, 6) belong to none
    offsets = [(0, 0), (0, 3), (3, 5), (5, 6), (6, 11), (0, 0)]
    assert assign_tokens(offsets, [(0, 5), (6, 11)]).tolist() == [-1, 0, 0, -1, 1, -1]
    assert assign_tokens([], [(0, 1)]).tolist() == []


@pytest.mark.parametrize("separator", [" ", "  ", "\n\n"])
def test_spans_cover_exactly_each_segments_tokens(tokenizer, separator):
    text, spans = assemble(SEGMENTS, separator)
    [info] = document_tokens(tokenizer, [text], [spans], max_length=512)
    assert not any(info.truncated)
    ids = list(info.input_ids)
    covered = []
    for segment, span in zip(SEGMENTS, info.spans):
        assert span is not None
        inside = tokenizer.decode(ids[span[0]:span[1]]).strip()
        # the decoded span is the segment (WordPiece lowercases; all decoders may re-space punctuation)
        assert inside.replace(" ", "").lower() == segment.replace(" ", "").lower()
        covered.extend(range(*span))
    assert len(covered) == len(set(covered)), "spans do not overlap"


def test_spans_match_standalone_tokenization_for_wordpiece(wordpiece):
    text, spans = assemble(SEGMENTS)
    [info] = document_tokens(wordpiece, [text], [spans], max_length=512)
    for segment, (start, end) in zip(SEGMENTS, info.spans):
        assert list(info.input_ids[start:end]) == _standalone_ids(wordpiece, segment)


def test_prompt_tokens_are_not_part_of_any_segment(wordpiece):
    text, spans = assemble(SEGMENTS)
    [plain] = document_tokens(wordpiece, [text], [spans], max_length=512)
    [prompted] = document_tokens(wordpiece, [text], [spans], max_length=512, prompt="passage: ")
    shift = len(_standalone_ids(wordpiece, "passage:"))
    assert [(a + shift, b + shift) for a, b in plain.spans] == list(prompted.spans)


def test_truncated_segments_are_flagged(tokenizer):
    text, spans = assemble(SEGMENTS)
    full = len(tokenizer(text)["input_ids"])
    first = len(_standalone_ids(tokenizer, SEGMENTS[0]))
    # cut inside the third segment: segments 1-2 complete, 3 truncated
    [info] = document_tokens(tokenizer, [text], [spans], max_length=full - 3)
    assert info.truncated == (False, False, True)
    assert len(info.input_ids) == full - 3
    # cut inside the first segment: the later ones are gone entirely
    [info] = document_tokens(tokenizer, [text], [spans], max_length=first)
    assert info.truncated == (True, True, True)
    assert info.spans[1] is None and info.spans[2] is None


class _NoOffsets:
    """A tokenizer without character offsets (what a slow, pure-Python tokenizer offers)."""

    is_fast = False

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, text, **kwargs):
        if kwargs.get("return_offsets_mapping"):
            raise NotImplementedError("no offsets")
        return self.inner(text, **kwargs)

    def num_special_tokens_to_add(self, pair=False):
        return self.inner.num_special_tokens_to_add(pair=pair)


def test_slow_tokenizer_fallback_still_reports_truncation(wordpiece):
    slow = _NoOffsets(wordpiece)
    text, spans = assemble(SEGMENTS)
    full = len(wordpiece(text)["input_ids"])
    [info] = document_tokens(slow, [text], [spans], max_length=full - 3)
    assert info.spans == (None, None, None)
    assert info.truncated == (False, False, True)
    [ok] = document_tokens(slow, [text], [spans], max_length=512)
    assert ok.truncated == (False, False, False)


def test_many_documents_batched(wordpiece):
    texts, spans = zip(*(assemble(list(np.roll(SEGMENTS, k))) for k in range(3)))
    infos = document_tokens(wordpiece, list(texts), list(spans), max_length=512, batch_size=2)
    assert len(infos) == 3
    assert {tuple(i.input_ids) for i in infos} and all(all(s is not None for s in i.spans) for i in infos)
