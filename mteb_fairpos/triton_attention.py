"""Calibrated attention in one pass over the keys: a Triton kernel for CUDA (docs/method.md#s1-5).

:func:`fused_calibrated_attention` computes what the PyTorch paths of :mod:`mteb_fairpos.attention`
compute (every row for mean pooling, the pooling row for cls and last-token pooling), in one kernel
that reads Q, K and V once and writes the output once, like flash attention. Per query row it runs
the online softmax one content basket at a time: a basket's running max, running sum and
accumulator give that basket's own output ``o_ib`` when the basket ends; the basket is then folded
into the row's plain accumulator (the same rescale flash attention does per key block), its output
into the sum of the baskets' outputs, and the count of non-empty baskets goes up. The isolated
tokens are scored directly. At the end, :func:`~mteb_fairpos.calibration.basket_targets`' formula
(steps 1-4 of docs/method.md#s1-3) and the blend with the original row (step 5) give the output.
A launch setting (:class:`LaunchConfig`) may read key and value blocks whole through tensor descriptors
(Hopper's TMA) instead of masked loads; the scores' mask and zeroed value rows keep what lies past a
basket out, so both ways give the same rows.

What the kernel assumes and the wrapper cannot see without reading device values (padding on one
side only, a model mask that is padding plus causality) are 0-d device flags (:func:`padding_fits`,
:func:`model_mask_fits`) that the backend reads with the batch's layout, once per forward pass at
most (``attention._mask_fits``); :func:`unsupported_reason` says the same in words. Everything else is
checked on every call without a host read. Where either refuses, or the kernel has not reproduced the
explicit computation on first use (:func:`verified`), the caller keeps the PyTorch path.

``triton`` is optional: CUDA builds of torch bring it. Without it this module still imports, and
every call is refused with the reason. On the CPU the kernel runs only through Triton's interpreter
(``TRITON_INTERPRET=1`` set before this module is imported), which is how the tests run it in CI.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .calibration import BasketLayout, basket_layout, calibrate_rows, contiguous, first_valid
from .config import SharePolicy
from .lse_kernels import set_aside

try:
    import triton
    import triton.language as tl
except ImportError as err:  # a CPU build of torch without the optional package
    triton = tl = None
    _TRITON_MISSING = f"triton is not installed ({err}); CUDA builds of torch bring it"
else:
    _TRITON_MISSING = None

HEAD_DIMS = range(1, 257)
"""Head sizes the kernel takes (padded to a power of two of at least 16 inside): every model supported."""
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
POLICY_CODES = {"equal": 0, "original": 1}
"""How the kernel knows an isolated token's share policy; a fixed share (a number) is code 2."""


class FusedAttentionRefused(ValueError):
    """The fused kernel cannot compute this call exactly; the message says why (the caller falls back)."""


@dataclass(frozen=True)
class LaunchConfig:
    """Tile sizes and launch settings: ``block_m`` query rows and ``block_n`` keys per step. ``tma``: key and value
    blocks are read whole through tensor descriptors (Hopper's tensor memory accelerator), not by masked loads;
    where a call's K or V cannot have one (:func:`descriptors`), they are read as without."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2
    tma: bool = False

    def __post_init__(self) -> None:
        least = {"block_m": 16, "block_n": 16, "num_warps": 1, "num_stages": 1}  # tiles: the least tl.dot takes
        values = {name: getattr(self, name) for name in least}
        wrong = [f"{name}={value!r}" for name, value in values.items()
                 if not isinstance(value, int) or value < least[name] or (name != "num_stages" and value & (value - 1))]
        if wrong:
            raise ValueError(f"LaunchConfig: {', '.join(wrong)}: tiles are powers of two of at least 16, warps a power "
                             "of two, stages at least 1.")


HOPPER = range(90, 100)
"""Compute capabilities 9.x (H100, H200): where the settings tuned on an H200 apply."""
ANY = range(0, 1000)

CONFIGS: tuple[tuple[tuple[torch.dtype, ...], int, bool, range, LaunchConfig], ...] = (
    # (dtypes, largest head size, pooling rows only, compute capabilities, config): the first entry that matches is
    # used. Three (block_m x head) fp32 accumulators live in registers (plain, basket, sum of baskets). Every entry
    # compiles with Triton 3.6 for sm_90 (H100, H200) and sm_80 (A100), and ptxas -v reports no register spills in half
    # precision at head sizes 32, 64 and 128 (benchmarks/gpu/kernel_build.py builds every entry without a GPU, aligned
    # as at a real launch; fp32 at 128 spills 4 bytes, and some builds spill at 256). The pooling rows of one sequence and KV
    # head (its query heads) are a handful: 16 rows, the least tl.dot takes. On Hopper the half-precision mean rows up
    # to head size 64 take the fastest setting of bench_kernels.py --tune on an H200 (docs/gpu.md; key blocks of 128
    # hold a default basket whole), in bf16 at head size 64 reading K and V through tensor descriptors (0.96-0.97x the
    # masked loads' time at 2,048 tokens in two H200 runs, 0.99-1.00x at 512 and 8,192 in the second; fp16, other head
    # sizes and baskets that span key blocks were not timed so, and keep masked loads: see launch_config); on
    # Ampere it spills, so the setting before the tuning stays (and later GPUs, with other shared memory, keep the
    # untuned ones). At 128 the tuned settings up to 0.62x the old one's time spill; Hopper takes the fastest that
    # does not (0.82x), Ampere the old one. The other entries are untimed first choices.
    ((torch.bfloat16, torch.float16), 64, True, ANY, LaunchConfig(16, 64, 4, 2)),
    ((torch.bfloat16, torch.float16), 256, True, ANY, LaunchConfig(16, 32, 4, 2)),
    ((torch.float32,), 256, True, ANY, LaunchConfig(16, 16, 4, 2)),
    ((torch.bfloat16, torch.float16), 63, False, HOPPER, LaunchConfig(64, 128, 4, 3)),
    ((torch.bfloat16,), 64, False, HOPPER, LaunchConfig(64, 128, 4, 3, tma=True)),
    ((torch.float16,), 64, False, HOPPER, LaunchConfig(64, 128, 4, 3)),
    ((torch.bfloat16, torch.float16), 64, False, ANY, LaunchConfig(64, 64, 4, 3)),
    ((torch.bfloat16, torch.float16), 128, False, HOPPER, LaunchConfig(64, 128, 8, 2)),
    ((torch.bfloat16, torch.float16), 128, False, ANY, LaunchConfig(64, 64, 8, 3)),
    ((torch.bfloat16, torch.float16), 256, False, ANY, LaunchConfig(64, 32, 8, 2)),
    ((torch.float32,), 64, False, ANY, LaunchConfig(32, 32, 8, 2)),
    ((torch.float32,), 256, False, ANY, LaunchConfig(32, 16, 8, 2)),
)
INTERPRETER_CONFIG = LaunchConfig(16, 16, 1, 1)
"""Under Triton's interpreter (CPU tensors): the smallest tiles tl.dot takes on a GPU, so baskets span key blocks."""


