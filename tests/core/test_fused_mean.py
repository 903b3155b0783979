"""Mean pooling through fused attention over key groups, against the explicit calibrated softmax.

The model-level equivalence with the nnsight reference is in ``test_equivalence.py`` (it runs this
path by default); here the kernel itself: the private CPU op's contract, grouped-query heads,
causal and padded masks, every share policy, half precision, fully masked rows. The tests taking
``device`` run on every device present (the CPU, and CUDA where ``torch.cuda.is_available()``).
"""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

from mteb_fairpos import attention
from mteb_fairpos.attention import grouped_mean_rows, mean_kernel, tiled_mean_rows
from mteb_fairpos.calibration import basket_layout
from mteb_fairpos.config import CalibrationConfig
from mteb_fairpos.lse_kernels import CANDIDATES, LSE_KERNELS, attention_with_lse, explicit_with_lse, verified_kernel
from test_equivalence import DEVICES


def _inputs(n=3, heads=4, kv_heads=4, length=23, dim=8, seed=0, dtype=torch.float32, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n, heads, length, dim, generator=generator) * 2
    k = torch.randn(n, kv_heads, length, dim, generator=generator) * 2
    v = torch.randn(n, kv_heads, length, dim, generator=generator)
    return q.to(device, dtype), k.to(device, dtype), v.to(device, dtype)


def _padding(n, length, lengths, side="right", device="cpu"):
    mask = torch.zeros(n, length, dtype=torch.long)
    for i, size in enumerate(lengths):
        if side == "right":
            mask[i, :size] = 1
        else:
            mask[i, length - size:] = 1
    return mask.to(device)


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def _dyadic(tensor, steps):
    """``tensor`` rounded to multiples of 1 / ``steps`` (a power of two): products and sums of such
    values stay exact in fp32 while they are small, whatever order a kernel adds them in."""
    return torch.round(tensor * steps) / steps


@pytest.fixture(params=["held", "running sums"])
def combine(request, monkeypatch):
    """Both ways grouped_mean_rows combines its baskets: every output kept until the end (up to
    HELD_BASKETS baskets), or two running sums (beyond); each test below runs both."""
    monkeypatch.setattr(attention, "HELD_BASKETS", 10**6 if request.param == "held" else 0)
    return request.param


