"""One factory: `build_encoder` builds every kind of plugin entry as mteb would, named after it, and
encoders built with one `LoadedWeights` share one loaded checkpoint."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("minilm_dir")


@pytest.fixture(scope="module", autouse=True)
def _registered():
    from mteb_fairpos.mteb_plugin import register

    register()


def test_every_kind_of_entry_is_built_by_the_factory_and_shares_weights(minilm_dir):
    import mteb
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.config import CalibrationConfig
    from mteb_fairpos.mteb_models import FairEncoder, LoadedWeights, build_encoder, checkpoint_meta
    from mteb_fairpos.sea import SegmentEmbedAverage

    weights = LoadedWeights()
    fair = build_encoder(mteb.get_model_meta("fair/all-MiniLM-L6-v2-b128_llast_a1"), weights=weights, device="cpu")
    twin = build_encoder(mteb.get_model_meta("fair-off/all-MiniLM-L6-v2"), weights=weights, device="cpu")
    assert isinstance(fair, FairEncoder) and isinstance(twin, FairEncoder)
    assert (fair.mteb_model_meta.name, str(fair.calibration)) == ("fair/all-MiniLM-L6-v2-b128_llast_a1", "b128_llast_a1")
    assert twin.calibration is None and fair.model[0] is twin.model[0] and len(weights) == 1

    shorter = mteb.get_model_meta("fair/all-MiniLM-L6-v2").model_copy(update={"experiment_kwargs": {"max_seq_length": 240}})
    built = build_encoder(shorter, weights=weights, device="cpu")
    assert built.model.max_seq_length == 240 and built.mteb_model_meta.experiment_name is not None
    assert len(weights) == 2  # another length is another loaded copy
    longer = shorter.model_copy(update={"experiment_kwargs": {"max_seq_length": 1000}})
    with pytest.raises(ValueError, match="max_seq_length 1000: this model embeds at most 512 tokens"):
        build_encoder(longer, weights=weights, device="cpu")  # not a size mismatch deep in torch on the first long input

    sea = build_encoder(mteb.get_model_meta("sea/sentence-transformers/all-MiniLM-L6-v2"), device="cpu")
    assert isinstance(sea, SegmentEmbedAverage) and sea.mteb_model_meta.name == "sea/sentence-transformers/all-MiniLM-L6-v2"

    loaded = SentenceTransformer(minilm_dir, device="cpu")
    held = LoadedWeights()
    held.add(loaded, minilm_dir, device="cpu")
    meta = checkpoint_meta(loaded, "my-model", CalibrationConfig.parse("b64_lhalf_a1"), path=minilm_dir, device="cpu")
    probe_style = build_encoder(meta, weights=held)
    assert probe_style.mteb_model_meta.name == "fair/my-model-b64_lhalf_a1"
    assert probe_style.model[0] is loaded[0] and len(held) == 1  # the probe's loaded copy, not a second one
