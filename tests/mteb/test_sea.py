"""Segment Embed Average: chunking, chunk averaging, unchanged queries, mteb model entries."""

from __future__ import annotations

import json
import re
import sys

import mteb
import numpy as np
import pytest
from retrieval_check import FIXTURES

from mteb_fairpos.sea import (
    SEA_BASE_MODELS,
    SEA_MODELS,
    Chunker,
    ChunkingFallbackWarning,
    SegmentEmbedAverage,
    average_by_owner,
    pack,
    sea_model_meta,
    split_sentences,
)
from mteb_fairpos.tasks.posq import FineWebPosQ

LONG_DOC = (
    "Honey bees live in colonies ruled by a single queen. Worker bees gather nectar from flowers all day. "
    "They turn the nectar into honey inside the hive. " * 6
    + "Volcanoes form where molten rock rises through the crust of the earth. Lava flows can destroy whole "
    "villages. Ash clouds ground aircraft for days. " * 6
)


@pytest.fixture(scope="module")
def encoder(minilm):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(minilm)


def _encode(model, texts, prompt_type):
    from datasets import Dataset
    from torch.utils.data import DataLoader

    from mteb.types import PromptType

    loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=4)
    return np.asarray(model.encode(loader, task_metadata=FineWebPosQ.metadata, hf_split="test", hf_subset="default",
                                   prompt_type=PromptType(prompt_type)))


def test_regex_splitter_and_packing_are_deterministic():
    assert split_sentences("One. Two!  Three?\nFour\n\nFive。六") == ["One.", "Two!", "Three?", "Four", "Five。", "六"]
    assert split_sentences("   ") == []
    assert pack(["aaaa", "bb", "cccccc", "d"], 6, len) == ["aaaa bb", "cccccc", "d"]
    assert pack(["toolongpiece"], 3, len) == ["toolongpiece"]  # never dropped, never cut


@pytest.mark.parametrize("method", ["semantic", "sentence", "regex"])
def test_chunkers_cover_the_document_within_the_budget(method, minilm):
    chunker = Chunker(method, max_tokens=64, tokenizer=minilm.tokenizer, embedding_model=minilm)
    assert chunker.method == method
    chunks = chunker(LONG_DOC)
    assert len(chunks) >= 2
    assert " ".join(chunks).split() == LONG_DOC.split()  # every word kept, in order
    lengths = [len(minilm.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in chunks]
    assert max(lengths) <= 64 + 8  # chonkie counts its own way; allow a sentence-boundary slack
    assert chunker("") == [""] and chunker("   ") == ["   "]
    assert chunker(LONG_DOC) == chunks  # deterministic
    with pytest.raises(TypeError):
        chunker(None)


def test_fallbacks_are_announced(monkeypatch, minilm):
    with pytest.warns(ChunkingFallbackWarning, match="sentence-transformers model"):
        assert Chunker("semantic", tokenizer=minilm.tokenizer).method == "sentence"
    monkeypatch.setitem(sys.modules, "chonkie", None)  # as if chonkie were not installed
    with pytest.warns(ChunkingFallbackWarning, match="chonkie is not installed"):
        assert Chunker("semantic", embedding_model=minilm).method == "regex"
    with pytest.raises(ValueError, match="unknown chunking method"):
        Chunker("paragraphs")
    with pytest.raises(ValueError, match="positive"):
        Chunker("regex", max_tokens=0)


def test_documents_are_chunk_means_and_queries_are_unchanged(encoder, minilm):
    sea = SegmentEmbedAverage(encoder, method="sentence", max_tokens=48)
    docs = [LONG_DOC, "A single short sentence about tea."]
    got = _encode(sea, docs, "document")
    chunks = sea.chunker(LONG_DOC)
    assert len(chunks) >= 3
    own = minilm.encode(chunks, convert_to_numpy=True).mean(axis=0)
    np.testing.assert_allclose(got[0], own, atol=1e-5)
    np.testing.assert_allclose(got[1], minilm.encode(docs[1], convert_to_numpy=True), atol=1e-5)
    plain = _encode(encoder, [LONG_DOC], "document")[0]
    assert not np.allclose(got[0], plain, atol=1e-3)  # averaging really changed the long document
    queries = ["where do bees store honey?", "what grounds aircraft?"]
    np.testing.assert_allclose(_encode(sea, queries, "query"), _encode(encoder, queries, "query"), atol=1e-6)
    assert sea.mteb_model_meta.name.startswith("sea/")


def test_default_budget_is_the_model_maximum(encoder, minilm):
    sea = SegmentEmbedAverage(encoder, method="regex")
    assert sea.chunker.max_tokens == minilm.max_seq_length - 2



def test_a_loaded_sentence_transformer_is_wrapped_as_mteb_wraps_one(encoder, minilm):
    """The README's ``SegmentEmbedAverage(model)``: a plain SentenceTransformer failed on mteb's encode arguments."""
    docs = [LONG_DOC, "A single short sentence about tea."]
    wrapped = SegmentEmbedAverage(minilm, method="regex")
    np.testing.assert_array_equal(_encode(wrapped, docs, "document"), _encode(SegmentEmbedAverage(encoder, method="regex"), docs, "document"))
    assert wrapped.mteb_model_meta.name.startswith("sea/")


@pytest.mark.parametrize(("base", "message"), [(None, "got NoneType"), ("all-MiniLM-L6-v2", "got str")])
def test_a_base_that_cannot_encode_is_refused_when_made(base, message):
    with pytest.raises(TypeError, match=f"base must be an mteb encoder .* or a SentenceTransformer; {message}"):
        SegmentEmbedAverage(base, method="regex")


def test_chunks_longer_than_the_model_reads_are_refused(encoder, minilm):
    """A budget above the model's length cut every long chunk, losing its end unseen."""
    with pytest.raises(ValueError, match=f"max_tokens=10000: the base model embeds at most {minilm.max_seq_length - 2} tokens"):
        SegmentEmbedAverage(encoder, method="regex", max_tokens=10000)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer, got '64'"):
        SegmentEmbedAverage(encoder, method="regex", max_tokens="64")


@pytest.mark.parametrize(("chunker", "shown"), [(lambda text: [], "list []"), (lambda text: text, "str 'A single"),
                                                (lambda text: None, "NoneType None"), (lambda text: [b"x"], "list [b'x']")])
def test_a_chunker_that_returns_no_list_of_strings_is_named(encoder, chunker, shown):
    """An empty list failed with an IndexError; a string was embedded character by character."""
    sea = SegmentEmbedAverage(encoder, chunker=chunker)
    with pytest.raises(ValueError, match=f"the chunker gave document 0 {re.escape(shown)}.*a chunker returns a non-empty list"):
        _encode(sea, ["A single short sentence about tea."], "document")

def test_average_by_owner():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], dtype=np.float32)
    np.testing.assert_allclose(average_by_owner(vectors, np.array([0, 0, 1]), 2), [[0.5, 0.5], [2.0, 2.0]])
    with pytest.raises(ValueError, match="no chunk"):
        average_by_owner(vectors, np.array([0, 0, 2]), 3)
    with pytest.raises(ValueError, match="chunk vectors"):
        average_by_owner(vectors, np.array([0, 1]), 2)


