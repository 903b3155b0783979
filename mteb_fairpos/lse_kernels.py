"""Fused attention kernels that also return each row's log-sum-exp, one plain function per device.

The mean-pooling path (:func:`mteb_fairpos.attention.grouped_mean_rows`) needs, for every content
basket, the attention output over that basket's keys *and* its log-sum-exp. Public SDPA returns
no log-sum-exp, so each device gets PyTorch's own fused kernel through its private ATen op:

* ``cpu``:  ``aten::_scaled_dot_product_flash_attention_for_cpu``;
* ``cuda``: ``aten::_scaled_dot_product_flash_attention`` for a half-precision call without a mask,
  ``aten::_scaled_dot_product_efficient_attention`` for the rest (the memory-efficient kernel, the
  one CUDA kernel that takes an additive mask and returns the log-sum-exp in every dtype).

On an H200 (``docs/gpu.md``) both reproduced the explicit computation in every dtype they take, and
the flash op ran an unmasked basket in 0.57-0.85 of the memory-efficient op's time in bf16 and fp16;
calibrated layers of right-padded batches of equal lengths run most baskets unmasked. Other ways to
the same pair stay as candidates (:data:`CANDIDATES`): the memory-efficient op alone, the cuDNN op
(half precision, additive mask; slower there) and ``flex_attention`` (compiled, the mask as a score
modification; 3-170x slower there). ``benchmarks/gpu/bench_kernels.py`` times each on a GPU.

Private ops can change between torch releases, so a kernel is used only after it has reproduced
the explicit computation (:func:`explicit_with_lse`) once per device type and dtype, on a small
problem with the model's head size, a partial mask and a fully masked row (:func:`verified_kernel`).
A kernel that is missing, raises or disagrees is set aside with a warning and the next candidate
is checked; where none passes, the exact explicit computation in query tiles runs instead. ``tests/core/test_fused_mean.py`` also checks the CPU
kernel's contract directly.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

LseKernel = Callable[[Tensor, Tensor, Tensor, "Tensor | None", float], tuple[Tensor, Tensor]]
"""(query (N, H, L, D), key and value (N, H, S, D), additive bias or None, scale) -> output, lse (N, H, L)."""

TILE_ELEMENTS = 1 << 22
"""Upper bound on the score elements of one query tile of the explicit computation (16 MiB in fp32)."""


def cpu_flash(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, scaling: float) -> tuple[Tensor, Tensor]:
    """PyTorch's fused flash attention for CPU; a fully masked row gives 0."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, False, attn_mask=bias, scale=scaling)


def cuda_memory_efficient(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None,
                          scaling: float) -> tuple[Tensor, Tensor]:
    """PyTorch's memory-efficient CUDA attention. It wants the mask's rows 16-element aligned and pads
    the log-sum-exp to a multiple of 32 rows, so the mask is laid out aligned and the lse cut back."""
    if bias is not None:
        keys = bias.shape[-1]
        aligned = torch.zeros(*bias.shape[:-1], -(-keys // 16) * 16, dtype=query.dtype, device=query.device)
        bias = aligned[..., :keys].copy_(bias).expand(query.shape[0], query.shape[1], query.shape[2], keys)
    out, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, bias, True, 0.0, False, scale=scaling
    )
    return out, lse[..., : query.shape[2]]


def cuda_flash(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, scaling: float) -> tuple[Tensor, Tensor]:
    """PyTorch's flash attention for CUDA where it applies (see :func:`_flash_applies`; no mask, which it cannot
    take); other calls go to :func:`cuda_memory_efficient`."""
    if bias is not None or not _flash_applies(query):
        return cuda_memory_efficient(query, key, value, bias, scaling)
    out, lse, *_ = torch.ops.aten._scaled_dot_product_flash_attention(query, key, value, 0.0, False, False, scale=scaling)
    return out, lse


def _flash_applies(query: Tensor) -> bool:
    """fp16 or bf16, a head size of at most 256 in steps of 8, on a GPU of compute capability 8.0 or newer:
    what PyTorch's flash kernel takes. Anything else goes to the memory-efficient op without a warning."""
    head = query.shape[-1]
    return (query.dtype in (torch.float16, torch.bfloat16) and head % 8 == 0 and head <= 256
            and _compute_capability(query.device) >= (8, 0))


@functools.cache
def _compute_capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def cuda_cudnn(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, scaling: float) -> tuple[Tensor, Tensor]:
    """PyTorch's cuDNN attention (fp16 and bf16 only), with the mask expanded to every head and row."""
    if bias is not None:
        bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    out, lse, *_ = torch.ops.aten._scaled_dot_product_cudnn_attention(
        query, key, value, bias, True, 0.0, False, False, scale=scaling
    )
    return out, lse.reshape(query.shape[:3])  # cuDNN keeps a trailing axis of 1


@functools.cache
def _compiled_flex() -> Callable:
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)


