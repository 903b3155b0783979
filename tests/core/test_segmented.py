"""mteb_fairpos.segmented: the one path from a segmented document to its vector, spans and late chunks."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
from mteb_fairpos.segmented import (
    COVERAGE_FULL,
    document_prompt,
    encode_segmented,
    find_sentence_transformer,
    model_text,
    token_layouts,
)

SEGMENTS = ["The harbour master counted twelve boats before noon.",
            "Snow covered the northern pass for most of March.",
            "A small bakery opened beside the old town hall."]


def _document(segments):
    text, spans, start = " ".join(segments), [], 0
    for segment in segments:
        spans.append((start, start + len(segment)))
        start += len(segment) + 1
    return text, spans


def test_document_prompt_is_sentence_transformers_rule(minilm):
    original = minilm.prompts
    try:
        minilm.prompts = {"query": "q: ", "document": "", "passage": "p: "}  # "document" wins, even when empty
        assert document_prompt(minilm) == ""
        minilm.prompts = {"query": "q: ", "passage": "p: "}
        assert document_prompt(minilm) == "p: "
        text = "a sentence about boats"
        assert np.allclose(minilm.encode_document([text]), minilm.encode([text], prompt=document_prompt(minilm)), atol=1e-6)
    finally:
        minilm.prompts = original


def test_vectors_and_late_chunks_from_one_pass_match_sentence_transformers(minilm):
    text, spans = _document(SEGMENTS)
    model = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=8, strength=1.0))
    encoded = encode_segmented(model, [text], [spans], late_chunks=True)
    assert np.allclose(encoded.vectors[0], model.encode_document([text])[0], atol=1e-6)
    [layout] = encoded.layouts
    assert layout.coverage == (COVERAGE_FULL,) * 3 and encoded.aligned == [True]
    tokens = model.encode_document([text], output_value="token_embeddings")[0].numpy()
    for span, chunk in zip(layout.spans, encoded.late_chunks[0]):
        expected = tokens[span[0]:span[1]].mean(axis=0)
        assert np.allclose(chunk, expected / np.linalg.norm(expected), atol=1e-6)
    plain = encode_segmented(model, [text], [spans], calibrated=False)
    assert np.allclose(plain.vectors[0], minilm.encode_document([text])[0], atol=1e-6)
    assert not np.allclose(plain.vectors[0], encoded.vectors[0], atol=1e-4)  # calibration acts on this text


def test_the_two_span_rules_and_truncation(minilm):
    text, spans = _document(SEGMENTS)
    tokenizer = minilm.tokenizer
    every = token_layouts(tokenizer, [text], [spans], 512, straddling="every")[0]
    first = token_layouts(tokenizer, [text], [spans], 512, straddling="first", strip=True)[0]
    assert every.spans == first.spans  # WordPiece never straddles: the rules agree here
    length = len(every.input_ids)
    cut = token_layouts(tokenizer, [text], [spans], length - 4)[0]
    assert cut.coverage == ("full", "full", "partial") and cut.n_tokens == length and cut.n_tokens_exact
    gone = token_layouts(tokenizer, [text], [spans], 8)[0]
    assert gone.coverage == ("partial", "cut", "cut") and gone.spans[1:] == (None, None)


def test_a_long_text_is_read_only_a_little_past_the_maximum(minilm):
    text = "word " * 50_000
    prefix = model_text(minilm.tokenizer, "", text, 256)
    assert len(prefix) < len(text) / 10
    assert minilm.tokenizer(prefix, truncation=True, max_length=256)["input_ids"] == \
        minilm.tokenizer(text, truncation=True, max_length=256)["input_ids"]


def test_the_sentence_transformer_behind_a_wrapper(minilm):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    assert find_sentence_transformer(minilm) is minilm
    assert find_sentence_transformer(SentenceTransformerEncoderWrapper(minilm)) is minilm
    assert find_sentence_transformer(object()) is None


def test_late_chunks_need_mean_pooling_and_segments(minilm):
    text, spans = _document(SEGMENTS)
    with pytest.raises(ValueError, match="need the segments"):
        encode_segmented(minilm, [text], late_chunks=True)
    cls = FairSentenceTransformer(minilm, CalibrationConfig(pooling="cls"))
    with pytest.raises(ValueError, match="mean-pooled models only"):
        encode_segmented(cls, [text], [spans], late_chunks=True)