def launch_config(dtype: torch.dtype, head_dim: int, pooled: bool, arch: int, basket_size: int | None = None
                  ) -> LaunchConfig:
    """The first entry of :data:`CONFIGS` for this call on a GPU of compute capability ``arch`` (90: Hopper, 80: Ampere;
    :func:`device_arch`), or :data:`INTERPRETER_CONFIG` under the interpreter. Where baskets of ``basket_size`` span
    key blocks, K and V are read by masked loads: that loop spills registers through descriptors, and was not timed."""
    if _interpreting():
        return INTERPRETER_CONFIG
    config = next(config for dtypes, largest, rows_only, archs, config in CONFIGS
                  if dtype in dtypes and head_dim <= largest and rows_only == pooled and arch in archs)
    if config.tma and basket_size is not None and basket_size > config.block_n:
        return dataclasses.replace(config, tma=False)
    return config


def device_arch(device: torch.device) -> int:
    """A device's compute capability as one number (9.0: 90), 0 off CUDA: what :func:`launch_config` takes."""
    if device.type != "cuda":
        return 0
    major, minor = torch.cuda.get_device_capability(device)
    return 10 * major + minor


@dataclass(frozen=True)
class FusedLayout:
    """What the kernel reads of a :class:`BasketLayout`: a few numbers per sequence, made on the device
    without a host read. Make it once per forward pass (:func:`fused_layout`) and pass it to every layer."""

    sequences: Tensor
    """(N, 10) int32, one row per sequence: content start, content length, basket size, number of baskets (the
    layout's, at least 1), valid start, valid stop, active, pooling row, the isolated tokens' positions (two
    columns, 0 where there are fewer)."""
    shares: tuple[SharePolicy, ...]
    pooled: bool
    """cls/last pooling: the kernel computes the pooling row only."""
    basket_size: int
    """The layout's basket size, the largest any sequence has: where a key block holds it, the kernel closes one
    basket per block."""
    length: int
    """The batch's length (keys per sequence) the layout was made for."""

    @property
    def n(self) -> int:
        return self.sequences.shape[0]


def fused_layout(layout: BasketLayout) -> FusedLayout:
    """The kernel's view of ``layout``. Content is contiguous (padding on one side, checked by
    :func:`unsupported_reason`), so a sequence's baskets are ``basket_size`` keys each from its first content
    key. A sequence whose content is shorter than one basket holds it all in basket 0: its basket size is
    its content length (such a sequence is inactive, so only its plain rows are computed)."""
    valid = layout.key_valid
    content = layout.basket >= 0
    iso = layout.isolated.long()
    iso = torch.cat([iso, iso.new_zeros(iso.shape[0], 2 - iso.shape[1])], dim=1) if iso.shape[1] < 2 else iso
    valid_start = first_valid(valid)
    pooling_row = layout.query_rows if layout.query_rows is not None else torch.zeros_like(valid_start)
    columns = (first_valid(content), content.sum(1), layout.basket.eq(0).sum(1).clamp(min=1), layout.n_baskets,
               valid_start, valid_start + valid.sum(1), layout.active.long(), pooling_row, iso[:, 0], iso[:, 1])
    sequences = torch.stack(columns, dim=1).to(torch.int32)  # every column is int64
    return FusedLayout(sequences, layout.shares, layout.query_rows is not None, layout.basket_size, valid.shape[1])


def _let_the_interpreter_take_loop_bounds() -> None:
    """Triton 3.6's interpreter turns a loop bound (a one-element array) into an int with ``int(array)``, which
    numpy 2.4 refuses; later Triton releases take the element. Under the interpreter, where numpy refuses,
    this makes 3.6 do the same (the compiled kernel is not concerned)."""
    import numpy
    from triton.runtime import interpreter

    try:
        int(numpy.zeros(1))
        return
    except TypeError:
        pass
    patch_tensor = interpreter._patch_lang_tensor
    if getattr(patch_tensor, "takes_one_element_bounds", False):
        return

    def patched(tensor, scope) -> None:
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched.takes_one_element_bounds = True
    interpreter._patch_lang_tensor = patched


def _interpreting() -> bool:
    """Whether this module's kernel was made by Triton's interpreter (``TRITON_INTERPRET=1`` at import)."""
    return triton is not None and type(_calibrated_attention_kernel).__name__ == "InterpretedFunction"


