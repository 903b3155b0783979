"""FairSentenceTransformer on the real all-MiniLM-L6-v2 weights (offline)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, TruncationWarning

SEGMENTS = [
    "The harbour authority announced that the old lighthouse will be restored next spring, "
    "with volunteers repainting the tower and engineers replacing the rusted lantern room. " * 2,
    "In the regional football league, the home side won a tense match after a late penalty, "
    "and their coach praised the young goalkeeper who saved two shots in the final minutes. " * 2,
    "A bakery on the main square now sells bread made from an heirloom wheat variety, "
    "which local farmers revived after finding seeds in an abandoned barn near the river. " * 2,
]
LONG = " ".join(SEGMENTS)
SHORT = "A short query about lighthouses."


@pytest.fixture(scope="module")
def fair(minilm):
    return FairSentenceTransformer(minilm, CalibrationConfig(basket_size=32, strength=1.0))


def test_wraps_a_loaded_model_without_copying_weights(minilm, fair):
    ours = dict(fair.named_parameters())
    for name, param in minilm.named_parameters():
        assert ours[name].data_ptr() == param.data_ptr()


def test_documents_are_calibrated_and_queries_are_not(minilm, fair):
    plain = minilm.encode([LONG, SHORT])
    documents = fair.encode_document([LONG, SHORT])
    queries = fair.encode_query([LONG, SHORT])
    assert np.abs(documents[0] - plain[0]).max() > 1e-2
    np.testing.assert_allclose(documents[1], plain[1], atol=1e-5)
    np.testing.assert_array_equal(queries, plain)


def test_short_inputs_are_unchanged(minilm, fair):
    np.testing.assert_array_equal(fair.encode_document([SHORT]), minilm.encode([SHORT]))


def test_plain_encode_follows_the_flag(minilm):
    config = CalibrationConfig(basket_size=32, strength=1.0)
    off = FairSentenceTransformer(minilm, config)
    on = FairSentenceTransformer(minilm, config, calibrate_encode=True)
    np.testing.assert_array_equal(off.encode([LONG]), minilm.encode([LONG]))
    np.testing.assert_allclose(on.encode([LONG]), off.encode_document([LONG]), atol=1e-6)


@pytest.mark.parametrize("calibration", [None, CalibrationConfig(strength=0.0, basket_size=8)])
def test_no_calibration_is_exactly_the_plain_model(minilm, calibration):
    model = FairSentenceTransformer(minilm, calibration)
    np.testing.assert_array_equal(model.encode_document([LONG, SHORT]), minilm.encode([LONG, SHORT]))


def test_embedding_is_the_same_alone_and_in_a_padded_batch(fair):
    alone = fair.encode_document([SEGMENTS[1]], convert_to_tensor=True)
    batch = fair.encode_document([LONG, SEGMENTS[1], SHORT], convert_to_tensor=True, batch_size=3)
    torch.testing.assert_close(batch[1], alone[0], atol=1e-5, rtol=1e-5)


def test_empty_list_gives_an_empty_matrix(fair):
    assert fair.encode_document([]).shape == (0, 384)
    assert fair.encode_document([], convert_to_tensor=True).shape == (0, 384)


def test_an_empty_batch_takes_the_calls_truncation_over_the_models(minilm_dir):
    model = FairSentenceTransformer(minilm_dir, truncate_dim=8, device="cpu")
    for options in ({}, {"truncate_dim": 16}, {"truncate_dim": 4}):
        assert model.encode_document([], **options).shape[1] == model.encode_document(["two words"], **options).shape[1]


@pytest.mark.parametrize("options", [{"truncate_dim": 8}, {"precision": "binary"}, {"precision": "int8"},
                                     {"truncate_dim": 16, "precision": "ubinary"}, {"convert_to_tensor": True, "truncate_dim": 8}])
def test_an_empty_batch_has_the_width_and_type_of_a_full_one(fair, options):
    """Batches are stacked: an empty one must join the others (it was float32 and 384 wide whatever was asked)."""
    empty, full = fair.encode_document([], **options), fair.encode_document(["two words", "three more words"], **options)
    assert type(empty) is type(full) and empty.dtype == full.dtype and tuple(empty.shape) == (0, full.shape[1])


def test_a_batch_size_that_is_no_count_is_named_and_numpy_counts_are_counts(fair):
    """1.5 failed inside tqdm; numpy's integers pass, as sentence-transformers takes them."""
    import numpy as np

    with pytest.raises(TypeError, match=r"batch_size must be a positive integer, got 1.5"):
        fair.encode_document(["a b"], batch_size=1.5)
    assert fair.encode_document(["a b"], batch_size=np.int64(4)).shape == (1, 384)


