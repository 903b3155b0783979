"""`attention_profile` (docs/method.md#s1-6) and `mteb-fairpos profile`."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from mteb_fairpos.cli import main
from mteb_fairpos.profile import AttentionProfile, attention_profile, format_profile, group_masses, plot_profile

TEXTS = [
    "The museum reopened its east wing with a new collection of maritime maps and ship models. " * k
    for k in (1, 3, 5)
] + ["Heavy rain flooded several streets downtown."]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_shapes_and_masses_sum_to_one(minilm):
    implementation = minilm.transformers_model.config._attn_implementation  # "fairpos" if another test attached it
    profile = attention_profile(minilm, TEXTS, basket_size=16, layers="last_half")
    assert profile.layers == (3, 4, 5)
    assert profile.pooling == "mean"
    assert profile.n_texts == len(TEXTS)
    n_layers, width = profile.masses.shape
    assert n_layers == 3 and width == profile.baskets.shape[1] + 2 == len(profile.labels)
    assert profile.first.shape == profile.last.shape == (3,)
    np.testing.assert_allclose(profile.masses.sum(axis=1), 1.0, atol=1e-5)
    assert (profile.masses >= 0).all()
    assert profile.counts[0] == len(TEXTS) and (np.diff(profile.counts) <= 0).all()
    assert profile.labels[1] == "tokens 2-17"
    np.testing.assert_allclose(profile.mean(), profile.masses.mean(axis=0))
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["layers"] == [3, 4, 5] and len(data["masses"]) == 3
    assert "tokens 2-17" in format_profile(profile)
    # the model is left as it was: same attention implementation, no nnsight hooks
    assert minilm.transformers_model.config._attn_implementation == implementation
    assert not any("forward" in m.__dict__ for m in minilm.modules())


def test_profile_matches_attentions_returned_by_transformers(minilm):
    """Cross-check the nnsight read against `output_attentions=True` of the eager model."""
    texts = TEXTS[:3]
    profile = attention_profile(minilm, texts, basket_size=32, layers=None, batch_size=2)
    inner = minilm.transformers_model
    features = minilm.preprocess(texts)
    previous = inner.config._attn_implementation
    inner.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            attentions = inner(input_ids=features["input_ids"], attention_mask=features["attention_mask"],
                               token_type_ids=features.get("token_type_ids"), output_attentions=True).attentions
    finally:
        inner.set_attn_implementation(previous)
    valid = features["attention_mask"].bool()
    for layer, probs in enumerate(attentions):
        weights = valid.float()
        rows = ((probs * weights[:, None, :, None]).sum(2) / weights.sum(1)[:, None, None]).mean(1)
        first, baskets, last = group_masses(rows, valid, 32)
        expected = np.concatenate([[first.mean().item()], (baskets.sum(0) / len(texts)).numpy(), [last.mean().item()]])
        np.testing.assert_allclose(profile.masses[layer, : len(expected)], expected, atol=1e-5)


def test_last_token_pooling_with_left_padding(tmp_path, minilm_dir):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer, Qwen3Config

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, intermediate_size=64, pad_token_id=0)
    AutoModel.from_config(config).save_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformer = Transformer(str(tmp_path))
    model = SentenceTransformer(modules=[transformer, Pooling(32, "lasttoken")], device="cpu")
    profile = attention_profile(model, TEXTS, basket_size=8)
    assert profile.pooling == "last" and profile.layers == (0, 1)
    np.testing.assert_allclose(profile.masses.sum(axis=1), 1.0, atol=1e-5)
    assert profile.labels[0] == "token 1 (sink)" and profile.labels[-1] == "last token (pooling)"


def test_plot_writes_a_png(tmp_path):
    profile = AttentionProfile(layers=(0, 1), basket_size=4, pooling="cls", first=np.array([0.5, 0.4]),
                               baskets=np.array([[0.3, 0.1], [0.3, 0.2]]), last=np.array([0.1, 0.1]),
                               counts=np.array([2, 1]), n_texts=2)
    path = plot_profile(profile, str(tmp_path / "profile.png"))
    with open(path, "rb") as handle:
        assert handle.read(8) == PNG_MAGIC
    assert profile.labels == ["token 1 (pooling)", "tokens 2-5", "tokens 6-9", "last token (final special)"]


def test_cli_prints_table_and_writes_png(tmp_path, capsys, minilm):
    listed = tmp_path / "texts.jsonl"
    listed.write_text("\n".join(json.dumps({"text": t}) for t in TEXTS[1:]))
    output = tmp_path / "out" / "profile.png"
    dumped = tmp_path / "data" / "profile.json"  # both written into folders that do not exist yet
    code = main(["profile", "--text", TEXTS[0], "--file", str(listed), "--basket-size", "16", "--layers", "last_half",
                 "--output", str(output), "--json", str(dumped)])
    out = capsys.readouterr().out
    assert code == 0
    assert output.read_bytes()[:8] == PNG_MAGIC
    assert json.loads(dumped.read_text())["n_texts"] == len(TEXTS)
    assert "pooling: mean" in out and "tokens 2-17" in out
    header = next(line for line in out.splitlines() if line.startswith("tokens "))
    assert header.split()[1:4] == ["L4", "L5", "L6"]


def test_cli_without_texts_is_a_clear_error(tmp_path, capsys):
    assert main(["profile", "--output", str(tmp_path / "p.png")]) == 2
    assert "at least one --text" in capsys.readouterr().err


def test_labels_end_where_the_text_ends_and_the_written_path_is_printed(tmp_path, capsys, minilm):
    from mteb_fairpos.cli import main
    from mteb_fairpos.profile import attention_profile

    profile = attention_profile(minilm, ["one two three"], basket_size=128)  # 3 content tokens
    assert profile.labels[1] == "tokens 2-4" and profile.content_tokens == 3
    assert main(["profile", "--text", "one two three", "--output", str(tmp_path / "adir")]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'adir'}.png" in out
    assert "note: 1 of 1 text(s) have less content than one basket (128 tokens)" in out  # calibration would do nothing
    assert (tmp_path / "adir.png").is_file()


def test_a_text_without_content_tokens_has_no_basket_and_no_error(minilm):
    """A batch in which no text has a token between the first and the last one went out of bounds in the scatter."""
    alone = attention_profile(minilm, [""], basket_size=4)
    assert alone.baskets.shape == (len(alone.layers), 0) and alone.counts.tolist() == [] and alone.short_texts == 1
    beside = attention_profile(minilm, ["", "a few words here"], basket_size=4)
    assert beside.counts.tolist() == [1] and beside.baskets.shape == (len(beside.layers), 1)


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"texts": ["a b"], "batch_size": 0}, ValueError, "batch_size must be a positive integer, got 0."),
    ({"texts": ["a b"], "batch_size": -1}, ValueError, "batch_size must be a positive integer, got -1."),
    ({"texts": ["a b"], "pooling": "max"}, ValueError, "pooling must be one of cls, last, mean or None (read from the model), got 'max'."),
    ({"texts": None}, TypeError, "texts must be a text or a list of texts, got NoneType."),
    ({"texts": [None, "a"]}, TypeError, "texts must be strings; text 0 is NoneType: None."),
])
def test_arguments_no_profile_can_use_are_named(minilm, kwargs, error, message):
    with pytest.raises(error) as caught:
        attention_profile(minilm, **kwargs)
    assert str(caught.value) == message


def test_texts_may_come_as_any_iterable_as_encode_takes_them(minilm):
    listed = attention_profile(minilm, TEXTS[:2], basket_size=16, batch_size=np.int64(2))
    for texts in (np.array(TEXTS[:2]), (text for text in TEXTS[:2]), dict.fromkeys(TEXTS[:2]).keys()):
        np.testing.assert_array_equal(attention_profile(minilm, texts, basket_size=16).baskets, listed.baskets)