def call_refusal(query: Tensor, key: Tensor, value: Tensor, layout: BasketLayout | FusedLayout) -> str | None:
    """Why the kernel cannot take this call, from shapes, dtypes and devices alone (no host read); ``None``: it can."""
    if _TRITON_MISSING:
        return _TRITON_MISSING
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return f"query, key and value must be (batch, heads, length, head size); got {tuple(query.shape)}, " \
               f"{tuple(key.shape)}, {tuple(value.shape)}"
    n, heads, length, head_dim = query.shape
    if key.shape != value.shape or key.shape[0] != n or key.shape[3] != head_dim:
        return f"key {tuple(key.shape)} and value {tuple(value.shape)} do not match query {tuple(query.shape)}"
    if key.shape[2] != length:
        return f"{key.shape[2]} keys for {length} queries: a key/value cache or cross-attention cannot be calibrated"
    if not key.shape[1]:
        return "no key/value heads"
    if heads % key.shape[1]:
        return f"{heads} query heads are not a multiple of {key.shape[1]} key/value heads"
    if query.dtype not in DTYPES or key.dtype != query.dtype or value.dtype != query.dtype:
        return f"dtypes {query.dtype}, {key.dtype}, {value.dtype}: the kernel takes one of fp32, bf16, fp16 for all three"
    if head_dim not in HEAD_DIMS:
        return f"head size {head_dim}: the kernel takes up to {HEAD_DIMS[-1]}"
    devices = {t.device for t in (query, key, value, layout.sequences if isinstance(layout, FusedLayout) else layout.basket)}
    if len(devices) > 1:
        return f"tensors on several devices: {sorted(map(str, devices))}"
    if query.device.type != "cuda" and not _interpreting():
        return f"device {query.device.type}: the compiled kernel runs on CUDA (on the CPU only through TRITON_INTERPRET=1)"
    batch, keys = (layout.n, layout.length) if isinstance(layout, FusedLayout) else layout.key_valid.shape
    if (batch, keys) != (n, length):
        return f"the basket layout is for another batch ({batch} sequences of {keys}) than query {tuple(query.shape)}"
    if records_gradients(query, key, value):
        return "inputs that require grad: the kernel has no backward pass"
    return None


def unsupported_reason(query: Tensor, key: Tensor, value: Tensor, layout: BasketLayout, causal: bool,
                       attention_mask: Tensor | None) -> str | None:
    """Why the kernel cannot compute this layer exactly, or ``None`` where it can.

    Beyond :func:`call_refusal`, it reads the device once (:func:`padding_fits` and :func:`model_mask_fits`); the
    answer holds for every layer given that mask.
    """
    reason = call_refusal(query, key, value, layout)
    if reason:
        return reason
    fits = padding_fits(layout) & model_mask_fits(layout, causal, attention_mask)
    return None if bool(fits) else mask_refusal(causal)


def padding_fits(layout: BasketLayout) -> Tensor:
    """0-d bool, where the layout is: padding on one side only (every sequence's valid tokens contiguous)."""
    return contiguous(layout.key_valid)


def model_mask_fits(layout: BasketLayout, causal: bool, attention_mask: Tensor | None) -> Tensor:
    """0-d bool, on the device: whether the model's mask (bool or additive, as transformers passes it) hides padded
    keys, plus later keys where ``causal``, and nothing else (no sliding window, no packed sequences, no bias). A
    caller that reads other values of the pass reads this one with them (one host read)."""
    valid = layout.key_valid
    if attention_mask is None:
        return torch.ones((), dtype=torch.bool, device=valid.device)
    positions = torch.arange(valid.shape[1], device=valid.device)
    expected = valid[:, None, None, :]
    if causal:
        expected = expected & (positions[None, :] <= positions[:, None])
    matches = torch.ones((), dtype=torch.bool, device=valid.device)
    if attention_mask.dtype == torch.bool:
        allowed = attention_mask
    else:  # additive: 0 where a key is seen (anything else is a bias), the dtype's minimum where it is not
        allowed = attention_mask > torch.finfo(attention_mask.dtype).min / 2
        matches = attention_mask.masked_fill(~allowed, 0).eq(0).all()
    return matches & allowed.expand(-1, -1, valid.shape[1], -1).eq(expected).all()


def mask_refusal(causal: bool) -> str:
    """Why the kernel refuses a mask that :func:`unsupported_reason` rejects."""
    return ("the attention mask is not padding on one side" + (" plus causality" if causal else "") +
            " (e.g. a sliding window, packed sequences, or an additive bias): the fused kernel cannot honour it")


