"""The texts a task's queries, documents and other inputs send to the model are the ones mteb's own
wrappers send: the plain sentence-transformers wrapper for prompts by prompt key, mteb's Qwen3 loader
for instruction templates. Both sides run the real all-MiniLM-L6-v2 (nothing is mocked)."""

from __future__ import annotations

import pytest

import fairpos_tiny_tasks

TEXTS = ["Which pastry won the baker a prize?", "The harbour wakes before dawn."]
pytestmark = pytest.mark.usefixtures("tiny_tasks")
E5_STYLE = {"query": "query: ", "document": "passage: ", "FairPosTinyRetrieval-query": "q: ", "Clustering": "topic: "}


@pytest.fixture(scope="module")
def tiny_tasks():
    """mteb checks prompt keys against its task registry: the tiny task's own key must be known."""
    fairpos_tiny_tasks.register()


def _sent(encoder, prompt_type) -> list[str]:
    """The texts (prompt included) the model tokenizes when mteb encodes `TEXTS` for the tiny retrieval task."""
    from datasets import Dataset
    from torch.utils.data import DataLoader

    seen: list[str] = []
    model = encoder.model
    original = model.preprocess

    def spy(inputs, *args, **kwargs):
        seen.extend((kwargs.get("prompt") or "") + text for text in inputs)
        return original(inputs, *args, **kwargs)

    model.preprocess = spy
    try:
        encoder.encode(DataLoader(Dataset.from_dict({"text": TEXTS}), batch_size=2),
                       task_metadata=fairpos_tiny_tasks.FairPosTinyRetrieval.metadata, hf_split="test",
                       hf_subset="default", prompt_type=prompt_type, show_progress_bar=False)
    finally:
        del model.preprocess
    return sorted(seen)


def _prompt_types():
    from mteb.types import PromptType

    return (PromptType.query, PromptType.document, None)


@pytest.mark.parametrize("prompts", [None, E5_STYLE], ids=["checkpoint", "e5-style"])
def test_prompts_are_what_mtebs_wrapper_gives(minilm_dir, prompts):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.mteb_models import FairEncoder

    ours = FairEncoder("fair/test", calibration="b128_lhalf_a0.5", device="cpu", offline_weights=True, model_prompts=prompts)
    with pytest.warns(UserWarning) if prompts else _nothing():  # mteb says the checkpoint's prompts are replaced
        mtebs = SentenceTransformerEncoderWrapper(SentenceTransformer(minilm_dir, device="cpu"), model_prompts=prompts)
    for prompt_type in _prompt_types():
        sent = _sent(ours, prompt_type)
        assert sent == _sent(mtebs, prompt_type), prompt_type
        prompt = ours.prompt_for(fairpos_tiny_tasks.FairPosTinyRetrieval.metadata, prompt_type) or ""
        assert sent == sorted(prompt + text for text in TEXTS)  # what the probe tokenizes is what mteb sends


def test_instructions_are_what_mtebs_qwen3_loader_gives(minilm_dir):
    from mteb.models.model_implementations.qwen3_models import q3e_instruct_loader

    from mteb_fairpos.mteb_models import FairInstructEncoder

    ours = FairInstructEncoder("fair/test", calibration="b128_lhalf_a0.5", device="cpu", offline_weights=True, instructions="qwen3")
    mtebs = q3e_instruct_loader(minilm_dir, revision=None, device="cpu")
    for prompt_type in _prompt_types():
        sent = _sent(ours, prompt_type)
        assert sent == _sent(mtebs, prompt_type), prompt_type
        prompt = ours.prompt_for(fairpos_tiny_tasks.FairPosTinyRetrieval.metadata, prompt_type) or ""
        assert sent == sorted(prompt + text for text in TEXTS)
    assert _sent(ours, _prompt_types()[0])[0].startswith("Instruct: ")  # the template did apply


def _nothing():
    import contextlib

    return contextlib.nullcontext()
