"""The mteb encoder: calibrated documents, uncalibrated queries, prompts, pass-through, remote code."""

from __future__ import annotations

import numpy as np
import pytest

import fairpos_tiny_tasks

LONG = [fairpos_tiny_tasks._document(topic, group) for topic, group in zip(fairpos_tiny_tasks.TOPICS, ("begin", "end"))]
SHORT = ["Which pastry won the baker a prize?", "How old is the pear tree?", "Who measured the glacier?"]
pytestmark = pytest.mark.usefixtures("minilm_dir")  # every model here is all-MiniLM-L6-v2, loaded by its hub id


@pytest.fixture(scope="module")
def encoders():
    import mteb

    from mteb_fairpos.mteb_models import LoadedWeights, build_encoder
    from mteb_fairpos.mteb_plugin import register

    register()
    fairpos_tiny_tasks.register()
    weights = LoadedWeights()  # one copy of the weights for both
    fair = build_encoder(mteb.get_model_meta("fair/all-MiniLM-L6-v2"), weights=weights, device="cpu")
    twin = build_encoder(mteb.get_model_meta("fair-off/all-MiniLM-L6-v2"), weights=weights, device="cpu")
    return fair, twin


def _loader(texts):
    from datasets import Dataset
    from torch.utils.data import DataLoader

    return DataLoader(Dataset.from_dict({"text": texts}), batch_size=2)


def _encode(encoder, texts, prompt_type, **kwargs):
    from mteb.types import PromptType

    meta = fairpos_tiny_tasks.FairPosTinyRetrieval.metadata
    kind = {"query": PromptType.query, "document": PromptType.document, None: None}[prompt_type]
    kwargs.setdefault("show_progress_bar", False)
    return np.asarray(encoder.encode(_loader(texts), task_metadata=meta, hf_split="test", hf_subset="default",
                                     prompt_type=kind, **kwargs))


def test_loaded_through_the_same_code_path(encoders):
    fair, twin = encoders
    assert type(fair) is type(twin) and type(fair.model) is type(twin.model)
    # the config is in the name, the revision is the weights' commit
    assert fair.mteb_model_meta.name == "fair/all-MiniLM-L6-v2" and twin.mteb_model_meta.name == "fair-off/all-MiniLM-L6-v2"
    assert fair.mteb_model_meta.revision == twin.mteb_model_meta.revision == "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    assert str(fair.calibration) == "b128_lhalf_a0.5" and twin.calibration is None
    assert fair.calibrated_sides == {"document", "other"} and twin.calibrated_sides == frozenset()
    assert fair.model.max_seq_length == twin.model.max_seq_length == 512  # the entry loads MiniLM at 512


def test_documents_calibrated_queries_not(encoders):
    fair, twin = encoders
    docs_fair, docs_twin = _encode(fair, LONG, "document"), _encode(twin, LONG, "document")
    assert docs_fair.shape == docs_twin.shape == (2, 384)
    assert np.abs(docs_fair - docs_twin).max() > 1e-3
    # long queries too: they are never calibrated, so fair and twin agree
    np.testing.assert_allclose(_encode(fair, LONG, "query"), _encode(twin, LONG, "query"), atol=1e-5)
    np.testing.assert_allclose(_encode(fair, SHORT, "query"), _encode(twin, SHORT, "query"), atol=1e-5)
    # inputs without a prompt type (STS, clustering, the permutation probe) count as documents
    assert np.abs(_encode(fair, LONG, None) - docs_twin).max() > 1e-3
    # inputs shorter than a basket are left as they are (docs/method.md#s1-2)
    np.testing.assert_allclose(_encode(fair, SHORT, "document"), _encode(twin, SHORT, "document"), atol=1e-5)


def test_calibrated_sides_are_configurable():
    import mteb

    twin = mteb.get_model("fair-off/all-MiniLM-L6-v2", device="cpu")
    queries_too = mteb.get_model("fair/all-MiniLM-L6-v2", device="cpu", calibrate_queries=True, calibrate_other=False)
    assert queries_too.calibrated_sides == {"document", "query"}
    assert queries_too.mteb_model_meta.experiment_kwargs == {"calibrate_queries": True, "calibrate_other": False}
    assert np.abs(_encode(queries_too, LONG, "query") - _encode(twin, LONG, "query")).max() > 1e-3
    np.testing.assert_allclose(_encode(queries_too, LONG, None), _encode(twin, LONG, None), atol=1e-5)


