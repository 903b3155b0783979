"""PosIR's hooks share nothing through the task: each subset's positions travel with its call."""

from __future__ import annotations

import copy

import pytest

from mteb_fairpos.tasks.posir import PosIR
from mteb_fairpos.tasks.posir.task import QUERY_SCORES, position_scores


def test_position_scores_place_each_query_and_count_the_rest():
    positions = {"q1": ("Q1", "0.00-0.05"), "q2": ("Q1", "0.00-0.05"), "q3": ("Q4", "0.95-1.00"), "q4": None}
    out = position_scores({"q1": 1.0, "q2": 0.5, "q3": 0.25, "q4": 1.0, "q5": 0.0}, positions)
    assert out["cells"]["Q1"] == {"0.00-0.05": [2, 1.5]} and out["cells"]["Q4"] == {"0.95-1.00": [1, 0.25]}
    assert out["n_queries"] == 5 and out["unplaced_queries"] == 2  # q4 has no usable place, q5 none at all
    assert out["position_0.00-0.05"] == 0.75 and out["position_0.95-1.00"] == 0.25
    assert out["psi"] == pytest.approx(1 - 0.25 / 0.75)


def test_task_specific_scores_read_nothing_left_on_the_task():
    task = PosIR(languages="deu", domains="finance_economics")
    before = copy.deepcopy(vars(task))
    scores = {"a": {"ndcg_cut_10": 0.5}, "b": {"ndcg_cut_10": 1.0}}
    out = task.task_specific_scores(scores, {"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d3": 1}}, {}, "test", "x")
    assert out == {QUERY_SCORES: {"a": 0.5, "b": 1.0, "c": 0.0}}  # c was not scored by pytrec_eval: 0
    assert vars(task).keys() == before.keys() and vars(task)["hf_subsets"] == before["hf_subsets"]


def test_the_corpus_cache_encoder_forwards_only_what_it_declares(minilm):
    """The cache's encoder is an mteb encoder of its own: documents of the same corpus come from the cache,
    queries and the similarity from the wrapped model, and nothing else is reached through it."""
    import numpy as np
    from datasets import Dataset
    from mteb.models.models_protocols import EncoderProtocol
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from mteb.types import PromptType
    from torch.utils.data import DataLoader

    import fairpos_tiny_tasks
    from mteb_fairpos.tasks.posir.corpus_cache import CorpusCache

    model = SentenceTransformerEncoderWrapper(minilm)
    cache = CorpusCache()
    texts = DataLoader(Dataset.from_dict({"text": ["The harbour wakes.", "A pear tree grows."]}), batch_size=2)
    where = {"task_metadata": fairpos_tiny_tasks.FairPosTinyRetrieval.metadata, "hf_split": "test",
             "hf_subset": "x", "show_progress_bar": False}
    first, second = cache.wrap(model, ("corpus-a",)), cache.wrap(model, ("corpus-a",))
    assert isinstance(first, EncoderProtocol) and first.mteb_model_meta is model.mteb_model_meta
    documents = first.encode(texts, prompt_type=PromptType.document, **where)
    assert second.encode(texts, prompt_type=PromptType.document, **where) is documents and cache.hits == 1
    queries = second.encode(texts, prompt_type=PromptType.query, **where)
    np.testing.assert_array_equal(queries, model.encode(texts, prompt_type=PromptType.query, **where))
    np.testing.assert_array_equal(np.asarray(first.similarity(queries, documents)),
                                  np.asarray(model.similarity(queries, documents)))
    other = cache.wrap(model, ("corpus-b",))
    assert other.encode(texts, prompt_type=PromptType.document, **where) is not documents and cache.hits == 1
    assert not hasattr(first, "fps")  # the wrapped model's own settings are not reached through the cache
