"""Each way to get one basket's attention output with its log-sum-exp, timed against plain SDPA.

The calibrated mean-pooling rows (``grouped_mean_rows``) call one such kernel per content basket: every
query row of the batch against the basket's 128 keys. For each dtype and mask kind (none: a basket every
row sees; per key: padding; per row: causal) this times the device's default kernel, its candidates
(:data:`mteb_fairpos.lse_kernels.CANDIDATES`) and the explicit computation, each as a ratio to
``torch.nn.functional.scaled_dot_product_attention`` over the same keys (which returns no log-sum-exp)
measured in the same run, and names the fastest one that passes the first-use check (exact). Timings
are medians of ``torch.utils.benchmark.Timer.blocked_autorange`` (which synchronises CUDA).

    python benchmarks/gpu/bench_kernels.py --device cuda --json kernels.json
    python benchmarks/gpu/bench_kernels.py --device cpu --quick      # the dry run
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import torch
from torch.nn.functional import scaled_dot_product_attention
from torch.utils.benchmark import Timer

from mteb_fairpos.lse_kernels import CANDIDATES, LSE_KERNELS, explicit_with_lse, reproduces_explicit

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="one short size and brief timings (the CPU dry run)")
    parser.add_argument("--dtypes", default="bf16,fp16,fp32", help="comma-separated, of " + ", ".join(DTYPES))
    parser.add_argument("--json", help="write every row and the picks here")
    args = parser.parse_args(argv)
    unknown = [d for d in args.dtypes.split(",") if d not in DTYPES]
    if unknown:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}; known: {', '.join(DTYPES)}")
    sizes = [(2, 256)] if args.quick else [(4, 2048), (1, 8192)]
    min_run_time = 0.05 if args.quick else 0.2
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else f"cpu, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__} on {name}; basket of {BASKET} keys, {HEADS} heads of {HEAD_DIM}")
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
                    with open(args.json, "w") as handle:
                        json.dump({"device": name, "torch": torch.__version__, "rows": rows, "picks": fastest(rows)}, handle, indent=1)
    for key, pick in fastest(rows).items():
        print(f"fastest exact fused kernel for {key}: {pick['kernel']} ({pick['vs_sdpa']:.2f} x sdpa)")
    return 0


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
