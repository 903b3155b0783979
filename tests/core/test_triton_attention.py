"""The fused calibrated-attention kernel (Triton) against the explicit float64 softmax and the PyTorch paths.

Without a GPU the kernel runs on CPU tensors through Triton's interpreter (``tests/conftest.py`` sets
``TRITON_INTERPRET=1`` before anything imports it); with one, the same tests run the compiled kernel on CUDA.
The interpreter is slow, so the problems are tiny and each layout feature is covered once or twice: tiles
of 16 keys (:data:`~mteb_fairpos.triton_attention.INTERPRETER_CONFIG`) with baskets shorter than a tile,
spanning several tiles, and a shorter last basket.
"""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from test_fused_mean import _inputs
from transformers import AutoModel, GteConfig, Qwen3Config

from mteb_fairpos import triton_attention
from mteb_fairpos.attention import attach, fused_kernel, grouped_mean_rows, tiled_mean_rows
from mteb_fairpos.calibration import basket_layout
from mteb_fairpos.config import CalibrationConfig
from mteb_fairpos.triton_attention import (
    FusedAttentionRefused,
    explicit_calibrated_attention,
    fused_calibrated_attention,
    fused_layout,
    device_arch,
    launch_config,
    unsupported_reason,
    verified,
)

pytestmark = pytest.mark.skipif(triton_attention.triton is None, reason="triton is not installed (pip install -e '.[test]')")

DEVICES = (["cpu"] if triton_attention._interpreting() else []) + (["cuda"] if torch.cuda.is_available() else [])
"""The CPU through the interpreter where there is no GPU; CUDA, compiled, where there is one."""
SCALE = 0.3
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 5e-3}
"""Largest difference from the float64 explicit computation on the same inputs (outputs of about 1): fp32 as the
other exactness tests; bf16 and fp16 as ``test_fused_mean.py`` allows half precision against fp32 (the kernel rounds
the probabilities to the dtype before their product with V, as flash attention does, and rounds its output)."""


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def _mask(length: int, spans: list[tuple[int, int]], device: str) -> torch.Tensor:
    """A padding mask whose sequence i holds valid tokens in [start, stop): right padding (start 0), left
    padding (stop ``length``) or none, mixed in one batch (the kernel reads each sequence's offsets)."""
    mask = torch.zeros(len(spans), length, dtype=torch.long)
    for row, (start, stop) in enumerate(spans):
        mask[row, start:stop] = 1
    return mask.to(device)


def _check(device, dtype, *, pooling, basket, isolated, causal, spans, strength=0.5, heads=4, kv_heads=2, dim=16,
           seed=0, existing=True, config=None):
    """The kernel's output (under launch setting ``config``, default the package's) against the float64 explicit
    computation and, for fp32, the PyTorch path the backend runs today (grouped_mean_rows for mean pooling, the
    pooling row of tiled_mean_rows for cls/last)."""
    length = max(stop for _, stop in spans)
    q, k, v = _inputs(n=len(spans), heads=heads, kv_heads=kv_heads, length=length, dim=dim, seed=seed, device=device)
    layout = basket_layout(_mask(length, spans, device), pooling, basket, isolated)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    if config is not None and config.tma:  # these K and V are read through descriptors, not by the fallback
        assert triton_attention.descriptors(k, v, config.block_n, triton_attention._block_d(dim)) is not None
    out = fused_calibrated_attention(q, k, v, layout, strength, causal, SCALE, config=config)
    # on the same inputs, rounded to the dtype: what is left is the kernel's own rounding
    expected = explicit_calibrated_attention(q.double(), k.double(), v.double(), layout, strength, causal, SCALE)
    assert out.dtype == dtype and out.shape == expected.shape
    error = (out.double() - expected).abs().max().item()
    assert error <= TOLERANCE[dtype], error
    if existing and dtype == torch.float32:
        if pooling == "mean":
            path = grouped_mean_rows(q, k, v, None, causal, SCALE, layout, strength).transpose(1, 2)
        else:
            rows = tiled_mean_rows(q, k, v, None, causal, SCALE, layout, strength)
            path = rows[torch.arange(len(spans), device=device), layout.query_rows]
        assert torch.allclose(out, path, atol=1e-5), (out - path).abs().max()
    return out, expected, layout


MEAN_CASES = {
    # basket shorter than a key tile, no isolated token, grouped-query heads, padding on both sides in one batch
    "short baskets": dict(basket=5, isolated=(), causal=False, spans=[(0, 30), (0, 21), (9, 30)]),
    # baskets spanning two tiles and a shorter last one; isolated first and last tokens; causal (left-padded rows
    # see no key and give 0)
    "long baskets, causal": dict(basket=24, isolated=(("bos", "original"), ("eos", "equal")), causal=True,
                                 spans=[(0, 40), (0, 31), (6, 40)]),
    # a basket of several tiles; a fixed share and full strength; a head size that is no power of two; one
    # sequence too short to be calibrated (its rows stay plain)
    "fixed share, inactive": dict(basket=34, isolated=(("bos", 0.3), ("eos", "original")), causal=False,
                                  spans=[(0, 38), (0, 20)], strength=1.0, dim=24, heads=2, kv_heads=2),
}


