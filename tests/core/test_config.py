"""CalibrationConfig: validation messages, layer resolution, and the text form round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mteb_fairpos import CalibrationConfig, ConfigError


def test_defaults_are_the_retrieval_papers():
    config = CalibrationConfig()
    assert (config.basket_size, config.layers, config.strength) == (128, "last_half", 0.5)
    assert (config.bos_share, config.eos_share) == ("original", "equal")
    assert str(config) == "b128_lhalf_a0.5"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"basket_size": 0}, "basket_size must be a positive integer"),
        ({"basket_size": -3}, "basket_size must be a positive integer"),
        ({"basket_size": 12.5}, "basket_size must be a positive integer"),
        ({"strength": 1.5}, r"strength must lie in \[0, 1\]"),
        ({"strength": -0.1}, r"strength must lie in \[0, 1\]"),
        ({"strength": "high"}, "strength must be a number"),
        ({"layers": 0}, "must be >= 1"),
        ({"layers": 1.5}, r"must lie in \(0, 1\]"),
        ({"layers": [3, -1]}, "non-negative"),
        ({"layers": [2, 2]}, "must not repeat"),
        ({"layers": "first"}, "layers must be 'last_half'"),
        ({"pooling": "max"}, "pooling must be one of"),
        ({"bos_share": 1.0}, r"float in \[0, 1\)"),
        ({"eos_share": "half"}, "eos_share must be"),
        ({"bos_share": 0.6, "eos_share": 0.5}, "leaves no attention mass for the content"),
    ],
)
def test_invalid_settings_say_what_is_allowed(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        CalibrationConfig(**kwargs)


@pytest.mark.parametrize(
    ("layers", "num_layers", "expected"),
    [
        ("last_half", 12, tuple(range(6, 12))),
        ("last_half", 7, (4, 5, 6)),
        ("last_half", 1, (0,)),  # at least one layer, as the authors' library
        ("last_half", 3, (2,)),
        ("last", 12, (11,)),
        (3, 12, (9, 10, 11)),
        (0.25, 12, (9, 10, 11)),
        (1.0, 6, tuple(range(6))),
        ((0, 5), 6, (0, 5)),
    ],
)
def test_layer_sets_resolve_as_spec_1_4(layers, num_layers, expected):
    assert CalibrationConfig(layers=layers).resolve_layers(num_layers) == expected


def test_layers_outside_the_model_are_refused():
    with pytest.raises(ConfigError, match=r"outside the model, which has layers 0..5"):
        CalibrationConfig(layers=(2, 6)).resolve_layers(6)
    with pytest.raises(ConfigError, match="the model has 6"):
        CalibrationConfig(layers=8).resolve_layers(6)


def test_isolated_tokens_follow_the_pooling_table():
    config = CalibrationConfig()
    assert config.isolated_tokens("cls") == (("bos", "original"),)
    assert config.isolated_tokens("last") == (("bos", "original"), ("eos", "equal"))
    assert config.isolated_tokens("mean") == ()
    assert CalibrationConfig(isolate_bos=False).isolated_tokens("cls") == ()
    assert CalibrationConfig(isolate_eos=True, eos_share=0.1).isolated_tokens("mean") == (("eos", 0.1),)


configs = st.builds(
    CalibrationConfig,
    basket_size=st.integers(1, 4096),
    layers=st.one_of(
        st.sampled_from(["last_half", "last"]),
        st.integers(1, 48),
        st.floats(0.01, 1.0),
        st.lists(st.integers(0, 47), min_size=1, max_size=6, unique=True).map(tuple),
    ),
    strength=st.floats(0.0, 1.0),
    pooling=st.sampled_from([None, "cls", "last", "mean"]),
    isolate_bos=st.sampled_from([None, True, False]),
    isolate_eos=st.sampled_from([None, True, False]),
    bos_share=st.one_of(st.sampled_from(["original", "equal"]), st.floats(0.0, 0.49)),
    eos_share=st.one_of(st.sampled_from(["original", "equal"]), st.floats(0.0, 0.49)),
)


@given(configs)
def test_text_form_round_trips(config):
    text = str(config)
    assert CalibrationConfig.parse(text) == config
    assert "/" not in text and " " not in text


@pytest.mark.parametrize("text", ["", "b128", "b128_lhalf_ax", "b128_lnope_a0.5", "b128_b64_lhalf_a0.5", "hello"])
def test_bad_text_shows_the_valid_form(text):
    with pytest.raises(ConfigError, match=r"Valid form: b<basket>_l<layers>_a<strength>"):
        CalibrationConfig.parse(text)


def test_replace_validates_again():
    assert CalibrationConfig().replace(strength=1.0).strength == 1.0
    with pytest.raises(ConfigError):
        CalibrationConfig().replace(basket_size=0)


@pytest.mark.parametrize(
    ("spellings", "expected"),
    [
        (["last_half", "half"], "last_half"),
        (["last"], "last"),
        (["6", "n6"], 6),
        (["0.5", "f0.5"], 0.5),
        (["6,7,8", "i6.7.8", " 8,6,7 "], (6, 7, 8)),
    ],
)
def test_one_layer_grammar_for_the_cli_and_the_text_form(spellings, expected):
    from mteb_fairpos.config import parse_layers

    for text in spellings:
        assert CalibrationConfig(layers=parse_layers(text)).layers == expected
    config = CalibrationConfig(layers=expected)
    assert CalibrationConfig.parse(str(config)) == config  # the text form writes the grammar's second spelling
    if "_" not in spellings[0]:
        assert CalibrationConfig.parse(f"b64_l{spellings[0]}_a1").layers == expected  # the first reads there too


def test_a_bad_layer_set_is_one_clear_line(capsys):
    from mteb_fairpos.cli import main

    assert main(["segments", "--segment", "a", "--segment", "b", "--layers", "foo"]) == 2
    err = capsys.readouterr().err
    assert "unknown layer set 'foo'" in err and "6,7,8 or i6.7.8" in err and "Traceback" not in err


def test_two_configs_are_one_config_only_when_their_text_forms_are():
    """The last layer (``layers=1``) and every layer (``layers=1.0``) differ though ``1 == 1.0``: a grid or a set of
    configs keeps both. -0.0 is 0 and numpy's numbers are numbers: one config, one text form."""
    import numpy as np

    from mteb_fairpos.grid import grid

    last, every = CalibrationConfig(layers=1), CalibrationConfig(layers=1.0)
    assert last != every and len({last, every}) == 2 and last.resolve_layers(6) != every.resolve_layers(6)
    assert [str(c) for c in grid([128], ["n1", "f1"], [0.5])] == ["b128_ln1_a0.5", "b128_lf1_a0.5"]
    assert CalibrationConfig(strength=-0.0) == CalibrationConfig(strength=0) and str(CalibrationConfig(strength=-0.0)) == "b128_lhalf_a0"
    assert str(CalibrationConfig(bos_share=-0.0)) == "b128_lhalf_a0.5_sb0"
    same = CalibrationConfig(basket_size=np.int64(64), layers=[np.int64(3)], strength=np.float32(0.5))
    assert same == CalibrationConfig(basket_size=64, layers=(3,), strength=0.5) and type(same.basket_size) is int
    assert hash(CalibrationConfig.parse("b64_li3_a0.5")) == hash(same)