def test_prompts_and_pass_through(encoders, monkeypatch):
    from mteb.types import PromptType

    from mteb_fairpos.mteb_models import FairEncoder, FairInstructEncoder

    fair, _ = encoders
    meta = fairpos_tiny_tasks.FairPosTinyRetrieval.metadata
    e5_style = FairEncoder("fair/test", calibration="b128_lhalf_a0.5", device="cpu", offline_weights=True,
                           model_prompts={"query": "query: ", "document": "passage: ", "FairPosTinyRetrieval-query": "q: "})
    assert e5_style.prompt_for(meta, PromptType.document) == "passage: "
    assert e5_style.prompt_for(meta, PromptType.query) == "q: "  # task-specific prompt wins (mteb's order)
    expected = e5_style.model.encode_query(["q: " + SHORT[0]], show_progress_bar=False)
    np.testing.assert_allclose(_encode(e5_style, SHORT[:1], "query"), expected, atol=1e-6)

    qwen_style = FairInstructEncoder("fair/test", calibration="off", device="cpu", offline_weights=True, instructions="qwen3")
    assert qwen_style.prompt_for(meta, PromptType.query).startswith("Instruct: ")
    assert qwen_style.prompt_for(meta, PromptType.query).endswith("\nQuery:")
    assert qwen_style.prompt_for(meta, PromptType.document) == ""

    seen = {}
    original = fair.model.encode_document

    def spy(texts, **kwargs):
        seen.update(kwargs, count=len(texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(fair.model, "encode_document", spy)
    _encode(fair, LONG, "document", batch_size=3, show_progress_bar=False)
    assert seen["batch_size"] == 3 and seen["show_progress_bar"] is False and seen["count"] == 2


def test_remote_code_needs_explicit_opt_in(monkeypatch):
    from mteb_fairpos.mteb_models import ENV_TRUST_REMOTE_CODE, FairEncoder, RemoteCodeRefused

    monkeypatch.delenv(ENV_TRUST_REMOTE_CODE, raising=False)
    with pytest.raises(RemoteCodeRefused, match=ENV_TRUST_REMOTE_CODE):
        FairEncoder("fair/test", calibration="off", offline_weights=True, trust_remote_code=True)
    with pytest.raises(RemoteCodeRefused):
        FairEncoder("fair/test", calibration="off", offline_weights=True, model_kwargs={"trust_remote_code": True})
    monkeypatch.setenv(ENV_TRUST_REMOTE_CODE, "1")
    assert FairEncoder("fair/test", calibration="off", device="cpu", offline_weights=True, trust_remote_code=True).calibration is None


def test_shared_weights_share_one_model():
    from mteb_fairpos.mteb_models import FairEncoder, LoadedWeights

    weights = LoadedWeights()
    a = FairEncoder("fair/test", calibration="b64_llast_a1", device="cpu", offline_weights=True, weights=weights)
    b = FairEncoder("fair/test", calibration="off", device="cpu", offline_weights=True, weights=weights)
    longer = FairEncoder("fair/test", calibration="off", device="cpu", offline_weights=True, max_seq_length=512,
                         weights=weights)
    assert a.model[0] is b.model[0]
    assert a.model.plan is not None and b.model.plan is None
    assert longer.model[0] is not a.model[0]  # a different maximum length is a different model
    assert (a.model.max_seq_length, longer.model.max_seq_length) == (256, 512)
    assert len(weights) == 2
    alone = FairEncoder("fair/test", calibration="off", device="cpu", offline_weights=True)
    assert alone.model[0] is not a.model[0]  # without the object, nothing is shared


def test_a_fair_model_pickles_with_its_calibration():
    """Worker processes (multi-process pools, Ray actors) receive models by pickling."""
    import pickle

    import mteb

    from mteb_fairpos.mteb_plugin import register

    register()
    encoder = mteb.get_model("fair/all-MiniLM-L6-v2", device="cpu", calibrate_queries=True)
    copy = pickle.loads(pickle.dumps(encoder))
    assert type(copy.model) is type(encoder.model) and copy.model.calibrate_queries
    assert str(copy.calibration) == str(encoder.calibration) and copy.model.plan is not None
    text = " ".join(["The harbour wakes before dawn and the boats come in."] * 40)
    for side in ("document", "query"):
        np.testing.assert_allclose(_encode(copy, [text], side), _encode(encoder, [text], side), atol=1e-6)
    with copy.model.calibration_disabled():  # the copy really calibrates
        plain = copy.model.encode_document([text])
    assert not np.allclose(_encode(copy, [text], "document"), plain, atol=1e-4)


# ---------------------------------------------------------------------------------- loader arguments
def test_a_calibration_other_than_the_names_is_refused(encoders):
    """mteb.get_model merges loader arguments over the entry's: fair-off/ ran calibrated, and still paired as the twin."""
    import mteb

    with pytest.raises(ValueError, match=r"fair-off/all-MiniLM-L6-v2 stands for calibration off; for b32_lhalf_a1, load "
                                         r"fair/all-MiniLM-L6-v2-b32_lhalf_a1 \(the calibration is part of the name\)"):
        mteb.get_model("fair-off/all-MiniLM-L6-v2", calibration="b32_lhalf_a1", device="cpu")
    with pytest.raises(ValueError, match="fair/all-MiniLM-L6-v2 stands for calibration b128_lhalf_a0.5; for off, load "
                                         "fair-off/all-MiniLM-L6-v2"):
        mteb.get_model("fair/all-MiniLM-L6-v2", calibration="off", device="cpu")
    same = mteb.get_model("fair/all-MiniLM-L6-v2", calibration="b128_lhalf_a0.5", device="cpu")  # the name's own
    assert str(same.calibration) == "b128_lhalf_a0.5"
    from mteb_fairpos.mteb_models import FairEncoder

    bare = FairEncoder("all-MiniLM-L6-v2", calibration="off", device="cpu", offline_weights=True)  # no registry name
    assert bare.calibration is None


@pytest.mark.parametrize("flag, value", [("calibrate_queries", "false"), ("calibrate_other", 0.0)])
def test_side_flags_are_booleans(flag, value):
    """'false' is true: query calibration ran."""
    from mteb_fairpos.mteb_models import FairEncoder

    with pytest.raises(TypeError, match=f"fair/test: {flag} must be True or False, got {value!r}"):
        FairEncoder("fair/test", device="cpu", offline_weights=True, **{flag: value})


def test_an_instruction_model_refuses_prompts_it_would_not_use():
    """FairInstructEncoder stored them and sent mteb's instruction alone, under a result folder named after them."""
    from mteb_fairpos.mteb_models import FairInstructEncoder

    with pytest.raises(ValueError, match=r"fair/test takes task instructions \(qwen3\), not prompts: document_prompt"):
        FairInstructEncoder("fair/test", device="cpu", offline_weights=True, instructions="qwen3", document_prompt="p: ")


def test_the_revision_is_the_weights_commit_never_a_config():
    """A config given as the revision (earlier releases' place for it) ran the default config instead."""
    from mteb_fairpos.mteb_models import FairEncoder

    with pytest.raises(ValueError, match="revision 'b32_llast_a1' is a calibration config; give it as calibration="):
        FairEncoder("fair/test", "b32_llast_a1", device="cpu", offline_weights=True)


def test_another_checkpoint_named_is_loaded_not_the_bundled_minilm(tmp_path, minilm_dir):
    """The bundled weights stood in for any hub_id given to the MiniLM entry, recorded as an experiment all the same."""
    import mteb
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(minilm_dir, device="cpu", truncate_dim=16).save(str(tmp_path / "other"))
    encoder = mteb.get_model("fair/all-MiniLM-L6-v2", hub_id=str(tmp_path / "other"), device="cpu")
    assert encoder.model.truncate_dim == 16


def test_loader_options_are_checked_as_the_model_checks_them():
    """Each failed deep in torch, sentence-transformers or int()."""
    import mteb
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda': cuda was asked for but torch sees no CUDA device"):
            mteb.get_model("fair/all-MiniLM-L6-v2", device="cuda")
    if not torch.accelerator.is_available():  # what `mteb run --device 0` passes
        with pytest.raises(ValueError, match="device 0: a bare index names an accelerator device, and torch sees none"):
            mteb.get_model("fair/all-MiniLM-L6-v2", device=0)
    with pytest.raises(ValueError, match="max_seq_length must be a whole number of tokens, got 'long'"):
        mteb.get_model("fair/all-MiniLM-L6-v2", max_seq_length="long", device="cpu")
    with pytest.raises(TypeError, match="'calibrate_querys': not an option of FairEncoder"):
        mteb.get_model("fair/all-MiniLM-L6-v2", calibrate_querys=True, device="cpu")
    assert mteb.get_model("fair/all-MiniLM-L6-v2", embed_dim=384, device="cpu").model.truncate_dim == 384  # mteb's name


def test_a_folder_fair_sentence_transformer_saved_loads_where_a_checkpoint_is_read(tmp_path, minilm):
    """The fair/ loader, attention_profile and the CLI read checkpoints with a plain SentenceTransformer, which asked
    for trust_remote_code (an option none of them takes) before a saved calibration step."""
    import mteb

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.profile import attention_profile

    FairSentenceTransformer(minilm, CalibrationConfig(basket_size=32)).save(str(tmp_path / "saved"))
    encoder = mteb.get_model("fair/all-MiniLM-L6-v2", hub_id=str(tmp_path / "saved"), device="cpu")
    assert str(encoder.model.calibration) == "b128_lhalf_a0.5"  # the name's calibration, not the folder's
    np.testing.assert_allclose(encoder.model.encode_query(SHORT), minilm.encode_query(SHORT), atol=1e-6)
    saved = attention_profile(str(tmp_path / "saved"), [LONG[0]], basket_size=32)
    plain = attention_profile(minilm, [LONG[0]], basket_size=32)
    np.testing.assert_allclose(saved.baskets, plain.baskets, atol=1e-6)  # the same weights, measured uncalibrated