def test_sea_on_a_retrieval_task(encoder):
    sea = SegmentEmbedAverage(encoder, method="semantic")
    scores = mteb.evaluate(sea, FineWebPosQ(data_dir=FIXTURES / "fineweb_posq"), cache=None,
                           co2_tracker=False).task_results[0].scores["test"][0]
    assert set(scores["position_counts"]) == {"begin", "middle", "end"}
    assert 0.0 <= scores["harmonic_mean"] <= 1.0


def test_model_meta_entries(encoder):
    names = [m.name for m in SEA_MODELS]
    assert names == [f"sea/{b}" for b in SEA_BASE_MODELS]
    meta = SEA_MODELS[0]
    assert meta.adapted_from == SEA_BASE_MODELS[0] and meta.loader_kwargs["method"] == "semantic"
    json.dumps(meta.to_dict())  # goes into result folders
    # loading builds the base through its own ModelMeta, then wraps it
    base_meta = encoder.mteb_model_meta.model_copy(
        update={"name": "offline/all-MiniLM-L6-v2", "loader": lambda name, revision=None, **kw: encoder})
    sea_meta = sea_model_meta(base_meta, method="regex", max_tokens=100)
    assert sea_meta.name == "sea/offline/all-MiniLM-L6-v2"
    model = sea_meta.load_model()
    assert isinstance(model, SegmentEmbedAverage) and model.base is encoder
    assert model.chunker.method == "regex" and model.chunker.max_tokens == 100
    assert model.mteb_model_meta.name == "sea/offline/all-MiniLM-L6-v2"
    with pytest.raises(ValueError, match="unknown chunking method"):
        sea_model_meta(base_meta, method="words")


@pytest.mark.usefixtures("minilm_dir")
def test_registered_sea_models_share_the_fair_base_table(monkeypatch):
    """sea/* load through the uncalibrated twin: offline MiniLM at 512 tokens, remote code refused."""
    from mteb_fairpos.mteb_models import BASE_MODELS, FairEncoder, RemoteCodeRefused
    from mteb_fairpos.mteb_plugin import register

    register()
    assert [m.name for m in SEA_MODELS] == [f"sea/{b.upstream}" for b in BASE_MODELS]
    gte = mteb.get_model_meta("sea/Alibaba-NLP/gte-multilingual-base")
    assert gte.loader_kwargs["method"] == "semantic"
    twin = mteb.get_model_meta("fair-off/gte-multilingual-base")
    assert gte.revision == twin.revision and gte.adapted_from == "Alibaba-NLP/gte-multilingual-base"
    monkeypatch.delenv("MTEB_FAIRPOS_TRUST_REMOTE_CODE", raising=False)
    with pytest.raises(RemoteCodeRefused):  # refused before anything is downloaded, as for fair/*
        mteb.get_model("sea/Alibaba-NLP/gte-multilingual-base", trust_remote_code=True)

    sea = mteb.get_model("sea/sentence-transformers/all-MiniLM-L6-v2", method="regex")  # no hub: offline weights
    assert isinstance(sea, SegmentEmbedAverage) and isinstance(sea.base, FairEncoder)
    assert sea.base.calibration is None and sea.base.model.max_seq_length == 512
    assert sea.chunker.max_tokens == 510
    twin = mteb.get_model("fair-off/all-MiniLM-L6-v2")
    assert twin.model.max_seq_length == sea.base.model.max_seq_length  # equal terms with the plain model
    scores = mteb.evaluate(sea, FineWebPosQ(data_dir=FIXTURES / "fineweb_posq"), cache=None,
                           co2_tracker=False).task_results[0].scores["test"][0]
    assert 0.0 <= scores["harmonic_mean"] <= 1.0
