"""Property tests of the row math (docs/method.md#s1-2 to #s1-3) on random batches with left and right padding."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mteb_fairpos.attention import _full
from mteb_fairpos.calibration import basket_layout, calibrate_rows, host_layout
from mteb_fairpos.config import CalibrationConfig
from mteb_fairpos.triton_attention import padding_fits

policies = st.one_of(st.sampled_from(["original", "equal"]), st.floats(0.0, 0.3))


@st.composite
def batches(draw):
    """A padded batch of softmax rows plus everything needed to calibrate it."""
    lengths = draw(st.lists(st.integers(1, 40), min_size=1, max_size=4))
    width = max(lengths) + draw(st.integers(0, 3))
    left = draw(st.booleans())
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        if left:
            mask[i, width - n:] = 1
        else:
            mask[i, :n] = 1
    heads, rows = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    logits = torch.randn(len(lengths), heads, rows, width, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    logits = logits * draw(st.floats(0.1, 6.0))
    probs = torch.softmax(logits.masked_fill(~mask.bool()[:, None, None, :], float("-inf")), dim=-1)
    config = CalibrationConfig(
        basket_size=draw(st.integers(1, 12)),
        pooling=draw(st.sampled_from(["cls", "last", "mean"])),
        bos_share=draw(policies),
        eos_share=draw(policies),
        strength=draw(st.floats(0.0, 1.0)),
    )
    layout = basket_layout(mask, config.pooling, config.basket_size, config.isolated_tokens(config.pooling))
    return probs, mask.bool(), layout, config


def _calibrate(probs, layout, strength):
    row_mask = layout.active[:, None].expand(probs.shape[0], probs.shape[2])
    return calibrate_rows(probs, layout, strength, row_mask)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_strength_zero_is_the_identity(batch):
    probs, _, layout, _ = batch
    assert torch.equal(_calibrate(probs, layout, 0.0), probs)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_rows_sum_to_one_and_padding_stays_zero(batch):
    probs, valid, layout, config = batch
    out = _calibrate(probs, layout, config.strength)
    torch.testing.assert_close(out.sum(-1), torch.ones_like(out.sum(-1)))
    assert torch.all(out[~valid[:, None, None, :].expand_as(out)] == 0)
    assert torch.all(out >= 0)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_full_strength_equalises_baskets_and_gives_isolated_tokens_their_share(batch):
    probs, _, layout, config = batch
    out = _calibrate(probs, layout, 1.0)
    n_iso = layout.isolated.shape[1]
    for b in range(probs.shape[0]):
        if not layout.active[b]:
            continue
        n_b = int(layout.n_baskets[b])
        n_total = n_b + n_iso
        shares = []
        for j, policy in enumerate(layout.shares):
            original = probs[b, :, :, layout.isolated[b, j]]
            share = {"equal": torch.full_like(original, 1 / n_total), "original": original}.get(policy)
            shares.append(share if share is not None else torch.full_like(original, policy))
        if shares and bool((sum(shares) > 1).any()):
            continue  # the overflow case has its own test
        for j, share in enumerate(shares):
            torch.testing.assert_close(out[b, :, :, layout.isolated[b, j]], share)
        content_total = 1 - sum(shares) if shares else torch.ones_like(probs[b, :, :, 0])
        for basket in range(n_b):
            in_basket = layout.basket[b] == basket
            torch.testing.assert_close(out[b][..., in_basket].sum(-1), content_total / n_b)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_any_strength_blends_the_row_with_its_full_strength_calibration(batch):
    """Step 5 on its own: a calibrated row at strength a is (1 - a) p + a c, with c its strength-1 row (checked
    above), to float64's rounding: the reference is computed in float64 through and through."""
    probs, _, layout, config = batch
    strength = config.strength
    expected = (1 - strength) * probs + strength * _calibrate(probs, layout, 1.0)
    active = layout.active[:, None, None, None].expand_as(probs)
    out = _calibrate(probs, layout, strength)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out[active], expected[active], rtol=0, atol=1e-14)
    assert torch.equal(out[~active], probs[~active])


@settings(max_examples=150, deadline=None)
@given(batches())
def test_proportions_inside_a_basket_are_preserved(batch):
    probs, _, layout, config = batch
    out = _calibrate(probs, layout, 1.0)
    for b in range(probs.shape[0]):
        if not layout.active[b]:
            continue
        for basket in range(int(layout.n_baskets[b])):
            keys = layout.basket[b] == basket
            before, after = probs[b][..., keys], out[b][..., keys]
            kept = after.sum(-1) > 0  # rows where isolated shares above 1 left content nothing are tested apart
            after, before = after[kept], before[kept]
            torch.testing.assert_close(after / after.sum(-1, keepdim=True), before / before.sum(-1, keepdim=True))