def test_an_empty_batch_follows_sentence_transformers_in_what_it_refuses_and_its_lists(fair):
    assert fair.encode_document([], output_value="token_embeddings") == [] == fair.encode_document([], convert_to_numpy=False)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        fair.encode_document([], batch_size=0)
    with pytest.raises(ValueError, match="Precision 'float16' is not supported"):
        fair.encode_document([], precision="float16")


def test_empty_string_is_embedded(fair):
    vector = fair.encode_document([""])
    assert vector.shape == (1, 384) and np.isfinite(vector).all()


@pytest.mark.parametrize("bad", [[LONG, 3], [None], {"text": LONG}, 42])
def test_non_string_items_are_refused_clearly(fair, bad):
    with pytest.raises(TypeError, match="expected a"):
        fair.encode_document(bad)


def test_truncation_is_reported_once_per_call(fair):
    too_long = LONG * 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fair.encode_document([too_long, too_long, SHORT], batch_size=1)
    reports = [w for w in caught if issubclass(w.category, TruncationWarning)]
    assert len(reports) == 1
    assert "2 input(s) exceeded the model's maximum of 256 tokens" in str(reports[0].message)


def test_truncation_is_counted_by_the_pass_not_by_tokenizing(fair):
    """Tokenizing alone counts nothing; the pass over the batch counts it once it is launched (so a GPU computes
    while the host counts), and a plain model takes the same features."""
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.attention import HOST_LAYOUT
    from mteb_fairpos.model import TRUNCATION, model_inputs

    with fair.tallying() as tally:
        features = fair.preprocess([LONG * 3, SHORT, LONG * 3], task="document")
        assert tally.truncated == 0
        with torch.inference_mode():
            fair.forward(dict(features), task="document")
    assert tally.truncated == 2
    with torch.inference_mode():
        inputs = model_inputs(features)  # what a plain model takes: the tokenizer's features, nothing of ours
        assert set(features) - set(inputs) == {HOST_LAYOUT, TRUNCATION}
        plain = SentenceTransformer.forward(fair, inputs, task="document")["sentence_embedding"]
        assert torch.equal(plain, fair.forward(dict(features), task="query")["sentence_embedding"])