def fused_calibrated_attention(query: Tensor, key: Tensor, value: Tensor, layout: BasketLayout | FusedLayout,
                               strength: float, causal: bool, scaling: float, *,
                               config: LaunchConfig | None = None, out: Tensor | None = None) -> Tensor:
    """Calibrated attention (docs/method.md#s1-3) in one fused kernel.

    Args:
        query: (N, H, L, D), key and value (N, H_kv, L, D), as transformers passes them to an attention
            function (H a multiple of H_kv: grouped-query heads read their K and V head, never a copy).
        layout: the batch's basket layout, or its :func:`fused_layout` made once per forward pass.
        strength: ``alpha`` in [0, 1]. causal: keys after a row are hidden. scaling: the score scale.
        config: tile sizes (default: :func:`launch_config`).
        out: cls/last pooling only: a (N, H, L, D) tensor (the layer's plain output, as a view) that receives each
            sequence's pooling row at its position, its other rows left as they are; returned. No copy, no scatter.

    Returns:
        mean pooling: every row, (N, H, L, D) in a (N, L, H, D) layout (so ``.transpose(1, 2)``, the layout
        an attention function returns, is a view): calibrated where ``layout.row_mask()`` says, plain
        attention over the keys the row may see elsewhere (padded rows too), 0 for a row that sees no key.
        cls/last pooling: the pooling row of each sequence and head, (N, H, D), calibrated for active
        sequences and plain for the others.

    The layout must satisfy :func:`unsupported_reason` (it is not re-read here: no host read per layer). A
    content basket counts as non-empty where the row sees one of its keys, as in exact arithmetic; the
    PyTorch paths in fp32 also count a basket whose mass underflows (a logit gap above ~87) as empty.
    """
    reason = call_refusal(query, key, value, layout)
    if not reason and not 0 <= strength <= 1:
        reason = f"strength {strength} is outside [0, 1]"
    if not reason and not 0 < scaling < float("inf"):
        reason = f"scaling {scaling} is not a positive finite number"
    fused = layout if isinstance(layout, FusedLayout) else fused_layout(layout)
    if not reason and out is not None:
        reason = _out_refusal(out, query, fused.pooled)
    if reason:
        raise FusedAttentionRefused(f"fused calibrated attention: {reason}.")
    n, heads, length, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    config = config or launch_config(query.dtype, head_dim, fused.pooled, device_arch(query.device), fused.basket_size)
    blocks = descriptors(key, value, config.block_n, _block_d(head_dim)) if config.tma else None
    if config.tma and blocks is None:  # K or V without a descriptor: read as without one (the same values)
        config = dataclasses.replace(config, tma=False)
    if fused.pooled:  # the pooling rows of a sequence and KV head (its query heads) are one block of rows
        if out is None:  # (N, H, D): the kernel's row offset (the pooling position) is multiplied by 0
            out = torch.empty(n, heads, head_dim, dtype=value.dtype, device=value.device)
            out_strides = (out.stride(0), out.stride(1), 0, out.stride(2))
        else:
            out_strides = out.stride()
        grid = (triton.cdiv(group, config.block_m), n * kv_heads)
    else:
        out = torch.empty(n, length, heads, head_dim, dtype=value.dtype, device=value.device).transpose(1, 2)
        out_strides = out.stride()
        grid = (triton.cdiv(length, config.block_m), n * heads)
    fixed = [float(policy) if not isinstance(policy, str) else 0.0 for policy in fused.shares] + [0.0, 0.0]
    with torch.profiler.record_function(PROFILE_NAME):  # one kernel launch, named in profiles (and counted as one)
        _calibrated_attention_kernel[grid](
            query, key, value, *(blocks or (key, value)), out, fused.sequences,
            *query.stride(), *key.stride(), *value.stride(), *out_strides,
            heads, kv_heads, length, scaling * _LOG2_E, float(strength), fixed[0], fixed[1],
            **kernel_constants(query.dtype, head_dim, config, fused.pooled, bool(causal), fused.shares, fused.basket_size),
            num_warps=config.num_warps, num_stages=config.num_stages,
        )
    return out


def kernel_constants(dtype: torch.dtype, head_dim: int, config: LaunchConfig, pooled: bool, causal: bool,
                     shares: tuple[SharePolicy, ...], basket_size: int) -> dict[str, Any]:
    """The kernel's compile-time arguments for one kind of call: each distinct set is a kernel compiled of its own."""
    codes = [POLICY_CODES.get(policy, 2) if isinstance(policy, str) else 2 for policy in shares] + [0, 0]
    return dict(HEAD_DIM=head_dim, BLOCK_D=_block_d(head_dim), BLOCK_M=config.block_m,
                BLOCK_N=config.block_n, POOLED=pooled, CAUSAL=causal, N_ISO=len(shares), POLICY_0=codes[0],
                POLICY_1=codes[1], RESCALE=any(policy != "equal" for policy in shares),
                DOT_PRECISION="ieee" if dtype == torch.float32 else "tf32",  # fp32 without TF32 rounding
                EXACT_OPERANDS=_interpreting() and dtype == torch.bfloat16, ONE_BLOCK=basket_size <= config.block_n,
                TMA=config.tma)


def _block_d(head_dim: int) -> int:
    """The head size the kernel's tiles take: a power of two of at least 16 (tl.dot's least)."""
    return max(16, triton.next_power_of_2(head_dim))


def descriptors(key: Tensor, value: Tensor, block_n: int, block_d: int) -> tuple[Any, Any] | None:
    """K and V as tensor descriptors of (1, 1, ``block_n``, ``block_d``) blocks, for a launch with ``tma``; ``None``
    where the hardware cannot address one: an empty tensor (a descriptor's sizes are positive), its head dimension not
    contiguous, or its base or another stride not a multiple of 16 bytes. A block past the tensor's end reads zeros."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    def fits(tensor: Tensor) -> bool:
        size = tensor.element_size()
        return tensor.numel() > 0 and tensor.stride(-1) == 1 and tensor.data_ptr() % 16 == 0 \
            and all(s * size % 16 == 0 for s in tensor.stride()[:-1])

    if not (fits(key) and fits(value)):
        return None
    return tuple(TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, block_n, block_d]) for t in (key, value))


def records_gradients(*tensors: Tensor) -> bool:
    """Whether autograd would record an operation on ``tensors`` here: what a pass that writes rows in place refuses."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _out_refusal(out: Tensor, query: Tensor, pooled: bool) -> str | None:
    """Why ``out`` cannot receive the kernel's rows (see :func:`fused_calibrated_attention`); ``None``: it can."""
    if not pooled:
        return "out= takes the pooling rows of cls/last pooling only"
    if out.shape != query.shape or out.dtype not in DTYPES or out.device != query.device:
        return f"out {tuple(out.shape)} {out.dtype} on {out.device} is not shaped like query {tuple(query.shape)} " \
               f"on {query.device}"
    return None


