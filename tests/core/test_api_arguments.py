"""Arguments the Python API cannot use are refused by the function given them, naming the argument: before, they
failed deeper (an AttributeError on a text, a KeyError on the first forward pass) or were taken ('no' as True)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, attach


@pytest.mark.parametrize(("flag", "value"), [("calibrate_encode", "no"), ("calibrate_queries", 1)])
def test_a_calibration_flag_is_a_bool(minilm, flag, value):
    with pytest.raises(TypeError, match=f"{flag} must be True, False or None .*got {value!r}"):
        FairSentenceTransformer(minilm, **{flag: value})


@pytest.mark.parametrize("text", ["none", "off", "Off"])
def test_the_uncalibrated_model_is_named_as_everywhere_else(minilm, text):
    assert FairSentenceTransformer(minilm, text).plan is None


def test_encode_options_that_would_fail_deep_or_cut_wrongly_are_named(minilm):
    """truncate_dim=-3 kept all but 3 dimensions and 0 none, output_value='foo' was a bare KeyError, and a CUDA
    device on a machine without one an AssertionError inside torch."""
    from mteb_fairpos import minilm_path

    model = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=8))
    for cut in (-3, 0, 2.5):
        with pytest.raises(ValueError, match=rf"truncate_dim must be a positive integer .*got {cut!r}"):
            model.encode_document(["a page of text"], truncate_dim=cut)
    with pytest.raises(ValueError, match="the model's output holds no 'foo'; output_value is 'sentence_embedding'"):
        model.encode_document(["a page of text"], output_value="foo")
    with pytest.raises(ValueError, match="device 'gpu': unknown device; expected e.g. cpu, cuda"):
        model.encode_document(["a page of text"], device="gpu")
    with pytest.raises(ValueError, match="truncate_dim must be a positive integer"):
        FairSentenceTransformer(minilm_path(), truncate_dim=0)
    assert model.encode_document(["a page of text"], truncate_dim=5).shape == (1, 5)
    if not torch.cuda.is_available():
        for given in ("cuda", ["cpu", "cuda:0"]):
            with pytest.raises(ValueError, match="cuda was asked for but torch sees no CUDA device"):
                model.encode_document(["a page of text"], device=given)
        with pytest.raises(ValueError, match="cuda was asked for but torch sees no CUDA device"):
            FairSentenceTransformer(minilm_path(), device="cuda")


def test_attach_takes_a_config_and_a_pooling_it_can_honour(minilm):
    with pytest.raises(TypeError, match=re.escape("config must be a CalibrationConfig (CalibrationConfig.parse(text) reads a "
                                                  "text form), got str.")):
        attach(minilm.transformers_model, "b128_lhalf_a0.5", "cls")
    with pytest.raises(ValueError, match="pooling must be one of cls, last, mean, got 'max'."):
        attach(minilm.transformers_model, CalibrationConfig(), "max")


def test_build_encoder_takes_an_entry_and_shared_weights():
    from mteb_fairpos.mteb_models import build_encoder, fair_model_meta

    with pytest.raises(TypeError, match=re.escape("build_encoder takes a ModelMeta (fair_model_meta(name), or "
                                                  "mteb.get_model_meta(name)), got str.")):
        build_encoder("fair/all-MiniLM-L6-v2")
    with pytest.raises(TypeError, match="weights must be a LoadedWeights, got dict."):
        build_encoder(fair_model_meta("fair/all-MiniLM-L6-v2"), weights={})


def test_a_sweep_point_and_plan_name_what_they_cannot_use(tmp_path):
    from mteb.cache import ResultCache

    from mteb_fairpos.sweep import SweepPoint, plan_sweep

    with pytest.raises(ValueError, match=re.escape("max_length must be None (the model's own) or a positive integer, got 0.")):
        SweepPoint("all-MiniLM-L6-v2", None, max_length=0)  # 0 was read as 'not given'
    with pytest.raises(TypeError, match="calibration must be a CalibrationConfig or None"):
        SweepPoint("all-MiniLM-L6-v2", "b128_lhalf_a0.5")
    with pytest.raises(TypeError, match=re.escape("cache must be an mteb ResultCache (mteb.cache.ResultCache(folder)), got str.")):
        plan_sweep([], [], str(tmp_path))
    with pytest.raises(TypeError, match=re.escape("tasks must be mteb tasks (mteb.get_tasks(tasks=[...])), got 'SQuADPosQTiny'.")):
        plan_sweep([], ["SQuADPosQTiny"], ResultCache(tmp_path))
    assert SweepPoint("all-MiniLM-L6-v2", None, max_length=np.int64(128)).meta().experiment_kwargs == {"max_seq_length": 128}


def test_a_generator_of_tasks_is_planned_not_spent_by_the_check(tmp_path):
    from fairpos_tiny_tasks import FairPosTinyRetrieval
    from mteb.cache import ResultCache

    from mteb_fairpos.sweep import SweepPoint, plan_sweep

    points = [SweepPoint("all-MiniLM-L6-v2", None)]
    listed = plan_sweep(points, [FairPosTinyRetrieval()], ResultCache(tmp_path / "a"))
    generated = plan_sweep(points, (task for task in [FairPosTinyRetrieval()]), ResultCache(tmp_path / "b"))
    assert [(u.task, u.subsets) for u in generated.units] == [(u.task, u.subsets) for u in listed.units] != []


def test_a_sweep_point_names_a_model_and_device_of_the_wrong_kind():
    from mteb_fairpos.sweep import SweepPoint

    for model in (None, ["fair/all-MiniLM-L6-v2"], ""):
        with pytest.raises(TypeError, match="model must be a plugin model's name"):
            SweepPoint(model, None)  # failed in meta() on an attribute
    with pytest.raises(TypeError, match="device must be a torch device's name"):
        SweepPoint("fair/all-MiniLM-L6-v2", None, 5)


def test_a_grid_reads_lists_and_whole_basket_sizes():
    """grid("128", ...) was baskets 1, 2 and 8, and a basket of 128.7 was cut to 128."""
    from mteb_fairpos.config import ConfigError
    from mteb_fairpos.grid import grid

    with pytest.raises(TypeError, match=r"baskets is a list; got the text '128' \(write \['128'\]\)"):
        grid("128", ["last"], [0.5])
    with pytest.raises(TypeError, match="layers is a list; got the text 'last'"):
        grid([128], "last", [0.5])
    for basket in (128.7, True, "x"):
        with pytest.raises(ConfigError, match=f"a basket size is a whole number of tokens, got {basket!r}"):
            grid([basket], ["last"], [0.5])
    assert grid(["128", 128.0, np.int64(128)], ["last"], [0.5]) == [CalibrationConfig(128, "last", 0.5)]