@pytest.mark.parametrize("backend", ["tokenizers", "python"])
def test_truncation_count_at_the_limit(minilm_dir, backend):
    """A fast tokenizer's count comes from what truncation cut off (no second pass over the texts); a
    Python tokenizer's from re-tokenizing the rows that reached the limit, with the prompt's tokens
    added (a prompt that merges with the first word is counted once more there). On these inputs both
    agree: one exactly at the limit is whole, one token more is cut, and a prompt counts towards the limit."""
    import os

    from sentence_transformers import SentenceTransformer
    from transformers import BertTokenizerLegacy

    model = SentenceTransformer(minilm_dir, device="cpu")
    if backend == "python":
        model[0].processor = BertTokenizerLegacy(os.path.join(minilm_dir, "vocab.txt"))
    model.max_seq_length = 16  # 14 words of one token, plus [CLS] and [SEP]
    fair = FairSentenceTransformer(model, CalibrationConfig(basket_size=4, strength=1.0))
    at_limit, over = "a " * 14, "a " * 15

    def reported(texts, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fair.encode(texts, **kwargs)
        return [str(w.message) for w in caught if issubclass(w.category, TruncationWarning)]

    assert reported([at_limit, "b"]) == []
    assert reported([at_limit, over, over]) == [
        "2 input(s) exceeded the model's maximum of 16 tokens and were truncated; "
        "their embeddings cover only the first tokens."]
    assert len(reported([at_limit], prompt="a a ")) == 1
    # whitespace around a text that fits, with and without a prompt: the character offsets index the prompt and the
    # text exactly as given (a text stripped before tokenizing would shift them onto a kept letter)
    assert reported(["   " + at_limit.strip(), "\n" + at_limit]) == []
    assert reported(["  " + "a " * 12], prompt="a a ") == []


def test_no_warning_for_inputs_that_fit(fair):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        fair.encode_document([LONG, SHORT])


# ---------------------------------------------------------------------------------- like sentence-transformers
def test_save_and_load_keep_the_calibration(minilm, tmp_path):
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.model import CalibratedModelError

    config = CalibrationConfig(basket_size=64, layers="last", strength=1.0)
    model = FairSentenceTransformer(minilm, config, calibrate_queries=True)
    model.save(str(tmp_path / "saved"))
    again = FairSentenceTransformer(str(tmp_path / "saved"), device="cpu")
    assert again.calibration == config and again.calibrate_queries and not again.calibrate_encode
    np.testing.assert_array_equal(again.encode_document([LONG]), model.encode_document([LONG]))
    np.testing.assert_array_equal(again.encode_query([LONG]), model.encode_query([LONG]))
    assert not any(type(m).__name__ == "Calibration" for m in again)  # the marker is not part of the pipeline
    card = (tmp_path / "saved" / "README.md").read_text()
    assert "## Attention calibration (mteb-fairpos)" in card and "`b64_llast_a1`" in card
    with pytest.raises(ValueError, match="mteb_fairpos.model.Calibration"):  # sentence-transformers' own gate
        SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    with pytest.raises(CalibratedModelError, match=r"saved with mteb-fairpos attention calibration 'b64_llast_a1'.*"
                                                   r"FairSentenceTransformer\("):
        SentenceTransformer(str(tmp_path / "saved"), device="cpu", trust_remote_code=True)
    # an explicit config still wins; saving an uncalibrated model comes back uncalibrated
    assert FairSentenceTransformer(str(tmp_path / "saved"), CalibrationConfig(), device="cpu").calibration == CalibrationConfig()
    FairSentenceTransformer(minilm, None).save(str(tmp_path / "plain"))
    assert FairSentenceTransformer(str(tmp_path / "plain"), device="cpu").plan is None



@pytest.mark.parametrize(("settings", "message"), [
    (None, "no calibration settings (the file is missing, or has no 'calibration' key)"),
    ('{"calibrate_encode": false}', "no calibration settings (the file is missing, or has no 'calibration' key)"),
    ('{"calibration": null}', "'calibration' must be a config's text form or 'none', got None"),
    ('{"calibration": "b12x"}', "cannot parse calibration config 'b12x'"),
    ('{"calibration": ', "the calibration settings do not read (Expecting value"),
    ('{"calibration": "none", "calibrate_queries": "yes"}', "'calibrate_queries' must be true or false, got 'yes'"),
])
def test_a_saved_calibration_that_is_missing_or_damaged_is_named_not_dropped(minilm, tmp_path, settings, message):
    """The folder lists the calibration step: a model that came back plain would embed uncalibrated, unseen."""
    from mteb_fairpos.config import ConfigError

    FairSentenceTransformer(minilm, CalibrationConfig(basket_size=64)).save(str(tmp_path / "saved"))
    file = tmp_path / "saved" / "3_Calibration" / "config.json"
    assert file.is_file()
    if settings is None:
        file.unlink()
    else:
        file.write_text(settings)
    with pytest.raises(ConfigError, match=f"^{re.escape(str(file))}: {re.escape(message)}"):
        FairSentenceTransformer(str(tmp_path / "saved"), device="cpu")


@pytest.mark.parametrize(("model", "error", "message"), [
    ("./no-such-model", FileNotFoundError, "cannot load the model './no-such-model': no such folder."),
    (None, TypeError, "model must be a model name or path, or a loaded SentenceTransformer; got NoneType."),
    ("", ValueError, "the model name or path is empty."),  # an AttributeError inside sentence-transformers
])
def test_a_model_that_is_not_there_is_named(model, error, message):
    with pytest.raises(error, match=re.escape(message)):
        FairSentenceTransformer(model)


def test_a_folder_that_holds_no_model_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=f"cannot load the model {re.escape(repr(str(tmp_path / 'empty')))}"):
        FairSentenceTransformer(tmp_path / "empty")