def explicit_calibrated_attention(query: Tensor, key: Tensor, value: Tensor, layout: BasketLayout, strength: float,
                                  causal: bool, scaling: float) -> Tensor:
    """What :func:`fused_calibrated_attention` returns, computed explicitly in the inputs' dtype: the softmax over the
    keys each row may see (0 for a row that sees none), :func:`~mteb_fairpos.calibration.calibrate_rows` on the
    calibrated rows, the product with V. The first-use check runs it in float64; so do the tests."""
    n, heads, length, _ = query.shape
    group = heads // key.shape[1]
    key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
    allowed = layout.key_valid[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool, device=query.device).tril()
    scores = (query @ key.transpose(-1, -2) * scaling).masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    if layout.query_rows is None:
        return calibrate_rows(probs, layout, strength, layout.row_mask()) @ value
    batch = torch.arange(n, device=query.device)
    pooled = probs[batch, :, layout.query_rows].unsqueeze(2)  # (N, H, 1, L)
    return (calibrate_rows(pooled, layout, strength, layout.active[:, None]) @ value).squeeze(2)


CHECK_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 5e-2}
"""Largest difference from the float64 explicit computation the first-use check accepts (outputs of about 1)."""
_VERIFIED: dict[tuple, bool] = {}


def verified(device: torch.device, dtype: torch.dtype, head_dim: int, pooled: bool, causal: bool,
             shares: tuple[SharePolicy, ...]) -> bool:
    """Whether the kernel has reproduced the explicit computation on this kind of device (type and compute capability:
    its launch settings and so its loop), in ``dtype`` at ``head_dim``, for this kind of call (each is a separately
    compiled kernel): checked on first use, then remembered."""
    entry = (device.type, device_arch(device), dtype, head_dim, pooled, causal, shares)
    if entry not in _VERIFIED:
        _VERIFIED[entry] = reproduces_explicit(device, dtype, head_dim, pooled, causal, shares)
    return _VERIFIED[entry]