def flex(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, scaling: float) -> tuple[Tensor, Tensor]:
    """``flex_attention``, compiled (uncompiled it builds the score matrix), the mask added as a score
    modification; the log-sum-exp comes through ``return_aux`` (torch 2.9 on; ``return_lse`` before)."""
    from torch.nn.attention import flex_attention as module

    score_mod = None
    if bias is not None:
        per_row = bias.shape[2] > 1

        def score_mod(score, batch, head, row, column):
            return score + bias[batch, 0, row if per_row else 0, column]

    if hasattr(module, "AuxRequest"):
        out, aux = _compiled_flex()(query, key, value, score_mod=score_mod, scale=scaling,
                                    return_aux=module.AuxRequest(lse=True))
        return out, aux.lse
    return _compiled_flex()(query, key, value, score_mod=score_mod, scale=scaling, return_lse=True)


LSE_KERNELS: dict[str, LseKernel] = {"cpu": cpu_flash, "cuda": cuda_flash}
"""The fused kernel of each device type; a device without one uses :func:`explicit_with_lse`."""
CANDIDATES: dict[str, tuple[LseKernel, ...]] = {"cuda": (cuda_memory_efficient, cuda_cudnn, flex)}
"""Further kernels of a device type, checked in this order where its default kernel fails its check."""
_VERIFIED: dict[tuple[str, torch.dtype, int], LseKernel | None] = {}


def attention_with_lse(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None,
                       scaling: float) -> tuple[Tensor, Tensor]:
    """Attention that also returns each row's log-sum-exp: (N, H, L, D) output, (N, H, L) fp32.

    Masks (padding, causal) come in ``bias``, additive, (N, 1, L or 1, S). Grouped-query attention
    is folded into the rows (no repeated K and V). A row that sees no key gives 0; its log-sum-exp
    is left to the caller, which knows which rows those are.
    """
    n, h, length, d = query.shape
    kv_heads = key.shape[1]
    rep = h // kv_heads
    # the fused ops read the head dimension as contiguous, whatever its stride (PyTorch's public SDPA copies first)
    query, key, value = (t if t.stride(-1) == 1 else t.contiguous() for t in (query, key, value))
    grouped = query.reshape(n, kv_heads, rep * length, d)
    if bias is not None and rep > 1 and bias.shape[2] > 1:  # a per-row mask follows the rows of every head
        bias = bias.repeat(1, 1, rep, 1)
    kernel = verified_kernel(query.device, query.dtype, d) or explicit_with_lse
    out, lse = kernel(grouped, key, value, bias, scaling)
    return out.reshape(n, h, length, -1), lse.float().reshape(n, h, length)