def test_the_cases_take_both_loops_of_the_kernel(device):
    """Baskets within one key block (one basket closed per block) and baskets spanning blocks, for mean pooling
    and for the pooling rows, at the key block the tests run with."""
    for cases, pooled in ((MEAN_CASES, False), (POOLED_CASES, True)):
        block = launch_config(torch.float32, 32, pooled, device_arch(torch.device(device))).block_n
        assert {case["basket"] <= block for case in cases.values()} == {True, False}


@pytest.mark.parametrize("case", MEAN_CASES)
def test_mean_pooling_rows_match_the_explicit_softmax_and_the_grouped_path(device, case):
    _check(device, torch.float32, pooling="mean", **MEAN_CASES[case])


POOLED_CASES = {
    "cls": dict(pooling="cls", basket=6, isolated=(("bos", "original"),), causal=False, spans=[(0, 30), (0, 17), (0, 5)]),
    # Qwen3-like: last-token pooling, causal, left padding, grouped-query heads, baskets spanning tiles
    "last, causal": dict(pooling="last", basket=18, isolated=(("bos", "original"), ("eos", "equal")), causal=True,
                         spans=[(0, 40), (11, 40), (36, 40), (39, 40)], heads=4, kv_heads=1, dim=32),
}


@pytest.mark.parametrize("blocks", [1, 2], ids=["one block a basket", "two blocks a basket"])
@pytest.mark.parametrize("pooling, causal, dtype", [("mean", False, torch.float32), ("mean", True, torch.float32),
                                                   ("last", True, torch.float32), ("cls", False, torch.float32),
                                                   ("mean", False, torch.bfloat16)])
def test_baskets_of_whole_key_blocks(device, pooling, causal, dtype, blocks):
    """Baskets exactly one or two key blocks long: the leading blocks that every row of a block sees whole run
    without a mask (with causality, those wholly at or before the block's first row), the rest with it; padding on
    both sides and a short last basket in one batch. One token of left padding puts a block's last key just after a
    row block's first row (that row must not see it), and a sequence shorter than one basket has baskets narrower
    than the block."""
    _whole_blocks(device, dtype, pooling, causal, blocks=blocks)


