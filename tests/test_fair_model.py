"""FairSentenceTransformer on the real all-MiniLM-L6-v2 weights (offline)."""

from __future__ import annotations

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


def test_no_warning_for_inputs_that_fit(fair):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        fair.encode_document([LONG, SHORT])
