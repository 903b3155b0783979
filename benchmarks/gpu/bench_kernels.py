"""The attention kernels of the calibrated path, timed against plain SDPA in the same run.

**Fused calibrated attention** (:mod:`mteb_fairpos.triton_attention`, one Triton kernel for a calibrated layer):
for the shapes of the calibrated benchmark (12 heads of 64: 128 x 512, 32 x 2,048 and 8 x 8,192 tokens, mean
pooling in baskets of 128; a Qwen3-like causal layer with 16 query heads of 128 on 8 KV heads, 32 x 2,048, its
every row and its pooling rows) the kernel's time as a ratio to ``scaled_dot_product_attention`` on the same
query, key and value (plain attention, every row) and to the PyTorch path the backend runs without it
(``grouped_mean_rows``, one fused call per basket; for the pooling rows, ``pooled_row`` after SDPA), each
after the kernel's first-use check, with the largest difference between the kernel and that path; for mean pooling
also a plain flash-attention loop in Triton with the kernel's launch setting (``plain_triton_attention``): the fused
kernel over it is what calibration costs inside such a loop, the loop over SDPA what the loop itself costs.

**One basket with its log-sum-exp**: each way to get one basket's attention output and log-sum-exp.

The calibrated mean-pooling rows (``grouped_mean_rows``) call one such kernel per content basket: every
query row of the batch against the basket's 128 keys. For each dtype and mask kind (none: a basket every
row sees; per key: padding; per row: causal) this times the device's default kernel, its candidates
(:data:`mteb_fairpos.lse_kernels.CANDIDATES`) and the explicit computation, each as a ratio to
``torch.nn.functional.scaled_dot_product_attention`` over the same keys (which returns no log-sum-exp)
measured in the same run, and names the fastest one that passes the first-use check (exact). Timings
are medians of ``torch.utils.benchmark.Timer.blocked_autorange`` (which synchronises CUDA).

    python benchmarks/gpu/bench_kernels.py --device cuda --json kernels.json
    python benchmarks/gpu/bench_kernels.py --device cpu --quick      # the dry run (the fused kernel interpreted)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import warnings
from dataclasses import asdict, dataclass

import torch
from torch.nn.functional import scaled_dot_product_attention
from torch.utils.benchmark import Timer

from mteb_fairpos.lse_kernels import CANDIDATES, LSE_KERNELS, explicit_with_lse, reproduces_explicit
from mteb_fairpos.sweep import one_line

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
HEADS, HEAD_DIM, BASKET = 12, 64, 128


def _bias(kind: str, n: int, length: int, device: str, dtype: torch.dtype) -> torch.Tensor | None:
    if kind == "none":
        return None
    if kind == "per key":  # the last sequence's padding covers half the basket
        allowed = torch.ones(n, 1, 1, BASKET, dtype=torch.bool, device=device)
        allowed[-1, ..., BASKET // 2:] = False
    else:  # causal: row i sees basket keys up to its own position (the basket starts at row 0)
        allowed = torch.ones(length, BASKET, dtype=torch.bool, device=device).tril().expand(n, 1, length, BASKET)
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed, float("-inf"))


def _median_ms(call, min_run_time: float) -> float:
    return Timer(stmt="call()", globals={"call": call}).blocked_autorange(min_run_time=min_run_time).median * 1e3


def measure(device: str, dtype_name: str, mask: str, n: int, length: int, min_run_time: float) -> list[dict]:
    dtype = DTYPES[dtype_name]
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(n, HEADS, length, HEAD_DIM, generator=generator).to(device, dtype)
    k, v = (torch.randn(n, HEADS, BASKET, HEAD_DIM, generator=generator).to(device, dtype) for _ in range(2))
    bias = _bias(mask, n, length, device, dtype)
    scale = HEAD_DIM ** -0.5
    rows = [{"kernel": "sdpa (no lse)", "exact": None,
             "ms": _median_ms(lambda: scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale), min_run_time)}]
    kernels = [LSE_KERNELS[device], *CANDIDATES.get(device, ())] if device in LSE_KERNELS else []
    for kernel in [*kernels, explicit_with_lse]:
        row = {"kernel": kernel.__name__, "default": kernel is LSE_KERNELS.get(device)}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            row["exact"] = kernel is explicit_with_lse or reproduces_explicit(kernel, torch.device(device), dtype, HEAD_DIM)
        if not row["exact"]:
            row["why"] = " ".join(str(w.message) for w in caught)
        else:
            try:
                row["ms"] = _median_ms(lambda: kernel(q, k, v, bias, scale), min_run_time)
            except (RuntimeError, NotImplementedError) as err:  # passes the small check, fails at this size
                row["exact"], row["why"] = False, f"raised at this size: {str(err).splitlines()[0]}"
        rows.append(row)
    base = rows[0]["ms"]
    for row in rows:
        if "ms" in row:
            row["vs_sdpa"] = row["ms"] / base
        row.update(dtype=dtype_name, mask=mask, n=n, length=length, keys=BASKET)
    return rows


@dataclass(frozen=True)
class FusedShape:
    """One calibrated layer's attention: batch, length, query and KV heads, head size, pooling, causality."""

    name: str
    n: int
    length: int
    heads: int
    kv_heads: int
    head_dim: int
    pooling: str
    causal: bool

    def inputs(self, device: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Query, key and value of this shape, the same random values in every table."""
        generator = torch.Generator().manual_seed(0)
        q = torch.randn(self.n, self.heads, self.length, self.head_dim, generator=generator).to(device, dtype)
        k, v = (torch.randn(self.n, self.kv_heads, self.length, self.head_dim, generator=generator).to(device, dtype)
                for _ in range(2))
        return q, k, v

    def isolated(self) -> tuple[tuple[str, object], ...]:
        return {"mean": (), "cls": (("bos", "original"),), "last": (("bos", "original"), ("eos", "equal"))}[self.pooling]


FUSED_SHAPES = (
    FusedShape("minilm-mean-512", 128, 512, 12, 12, 32, "mean", False),  # all-MiniLM-L6-v2's heads
    FusedShape("gte-mean-512", 128, 512, 12, 12, 64, "mean", False),
    FusedShape("gte-mean-2048", 32, 2048, 12, 12, 64, "mean", False),
    FusedShape("gte-mean-8192", 8, 8192, 12, 12, 64, "mean", False),
    FusedShape("qwen3-mean-2048", 32, 2048, 16, 8, 128, "mean", True),
    FusedShape("qwen3-last-2048", 32, 2048, 16, 8, 128, "last", True),
)
QUICK_SHAPES = (FusedShape("toy-mean-64", 2, 64, 2, 2, 32, "mean", False),
                FusedShape("toy-last-64", 2, 64, 4, 2, 32, "last", True))
"""The dry run's sizes: Triton's interpreter takes seconds for these on a CPU."""
STRENGTH = 0.5


def plain_triton_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
                           config=None) -> torch.Tensor:
    """Plain attention (every row, no calibration) in a flash-attention loop written like the fused kernel's: the
    same launch setting (``config``, default the fused kernel's), the same online softmax, the fused kernel's own
    reads of a key and value block (masked loads, or tensor descriptors where ``config.tma``), masks only where a key
    block needs one. Its time against the fused kernel's is what calibration costs inside a Triton loop; against
    SDPA's, what the loop itself costs."""
    from mteb_fairpos import triton_attention

    n, heads, length, head_dim = q.shape
    config = config or triton_attention.launch_config(q.dtype, head_dim, False, triton_attention.device_arch(q.device))
    if q.device.type == "cpu" and q.dtype == torch.bfloat16:  # the interpreter's tl.dot takes bf16 as raw bits
        q, k, v = (t.float() for t in (q, k, v))
    blocks = triton_attention.descriptors(k, v, config.block_n, head_dim) if config.tma else None
    out = torch.empty_like(q)
    grid = (-(-length // config.block_m), n * heads)
    _plain_attention_kernel()[grid](q, k, v, *(blocks or (k, v)), out, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                                  *out.stride()[:3], heads, k.shape[1], length, scale * 1.4426950408889634,
                                  HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=causal,
                                  DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32", TMA=blocks is not None,
                                  num_warps=config.num_warps, num_stages=config.num_stages)
    return out


@functools.cache
def _plain_attention_kernel():
    """The plain loop's Triton kernel, made on first use: after main() has chosen the interpreter for a CPU run (Triton
    is imported only then; the kernel's body reads ``tl``, its block and the fused kernel's block reads as module
    globals)."""
    global tl, _scores, _values, _plain_block
    import triton
    import triton.language as tl

    from mteb_fairpos.triton_attention import _scores, _values

    @triton.jit
    def block(q, source, start, length, rows, dims, in_head, scale_log2, masked, row_max, row_sum, acc,
              BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
              TMA: tl.constexpr):
        """One key block of the online softmax, read as the fused kernel reads it."""
        keys = start + tl.arange(0, BLOCK_N)
        scores = _scores(q, source, start, keys, keys < length, rows, dims, in_head, masked, BLOCK_N, HEAD_DIM,
                         CAUSAL, DOT_PRECISION, False, TMA)
        new_max = tl.maximum(row_max, tl.max(scores, 1) * scale_log2)
        p = tl.exp2(scores * scale_log2 - new_max[:, None])
        rescale = tl.exp2(row_max - new_max)
        v = _values(source, start, keys, keys < length, dims, in_head, masked, BLOCK_N, HEAD_DIM, TMA)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        return new_max, row_sum * rescale + tl.sum(p, 1), acc

    _plain_block = block

    @triton.jit
    def kernel(Q, K, V, KD, VD, Out, stride_qn, stride_qh, stride_ql, stride_kn, stride_kh, stride_kl,
               stride_vn, stride_vh, stride_vl, stride_on, stride_oh, stride_ol,
               heads, kv_heads, length, scale_log2, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, TMA: tl.constexpr):
        seq, head = tl.program_id(1) // heads, tl.program_id(1) % heads
        kv_head = head // (heads // kv_heads)
        first_row = tl.program_id(0) * BLOCK_M
        rows = first_row + tl.arange(0, BLOCK_M)
        dims = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + seq * stride_qn + head * stride_qh + rows[:, None] * stride_ql + dims[None, :],
                    mask=rows[:, None] < length, other=0.0)
        k_base = K + seq * stride_kn + kv_head * stride_kh
        v_base = V + seq * stride_vn + kv_head * stride_vh
        source = (KD, VD, seq, kv_head, k_base, v_base, stride_kl, 1, stride_vl, 1)  # as the fused kernel reads blocks
        in_head = dims < HEAD_DIM
        row_max = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
        row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        stop = tl.minimum(length, first_row + BLOCK_M) if CAUSAL else length
        whole = length // BLOCK_N * BLOCK_N  # the key blocks every row sees whole need no mask
        if CAUSAL:
            whole = tl.minimum(whole, (first_row + 1) // BLOCK_N * BLOCK_N)
        if TMA:  # as the fused kernel: whole blocks in a loop compiled without a mask, then the rest
            for start in range(0, whole, BLOCK_N):
                row_max, row_sum, acc = _plain_block(q, source, start, length, rows, dims, in_head, scale_log2, False,
                                                     row_max, row_sum, acc, BLOCK_N, HEAD_DIM, CAUSAL, DOT_PRECISION, TMA)
            for start in range(whole, stop, BLOCK_N):
                row_max, row_sum, acc = _plain_block(q, source, start, length, rows, dims, in_head, scale_log2, True,
                                                     row_max, row_sum, acc, BLOCK_N, HEAD_DIM, CAUSAL, DOT_PRECISION, TMA)
        else:  # one loop, the mask behind a branch
            for start in range(0, stop, BLOCK_N):
                row_max, row_sum, acc = _plain_block(q, source, start, length, rows, dims, in_head, scale_log2,
                                                     start >= whole, row_max, row_sum, acc, BLOCK_N, HEAD_DIM, CAUSAL,
                                                     DOT_PRECISION, TMA)
        out = acc / row_sum[:, None]
        tl.store(Out + seq * stride_on + head * stride_oh + rows[:, None] * stride_ol + dims[None, :],
                 out.to(Out.dtype.element_ty), mask=rows[:, None] < length)

    return kernel


def measure_fused(device: str, dtype_name: str, shape: FusedShape, basket: int, min_run_time: float) -> dict:
    """One row of the fused table: SDPA, the kernel and the PyTorch path, timed on the same inputs."""
    from mteb_fairpos import triton_attention
    from mteb_fairpos.attention import grouped_mean_rows, pooled_row
    from mteb_fairpos.calibration import basket_layout

    dtype = DTYPES[dtype_name]
    row = {"case": shape.name, "dtype": dtype_name, "n": shape.n, "length": shape.length, "heads": shape.heads,
           "kv_heads": shape.kv_heads, "head_dim": shape.head_dim, "pooling": shape.pooling, "causal": shape.causal}
    q, k, v = shape.inputs(device, dtype)
    mask = torch.ones(shape.n, shape.length, dtype=torch.long, device=device)
    layout = basket_layout(mask, shape.pooling, basket, shape.isolated())
    fused = triton_attention.fused_layout(layout)  # made once per forward pass, as the backend would
    scale = shape.head_dim ** -0.5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row["exact"] = triton_attention.verified(torch.device(device), dtype, shape.head_dim, fused.pooled, shape.causal,
                                                 fused.shares)
    if not row["exact"]:
        row["why"] = " ".join(str(w.message) for w in caught) or triton_attention.call_refusal(q, k, v, fused)
        return row

    def kernel():
        return triton_attention.fused_calibrated_attention(q, k, v, fused, STRENGTH, shape.causal, scale)

    if shape.pooling == "mean":
        def path():
            return grouped_mean_rows(q, k, v, None, shape.causal, scale, layout, STRENGTH).transpose(1, 2)
    else:
        batch = torch.arange(shape.n, device=device)
        plain = scaled_dot_product_attention(q, k, v, is_causal=shape.causal, scale=scale,  # (N, L, H, D), as
                                             enable_gqa=shape.heads != shape.kv_heads).transpose(1, 2).contiguous()

        def path():  # what the backend adds to SDPA without the kernel: the pooling rows, written over its output
            return pooled_row(plain, q, k, v, None, shape.causal, scale, layout, STRENGTH)[batch, layout.query_rows]

    row["max_abs_vs_path"] = (kernel().float() - path().float()).abs().max().item()
    row["sdpa_ms"] = _median_ms(lambda: scaled_dot_product_attention(q, k, v, is_causal=shape.causal, scale=scale,
                                                                     enable_gqa=shape.heads != shape.kv_heads), min_run_time)
    row["fused_ms"] = _median_ms(kernel, min_run_time)
    row["path_ms"] = _median_ms(path, min_run_time)
    row["fused_vs_sdpa"] = row["fused_ms"] / row["sdpa_ms"]
    row["fused_vs_path"] = row["fused_ms"] / row["path_ms"]
    if shape.pooling == "mean":  # every row: the plain Triton loop computes the same rows uncalibrated
        expected = scaled_dot_product_attention(q, k, v, is_causal=shape.causal, scale=scale, enable_gqa=shape.heads != shape.kv_heads)
        try:
            plain_loop = plain_triton_attention(q, k, v, shape.causal, scale)
        except Exception as err:  # a compiler or launch error of the baseline: the kernel's row stands without it
            row["plain_triton_why"] = one_line(err)[:200]
            return row
        row["plain_triton_max_abs_vs_sdpa"] = (plain_loop.float() - expected.float()).abs().max().item()
        row["plain_triton_ms"] = _median_ms(lambda: plain_triton_attention(q, k, v, shape.causal, scale), min_run_time)
        row["fused_vs_plain_triton"] = row["fused_ms"] / row["plain_triton_ms"]
        row["plain_triton_vs_sdpa"] = row["plain_triton_ms"] / row["sdpa_ms"]
    return row


TUNING = ((64, 64, 4, 3), (64, 128, 4, 2), (64, 128, 4, 3), (64, 128, 8, 2), (64, 128, 8, 3), (128, 64, 8, 3),
          (128, 128, 8, 2), (128, 128, 8, 3),
          (64, 64, 4, 3, True), (64, 128, 4, 3, True), (64, 128, 8, 2, True), (128, 128, 8, 2, True))
"""Launch settings ``--tune`` times (mean rows, on the shapes of :data:`TUNED_ON`), besides CONFIGS' default:
(block_m, block_n, warps, stages[, tma]). A key block of 128 holds a whole basket of the default calibration (the kernel's
one-basket-per-block loop); 64 splits it in two. Left out: 64-row blocks on 8 warps with 64 keys (the fourth H200 run:
2.0-2.4x its default at head size 64, 1.0x at 128) and 128-row blocks on 4 warps (1.15-1.26x at 64, 1.45-1.74x at
128), each at least 1.3x the fastest setting at both; and 2 stages where 3 were as fast at both head sizes (64 x 64 on 4
warps, 128 x 64 on 8). The last four read K and V through tensor descriptors (``LaunchConfig.tma``)."""
TUNED_ON = ("gte-mean-2048", "gte-mean-512")
"""The shapes ``--tune`` times every setting on, in this order: the first of a head size picks its ``CONFIGS`` entry
(``launch_configs``), the others say whether another setting wins at their length. Qwen3's head size of 128 is not
tuned: two H200 runs found the same three settings fastest there, and every one faster than the default spills registers
(docs/gpu.md)."""
QUICK_TUNING = ((64, 64, 4, 2), (64, 64, 4, 3, True))
"""The dry run's settings: one that reads K and V by masked loads, one through tensor descriptors."""
TUNED_TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3}
"""How far a setting's output may lie from the default's to be picked: the dtype's rounding (outputs of about 1)."""


def tune_fused(device: str, dtype_name: str, shape: FusedShape, basket: int, min_run_time: float,
               settings: tuple[tuple[int, int, int, int] | tuple[int, int, int, int, bool], ...]) -> list[dict]:
    """The kernel's time under each of ``settings`` that compiles and runs (the default's first), as a ratio to
    the default's: what to put in ``triton_attention.CONFIGS``. The fastest that keeps the default's output
    (`TUNED_TOLERANCE`) is also timed against SDPA, and so is the plain Triton loop under the same setting: how
    close the setting brings the kernel, and the loop it cannot beat, to SDPA."""
    from mteb_fairpos import triton_attention
    from mteb_fairpos.calibration import basket_layout

    dtype = DTYPES[dtype_name]
    q, k, v = shape.inputs(device, dtype)
    layout = triton_attention.fused_layout(basket_layout(torch.ones(shape.n, shape.length, dtype=torch.long, device=device),
                                                         shape.pooling, basket, shape.isolated()))
    arch = triton_attention.device_arch(torch.device(device))
    default = triton_attention.launch_config(dtype, shape.head_dim, layout.pooled, arch, basket)
    expected = triton_attention.fused_calibrated_attention(q, k, v, layout, STRENGTH, shape.causal, shape.head_dim ** -0.5)
    rows = []
    for setting in [default, *(triton_attention.LaunchConfig(*t) for t in settings)]:
        row = {"case": shape.name, "dtype": dtype_name, "head_dim": shape.head_dim, "arch": arch, "config": asdict(setting)}

        def call(setting=setting):
            return triton_attention.fused_calibrated_attention(q, k, v, layout, STRENGTH, shape.causal,
                                                               shape.head_dim ** -0.5, config=setting)
        try:
            row["max_abs_vs_default"] = (call().float() - expected.float()).abs().max().item()
            row["ms"] = _median_ms(call, min_run_time)
        except Exception as err:  # out of shared memory or registers for this setting: skipped, with the reason
            row["why"] = one_line(err)[:200]
        rows.append(row)
    base = rows[0].get("ms")
    for row in rows:
        if base and "ms" in row:
            row["vs_default"] = row["ms"] / base
    kept = [row for row in rows if "ms" in row and row["max_abs_vs_default"] <= TUNED_TOLERANCE[dtype_name]]
    if kept and shape.pooling == "mean":
        fastest = min(kept, key=lambda row: row["ms"])
        setting, scale = triton_attention.LaunchConfig(**fastest["config"]), shape.head_dim ** -0.5
        fastest["sdpa_ms"] = _median_ms(lambda: scaled_dot_product_attention(
            q, k, v, is_causal=shape.causal, scale=scale, enable_gqa=shape.heads != shape.kv_heads), min_run_time)
        try:
            fastest["plain_triton_ms"] = _median_ms(lambda: plain_triton_attention(q, k, v, shape.causal, scale, setting),
                                                    min_run_time)
        except Exception as err:  # the baseline's compile or launch error: the pick stands without it
            fastest["plain_triton_why"] = one_line(err)[:200]
    return rows


def across_lengths(device: str, dtype_name: str, shapes: tuple[FusedShape, ...], tuned_on: FusedShape, found: list[dict],
                   basket: int, min_run_time: float) -> list[dict]:
    """The fastest setting ``tune_fused`` ``found`` on ``tuned_on``, where it is not the default, timed on the other
    mean-row shapes of that head size against the default and SDPA there (``tune_fused``'s row of it): whether a
    setting tuned at one length is also the faster one at the others, before it goes into ``CONFIGS`` for all."""
    rows = []
    for pick in [p for p in tuned(found) if p["config"] != found[0]["config"]]:
        for shape in [s for s in shapes if s.pooling == "mean" and s.head_dim == pick["largest"] and s != tuned_on]:
            rows += tune_fused(device, dtype_name, shape, basket, min_run_time, (tuple(pick["config"].values()),))[1:]
    return rows


def _print_fused(row: dict) -> None:
    size = f"{row['n']}x{row['length']}"
    if not row["exact"]:
        print(f"{row['dtype']:<5} {row['case']:<16} {size:>7} set aside: {row['why']}", flush=True)
        return
    loop = (f"{row['plain_triton_ms']:>9.3f} {row['fused_vs_plain_triton']:>7.2f} {row['plain_triton_vs_sdpa']:>7.2f}"
            if "plain_triton_ms" in row else f"{'-':>9} {'-':>7} {'-':>7}")
    print(f"{row['dtype']:<5} {row['case']:<16} {size:>7} {row['sdpa_ms']:>9.3f} {row['fused_ms']:>9.3f} {row['path_ms']:>9.3f} "
          f"{row['fused_vs_sdpa']:>7.2f} {row['fused_vs_path']:>7.2f} {row['max_abs_vs_path']:>9.2g} {loop}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="one short size and brief timings (the CPU dry run)")
    parser.add_argument("--dtypes", default="bf16,fp16,fp32", help="comma-separated, of " + ", ".join(DTYPES))
    parser.add_argument("--json", help="write every row and the picks here")
    parser.add_argument("--tune", action="store_true", help="also time the fused kernel's mean rows under each launch "
                        "setting of TUNING (bf16, fp16), to choose triton_attention.CONFIGS")
    parser.add_argument("--tables", default="fused,lse", help="which tables: fused (the fused calibrated-attention "
                        "kernel), lse (one basket with its log-sum-exp), or both")
    args = parser.parse_args(argv)
    if args.device == "cpu":  # before triton_attention is imported: its kernel runs through Triton's interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    unknown = [d for d in args.dtypes.split(",") if d not in DTYPES]
    if unknown:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}; known: {', '.join(DTYPES)}")
    tables = args.tables.split(",")
    if not tables or set(tables) - {"fused", "lse"}:
        parser.error(f"--tables takes fused, lse or both (comma-separated), not {args.tables!r}")
    sizes = [(2, 256)] if args.quick else [(4, 2048), (1, 8192)]
    min_run_time = 0.05 if args.quick else 0.2
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else f"cpu, {torch.get_num_threads()} threads"
    shapes, fused_basket = (QUICK_SHAPES, 16) if args.quick else (FUSED_SHAPES, BASKET)
    print(f"torch {torch.__version__} on {name}")
    if "fused" in tables:
        print(f"fused calibrated attention (strength {STRENGTH}, baskets of {fused_basket}); x sdpa and x path: its time "
              "over SDPA's and over the PyTorch path's")
        print(f"{'dtype':<5} {'case':<16} {'size':>7} {'sdpa ms':>9} {'fused ms':>9} {'path ms':>9} {'x sdpa':>7} "
              f"{'x path':>7} {'max diff':>9} {'loop ms':>9} {'x loop':>7} {'loop/sdpa':>7}")
    fused_rows: list[dict] = []
    for dtype in [d for d in ("bf16", "fp32") if d in args.dtypes.split(",") and "fused" in tables]:
        for shape in shapes:
            fused_rows.append(measure_fused(args.device, dtype, shape, fused_basket, min_run_time))
            _print_fused(fused_rows[-1])
            if args.json:
                _write(args.json, name, [], fused_rows)
    tuning: list[dict] = []
    across: list[dict] = []
    for dtype in [d for d in ("bf16", "fp16") if args.tune and d in args.dtypes.split(",")]:
        named = {shape.name: shape for shape in shapes}
        for shape in [s for s in shapes if s.pooling == "mean"] if args.quick else [named[n] for n in TUNED_ON]:
            found = tune_fused(args.device, dtype, shape, fused_basket, min_run_time, QUICK_TUNING if args.quick else TUNING)
            tuning += found
            ranked = sorted((r for r in found if "vs_default" in r), key=lambda r: r["ms"])
            for row in ranked[:3]:
                print(f"tune {dtype} {shape.name}: {row['config']} {row['ms']:.3f} ms, {row['vs_default']:.2f} x the default "
                      f"(max diff {row['max_abs_vs_default']:.2g})", flush=True)
            timed = next((row for row in found if "sdpa_ms" in row), None)
            if timed:  # the fastest that keeps the default's output, against SDPA, and the plain loop under it
                loop = (f", the plain Triton loop under it {timed['plain_triton_ms'] / timed['sdpa_ms']:.2f} x SDPA"
                        if "plain_triton_ms" in timed else "")
                print(f"tune {dtype} {shape.name}: its fastest {timed['ms'] / timed['sdpa_ms']:.2f} x SDPA{loop}", flush=True)
            elsewhere = across_lengths(args.device, dtype, shapes, shape, found, fused_basket, min_run_time)
            for row in [r for r in elsewhere if "vs_default" in r]:
                print(f"tune {dtype} {shape.name}'s fastest on {row['case']}: {row['vs_default']:.2f} x the default"
                      + (f", {row['ms'] / row['sdpa_ms']:.2f} x SDPA" if "sdpa_ms" in row else ""), flush=True)
            across += elsewhere
            if args.json:
                _write(args.json, name, [], fused_rows, tuning, across)
    if "lse" not in tables:
        return 0
    print(f"\none basket with its log-sum-exp: basket of {BASKET} keys, {HEADS} heads of {HEAD_DIM}")
    print(f"{'dtype':<5} {'mask':<8} {'size':>7} {'kernel':<22} {'exact':>5} {'ms':>9} {'x sdpa':>7}")
    rows: list[dict] = []
    for dtype in args.dtypes.split(","):
        for mask in ("none", "per key", "per row"):
            for n, length in sizes:
                for row in measure(args.device, dtype, mask, n, length, min_run_time):
                    rows.append(row)
                    ms = f"{row['ms']:>9.3f} {row['vs_sdpa']:>7.2f}" if "ms" in row else f"{'-':>9} {'-':>7}"
                    print(f"{dtype:<5} {mask:<8} {n}x{length:<5} {row['kernel']:<22} {str(row['exact']):>5} {ms}", flush=True)
                if args.json:  # after each size: a run cut short keeps what it measured
                    _write(args.json, name, rows, fused_rows, tuning, across)
    for key, pick in fastest(rows).items():
        print(f"fastest exact fused kernel for {key}: {pick['kernel']} ({pick['vs_sdpa']:.2f} x sdpa)")
    return 0


def _write(path: str, device: str, rows: list[dict], fused_rows: list[dict], tuning: list[dict] | None = None,
           across: list[dict] | None = None) -> None:
    with open(path, "w") as handle:
        json.dump({"device": device, "torch": torch.__version__, "rows": rows, "picks": fastest(rows), "fused": fused_rows,
                   "tuning": tuning or [], "launch_configs": tuned(tuning or []), "across": across or []}, handle, indent=1)


def tuned(tuning: list[dict]) -> list[dict]:
    """The fastest setting within the dtype's rounding of the default, per dtype and head size tuned, on the first
    shape tuned at that head size (:data:`TUNED_ON`): entries for ``triton_attention.CONFIGS`` (mean rows), smallest
    head first, as ``bench_calibration.py --kernel-configs`` reads them."""
    best: dict[tuple[str, int], dict] = {}
    picked_on: dict[tuple[str, int], str] = {}
    for row in tuning:
        entry = (row["dtype"], row["head_dim"])
        if picked_on.setdefault(entry, row.get("case")) != row.get("case"):
            continue
        if "ms" in row and row["max_abs_vs_default"] <= TUNED_TOLERANCE[row["dtype"]]:
            if entry not in best or row["ms"] < best[entry]["ms"]:
                best[entry] = row
    return [_pick(dtype, head, row) for (dtype, head), row in sorted(best.items(), key=lambda item: item[0][1])]


def _pick(dtype: str, head: int, row: dict) -> dict:
    """A ``CONFIGS`` entry from the fastest tuning row, with its time over SDPA's and the plain loop's, where timed."""
    pick = {"dtype": dtype, "largest": head, "pooled": False, "arch": row["arch"], "config": row["config"],
            "vs_default": row["vs_default"], "case": row["case"]}
    if "sdpa_ms" in row:
        pick["vs_sdpa"] = row["ms"] / row["sdpa_ms"]
        if "plain_triton_ms" in row:
            pick["plain_triton_vs_sdpa"] = row["plain_triton_ms"] / row["sdpa_ms"]
    return pick


def fastest(rows: list[dict]) -> dict[str, dict]:
    """The fastest fused kernel that passed the check, per dtype, mask and size."""
    picks: dict[str, dict] = {}
    for row in rows:
        key = f"{row['dtype']} {row['mask']} {row['n']}x{row['length']}"
        if row["exact"] and "ms" in row and row["kernel"] not in ("explicit_with_lse", "sdpa (no lse)"):
            if key not in picks or row["ms"] < picks[key]["ms"]:
                picks[key] = {"kernel": row["kernel"], "ms": row["ms"], "vs_sdpa": row["vs_sdpa"]}
    return picks


if __name__ == "__main__":
    sys.exit(main())