def test_the_cpu_kernel_returns_the_log_sum_exp_it_promises():
    """Fails loudly if a torch release changes the private op behind attention_with_lse."""
    assert hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")
    q, k, v = _inputs(kv_heads=2)
    bias = torch.zeros(3, 1, 23, 23).masked_fill_(torch.rand(3, 1, 23, 23, generator=torch.Generator().manual_seed(1)) < 0.3,
                                                   float("-inf"))
    bias[..., 0] = 0.0  # every row sees at least one key
    out, lse = attention_with_lse(q, k, v, bias, 0.35)
    grouped_q = q.reshape(3, 2, 2 * 23, 8)
    expected_out, expected_lse = explicit_with_lse(grouped_q, k, v, bias.repeat(1, 1, 2, 1), 0.35)
    assert lse.dtype == torch.float32 and lse.shape == (3, 4, 23)
    assert torch.allclose(lse, expected_lse.reshape(3, 4, 23), atol=1e-5)
    assert torch.allclose(out, expected_out.reshape(3, 4, 23, 8), atol=1e-5)
    scores = (q @ k.repeat_interleave(2, dim=1).transpose(-1, -2)) * 0.35 + bias
    assert torch.allclose(lse, torch.logsumexp(scores, -1), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_explicit_fallback_scores_half_precision_inputs_in_fp32(dtype):
    """The fallback that stands in for a kernel sets its scores from the inputs' exact products (as a half-precision
    matrix unit accumulates them in fp32), not from their sums rounded to the inputs' precision: its log-sum-exp
    follows float64 to fp32 rounding (bf16 sums: errors of 0.03)."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = ((torch.randn(1, 2, 64, 64, generator=generator) * scale).to(dtype) for scale in (2, 2, 1))
    out, lse = explicit_with_lse(q, k, v, None, 0.125)
    expected_out, expected_lse = explicit_with_lse(q.double(), k.double(), v.double(), None, 0.125)
    assert lse.dtype == torch.float32
    assert (lse.double() - expected_lse).abs().max().item() <= 1e-5
    assert (out.double() - expected_out).abs().max().item() <= 4 * torch.finfo(dtype).eps  # P and its product: rounded


def test_a_head_dimension_with_a_stride_gives_the_same_rows(device):
    """Views whose head dimension is strided (every other element of a wider tensor) give the rows their contiguous
    copies give: the fused ops read that dimension as contiguous (before, one sequence's mean rows were off by 1.5)."""
    wide = _inputs(n=1, kv_heads=2, length=12, dim=16, device=device)
    strided = tuple(t[..., ::2] for t in wide)
    copies = tuple(t.contiguous() for t in strided)
    assert strided[0].stride(-1) == 2
    bias = torch.zeros(1, 1, 1, 12, device=device)
    for got, expected in zip(attention_with_lse(*strided, bias, 0.35), attention_with_lse(*copies, bias, 0.35)):
        assert torch.equal(got, expected)
    layout = basket_layout(_padding(1, 12, [9], "left", device), "mean", 3, ())
    rows = [attention.grouped_mean_rows(*t, None, False, 0.35, layout, 1.0) for t in (strided, copies)]
    assert torch.equal(rows[0], rows[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_cpu_kernel_passes_its_first_use_check(dtype):
    for head_dim in (8, 32, 64, 128):
        assert verified_kernel(torch.device("cpu"), dtype, head_dim) is LSE_KERNELS["cpu"]


def _masked_problem(device, dtype):
    """Grouped-query inputs with a per-row mask: every row sees its first key, row 5 of the second
    sequence sees none."""
    q, k, v = _inputs(kv_heads=2, device=device)
    allowed = torch.rand(3, 1, 23, 23, generator=torch.Generator().manual_seed(3)) > 0.3
    allowed[..., 0] = True
    allowed[1, :, 5] = False
    bias = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf")).to(device)
    return (q.to(dtype), k.to(dtype), v.to(dtype)), bias, allowed.any(-1).expand(3, 4, 23).to(device)


@pytest.mark.parametrize(("dtype", "tolerance", "relative"), [(torch.bfloat16, 5e-2, 1.5e-2), (torch.float16, 1e-2, 2e-3)])
def test_the_kernel_in_half_precision_follows_fp32(device, dtype, tolerance, relative):
    """attention_with_lse in bf16/fp16 against fp32 on the same inputs differs by the rounding of the inputs
    and the output alone (bf16 keeps 8 bits of mantissa, fp16 11): outputs (values of about 1) within
    ``tolerance``, log-sum-exps (up to 12 here: the error grows with the scores) within ``relative`` of their
    size. Twice what the CPU gave (bf16 0.024 and 0.0076, fp16 0.0031 and 0.00066)."""
    (q, k, v), bias, seen = _masked_problem(device, torch.float32)
    out32, lse32 = attention_with_lse(q, k, v, bias, 0.35)
    out, lse = attention_with_lse(q.to(dtype), k.to(dtype), v.to(dtype), bias.to(dtype), 0.35)
    assert out.dtype == dtype and lse.dtype == torch.float32 and not torch.isnan(out[seen]).any()
    assert (out.float()[seen] - out32[seen]).abs().max().item() <= tolerance
    assert ((lse[seen] - lse32[seen]).abs() / lse32[seen].abs().clamp(min=1)).max().item() <= relative


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_fully_masked_row_gives_zeros(device, dtype):
    (q, k, v), bias, seen = _masked_problem(device, dtype)
    out, _ = attention_with_lse(q, k, v, bias.to(dtype), 0.35)
    assert not seen.all() and torch.equal(out[~seen], torch.zeros_like(out[~seen]))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_first_use_check_passes_on_each_device(monkeypatch, device, dtype):
    """The check's outcome on this device, read afresh: the default kernel is kept; if it is set aside,
    the failure names the reason the check gave (the warning users see)."""
    import mteb_fairpos.lse_kernels as lse_kernels

    monkeypatch.setattr(lse_kernels, "_VERIFIED", {})
    for head_dim in (32, 64, 128):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kernel = verified_kernel(torch.device(device), dtype, head_dim)
        reasons = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert kernel is LSE_KERNELS[device], f"{device}/{dtype}/{head_dim}: {kernel} in use; {reasons}"
        assert not reasons


@pytest.mark.parametrize("name", ["cuda_memory_efficient", "cuda_cudnn", "flex"])
def test_each_cuda_candidate_is_exact_or_set_aside_with_its_reason(name):
    """Every candidate behind the CUDA default either reproduces the explicit computation or is set aside
    with a warning naming it and why, in each dtype (cuDNN takes half precision only)."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available: the candidates are CUDA kernels")
    import mteb_fairpos.lse_kernels as lse_kernels

    kernel = next(k for k in CANDIDATES["cuda"] if k.__name__ == name)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exact = lse_kernels.reproduces_explicit(kernel, torch.device("cuda"), dtype, 64)
        assert exact or any(f"fused kernel {name} is not used on cuda" in str(w.message) for w in caught)
    assert lse_kernels.reproduces_explicit(kernel, torch.device("cuda"), torch.bfloat16, 64), \
        f"{name} fails its check in bf16, the dtype it is a candidate for"


def test_the_flex_adapter_meets_the_check_through_eager_flex(monkeypatch):
    """The flex candidate's own work (the mask as a score modification, the log-sum-exp through
    ``return_aux``) checked on the CPU, where compiled flex_attention cannot return the log-sum-exp:
    its eager form (the same function, unfused) stands in for the compiled one."""
    import mteb_fairpos.lse_kernels as lse_kernels
    from torch.nn.attention.flex_attention import flex_attention

    monkeypatch.setattr(lse_kernels, "_compiled_flex", lambda: flex_attention)
    assert lse_kernels.reproduces_explicit(lse_kernels.flex, torch.device("cpu"), torch.float32, 8)


def _off_by_one(query, key, value, bias, scaling):
    out, lse = explicit_with_lse(query, key, value, bias, scaling)
    return out, lse + 1


def _raises(query, key, value, bias, scaling):
    raise RuntimeError("attn_bias is not correctly aligned\nmore detail")


@pytest.mark.parametrize(("kernel", "why"), [(_off_by_one, "differs from the explicit computation"),
                                             (_raises, "raised RuntimeError: attn_bias is not correctly aligned")])
def test_a_kernel_that_fails_its_first_use_check_is_set_aside(monkeypatch, kernel, why):
    """A private op that changed in a torch release (stood in for by a wrong kernel registered for the
    CPU) is not used: a warning says so, and the rows come from the explicit computation, still exact."""
    import mteb_fairpos.lse_kernels as lse_kernels

    monkeypatch.setitem(LSE_KERNELS, "cpu", kernel)
    monkeypatch.setattr(lse_kernels, "_VERIFIED", {})
    q, k, v = _inputs()
    padding = _padding(3, 23, (23, 17, 9))
    config = CalibrationConfig(basket_size=4, strength=0.5, pooling="mean")
    layout = basket_layout(padding, "mean", 4, config.isolated_tokens("mean"))
    mask = padding.bool()[:, None, None, :].expand(3, 1, 23, 23)
    with pytest.warns(RuntimeWarning, match=why):
        grouped = grouped_mean_rows(q, k, v, mask, False, 0.35, layout, 0.5)
    assert verified_kernel(torch.device("cpu"), torch.float32, 8) is None
    explicit = tiled_mean_rows(q, k, v, mask, False, 0.35, layout, 0.5)
    rows = padding.bool()[:, :, None, None]
    assert torch.allclose(grouped * rows, explicit * rows, atol=1e-5)


def _efficient_attention_contract(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *,
                                  scale=None):
    """Stands in for CUDA's aten::_scaled_dot_product_efficient_attention, which cannot run without a GPU:
    the same computation with the same contract (a bias of the full (N, H, L, S) shape whose batch,
    head and row strides are multiples of 16, and a log-sum-exp padded to a multiple of 32 rows,
    with junk in the padding)."""
    if attn_bias is not None:
        if attn_bias.shape != (*query.shape[:3], key.shape[2]):
            raise RuntimeError(f"attn_bias shape {tuple(attn_bias.shape)} does not match the attention")
        if any(stride % 16 for stride in attn_bias.stride()[:3]):
            raise RuntimeError("attn_bias is not correctly aligned")
    out, lse = explicit_with_lse(query, key, value, attn_bias, scale)
    padded = torch.full((*lse.shape[:2], -(-lse.shape[2] // 32) * 32), float("inf"))
    padded[..., : lse.shape[2]] = lse
    return out, padded, torch.empty(()), torch.empty(())


def test_the_cuda_kernel_adapter_meets_the_ops_contract(monkeypatch):
    """The CUDA adapter's own work (aligning the bias, cutting the lse back) checked on the CPU with the op
    replaced by its contract (no GPU here): it reproduces the explicit computation for every mask kind
    of the first-use check, at row counts that are not multiples of 16 or 32."""
    import mteb_fairpos.lse_kernels as lse_kernels

    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_efficient_attention", _efficient_attention_contract)
    assert lse_kernels.reproduces_explicit(lse_kernels.cuda_memory_efficient, torch.device("cpu"), torch.float32, 8)
    q, k, v = _inputs(length=23)
    bias = torch.zeros(3, 1, 1, 23).masked_fill_(_padding(3, 23, (23, 17, 9)).bool()[:, None, None, :] == 0, float("-inf"))
    out, lse = lse_kernels.cuda_memory_efficient(q, k, v, bias, 0.35)
    expected_out, expected_lse = explicit_with_lse(q, k, v, bias, 0.35)
    assert lse.shape == (3, 4, 23) and torch.allclose(lse, expected_lse) and torch.allclose(out, expected_out)


def test_the_cuda_op_still_has_the_signature_the_adapter_and_its_stand_in_use():
    """The CUDA op cannot run here, but every torch build registers its schema: a release that renames,
    reorders or drops an argument the adapter passes, or moves the log-sum-exp among the returns, fails
    here on the CPU, instead of being set aside with a warning on a user's GPU; and the stand-in above
    cannot drift from the real op."""
    passed = ["query", "key", "value", "attn_bias", "compute_log_sumexp", "dropout_p", "is_causal"]  # in this order
    schema = torch.ops.aten._scaled_dot_product_efficient_attention.default._schema
    assert [argument.name for argument in schema.arguments if not argument.kwarg_only][: len(passed)] == passed
    assert "scale" in [argument.name for argument in schema.arguments if argument.kwarg_only]
    # the adapter unpacks four results and keeps the first two
    assert [result.name for result in schema.returns] == ["output", "log_sumexp", "philox_seed", "philox_offset"]
    stand_in = inspect.signature(_efficient_attention_contract).parameters.values()
    assert [p.name for p in stand_in if p.kind is not p.KEYWORD_ONLY] == passed
    assert [p.name for p in stand_in if p.kind is p.KEYWORD_ONLY] == ["scale"]


CASES = [
    ("right", False, CalibrationConfig(basket_size=4, strength=1.0, pooling="mean")),
    ("left", False, CalibrationConfig(basket_size=5, strength=0.5, pooling="mean")),
    ("right", True, CalibrationConfig(basket_size=4, strength=1.0, pooling="mean")),
    ("left", True, CalibrationConfig(basket_size=3, strength=0.7, pooling="mean")),
    ("right", False, CalibrationConfig(basket_size=4, strength=1.0, pooling="mean", isolate_bos=True, bos_share="original",
                                       isolate_eos=True, eos_share="equal")),
    ("left", True, CalibrationConfig(basket_size=4, strength=0.5, pooling="mean", isolate_bos=True, bos_share=0.3,
                                     isolate_eos=True, eos_share="original")),
    ("right", False, CalibrationConfig(basket_size=2, strength=1.0, pooling="mean", isolate_bos=True, bos_share=0.9,
                                       isolate_eos=True, eos_share="equal")),  # shares above 1
]


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize(("side", "causal", "config"), CASES)
def test_grouped_rows_equal_the_explicit_calibrated_softmax(side, causal, config, kv_heads, combine, device):
    q, k, v = _inputs(kv_heads=kv_heads, device=device)
    padding = _padding(3, 23, (23, 17, 9), side, device)
    layout = basket_layout(padding, "mean", config.basket_size, config.isolated_tokens("mean"))
    valid = padding.bool()
    mask = valid[:, None, None, :].expand(3, 1, 23, 23)
    if causal:
        mask = mask & torch.ones(23, 23, dtype=torch.bool, device=device).tril()
    for given in (mask, torch.zeros(mask.shape, device=device).masked_fill_(~mask, torch.finfo(torch.float32).min)):
        grouped = grouped_mean_rows(q, k, v, given, causal, 0.35, layout, config.strength)
        explicit = tiled_mean_rows(q, k, v, given, causal, 0.35, layout, config.strength)
        rows = valid[:, :, None, None]  # padded query rows are never pooled
        assert torch.allclose(grouped * rows, explicit * rows, atol=1e-5), (grouped - explicit).abs().max()


def test_a_causal_model_without_a_mask(combine, device):
    """Unpadded causal batches reach attention with no mask at all (transformers leaves it to the kernel's
    causal flag); the rows then see the keys up to their own position."""
    q, k, v = _inputs(kv_heads=2, device=device)
    config = CalibrationConfig(basket_size=4, strength=0.7, pooling="mean", isolate_eos=True)
    layout = basket_layout(torch.ones(3, 23, dtype=torch.long, device=device), "mean", 4, config.isolated_tokens("mean"))
    grouped = grouped_mean_rows(q, k, v, None, True, 0.35, layout, 0.7)
    explicit = tiled_mean_rows(q, k, v, None, True, 0.35, layout, 0.7)
    assert torch.allclose(grouped, explicit, atol=1e-5), (grouped - explicit).abs().max()


@pytest.mark.parametrize("gap", [30.0, 80.0, 95.0, 150.0])
@pytest.mark.parametrize(("side", "causal"), [("right", False), ("left", True)])
def test_wide_logit_gaps_between_baskets(gap, side, causal, combine):
    """One basket's scores sit ``gap`` above the rest.

    * 30 and 80: the rows' frame moves (the weighted sum is rescaled); the other baskets keep tiny
      but normal fp32 masses. Both paths agree.
    * 95: those masses are fp32 subnormals, where whether an exp still gives a non-zero value
      depends on the kernel, and so does whether docs/method.md#s1-3 counts the basket as empty. Both paths
      must stay finite (the explicit one divided by such masses and overflowed to NaN before) and
      keep rows that sum to 1.
    * 150: the masses underflow to 0 everywhere and the baskets count as empty, as in the explicit
      softmax (their outputs are taken back out of the basket sum). Both paths agree.

    Scores near 150 carry fp32 rounding of about 1e-5 wherever the dot products are summed in a
    different order (the GEMMs of AVX2 and AVX-512 CPUs do), which alone would part the two paths
    by 2e-5. So queries and keys sit on a dyadic grid and the scale is a power of two: every score
    is exact in fp32, the same in both paths on any CPU, and what is compared is the calibration.
    """
    q, k, v = _inputs()
    generator = torch.Generator().manual_seed(2)
    q = _dyadic(1 + 0.1 * torch.randn(q.shape, generator=generator), 16)  # every query leans the same way, and
    k = _dyadic(0.05 * k, 64)  # scores stay within about 0.3 of each other ...
    k[:, :, 13:17] += gap / (0.25 * 8)  # ... but for the basket holding keys 13-16: `gap` higher
    padding = _padding(3, 23, (23, 20, 19), side)
    config = CalibrationConfig(basket_size=4, strength=0.5, pooling="mean", isolate_bos=True, bos_share="original")
    layout = basket_layout(padding, "mean", 4, config.isolated_tokens("mean"))
    mask = padding.bool()[:, None, None, :].expand(3, 1, 23, 23)
    if causal:
        mask = mask & torch.ones(23, 23, dtype=torch.bool).tril()
    rows = padding.bool()[:, :, None, None]
    for values in (v, torch.ones_like(v)):
        grouped = grouped_mean_rows(q, k, values, mask, causal, 0.25, layout, 0.5)
        explicit = tiled_mean_rows(q, k, values, mask, causal, 0.25, layout, 0.5)
        assert torch.isfinite(grouped).all() and torch.isfinite(explicit * rows).all()
        if values is not v:  # values of 1: every calibrated row still sums to 1
            for out in (grouped, explicit):
                assert torch.allclose(out * rows, rows.float().expand_as(out), atol=1e-5)
        elif gap != 95.0:
            assert torch.allclose(grouped * rows, explicit * rows, atol=1e-5), (grouped - explicit).abs().max()


def test_calibrated_rows_stay_distributions_and_masked_rows_are_zero(combine, device):
    q, k, _ = _inputs(device=device)
    ones = torch.ones(3, 4, 23, 8, device=device)
    padding = _padding(3, 23, (23, 17, 9), device=device)
    config = CalibrationConfig(basket_size=4, strength=1.0, pooling="mean", isolate_bos=True, bos_share=0.2)
    layout = basket_layout(padding, "mean", 4, config.isolated_tokens("mean"))
    mask = padding.bool()[:, None, None, :].expand(3, 1, 23, 23).clone()
    mask[0, :, 5] = False  # a query row that sees no key at all
    out = grouped_mean_rows(q, k, ones, mask, False, 0.35, layout, 1.0)  # values of 1: the output is the row sum
    assert not torch.isnan(out).any()
    assert torch.equal(out[0, 5], torch.zeros(4, 8, device=device))
    rows = padding.bool().clone()
    rows[0, 5] = False
    assert torch.allclose(out[rows], torch.ones_like(out[rows]), atol=1e-6)


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.bfloat16, 3e-2), (torch.float16, 5e-3)])
def test_half_precision_follows_fp32(dtype, tolerance, combine, device):
    """Log-sum-exps and sums are kept in fp32, so half precision differs from fp32 by its rounding only."""
    q, k, v = _inputs(device=device)
    padding = _padding(3, 23, (23, 17, 9), "left", device)
    config = CalibrationConfig(basket_size=4, strength=0.5, pooling="mean", isolate_eos=True)
    layout = basket_layout(padding, "mean", 4, config.isolated_tokens("mean"))
    mask = padding.bool()[:, None, None, :].expand(3, 1, 23, 23)
    reference = grouped_mean_rows(q, k, v, mask, False, 0.35, layout, 0.5)
    half = grouped_mean_rows(q.to(dtype), k.to(dtype), v.to(dtype), mask, False, 0.35, layout, 0.5)
    assert half.dtype == dtype and not torch.isnan(half).any()
    rows = padding.bool()
    assert (half.float()[rows] - reference[rows]).abs().max().item() <= tolerance
    ones = grouped_mean_rows(q.to(dtype), k.to(dtype), torch.ones_like(v, dtype=dtype), mask, False, 0.35, layout, 0.5)
    assert (ones.float()[rows] - 1).abs().max().item() <= tolerance  # rows sum to 1 within the dtype


@pytest.mark.parametrize("lengths", [(61, 61), (61, 50)])
def test_a_short_last_basket_is_widened_to_a_full_key_block(lengths, combine, device):
    """Basket size 32 over 61 keys: the last basket holds 29. Its window takes 32 keys, widened
    backwards over basket 0's last three (the kernel is much slower on odd key counts), which are
    masked out; the rows still equal the explicit ones."""
    q, k, v = _inputs(n=2, length=61, dim=16, device=device)
    padding = _padding(2, 61, lengths, device=device)
    config = CalibrationConfig(basket_size=32, strength=0.8, pooling="mean")
    layout = basket_layout(padding, "mean", 32, config.isolated_tokens("mean"))
    last = attention._basket_windows(layout, 61)[-1]
    assert last.keys(k).shape[2] == 32 and torch.equal(last.index[0].cpu(), torch.arange(29, 61))
    assert last.present.sum(1).tolist() == [29, lengths[1] - 32]
    mask = padding.bool()[:, None, None, :].expand(2, 1, 61, 61)
    grouped = grouped_mean_rows(q, k, v, mask, False, 0.25, layout, 0.8)
    explicit = tiled_mean_rows(q, k, v, mask, False, 0.25, layout, 0.8)
    rows = padding.bool()[:, :, None, None]
    assert torch.allclose(grouped * rows, explicit * rows, atol=1e-5), (grouped - explicit).abs().max()


def test_an_unknown_kernel_name_is_refused():
    with pytest.raises(ValueError, match="unknown mean-pooling kernel 'fast'"):
        with mean_kernel("fast"):
            pass


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_is_calibrated_like_fp32(tmp_path_factory, minilm_dir, pooling, dtype):
    """A whole model in bf16/fp16: calibration adds no error beyond the model's own rounding (the plain
    model's half-vs-fp32 difference is the yardstick), and no NaN."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import test_equivalence as equivalence

    from mteb_fairpos import FairSentenceTransformer

    transformer = equivalence.build_transformer(equivalence.tiny_configs()["bert"], tmp_path_factory, minilm_dir)
    model = equivalence.st_model(transformer, pooling, "right")
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=1.0)
    texts = equivalence.TEXTS

    def both():
        plain = model.encode_document(texts, convert_to_tensor=True, batch_size=3)
        fair = FairSentenceTransformer(model, config).encode_document(texts, convert_to_tensor=True, batch_size=3)
        return plain.float(), fair

    plain32, fair32 = both()
    model.to(dtype)
    plain16, fair16 = both()
    assert fair16.dtype == dtype and not torch.isnan(fair16).any()
    rounding = (plain16 - plain32).abs().max().item()
    error = (fair16.float() - fair32).abs().max().item()
    assert error <= 2 * rounding + 1e-3, (error, rounding)
    # and the half-precision result is the calibrated one, not the plain one
    assert (fair16.float() - fair32).abs().mean() < (fair16.float() - plain32).abs().mean()


def _flash_attention_contract(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    """Stands in for CUDA's aten::_scaled_dot_product_flash_attention, which cannot run without a GPU: the
    same computation with the same contract (half precision only, no mask, nine results)."""
    if query.dtype not in (torch.float16, torch.bfloat16):
        raise RuntimeError("FlashAttention only support fp16 and bf16 data type")
    out, lse = explicit_with_lse(query, key, value, None, scale)
    return out, lse, None, None, 0, 0, torch.empty(()), torch.empty(()), torch.empty(())


def test_the_cuda_default_takes_flash_where_it_applies_and_the_efficient_op_elsewhere(monkeypatch):
    """The CUDA default's routing checked on the CPU with both ops replaced by their contracts (no GPU
    here, and the GPU's compute capability stood in for): flash for a half-precision call without a mask
    on a GPU that has the flash kernel, the memory-efficient op for a mask, fp32 or an older GPU; the
    first-use check passes in each case without ever handing flash what it refuses. Routing only: what
    flash itself does on a GPU is for the CUDA run of this file."""
    import mteb_fairpos.lse_kernels as lse_kernels

    reached = []

    def recording(name, op):
        def call(*args, **kwargs):
            reached.append((name, args[0].dtype))
            return op(*args, **kwargs)
        return call

    monkeypatch.setattr(lse_kernels, "_compute_capability", lambda device: (9, 0))  # an H100/H200 (no GPU here)
    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_flash_attention", recording("flash", _flash_attention_contract))
    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_efficient_attention",
                        recording("efficient", _efficient_attention_contract))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # set aside would warn
        assert lse_kernels.reproduces_explicit(lse_kernels.cuda_flash, torch.device("cpu"), torch.float32, 8)
        assert {name for name, _ in reached} == {"efficient"}
        reached.clear()
        assert lse_kernels.reproduces_explicit(lse_kernels.cuda_flash, torch.device("cpu"), torch.bfloat16, 8)
    assert reached == [("efficient", torch.bfloat16), ("efficient", torch.bfloat16), ("flash", torch.bfloat16)]  # per row, per key, none
    assert lse_kernels.LSE_KERNELS["cuda"] is lse_kernels.cuda_flash
    reached.clear()
    monkeypatch.setattr(lse_kernels, "_compute_capability", lambda device: (7, 5))  # a T4: no flash kernel
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert lse_kernels.reproduces_explicit(lse_kernels.cuda_flash, torch.device("cpu"), torch.bfloat16, 8)
    assert {name for name, _ in reached} == {"efficient"}


def test_the_cuda_flash_op_still_has_the_signature_the_adapter_and_its_stand_in_use():
    """As for the memory-efficient op: the flash op's registered schema still takes the positional
    arguments the adapter passes, in this order, and returns the log-sum-exp second."""
    passed = ["query", "key", "value", "dropout_p", "is_causal", "return_debug_mask"]
    schema = torch.ops.aten._scaled_dot_product_flash_attention.default._schema
    assert [argument.name for argument in schema.arguments if not argument.kwarg_only] == passed
    assert [argument.name for argument in schema.arguments if argument.kwarg_only] == ["scale"]
    assert [result.name for result in schema.returns][:2] == ["output", "logsumexp"]
    stand_in = inspect.signature(_flash_attention_contract).parameters.values()
    assert [p.name for p in stand_in if p.kind is not p.KEYWORD_ONLY] == passed


@pytest.mark.parametrize(("pooling", "config"), [
    ("last", CalibrationConfig(basket_size=4, layers=1.0, strength=0.8)),
    ("mean", CalibrationConfig(basket_size=4, layers=1.0, strength=0.8, isolate_bos=True)),
])
def test_layers_share_their_masks_only_with_layers_of_the_same_mask(monkeypatch, pooling, config):
    """What calibrated layers share within a pass (basket windows and masks, the pooling row's mask) is
    keyed by the model's mask: a Qwen3 whose full and sliding-window layers get different masks gives
    the same output, bit for bit, as a pass that makes everything afresh in every layer."""
    from transformers import AutoModel, Qwen3Config

    from mteb_fairpos.attention import attach

    model_config = Qwen3Config(vocab_size=100, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=8, intermediate_size=64, max_position_embeddings=64,
                               pad_token_id=0, use_sliding_window=True, sliding_window=3, max_window_layers=0,
                               layer_types=["full_attention", "sliding_attention"] * 2)
    torch.manual_seed(0)
    model = AutoModel.from_config(model_config, attn_implementation="sdpa").eval()
    ids = torch.randint(1, 100, (2, 14))
    mask = torch.ones(2, 14, dtype=torch.long)
    mask[1, :5] = 0  # left padding
    plan = attach(model, config, pooling)

    def run():
        with torch.inference_mode(), plan.applied(mask):
            return model(input_ids=ids, attention_mask=mask).last_hidden_state

    shared = run()
    masks = set()

    def afresh(made):  # the same function, with the pass's memo emptied first
        def make(attention_mask, *args):
            masks.add(id(attention_mask))
            attention._ACTIVE.get().shared.clear()
            return made(attention_mask, *args)
        return make

    monkeypatch.setattr(attention, "_layer_shared", afresh(attention._layer_shared))
    monkeypatch.setattr(attention, "_pooled_row_shared", afresh(attention._pooled_row_shared))
    unshared = run()
    assert len(masks) == 2  # the full and the sliding-window layers' masks
    valid = mask.bool()
    assert torch.equal(shared[valid], unshared[valid])