@pytest.mark.parametrize("value", [None, 128, ["b128_lhalf_a0.5"]])
def test_a_text_form_that_is_no_string_is_named(value):
    with pytest.raises(ConfigError, match=f"a calibration config in text form is a string .*got {type(value).__name__}"):
        CalibrationConfig.parse(value)


def test_layers_given_as_an_array_are_refused_with_the_allowed_forms():
    import numpy as np

    with pytest.raises(ConfigError, match=r"layers must be 'last_half', 'last', .*got array\(\[1, 2\]\)"):
        CalibrationConfig(layers=np.array([1, 2]))


@pytest.mark.parametrize("flag", ["isolate_bos", "isolate_eos"])
@pytest.mark.parametrize("value", [1, 0.0, "yes"])
def test_isolation_flags_are_booleans(flag, value):
    """1 and 0.0 passed (1 == True) and were stored as given."""
    with pytest.raises(ConfigError, match=f"{flag} must be True, False or None"):
        CalibrationConfig(**{flag: value})


def test_numpy_booleans_are_flags_and_stored_as_bools():
    import numpy as np

    config = CalibrationConfig(isolate_bos=np.True_, isolate_eos=np.False_)
    assert config.isolate_bos is True and config.isolate_eos is False


def test_a_basket_beyond_what_torch_counts_is_refused():
    """10**30 passed and failed at encode time (an OverflowError)."""
    with pytest.raises(ConfigError, match="basket_size must be a positive integer"):
        CalibrationConfig(basket_size=10**30)