def test_arrays_repr_and_warnings_behave_like_sentence_transformers(minilm):
    from mteb_fairpos.model import UncalibratedWarning

    fair = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=32, strength=1.0))
    np.testing.assert_array_equal(fair.encode_document(np.array([LONG, SHORT])), fair.encode_document([LONG, SHORT]))
    assert "(calibration): b32_lhalf_a1 on documents" in repr(fair)
    with pytest.warns(UncalibratedWarning, match=r"1 of 2 document\(s\) were left uncalibrated.*32 tokens") as caught:
        fair.encode_document([LONG, SHORT])
    assert caught[0].filename == __file__  # points at the caller's line, not into sentence-transformers
    minilm.max_seq_length, saved = 16, minilm.max_seq_length
    try:
        with pytest.warns(TruncationWarning) as caught:
            fair.encode([LONG])
    finally:
        minilm.max_seq_length = saved
    assert caught[0].filename == __file__


def test_wrapping_keeps_the_models_own_attention(tmp_path, minilm_dir):
    from sentence_transformers import SentenceTransformer

    eager = SentenceTransformer(minilm_dir, device="cpu", model_kwargs={"attn_implementation": "eager"})
    with pytest.warns(UserWarning, match="attn_implementation='eager'; its calibrated passes use the 'fairpos' backend"):
        fair = FairSentenceTransformer(eager, CalibrationConfig(basket_size=32, strength=1.0))
    fair.encode_document([LONG])
    assert eager.transformers_model.config._attn_implementation == "eager"  # said, and only for calibrated passes


def test_wrapping_a_loaded_model_keeps_its_settings_and_a_fair_one_its_calibration(minilm_dir):
    from sentence_transformers import SentenceTransformer

    plain = SentenceTransformer(minilm_dir, device="cpu", truncate_dim=64, similarity_fn_name="dot")
    fair = FairSentenceTransformer(plain, "b8_llast_a1", calibrate_encode=True)  # the text form, as the CLI takes it
    assert (fair.truncate_dim, fair.similarity_fn_name, fair.encode(["hello"]).shape) == (64, "dot", (1, 64))
    assert fair.calibration == CalibrationConfig(basket_size=8, layers="last", strength=1.0)
    again = FairSentenceTransformer(fair)
    assert (again.calibration, again.calibrate_encode, again.calibrate_queries) == (fair.calibration, True, False)
    assert FairSentenceTransformer(fair, None, calibrate_encode=False).plan is None
    with pytest.raises(TypeError, match="calibration must be a CalibrationConfig, its text form"):
        FairSentenceTransformer(plain, {"basket_size": 8})


def test_calibrated_passes_give_back_the_attention_the_model_has_now(minilm_dir, monkeypatch):
    """Only a model's first calibrated pass switches through transformers' set_attn_implementation (which walks every
    module); later passes switch the configs it switched, and give back what the model runs now, not at first."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_dir, device="cpu", model_kwargs={"attn_implementation": "eager"})
    inner = model.transformers_model
    calls = []
    switch = inner.set_attn_implementation
    monkeypatch.setattr(inner, "set_attn_implementation", lambda name, **kw: calls.append(name) or switch(name, **kw))
    with pytest.warns(UserWarning, match="attn_implementation='eager'"):
        fair = FairSentenceTransformer(model, CalibrationConfig(basket_size=8, strength=1.0))
    texts = [LONG, LONG[: len(LONG) // 2], LONG[: len(LONG) // 3]]
    first = fair.encode_document(texts, batch_size=1, convert_to_tensor=True)
    assert inner.config._attn_implementation == "eager"
    switch("sdpa")  # the user's own switch, between calls
    second = fair.encode_document(texts, batch_size=1, convert_to_tensor=True)
    assert inner.config._attn_implementation == "sdpa"
    assert calls == ["fairpos"]  # the first pass's switch: none back, none for the five passes after
    assert torch.allclose(first, second, atol=1e-6)  # calibrated passes run the backend, whatever the model's own
    with fair.calibration_disabled():
        assert not torch.allclose(fair.encode_document(texts, batch_size=1, convert_to_tensor=True), second, atol=1e-3)


@pytest.mark.slow
def test_multi_process_encoding_with_a_real_two_process_pool(minilm):
    """Workers unpickle the models without this package's backend registered: the calibrated model
    registers it where it is used, and the user's own wrapped model keeps working."""
    fair = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=32, strength=1.0))
    texts = [LONG, SEGMENTS[0], SEGMENTS[1] * 2]
    single = fair.encode_document(texts)
    pooled = fair.encode_document(texts, device=["cpu", "cpu"])
    np.testing.assert_allclose(pooled, single, atol=1e-5)
    assert np.abs(single - minilm.encode_document(texts)).max() > 1e-3  # the workers really calibrated
    np.testing.assert_allclose(minilm.encode_document(texts, device=["cpu", "cpu"]), minilm.encode_document(texts), atol=1e-5)