def _whole_blocks(device, dtype, pooling, causal, config=None, blocks=1):
    dim = 16
    block = (config or launch_config(dtype, dim, pooling != "mean", device_arch(torch.device(device)))).block_n
    basket = blocks * block
    length = 2 * basket + block + 5
    return _check(device, dtype, pooling=pooling, basket=basket, isolated=(("bos", "original"), ("eos", "equal")),
                  causal=causal, spans=[(0, length), (0, 2 * basket + 3), (block // 2, length), (1, length), (0, block // 2)],
                  dim=dim, config=config)


def _descriptor_config(device):
    base = launch_config(torch.float32, 32, False, device_arch(torch.device(device)))
    return dataclasses.replace(base, tma=True)


ALL_CASES = {**{name: dict(pooling="mean", **case) for name, case in MEAN_CASES.items()}, **POOLED_CASES}


@pytest.mark.parametrize("case", [*ALL_CASES, "whole blocks, mean", "whole blocks, mean, causal bf16",
                                  "two whole blocks, mean, causal", "two whole blocks, last, causal"])
def test_key_and_value_blocks_read_through_tensor_descriptors_give_the_same_rows(device, case):
    """The setting that reads whole key and value blocks through tensor descriptors computes what the masked loads
    do, in every layout: a block reads keys past its basket and past the sequence, which the mask keeps out."""
    config = _descriptor_config(device)
    if "whole blocks" in case:
        _whole_blocks(device, torch.bfloat16 if "bf16" in case else torch.float32, "last" if "last" in case else "mean",
                      "causal" in case, config, blocks=2 if case.startswith("two") else 1)
    else:
        _check(device, torch.float32, config=config, **ALL_CASES[case])


def test_a_call_whose_keys_and_values_take_no_descriptor_reads_them_by_masked_loads(device):
    """The descriptor setting on K and V the hardware cannot address gives what the masked loads give: an empty
    batch (which a descriptor, of positive sizes only, refused with an assertion), a head size of 10 in bf16 (rows of
    20 bytes), a base 4 bytes off 16."""
    config = _descriptor_config(device)
    layout = basket_layout(torch.ones(0, 20, dtype=torch.long, device=device), "mean", 5, ())
    empty = _inputs(n=0, heads=4, kv_heads=2, length=20, dim=16, device=device)
    assert triton_attention.descriptors(*empty[1:], config.block_n, 16) is None
    assert fused_calibrated_attention(*empty, layout, 0.5, False, SCALE, config=config).shape == (0, 4, 20, 16)
    q, k, v = _inputs(n=1, heads=2, kv_heads=2, length=20, dim=16, device=device)
    shifted = torch.cat([k.new_zeros(1), k.flatten()])[1:].view_as(k)  # the same values, 4 bytes past a 16-byte base
    odd = [t[..., :10].to(torch.bfloat16).contiguous() for t in (q, k, v)]
    layout = basket_layout(_mask(20, [(2, 20)], device), "mean", 5, (("bos", "original"),))
    for inputs in ((q, shifted, v), odd):
        assert triton_attention.descriptors(*inputs[1:], config.block_n, 16) is None
        out = fused_calibrated_attention(*inputs, layout, 0.5, False, SCALE, config=config)
        masked = fused_calibrated_attention(*inputs, layout, 0.5, False, SCALE, config=dataclasses.replace(config, tma=False))
        assert torch.equal(out, masked)


@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize("blocks", [0.375, 1.0, 1.5, 2.0], ids=["baskets within a block", "baskets of a whole block",
                                                                "baskets spanning blocks", "baskets of two whole blocks"])
def test_keys_and_values_of_padded_positions_never_reach_a_row_that_does_not_see_them(device, tma, blocks):
    """NaN in K and V at padded positions (as a causal model's fully masked padded rows can leave in the next layer's
    keys): every row that sees no padded key is exact, whether blocks are read masked or whole through descriptors,
    in both loops of the kernel (baskets of ``blocks`` key blocks; the last one of each sequence shorter); and a
    sequence of padding alone, whose isolated tokens point at padding, is 0 (its isolated values were NaN x 0)."""
    config = _descriptor_config(device) if tma else None
    block = (config or launch_config(torch.float32, 16, False, device_arch(torch.device(device)))).block_n
    length = 2 * block + 5
    spans = [(0, length), (0, length - 15), (9, length), (0, 0)]  # the last: padding alone, its isolated tokens too
    q, k, v = _inputs(n=4, heads=4, kv_heads=2, length=length, dim=16, device=device)
    mask = _mask(length, spans, device)
    layout = basket_layout(mask, "mean", int(blocks * block), (("bos", "original"), ("eos", "equal")))
    padded = ~mask.bool()[:, None, :, None]
    poisoned_k, poisoned_v = k.masked_fill(padded, float("nan")), v.masked_fill(padded, float("nan"))
    out = fused_calibrated_attention(q, poisoned_k, poisoned_v, layout, 0.5, False, SCALE, config=config)
    expected = explicit_calibrated_attention(q.double(), k.double(), v.double(), layout, 0.5, False, SCALE)
    valid = mask.bool()[:, None, :, None].expand_as(out)
    assert (out[valid].double() - expected[valid]).abs().max().item() <= TOLERANCE[torch.float32]
    assert torch.equal(out[3], torch.zeros_like(out[3])) and torch.equal(expected[3], torch.zeros_like(expected[3]))


@pytest.mark.parametrize("case", POOLED_CASES)
def test_pooling_rows_match_the_explicit_softmax_and_the_pooled_row_path(device, case):
    """One row per sequence and head, (N, H, D): calibrated for active sequences, plain for the short last ones (the
    last sequence of the causal case is one token, first and last at once: one key)."""
    out, _, layout = _check(device, torch.float32, **POOLED_CASES[case])
    assert out.shape[1] == 4 and layout.active[0] and not layout.active[-1]


@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_follows_the_explicit_softmax(device, dtype, tma):
    """Inputs in bf16 or fp16, scores and sums in fp32: within the dtype's rounding of the float64 result, whether
    key and value blocks are read by masked loads or through descriptors."""
    config = _descriptor_config(device) if tma else None
    _check(device, dtype, pooling="mean", config=config, **MEAN_CASES["long baskets, causal"])
    _check(device, dtype, config=config, **POOLED_CASES["last, causal"])


def test_rows_left_alone_are_plain_attention(device):
    """Padded query rows get the plain softmax over the keys they may see, as SDPA gives them (and at strength 0
    every row does); a causal row before the first valid key sees none and gets 0."""
    spans = [(0, 25), (0, 14), (7, 25)]
    q, k, v = _inputs(n=3, heads=2, kv_heads=2, length=25, dim=16, device=device)
    mask = _mask(25, spans, device)
    layout = basket_layout(mask, "mean", 4, (("bos", "original"),))
    for causal, strength in ((False, 0.5), (True, 0.0)):
        allowed = mask.bool()[:, None, None, :]
        if causal:
            allowed = allowed & torch.ones(25, 25, dtype=torch.bool, device=device).tril()
        plain = torch.softmax((q @ k.transpose(-1, -2) * SCALE).masked_fill(~allowed, float("-inf")), -1).nan_to_num(0) @ v
        out = fused_calibrated_attention(q, k, v, layout, strength, causal, SCALE)
        left_alone = ~mask.bool()[:, None, :, None].expand_as(out) if strength else torch.ones_like(out, dtype=torch.bool)
        assert torch.allclose(out[left_alone], plain[left_alone], atol=1e-5)
        assert strength == 0 or not torch.allclose(out, plain, atol=1e-3)  # the valid rows did change
    assert torch.equal(out[2, :, :7], torch.zeros_like(out[2, :, :7]))  # causal, left padding: rows that see nothing


def test_shares_above_one_leave_the_content_nothing(device):
    """An "original" first token holding most of every row next to a fixed share of 0.6: the shares pass 1, so at
    full strength content gets 0 and the shares are scaled down to sum to 1 (calibration.basket_targets' open case)."""
    q, k, v = _inputs(n=1, heads=2, kv_heads=2, length=30, dim=16, device=device)
    toward = torch.full((16,), 0.25, device=device)  # a unit vector every query leans toward, and the first key on it
    q, k[:, :, 0] = q * 0.2 + 5 * toward, 20 * toward
    probs = torch.softmax(q.double() @ k.double().transpose(-1, -2) * SCALE, -1)
    assert (probs[..., 0] > 0.4).all()  # the case in question: 0.6 + the first token's share > 1
    layout = basket_layout(_mask(30, [(0, 30)], device), "mean", 7, (("bos", "original"), ("eos", 0.6)))
    out = fused_calibrated_attention(q, k, v, layout, 1.0, False, SCALE)
    first, last = probs[..., :1], 0.6
    mixed = (first * v[:, :, :1].double() + last * v[:, :, 29:].double()) / (first + last)
    assert (out.double() - mixed).abs().max().item() <= 1e-5


def test_a_basket_far_below_the_row_still_counts(device):
    """Baskets whose mass is e^-200 of the row's are non-empty, as in exact arithmetic: at full strength every one
    of the three gets a third of the row. The kernel never forms those masses, so fp32 cannot underflow them to 0
    (the PyTorch paths in fp32 count such a basket as empty, which float64 does not)."""
    q, k, v = _inputs(n=1, heads=1, kv_heads=1, length=24, dim=16, device=device)
    q[..., :] = 1.0
    k[:, :, :8] = 200.0 / 16 / SCALE  # scores of 200 on the first basket, a few units elsewhere
    layout = basket_layout(_mask(24, [(0, 24)], device), "mean", 8, ())
    out = fused_calibrated_attention(q, k, v, layout, 1.0, False, SCALE)
    baskets = [torch.softmax(q[0, 0].double() @ k[0, 0, b:b + 8].double().T * SCALE, -1) @ v[0, 0, b:b + 8].double()
               for b in (0, 8, 16)]
    assert (out[0, 0].double() - sum(baskets) / 3).abs().max().item() <= 1e-5
    expected = explicit_calibrated_attention(q.double(), k.double(), v.double(), layout, 1.0, False, SCALE)
    assert (out.double() - expected).abs().max().item() <= 1e-5


def test_a_prepared_layout_gives_the_same_rows(device):
    """fused_layout made once per pass and passed to every layer: the same output as the layout itself."""
    q, k, v = _inputs(n=2, heads=2, kv_heads=2, length=20, dim=16, device=device)
    layout = basket_layout(_mask(20, [(0, 20), (3, 20)], device), "last", 5, (("bos", "original"), ("eos", "equal")))
    assert torch.equal(fused_calibrated_attention(q, k, v, fused_layout(layout), 0.5, True, SCALE),
                       fused_calibrated_attention(q, k, v, layout, 0.5, True, SCALE))


def test_pooling_rows_written_into_the_layer_output_land_at_each_pooling_position(device):
    """out=: the rows go straight into the plain output (N, H, L, D) at each sequence's pooling position (left
    padding moves it), the same values as returned rows; every other row is left as it was."""
    q, k, v = _inputs(n=2, heads=4, kv_heads=2, length=20, dim=16, device=device)
    layout = basket_layout(_mask(20, [(0, 14), (3, 20)], device), "last", 5, (("bos", "original"),))
    rows = fused_calibrated_attention(q, k, v, layout, 0.5, True, SCALE)
    plain = torch.randn(2, 20, 4, 16, device=device)  # the layout an attention function returns
    written = plain.clone()
    returned = fused_calibrated_attention(q, k, v, layout, 0.5, True, SCALE, out=written.transpose(1, 2))
    assert returned.data_ptr() == written.data_ptr()
    expected = plain.clone()
    expected[torch.arange(2, device=device), layout.query_rows] = rows
    assert layout.query_rows.tolist() == [13, 19]
    assert torch.equal(written, expected)
    for wrong, why in ((written.transpose(1, 2)[:, :, :10], "is not shaped like query"),
                       (written.transpose(1, 2).double(), "is not shaped like query")):
        with pytest.raises(FusedAttentionRefused, match=why):
            fused_calibrated_attention(q, k, v, layout, 0.5, True, SCALE, out=wrong)
    mean = basket_layout(_mask(20, [(0, 14), (3, 20)], device), "mean", 5, ())
    with pytest.raises(FusedAttentionRefused, match="out= takes the pooling rows of cls/last pooling only"):
        fused_calibrated_attention(q, k, v, mean, 0.5, True, SCALE, out=written.transpose(1, 2))


def test_what_the_kernel_cannot_honour_is_refused_with_the_reason(device):
    q, k, v = _inputs(n=2, heads=4, kv_heads=2, length=12, dim=16, device=device)
    mask = _mask(12, [(0, 12), (0, 8)], device)
    layout = basket_layout(mask, "mean", 4, ())
    refusals = {
        "dtypes torch.float64": (q.double(), k.double(), v.double(), layout),
        "3 query heads are not a multiple of 2": (q[:, :3], k, v, layout),
        "6 keys for 12 queries": (q, k[:, :, :6], v[:, :, :6], layout),
        "head size 300": (torch.zeros(2, 4, 12, 300, device=device), *[torch.zeros(2, 2, 12, 300, device=device)] * 2, layout),
        "another batch": (q[:1], k[:1], v[:1], layout),
        r"another batch \(2 sequences of 20\)": (q, k, v, fused_layout(basket_layout(_mask(20, [(0, 20)] * 2, device),
                                                                                     "mean", 4, ()))),
        "no key/value heads": (q, k[:, :0], v[:, :0], layout),
        "require grad: the kernel has no backward pass": (q.clone().requires_grad_(), k, v, layout),
    }
    for why, (query, key, value, basket) in refusals.items():
        with pytest.raises(FusedAttentionRefused, match=why):
            fused_calibrated_attention(query, key, value, basket, 0.5, False, SCALE)
    with pytest.raises(FusedAttentionRefused, match=r"strength 1.5 is outside \[0, 1\]"):
        fused_calibrated_attention(q, k, v, layout, 1.5, False, SCALE)
    for scaling in (0.0, -0.25, float("nan"), float("inf")):  # every row would be NaN (-inf x 0 where masked)
        with pytest.raises(FusedAttentionRefused, match=f"scaling {scaling} is not a positive finite number"):
            fused_calibrated_attention(q, k, v, layout, 0.5, False, scaling)
    with torch.no_grad():  # without grad mode the same inputs are taken
        fused_calibrated_attention(q.clone().requires_grad_(), k, v, layout, 0.5, False, SCALE)
    for tiles, named in (((16, 24), "block_n=24"), ((8, 16), "block_m=8"), ((16, 16, 3), "num_warps=3"),
                         ((16, 16, 4, 0), "num_stages=0"), ((24, 16, 4, 0), "block_m=24, num_stages=0")):
        with pytest.raises(ValueError, match=f"LaunchConfig: {named}: tiles are powers of two"):  # not the compiler's
            triton_attention.LaunchConfig(*tiles)

    causal = mask.bool()[:, None, None, :] & torch.ones(12, 12, dtype=torch.bool, device=device).tril()
    assert unsupported_reason(q, k, v, layout, True, causal) is None
    assert unsupported_reason(q, k, v, layout, False, None) is None
    additive = torch.zeros(causal.shape, device=device).masked_fill_(~causal, torch.finfo(torch.float32).min)
    assert unsupported_reason(q, k, v, layout, True, additive) is None
    window = causal & ~torch.ones(12, 12, dtype=torch.bool, device=device).tril(-4)  # a sliding window of 4 keys
    assert "not padding on one side plus causality" in unsupported_reason(q, k, v, layout, True, window)
    assert "not padding on one side" in unsupported_reason(q, k, v, layout, False, additive + 0.5)  # an additive bias
    holes = mask.clone()
    holes[0, 5] = 0  # packed sequences: valid tokens with a gap
    layout_with_holes = basket_layout(holes, "mean", 4, ())
    assert "not padding on one side" in unsupported_reason(q, k, v, layout_with_holes, False, None)


def test_the_compiled_kernel_refuses_cpu_tensors_outside_the_interpreter(monkeypatch):
    monkeypatch.setattr(triton_attention, "_interpreting", lambda: False)
    q, k, v = _inputs(n=1, heads=2, kv_heads=2, length=8, dim=16)
    layout = basket_layout(torch.ones(1, 8, dtype=torch.long), "mean", 4, ())
    with pytest.raises(FusedAttentionRefused, match="device cpu: the compiled kernel runs on CUDA"):
        fused_calibrated_attention(q, k, v, layout, 0.5, False, SCALE)


def test_the_kernel_passes_its_first_use_check(device, monkeypatch):
    """Checked afresh on this device: kept, and no warning (a failure would print the check's reason)."""
    monkeypatch.setattr(triton_attention, "_VERIFIED", {})
    variants = [(torch.float32, 16, True, True, ("original", "equal"))]
    if device == "cuda":  # compiled: the kinds of call the supported models make (each compiles in seconds)
        variants = [(dtype, 64, False, False, ()) for dtype in (torch.float32, torch.bfloat16, torch.float16)]
        variants += [(torch.bfloat16, 32, False, False, ()), (torch.bfloat16, 64, True, False, ("original",)),
                     (torch.bfloat16, 128, True, True, ("original", "equal")), (torch.float32, 128, False, True, ())]
    for variant in variants:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert verified(torch.device(device), *variant), variant


def _wrong(query, key, value, layout, strength, causal, scaling, **options):
    return explicit_calibrated_attention(query, key, value, layout, min(1.0, strength + 0.1), causal, scaling)


def _raises(*args, **options):
    raise RuntimeError("PassManager::run failed\nmore detail")


@pytest.mark.parametrize(("kernel", "why"), [(_wrong, "differs from the explicit computation by"),
                                             (_raises, "raised RuntimeError: PassManager::run failed")])
def test_a_kernel_that_fails_its_first_use_check_is_set_aside(monkeypatch, kernel, why):
    """A Triton or GPU on which the kernel is wrong or does not compile (stood in for by a wrong function): a
    warning names the reason, and the answer is remembered, so the caller keeps the PyTorch path."""
    monkeypatch.setattr(triton_attention, "fused_calibrated_attention", kernel)
    monkeypatch.setattr(triton_attention, "_VERIFIED", {})
    with pytest.warns(RuntimeWarning, match=why):
        assert not verified(torch.device("cpu"), torch.float32, 16, False, False, ())
    assert triton_attention._VERIFIED == {("cpu", 0, torch.float32, 16, False, False, ()): False}  # per device type and capability


def test_without_triton_the_package_imports_and_the_kernel_refuses():
    """A CPU build of torch without triton: mteb_fairpos and this module import, and a call names what is missing."""
    code = (
        "import sys; sys.modules['triton'] = None\n"  # `import triton` now raises ImportError
        "import torch, mteb_fairpos\n"
        "from mteb_fairpos.calibration import basket_layout\n"
        "from mteb_fairpos.triton_attention import FusedAttentionRefused, fused_calibrated_attention, unsupported_reason\n"
        "q = torch.zeros(1, 2, 8, 16)\n"
        "layout = basket_layout(torch.ones(1, 8), 'mean', 4, ())\n"
        "print(unsupported_reason(q, q, q, layout, False, None))\n"
        "try:\n"
        "    fused_calibrated_attention(q, q, q, layout, 0.5, False, 0.25)\n"
        "except FusedAttentionRefused as err:\n"
        "    print(err)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("triton is not installed") and "CUDA builds of torch bring it" in lines[0]
    assert lines[1].startswith("fused calibrated attention: triton is not installed")


_MODELS = {
    "gte": lambda: GteConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=256, pad_token_id=0),
    "qwen3": lambda: Qwen3Config(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=16, intermediate_size=64, max_position_embeddings=256,
                                 pad_token_id=0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("model_name", "pooling", "left"), [("gte", "mean", False), ("gte", "cls", False),
                                                            ("qwen3", "last", True), ("qwen3", "mean", True)])
def test_a_calibrated_model_gives_the_same_output_through_the_kernel(device, model_name, pooling, left):
    """The backend wired to the kernel: a whole forward pass of a calibrated model (every calibrated layer
    through the kernel, selected once per pass) equals the PyTorch path's, with padding on the model's side;
    the kernel was really used (a pass that refuses it falls back silently, so the choice is checked too)."""
    torch.manual_seed(0)
    model = AutoModel.from_config(_MODELS[model_name](), attn_implementation="sdpa").eval().to(device)
    length = 40
    ids = torch.randint(1, 100, (2, length), generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.ones(2, length, dtype=torch.long, device=device)
    if left:
        mask[1, :11] = 0
    else:
        mask[1, length - 11:] = 0
    plan = attach(model, CalibrationConfig(basket_size=8, layers=1.0, strength=0.7), pooling)
    outputs, calls = {}, {}
    real = triton_attention.fused_calibrated_attention
    for enabled in (False, True, True):  # the first pass with the kernel also runs its first-use check
        used = []
        with fused_kernel(enabled), plan.applied(mask), torch.no_grad(), pytest.MonkeyPatch.context() as patch:
            patch.setattr(triton_attention, "fused_calibrated_attention", lambda *a, **k: used.append(1) or real(*a, **k))
            outputs[enabled] = model(input_ids=ids, attention_mask=mask).last_hidden_state
        calls[enabled] = len(used)
    assert calls == {False: 0, True: 2}  # both calibrated layers, and only with the kernel selected
    valid = mask.bool()
    torch.testing.assert_close(outputs[True][valid], outputs[False][valid], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_a_calibrated_pass_that_would_record_gradients_is_refused(device, pooling):
    """Calibration is for inference: its rows are written in place (by the kernel, which has no backward pass, or into
    SDPA's output), so a pass that records gradients is refused with what to do, on either path (the kernel gave
    SDPA's gradients silently, the PyTorch path an autograd error), and the same pass under no_grad runs."""
    from mteb_fairpos import UnsupportedModelError

    torch.manual_seed(0)
    model = AutoModel.from_config(_MODELS["gte"](), attn_implementation="sdpa").eval().to(device)
    ids = torch.randint(1, 100, (2, 40), generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.ones(2, 40, dtype=torch.long, device=device)
    mask[1, 29:] = 0
    plan = attach(model, CalibrationConfig(basket_size=8, layers=1.0, strength=0.7), pooling)
    for enabled in (False, True):
        with fused_kernel(enabled), plan.applied(mask):
            with pytest.raises(UnsupportedModelError, match=r"records no gradients.*torch.no_grad\(\)"):
                model(input_ids=ids, attention_mask=mask)
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask)


@pytest.mark.parametrize("device", DEVICES)
def test_a_sliding_window_layer_keeps_the_pytorch_path_whatever_length_its_model_was_checked_at(device):
    """The model's mask is checked at the longest length seen and remembered per kind of layer, where a row filled
    that length: a Qwen3 whose second layer slides over 12 keys fits the kernel at 10 tokens in both layers, and at
    20 or 24 in the full layer only. A batch padded to 24 whose rows hold at most 12 tokens fits both, but teaches
    nothing about 20 full tokens. Every pass equals the PyTorch path's; the calls count the layers on the kernel."""
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, intermediate_size=64, max_position_embeddings=256, pad_token_id=0,
                         use_sliding_window=True, sliding_window=12, max_window_layers=1)
    assert config.layer_types == ["full_attention", "sliding_attention"]
    model = AutoModel.from_config(config, attn_implementation="sdpa").eval().to(device)
    plan = attach(model, CalibrationConfig(basket_size=4, layers=1.0, strength=0.7), "last")
    real = triton_attention.fused_calibrated_attention
    calls = []
    # (length, tokens of the longest row); the first pass also runs the kernel's first-use check
    for length, longest in ((10, 10), (10, 10), (24, 12), (20, 20), (24, 24), (10, 10)):
        ids = torch.randint(1, 100, (2, length), generator=torch.Generator().manual_seed(length)).to(device)
        mask = torch.zeros(2, length, dtype=torch.long, device=device)
        mask[0, length - longest:] = 1  # left padding, as a causal model is fed
        mask[1, length - longest + 3:] = 1
        outputs, used = {}, []
        for enabled in (False, True):
            with fused_kernel(enabled), plan.applied(mask), torch.no_grad(), pytest.MonkeyPatch.context() as patch:
                patch.setattr(triton_attention, "fused_calibrated_attention", lambda *a, **k: used.append(1) or real(*a, **k))
                outputs[enabled] = model(input_ids=ids, attention_mask=mask).last_hidden_state
        calls.append(len(used))
        torch.testing.assert_close(outputs[True][mask.bool()], outputs[False][mask.bool()], rtol=1e-5, atol=1e-5)
    assert calls[1:] == [2, 2, 1, 1, 2]
    assert plan.fitted == {("full_attention", True, ()): 24, ("sliding_attention", True, ()): 10}
    assert plan.refused == {("sliding_attention", True, ()): 20}


def test_a_layers_mask_kind_is_what_names_every_layer_or_the_layer_itself():
    """``layer_types`` name the kinds only where they name every block: a model whose blocks include others (a
    vision tower's, before the text layers) remembers each layer's check for that layer alone."""
    from mteb_fairpos.attention import mask_kinds, transformer_layers

    config = Qwen3Config(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, intermediate_size=64, use_sliding_window=True, sliding_window=12, max_window_layers=1)
    model = AutoModel.from_config(config)
    blocks = transformer_layers(model)
    assert mask_kinds(model, blocks) == ("full_attention", "sliding_attention")
    model.config.layer_types = ["sliding_attention"]  # names fewer layers than the model has blocks
    assert mask_kinds(model, blocks) == ("layer 0", "layer 1")


def test_the_gpu_runs_kernel_table_compares_the_kernel_with_the_path_the_backend_runs_without_it():
    """benchmarks/gpu/bench_kernels.py's fused table (run.sh's kernels step), on its dry-run shapes: the kernel
    passes its first-use check and agrees with the PyTorch path it is timed against, for every row and the
    pooling rows, and the plain Triton loop it is also timed against computes SDPA's rows (here interpreted;
    compiled on CUDA in the GPU run)."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "gpu"))
    from bench_kernels import QUICK_SHAPES, measure_fused

    device = DEVICES[0]
    for shape in QUICK_SHAPES:
        row = measure_fused(device, "fp32", shape, 16, 0.001)
        assert row["exact"] and row["max_abs_vs_path"] <= 1e-5, row
        assert (row["plain_triton_max_abs_vs_sdpa"] <= 1e-5) if shape.pooling == "mean" else "plain_triton_ms" not in row, row


def test_the_gpu_runs_tuning_times_each_setting_and_its_fastest_against_sdpa_and_the_plain_loop():
    """bench_kernels.py --tune on its dry-run shape (masked loads and tensor descriptors): every setting runs and keeps
    the default's output, and the fastest is also timed against SDPA and against the plain Triton loop under the same
    setting, which computes SDPA's rows whichever way it reads K and V. The fastest, where it is not the default, is
    then timed on the other mean-row shapes of its head size, and only there."""
    from torch.nn.functional import scaled_dot_product_attention

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "gpu"))
    from bench_kernels import (QUICK_SHAPES, QUICK_TUNING, TUNED_TOLERANCE, FusedShape, across_lengths,
                               plain_triton_attention, tune_fused)

    device, shape = DEVICES[0], QUICK_SHAPES[0]
    rows = tune_fused(device, "bf16", shape, 16, 0.001, QUICK_TUNING)
    assert len(rows) == 1 + len(QUICK_TUNING), rows
    assert all(row["max_abs_vs_default"] <= TUNED_TOLERANCE["bf16"] for row in rows), rows
    timed = [row for row in rows if "sdpa_ms" in row]
    assert len(timed) == 1 and timed[0]["ms"] == min(row["ms"] for row in rows) and timed[0]["plain_triton_ms"] > 0
    longer, wider = FusedShape("toy-mean-80", 2, 80, 2, 2, 32, "mean", False), FusedShape("toy-mean-64x64", 2, 64, 2, 2, 64, "mean", False)
    fastest = [{**row, "ms": 0.5 * min(r["ms"] for r in rows) if row is rows[-1] else row["ms"]} for row in rows]
    elsewhere = across_lengths(device, "bf16", (*QUICK_SHAPES, longer, wider), shape, fastest, 16, 0.001)
    assert [(row["case"], row["config"]) for row in elsewhere] == [("toy-mean-80", rows[-1]["config"])], elsewhere
    assert elsewhere[0]["max_abs_vs_default"] <= TUNED_TOLERANCE["bf16"] and elsewhere[0]["vs_default"] > 0
    assert across_lengths(device, "bf16", (*QUICK_SHAPES, longer), shape, rows[:1], 16, 0.001) == []  # the default won
    q, k, v = _inputs(n=2, heads=4, kv_heads=2, length=50, dim=32, device=device)  # a last key block cut short
    for setting, causal in itertools.product(QUICK_TUNING, (False, True)):
        expected = scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.25, enable_gqa=True)
        out = plain_triton_attention(q, k, v, causal, 0.25, triton_attention.LaunchConfig(*setting))
        assert (out - expected).abs().max().item() <= 1e-5, (setting, causal)


def test_tuned_launch_settings_reach_the_model_benchmark_for_the_gpu_they_were_tuned_on(tmp_path, monkeypatch):
    """bench_kernels.py --tune picks the fastest setting within the dtype's rounding of the default, per dtype and head
    size, on the first shape tuned at that size (a setting that failed or strayed is never picked, nor one timed on a
    later shape, of another length); bench_calibration.py --kernel-configs puts the picks
    into CONFIGS for that compute capability alone, right before the entry it takes over (smaller heads keep their
    entries), and names the file it cannot use."""
    import json

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "gpu"))
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from bench_calibration import use_kernel_configs
    from bench_kernels import tuned

    def row(config, ms, diff, head=64):
        return {"case": f"mean-{head}", "dtype": "bf16", "head_dim": head, "arch": 90, "config": dict(zip(("block_m",
                "block_n", "num_warps", "num_stages"), config)), "ms": ms, "max_abs_vs_default": diff, "vs_default": ms / 2.0}

    rows = [row((64, 64, 4, 3), 2.0, 0.0), {**row((64, 128, 4, 3), 1.5, 1e-3), "sdpa_ms": 1.2, "plain_triton_ms": 1.32},
            row((128, 128, 8, 2), 1.0, 0.5),
            {"case": "mean-64", "dtype": "bf16", "head_dim": 64, "config": {}, "why": "OutOfResources"},
            row((64, 128, 8, 2), 3.0, 0.0, head=128), {**row((64, 64, 4, 2), 0.3, 0.0), "case": "mean-64-short"}]
    picks = tuned(rows)
    assert [(p["largest"], p["config"]["block_n"], p["config"]["num_warps"]) for p in picks] == [(64, 128, 4), (128, 128, 8)]
    assert [p["case"] for p in picks] == ["mean-64", "mean-128"]
    # the pick's time and the plain loop's under it over SDPA, where the tuning timed them
    assert picks[0]["vs_sdpa"] == pytest.approx(1.25) and picks[0]["plain_triton_vs_sdpa"] == pytest.approx(1.1)
    assert "vs_sdpa" not in picks[1]
    path = tmp_path / "kernels.json"
    picks[0]["config"]["tma"] = True  # a setting the smaller heads' entry does not have
    path.write_text(json.dumps({"launch_configs": picks}))
    monkeypatch.setattr(triton_attention, "CONFIGS", triton_attention.CONFIGS)
    monkeypatch.setattr(triton_attention, "_interpreting", lambda: False)  # the settings as a GPU gets them
    others = [(torch.bfloat16, 32, False, 90), (torch.float16, 64, False, 90), (torch.bfloat16, 64, False, 80),
              (torch.bfloat16, 64, True, 90)]  # a smaller head, another dtype, GPU or pooling
    untouched = [triton_attention.launch_config(*call) for call in others]
    before = triton_attention.CONFIGS
    use_kernel_configs(str(path))
    assert len(triton_attention.CONFIGS) == len(before) + 2
    assert triton_attention.launch_config(torch.bfloat16, 64, False, 90) == triton_attention.LaunchConfig(64, 128, 4, 3, tma=True)
    assert triton_attention.launch_config(torch.bfloat16, 128, False, 90) == triton_attention.LaunchConfig(**picks[1]["config"])
    assert [triton_attention.launch_config(*call) for call in others] == untouched
    path.write_text(json.dumps({"launch_configs": [{k: v for k, v in picks[0].items() if k != "arch"}]}))
    with pytest.raises(SystemExit, match=f"--kernel-configs {path}: .*'arch'"):
        use_kernel_configs(str(path))


def test_cuda_runs_the_kernel_by_default_where_an_h200_measured_it_faster_than_the_pytorch_path():
    """The pooling rows in every dtype; mean pooling in half precision, on the grouped path only. In fp32 the
    kernel's mean rows ran 1.4-3x slower than the PyTorch path on an H200, so CUDA keeps that path there."""
    from mteb_fairpos.attention import kernel_by_default

    assert all(kernel_by_default(dtype, True, path) for dtype in (torch.float32, torch.bfloat16) for path in ("grouped", "tiled"))
    assert kernel_by_default(torch.bfloat16, False, "grouped") and kernel_by_default(torch.float16, False, "grouped")
    assert not kernel_by_default(torch.float32, False, "grouped") and not kernel_by_default(torch.bfloat16, False, "tiled")