def reproduces_explicit(device: torch.device, dtype: torch.dtype, head_dim: int, pooled: bool, causal: bool,
                        shares: tuple[SharePolicy, ...]) -> bool:
    """Whether the kernel gives the explicit output (float64) on a small problem shaped like real calls: three
    sequences (full, right- and left-padded), grouped-query heads, a basket spanning two key blocks and the last
    one shorter, then baskets of one whole key block (the first seen whole, without a mask), then baskets shorter
    than a key block; a warning says why not."""
    block = launch_config(dtype, head_dim, pooled, device_arch(torch.device(device))).block_n
    length = 3 * block + 7
    generator = torch.Generator().manual_seed(0)
    q = (torch.randn(3, 4, length, head_dim, generator=generator) * 2).to(dtype)
    k = (torch.randn(3, 2, length, head_dim, generator=generator) * 2).to(dtype)
    v = torch.randn(3, 2, length, head_dim, generator=generator).to(dtype)  # the dtype's values: only the kernel rounds
    positions = torch.arange(length)
    mask = torch.stack([positions >= 0, positions < length - 5, positions >= 9]).long()
    isolated = tuple(zip(("bos", "eos"), shares))
    for basket_size in (block + block // 2, block, max(1, block // 2 - 1)):
        layouts = [basket_layout(mask.to(where), "last" if pooled else "mean", basket_size, isolated) for where in ("cpu", device)]
        expected = explicit_calibrated_attention(q.double(), k.double(), v.double(), layouts[0], 0.7, causal, 0.25)
        try:
            out = fused_calibrated_attention(q.to(device), k.to(device), v.to(device), layouts[1], 0.7, causal, 0.25)
            out = out.double().cpu()
        except Exception as err:  # a compiler or launch error of this Triton/GPU: the PyTorch path stays
            set_aside(_KERNEL_NAME, device, dtype, head_dim, f"it raised {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                      instead=_INSTEAD)
            return False
        error = (out - expected).abs().max().item()
        if not error <= CHECK_TOLERANCE[dtype]:
            set_aside(_KERNEL_NAME, device, dtype, head_dim, f"its output differs from the explicit computation by {error:.2g} "
                      f"(basket of {basket_size}, {'pooling rows' if pooled else 'every row'}, causal={causal}, shares {shares})",
                      instead=_INSTEAD)
            return False
    return True


_KERNEL_NAME = "fused_calibrated_attention (Triton)"
_INSTEAD = "Calibrated layers keep the PyTorch path (exact)."


PROFILE_NAME = "fairpos::fused_calibrated_attention"
"""The kernel's range in ``torch.profiler`` traces: one launch (under Triton's interpreter, the ATen operations it
runs on the host to emulate the kernel sit inside it)."""

_LOG2_E = 1.4426950408889634
"""Scores are kept in base 2 (exp2 is the GPU's native exponential)."""


if triton is not None:

    @triton.jit
    def _calibrated_attention_kernel(
        Q, K, V, KD, VD, Out, Sequences,
        stride_qn, stride_qh, stride_ql, stride_qd,
        stride_kn, stride_kh, stride_kl, stride_kd,
        stride_vn, stride_vh, stride_vl, stride_vd,
        stride_on, stride_oh, stride_ol, stride_od,
        heads, kv_heads, length, scale_log2, strength, fixed_0, fixed_1,
        HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        POOLED: tl.constexpr, CAUSAL: tl.constexpr, N_ISO: tl.constexpr, POLICY_0: tl.constexpr,
        POLICY_1: tl.constexpr, RESCALE: tl.constexpr, DOT_PRECISION: tl.constexpr, EXACT_OPERANDS: tl.constexpr,
        ONE_BLOCK: tl.constexpr, TMA: tl.constexpr,
    ):
        """One block of query rows of one sequence against all of its keys (see the module docstring)."""
        group = heads // kv_heads
        block = tl.program_id(0)
        slot = tl.arange(0, BLOCK_M)
        seq = (tl.program_id(1) // (kv_heads if POOLED else heads)).to(tl.int64)  # int64: offsets of large batches
        meta = Sequences + seq * 10
        content_start = tl.load(meta + 0)
        content_stop = content_start + tl.load(meta + 1)
        basket_size = tl.load(meta + 2)
        n_baskets = tl.load(meta + 3).to(tl.float32)
        valid_start = tl.load(meta + 4)
        valid_stop = tl.load(meta + 5)
        active = tl.load(meta + 6) != 0
        if POOLED:  # rows: the query heads of one KV head, all at the pooling position
            kv_head = tl.program_id(1) % kv_heads
            head = kv_head * group + block * BLOCK_M + slot
            real = block * BLOCK_M + slot < group
            pooling_row = tl.load(meta + 7)
            position = tl.zeros([BLOCK_M], dtype=tl.int32) + pooling_row
            calibrated = real & active
            first_row = pooling_row
            last_row = pooling_row
        else:  # rows: BLOCK_M positions of one query head
            head_scalar = tl.program_id(1) % heads
            kv_head = head_scalar // group
            head = tl.zeros([BLOCK_M], dtype=tl.int32) + head_scalar
            position = block * BLOCK_M + slot
            real = position < length
            calibrated = real & active & (position >= valid_start) & (position < valid_stop)
            first_row = block * BLOCK_M
            last_row = tl.minimum(block * BLOCK_M + BLOCK_M, length) - 1

        dims = tl.arange(0, BLOCK_D)
        in_head = dims < HEAD_DIM
        q = tl.load(Q + seq * stride_qn + head[:, None] * stride_qh + position[:, None] * stride_ql + dims[None, :] * stride_qd,
                    mask=real[:, None] & in_head[None, :], other=0.0)
        k_base = K + seq * stride_kn + kv_head * stride_kh
        v_base = V + seq * stride_vn + kv_head * stride_vh
        # where TMA, the key and value blocks come through the descriptors KD and VD: block (seq, kv head, first key)
        source = (KD, VD, seq.to(tl.int32), kv_head, k_base, v_base, stride_kl, stride_kd, stride_vl, stride_vd)

        # the isolated tokens' scores, before the loop (where a one-token sequence's first token is also its last, the
        # key joins the softmax twice, which changes nothing: it is the row's only key, and the row is not calibrated)
        iso_0 = tl.load(meta + 8)
        iso_1 = tl.load(meta + 9)
        score_0 = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        score_1 = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        # an isolated token is a valid position but in a sequence of padding alone (whose values may be NaN)
        valid_0 = (iso_0 >= valid_start) & (iso_0 < valid_stop)
        valid_1 = (iso_1 >= valid_start) & (iso_1 < valid_stop)
        if N_ISO >= 1:
            score_0 = _isolated_score(q, k_base, iso_0, stride_kl, stride_kd, dims, in_head, scale_log2,
                                      valid_0 & real, position, CAUSAL)
        if N_ISO == 2:
            score_1 = _isolated_score(q, k_base, iso_1, stride_kl, stride_kd, dims, in_head, scale_log2,
                                      valid_1 & real, position, CAUSAL)

        # the row's plain online softmax (running max, running sum, accumulator) over the content keys, in base 2;
        # a finite floor for the max keeps exp2(max - new max) free of inf - inf where a row has seen no key yet
        floor = -1.0e30
        row_max = tl.full([BLOCK_M], floor, dtype=tl.float32)
        row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
        row_acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        basket_outputs = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)  # sum over non-empty baskets of o_ib
        filled = tl.zeros([BLOCK_M], dtype=tl.float32)  # how many baskets the row sees a key of

        keys_stop = tl.minimum(content_stop, last_row + 1) if CAUSAL else content_stop  # later keys: no row sees them
        n_seen = tl.cdiv(keys_stop - content_start, basket_size)  # the baskets any row of the block sees
        # Basket b takes the key blocks b * per_basket .. (b + 1) * per_basket - 1, each from the basket's own offset (a
        # block never holds keys of two baskets; a short last basket leaves its last blocks empty). Where every basket
        # fits one block (ONE_BLOCK: the layout's basket size is at most BLOCK_N), a block's softmax is its basket's,
        # so the basket needs no running rescale and every step closes one (docs/method.md#s1-5).
        per_basket = 1 if ONE_BLOCK else tl.cdiv(basket_size, BLOCK_N)
        # the leading blocks every row sees whole (where baskets fill their blocks exactly) need no mask
        whole = 0
        if basket_size % BLOCK_N == 0:
            whole = tl.maximum(keys_stop - content_start, 0) // BLOCK_N  # no steps for rows all in left padding
            if CAUSAL:  # a block is seen whole where its last key is at or before the block's first row
                whole = tl.minimum(whole, tl.maximum(first_row + 1 - content_start, 0) // BLOCK_N)
        state = (row_max, row_sum, row_acc, basket_outputs, filled)
        if not ONE_BLOCK:  # and the running basket's max, sum and accumulator
            state = state + (tl.full([BLOCK_M], floor, dtype=tl.float32), tl.zeros([BLOCK_M], dtype=tl.float32),
                             tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32))
        # what every step reads
        steps = (content_start, basket_size, per_basket, keys_stop, position, dims, in_head, scale_log2, floor)
        if TMA:
            # whole blocks in a loop of their own, compiled without a mask: a masked block's values pass through
            # registers to be zeroed past the basket, and in one loop every block would take the trip
            for block in range(0, whole):
                state = _key_block(q, source, steps, block, False, state,
                                   BLOCK_N, BLOCK_D, CAUSAL, DOT_PRECISION, EXACT_OPERANDS, TMA, ONE_BLOCK)
            for block in range(whole, n_seen * per_basket):
                state = _key_block(q, source, steps, block, True, state,
                                   BLOCK_N, BLOCK_D, CAUSAL, DOT_PRECISION, EXACT_OPERANDS, TMA, ONE_BLOCK)
        else:
            # one loop (so the compiler pipelines loads across baskets), the mask behind a branch every row of a block
            # takes alike (two loops, as above, cost masked loads registers: the builds spill)
            for block in range(0, n_seen * per_basket):
                state = _key_block(q, source, steps, block, block >= whole, state,
                                   BLOCK_N, BLOCK_D, CAUSAL, DOT_PRECISION, EXACT_OPERANDS, TMA, ONE_BLOCK)
        row_max, row_sum, row_acc, basket_outputs, filled = state[0], state[1], state[2], state[3], state[4]

        # the isolated tokens join the softmax: each row's total, and their original probabilities
        final_max = tl.maximum(row_max, tl.maximum(score_0, score_1))
        keep = tl.exp2(row_max - final_max)
        weight_0 = tl.exp2(score_0 - final_max)
        weight_1 = tl.exp2(score_1 - final_max)
        total = row_sum * keep + weight_0 + weight_1
        sees_any = total > 0
        inverse = 1.0 / tl.where(sees_any, total, 1.0)
        to_plain = keep * inverse  # row_acc * to_plain: the plain output's content part, sum over content of p_ij v_j
        original_0 = weight_0 * inverse
        original_1 = weight_1 * inverse

        # docs/method.md#s1-3 steps 1-4, as calibration.basket_targets computes them
        n_total = n_baskets + N_ISO
        content_total = filled / n_total
        share_0 = tl.zeros([BLOCK_M], dtype=tl.float32)
        share_1 = tl.zeros([BLOCK_M], dtype=tl.float32)
        if N_ISO >= 1:
            share_0 = _share(share_0, original_0, n_total, fixed_0, score_0 > float("-inf"), POLICY_0)
        if N_ISO == 2:
            share_1 = _share(share_1, original_1, n_total, fixed_1, score_1 > float("-inf"), POLICY_1)
        share_total = share_0 + share_1
        gain = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
        if RESCALE:  # content gets exactly what the shares leave (nothing where they exceed 1)
            gain = tl.maximum(1.0 - share_total, 0.0) / tl.where(content_total > 0, content_total, 1.0)
        row_total = content_total * gain + share_total
        row_total = tl.where(row_total > 0, row_total, 1.0)
        target = gain / (n_total * row_total)

        # step 5, blend: a calibrated row keeps (1 - alpha) of its plain content and gives every non-empty basket
        # alpha * target; the isolated tokens get their blended probability. Other rows stay plain.
        blend = calibrated & sees_any
        plain_weight = tl.where(blend, (1.0 - strength) * to_plain, to_plain)
        baskets_weight = tl.where(blend, strength * target, 0.0)
        iso_weight_0 = tl.where(blend, strength * share_0 / row_total + (1.0 - strength) * original_0, original_0)
        iso_weight_1 = tl.where(blend, strength * share_1 / row_total + (1.0 - strength) * original_1, original_1)
        out = row_acc * plain_weight[:, None] + basket_outputs * baskets_weight[:, None]
        # an isolated token's value only where it is a valid position (a padded value may be NaN, which a weight of 0
        # would not cancel)
        if N_ISO >= 1:
            v_0 = tl.load(v_base + iso_0 * stride_vl + dims * stride_vd, mask=in_head & valid_0, other=0.0).to(tl.float32)
            out += iso_weight_0[:, None] * v_0[None, :]
        if N_ISO == 2:
            v_1 = tl.load(v_base + iso_1 * stride_vl + dims * stride_vd, mask=in_head & valid_1, other=0.0).to(tl.float32)
            out += iso_weight_1[:, None] * v_1[None, :]
        out_rows = Out + seq * stride_on + head[:, None] * stride_oh + position[:, None] * stride_ol
        tl.store(out_rows + dims[None, :] * stride_od, out.to(Out.dtype.element_ty), mask=real[:, None] & in_head[None, :])

    @triton.jit
    def _dot(a, b, DOT_PRECISION: tl.constexpr, EXACT_OPERANDS: tl.constexpr):
        """tl.dot, accumulating in fp32. Triton 3.6's interpreter multiplies bf16 operands as their raw bits, so
        there (EXACT_OPERANDS) they are widened to fp32 first: the products of bf16 values are exact in fp32, as
        in a GPU's bf16 matrix units."""
        if EXACT_OPERANDS:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        return tl.dot(a, b, input_precision=DOT_PRECISION)

    @triton.jit
    def _scores(q, source, first_key, keys, in_basket, position, dims, in_head, masked, BLOCK_N: tl.constexpr,
                BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, EXACT_OPERANDS: tl.constexpr,
                TMA: tl.constexpr):
        """The rows' raw scores (q . k, unscaled) against the block of keys from ``first_key``; where ``masked``, -inf
        where a row may not see a key (else every row sees every key of the block, and no score is selected; a literal
        ``False`` compiles no mask at all). Through a descriptor a block also reads keys past its basket (values of the
        next basket or padding, which may even be NaN): the mask is what keeps them out."""
        KD, VD, seq, kv_head, k_base, v_base, stride_kl, stride_kd, stride_vl, stride_vd = source
        if TMA:
            k = tl.trans(KD.load([seq, kv_head, first_key, 0]).reshape(BLOCK_N, BLOCK_D))
        else:
            k = tl.load(k_base + keys[None, :] * stride_kl + dims[:, None] * stride_kd,
                        mask=in_basket[None, :] & in_head[:, None], other=0.0)
        scores = _dot(q, k, DOT_PRECISION, EXACT_OPERANDS)
        if masked:
            seen = in_basket[None, :]
            if CAUSAL:
                seen = seen & (keys[None, :] <= position[:, None])
            scores = tl.where(seen, scores, float("-inf"))
        return scores

    @triton.jit
    def _values(source, first_key, keys, in_basket, dims, in_head, masked, BLOCK_N: tl.constexpr,
                BLOCK_D: tl.constexpr, TMA: tl.constexpr):
        """The block of values from ``first_key``, 0 past its basket where ``masked``: those keys' probabilities are 0,
        but a value there may be NaN (a padded position's), and 0 x NaN is NaN."""
        KD, VD, seq, kv_head, k_base, v_base, stride_kl, stride_kd, stride_vl, stride_vd = source
        if TMA:
            v = VD.load([seq, kv_head, first_key, 0]).reshape(BLOCK_N, BLOCK_D)
            if masked:
                v = tl.where(in_basket[:, None], v, 0.0)
            return v
        return tl.load(v_base + keys[:, None] * stride_vl + dims[None, :] * stride_vd,
                       mask=in_basket[:, None] & in_head[None, :], other=0.0)

    @triton.jit
    def _key_block(q, source, steps, block, masked, state, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                   CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, EXACT_OPERANDS: tl.constexpr, TMA: tl.constexpr,
                   ONE_BLOCK: tl.constexpr):
        """One step of the loop: key block ``block`` of the content, scored, its softmax and product with V taken into
        the basket's running state (the last three of ``state``), and where it ends its basket, the basket closed
        (:func:`_close_basket`); with ``ONE_BLOCK`` a block is a basket, with no running state."""
        content_start, basket_size, per_basket, keys_stop, position, dims, in_head, scale_log2, floor = steps
        row_max, row_sum, row_acc, basket_outputs, filled = state[0], state[1], state[2], state[3], state[4]
        basket_start = content_start + block // per_basket * basket_size
        first_key = basket_start + block % per_basket * BLOCK_N
        keys = first_key + tl.arange(0, BLOCK_N)
        in_basket = keys < tl.minimum(basket_start + basket_size, keys_stop)
        scores = _scores(q, source, first_key, keys, in_basket, position, dims, in_head, masked,
                         BLOCK_N, BLOCK_D, CAUSAL, DOT_PRECISION, EXACT_OPERANDS, TMA)
        if ONE_BLOCK:
            block_max = tl.maximum(tl.max(scores, 1) * scale_log2, floor)
            p = tl.exp2(scores * scale_log2 - block_max[:, None])  # one fused multiply-add per score
            v = _values(source, first_key, keys, in_basket, dims, in_head, masked, BLOCK_N, BLOCK_D, TMA)
            block_acc = _dot(p.to(v.dtype), v, DOT_PRECISION, EXACT_OPERANDS)  # before the sum: fewer live registers
            return _close_basket(row_max, row_sum, row_acc, basket_outputs, filled, block_max, tl.sum(p, 1), block_acc)
        else:
            basket_max, basket_sum, basket_acc = state[5], state[6], state[7]
            new_max = tl.maximum(basket_max, tl.max(scores, 1) * scale_log2)
            rescale = tl.exp2(basket_max - new_max)
            p = tl.exp2(scores * scale_log2 - new_max[:, None])  # one fused multiply-add per score
            v = _values(source, first_key, keys, in_basket, dims, in_head, masked, BLOCK_N, BLOCK_D, TMA)
            basket_sum = basket_sum * rescale + tl.sum(p, 1)
            basket_acc = basket_acc * rescale[:, None] + _dot(p.to(v.dtype), v, DOT_PRECISION, EXACT_OPERANDS)
            basket_max = new_max
            if block % per_basket == per_basket - 1:
                row_max, row_sum, row_acc, basket_outputs, filled = _close_basket(
                    row_max, row_sum, row_acc, basket_outputs, filled, basket_max, basket_sum, basket_acc)
                basket_max = tl.zeros_like(basket_max) + floor
                basket_sum = tl.zeros_like(basket_sum)
                basket_acc = tl.zeros_like(basket_acc)
            return row_max, row_sum, row_acc, basket_outputs, filled, basket_max, basket_sum, basket_acc

    @triton.jit
    def _close_basket(row_max, row_sum, row_acc, basket_outputs, filled, basket_max, basket_sum, basket_acc):
        """A basket ends: its own output o_ib joins the sum of the baskets' outputs (where the row saw one of its
        keys), and the basket joins the row's plain online softmax (the rescale flash attention does per block)."""
        nonempty = basket_sum > 0  # a basket the row sees no key of: its sum and product are 0
        new_max = tl.maximum(row_max, basket_max)
        keep = tl.exp2(row_max - new_max)
        join = tl.exp2(basket_max - new_max)
        inverse = 1.0 / tl.where(nonempty, basket_sum, 1.0)
        seen = nonempty.to(tl.float32)
        return new_max, row_sum * keep + basket_sum * join, row_acc * keep[:, None] + basket_acc * join[:, None], \
            basket_outputs + basket_acc * inverse[:, None], filled + seen

    @triton.jit
    def _isolated_score(q, k_base, position_k, stride_kl, stride_kd, dims, in_head, scale_log2, seen, position,
                        CAUSAL: tl.constexpr):
        """The base-2 score of every row against one isolated key, -inf where a row may not see it."""
        k = tl.load(k_base + position_k * stride_kl + dims * stride_kd, mask=in_head, other=0.0).to(tl.float32)
        if CAUSAL:
            seen = seen & (position_k <= position)
        return tl.where(seen, tl.sum(q.to(tl.float32) * k[None, :], 1) * scale_log2, float("-inf"))

    @triton.jit
    def _share(zeros, original, n_total, fixed, seen, POLICY: tl.constexpr):
        """An isolated token's share (docs/method.md#s1-3 step 2): "equal", "original" or a fixed number; none for a
        row that does not ``seen`` it (a later token in a causal model), as an empty basket gets none."""
        if POLICY == 0:
            return tl.where(seen, zeros + 1.0 / n_total, 0.0)
        elif POLICY == 1:
            return original
        else:
            return tl.where(seen, zeros + fixed, 0.0)

    if _interpreting():
        _let_the_interpreter_take_loop_bounds()

else:
    _calibrated_attention_kernel = None