def test_saving_inside_calibration_disabled_keeps_the_calibration(minilm, tmp_path):
    """The block is a switch for this thread's passes: saving inside it wrote 'none', and the folder came back plain."""
    fair = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=32, strength=1.0))
    with fair.calibration_disabled():
        fair.save(str(tmp_path / "saved"))
    back = FairSentenceTransformer(str(tmp_path / "saved"), device="cpu")
    assert str(back.calibration) == str(fair.calibration)
    assert f"`{fair.calibration}`" in (tmp_path / "saved" / "README.md").read_text()


def test_a_route_other_than_document_or_query_is_named(fair):
    """task='documents' ran plain without a word: a model without a Router has no such route."""
    np.testing.assert_array_equal(fair.encode([LONG], task="document"), fair.encode_document([LONG]))
    with pytest.raises(ValueError, match=r"task must be 'document', 'query' or None \(this model has no Router\), "
                                         r"got 'documents'"):
        fair.encode([LONG], task="documents")


def test_a_calls_own_max_length_is_checked_and_reported(fair):
    """sentence-transformers' per-call override cut texts without the truncation warning, and one beyond the position
    table failed deep in transformers."""
    with pytest.warns(TruncationWarning, match="1 input\\(s\\) exceeded this call's maximum of 64 tokens"):
        cut = fair.encode_document([LONG], processing_kwargs={"text": {"max_length": 64}})
    assert np.abs(cut - fair.encode_document([LONG])).max() > 1e-3  # it did cut
    with pytest.raises(ValueError, match="max_length 2000: this model embeds at most 512 tokens"):
        fair.encode_document([LONG], processing_kwargs={"text": {"max_length": 2000}})


@pytest.mark.slow
def test_a_pool_embeds_as_it_was_started_and_is_refused_on_the_other_side_of_calibration_disabled(minilm):
    """The workers hold the model as pickled when the pool started: one started outside the block calibrated inside
    it, and one started inside stayed plain after it."""
    fair = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=32, strength=1.0))
    texts = [LONG, SEGMENTS[0]]
    outside = fair.start_multi_process_pool(["cpu"])
    try:
        np.testing.assert_allclose(fair.encode_document(texts, pool=outside), fair.encode_document(texts), atol=1e-5)
        with fair.calibration_disabled(), pytest.raises(ValueError, match=(
                r"this pool was started outside calibration_disabled\(\) and its workers calibrate; start a pool "
                "inside the block")):
            fair.encode_document(texts, pool=outside)
    finally:
        fair.stop_multi_process_pool(outside)
    with fair.calibration_disabled():
        inside = fair.start_multi_process_pool(["cpu"])
    try:
        with fair.calibration_disabled():
            np.testing.assert_allclose(fair.encode_document(texts, pool=inside), minilm.encode_document(texts), atol=1e-5)
        with pytest.raises(ValueError, match=r"started inside calibration_disabled\(\) and its workers do not calibrate"):
            fair.encode_document(texts, pool=inside)
    finally:
        fair.stop_multi_process_pool(inside)