def explicit_with_lse(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None,
                      scaling: float) -> tuple[Tensor, Tensor]:
    """The same as the fused kernels, computed explicitly in query tiles (a fully masked row: 0, lse 0)."""
    outs, lses = [], []
    exact = torch.promote_types(query.dtype, torch.float32)  # scores and softmax in fp32 at least
    keys = key.transpose(-1, -2).to(exact)  # products of half-precision operands, not their rounded sums
    tile = max(1, TILE_ELEMENTS // (query.shape[0] * query.shape[1] * key.shape[2]))
    for start in range(0, query.shape[2], tile):
        stop = min(start + tile, query.shape[2])
        scores = (query[:, :, start:stop].to(exact) @ keys) * scaling
        if bias is not None:
            scores = scores + (bias[:, :, start:stop] if bias.shape[2] > 1 else bias).to(exact)
        lse = torch.logsumexp(scores, dim=-1)
        probs = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
        outs.append((probs.to(value.dtype) @ value))
        lses.append(torch.where(torch.isfinite(lse), lse, 0.0))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def verified_kernel(device: torch.device, dtype: torch.dtype, head_dim: int) -> LseKernel | None:
    """The device's first fused kernel (its default, then its candidates) that has reproduced the
    explicit computation in ``dtype`` at ``head_dim`` (checked on first use, then remembered);
    ``None`` where there is none or all failed."""
    entry = (device.type, dtype, head_dim)
    if entry not in _VERIFIED:
        kernels = ([LSE_KERNELS[device.type]] if device.type in LSE_KERNELS else []) + list(CANDIDATES.get(device.type, ()))
        _VERIFIED[entry] = next((k for k in kernels if reproduces_explicit(k, device, dtype, head_dim)), None)
    return _VERIFIED[entry]


def reproduces_explicit(kernel: LseKernel, device: torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    """Whether ``kernel`` gives the explicit output and log-sum-exp (fp64) under a per-row mask, a per-key
    mask and none, with 0 for a row that sees no key; a warning says why not."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, rows, head_dim, generator=generator) for rows in (40, 32, 32))
    allowed = torch.rand(2, 1, 40, 32, generator=generator) > 0.3
    allowed[..., 0] = True
    allowed[1, :, 7] = False  # a row that sees no key
    masks = {"per row": torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf")),
             "per key": torch.zeros(2, 1, 1, 32).masked_fill_(~allowed[:, :, :1], float("-inf")), "none": None}
    visible = {"per row": allowed.any(-1), "per key": allowed[:, :, :1].any(-1), "none": torch.ones(1, 1, 1, dtype=torch.bool)}
    tolerance = 1e-4 if dtype in (torch.float32, torch.float64) else 5e-2
    name = getattr(kernel, "__name__", repr(kernel))
    for label, bias in masks.items():
        expected_out, expected_lse = explicit_with_lse(q.double(), k.double(), v.double(),
                                                       None if bias is None else bias.double(), 0.25)
        inputs = [t.to(device, dtype) for t in (q, k, v)]
        try:
            out, lse = kernel(*inputs, None if bias is None else bias.to(device, dtype), 0.25)
        except (RuntimeError, NotImplementedError, AttributeError) as err:  # AttributeError: an op torch no longer has
            set_aside(name, device, dtype, head_dim, f"it raised {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            return False
        seen = visible[label].expand(2, 2, 40)  # rows that see a key
        out, lse = out.double().cpu(), lse.double().cpu()
        expected_lse = expected_lse.double()
        if out.shape != expected_out.shape or lse.shape != expected_lse.shape:
            set_aside(name, device, dtype, head_dim, f"it returned shapes {tuple(out.shape)}, {tuple(lse.shape)} "
                       f"for {tuple(expected_out.shape)}, {tuple(expected_lse.shape)} ({label} mask)")
            return False
        wrong = not torch.allclose(out[seen], expected_out[seen], atol=tolerance) or \
            not torch.allclose(lse[seen], expected_lse[seen], atol=tolerance) or \
            not torch.equal(out[~seen], torch.zeros_like(out[~seen]))
        if wrong:
            set_aside(name, device, dtype, head_dim, f"its output or log-sum-exp differs from the explicit computation ({label} mask)")
            return False
    return True


NEXT_KERNEL = ("The next kernel is checked; where none reproduces the explicit computation, calibrated mean pooling "
               "computes its rows explicitly (exact, slower).")


def set_aside(name: str, device: torch.device, dtype: torch.dtype, head_dim: int, why: str, instead: str = NEXT_KERNEL) -> None:
    """Warn that a kernel failed its first-use check, why, and what runs ``instead``."""
    warnings.warn(
        f"mteb-fairpos: the fused kernel {name} is not used on {device.type} in {dtype} with head size {head_dim}: {why}. "
        f"{instead} Please report this with your torch version and GPU.",
        RuntimeWarning,
        stacklevel=4,
    )