@settings(max_examples=100, deadline=None)
@given(batches())
def test_content_shorter_than_one_basket_is_left_alone(batch):
    probs, _, layout, config = batch
    out = _calibrate(probs, layout, config.strength)
    short = ~layout.active
    assert torch.equal(out[short], probs[short])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=5), st.integers(1, 6),
       st.sampled_from([(), (("bos", "original"),), (("eos", 0.1),), (("bos", "original"), ("eos", "equal"))]),
       st.sampled_from(["blank", "padded", "solid"]))
def test_the_host_layout_made_from_the_tokenizers_mask_is_what_a_pass_would_read_from_the_device(bits, basket, isolated, shape):
    """``host_layout`` (numpy, before the batch leaves the host) gives what the layout's ``on_host`` reads back, with the
    padding and full-row flags, for any mask: rows without a valid token, of one token, padded on either side, with
    holes in them."""
    width = max(len(row) for row in bits)
    mask = torch.tensor([row + [False] * (width - len(row)) for row in bits], dtype=torch.long)
    if shape == "blank":
        mask[0] = 0
    elif shape == "padded":
        mask[0] = 0
        mask[0, width // 2:] = 1
    else:
        mask[0] = 1
    layout = basket_layout(mask, "mean", basket, isolated)
    read, (contiguous, full) = layout.on_host(padding_fits(layout), _full(layout))
    made = host_layout(mask, basket, isolated)
    assert read.contiguous == contiguous  # a mean layout reads it with itself, as its grouped path needs it
    assert made == type(read)(read.active, read.content_start, read.n_content, basket, contiguous=contiguous, full=full,
                              shape=tuple(mask.shape), isolated=tuple(name for name, _ in isolated))
    assert all(type(v) is int for v in made.active + made.content_start + made.n_content)


def test_baskets_count_valid_tokens_only_on_either_padding_side():
    right = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0, 0]])
    left = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1]])
    isolated = CalibrationConfig().isolated_tokens("last")
    a = basket_layout(right, "last", 2, isolated)
    b = basket_layout(left, "last", 2, isolated)
    assert a.basket.tolist() == [[-1, 0, 0, 1, 1, 2, -1, -1, -1]]
    assert b.basket.tolist() == [[-1, -1, -1, 0, 0, 1, 1, 2, -1]]
    assert a.isolated.tolist() == [[0, 6]] and b.isolated.tolist() == [[2, 8]]
    assert a.query_rows.tolist() == [6] and b.query_rows.tolist() == [8]
    assert a.n_baskets.tolist() == b.n_baskets.tolist() == [3]


def test_a_basket_of_zero_mass_gets_nothing_instead_of_nan():
    mask = torch.ones(1, 5, dtype=torch.long)
    probs = torch.tensor([[[[0.5, 0.5, 0.0, 0.0, 0.0]]]], dtype=torch.float64)
    layout = basket_layout(mask, "mean", 2, ())
    out = calibrate_rows(probs, layout, 1.0, torch.ones(1, 1, dtype=torch.bool))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.sum(), torch.tensor(1.0, dtype=torch.float64))


def test_isolated_shares_above_one_leave_content_nothing_and_stay_a_distribution():
    mask = torch.ones(1, 3, dtype=torch.long)
    probs = torch.tensor([[[[0.8446, 0.1, 0.0554]]]], dtype=torch.float64)
    layout = basket_layout(mask, "last", 1, CalibrationConfig().isolated_tokens("last"))
    out = calibrate_rows(probs, layout, 1.0, torch.ones(1, 1, dtype=torch.bool))
    assert torch.all(out >= 0)
    torch.testing.assert_close(out.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert out[0, 0, 0, 1] == 0
    torch.testing.assert_close(out[0, 0, 0, 0] / out[0, 0, 0, 2], torch.tensor(0.8446 * 3, dtype=torch.float64))


def test_a_row_gives_nothing_to_a_key_it_does_not_see():
    """Causal rows with the last token isolated at an equal or a fixed share (mean pooling): a row before that token
    does not see it, and gives it nothing, as it gives nothing to a basket it sees no key of; rows stay distributions."""
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    seen = torch.ones(11, 11, dtype=torch.bool).tril()[None, None] & mask.bool()[:, None, None, :]
    logits = torch.randn(2, 3, 11, 11, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    probs = torch.softmax(logits.masked_fill(~seen, float("-inf")), dim=-1).nan_to_num(0.0)
    for share in ("equal", 0.2, "original"):
        config = CalibrationConfig(basket_size=2, strength=1.0, isolate_eos=True, eos_share=share)
        layout = basket_layout(mask, "mean", 2, config.isolated_tokens("mean"))
        out = calibrate_rows(probs, layout, 1.0, layout.row_mask())
        assert torch.all(out[~seen.expand_as(out)] == 0), share
        rows = layout.row_mask()[:, None, :].expand(out.shape[:3])
        torch.testing.assert_close(out.sum(-1)[rows], torch.ones_like(out.sum(-1)[rows]))
