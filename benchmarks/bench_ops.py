"""Device operations and host reads of a calibrated forward pass against the plain one, counted on the CPU.

On a GPU every ATen operation that computes is a kernel launch, and every value read back to the
host (``bool(t.any())``, ``int(t.max())``, ``.tolist()``, ``nonzero``, a boolean-mask index) makes the host
wait for the device. Where a batch's
arithmetic is small next to them, these counts decide the calibrated path's throughput, and they
are the same on any device, so this script counts them with ``torch.profiler`` where no GPU is at
hand. Random full-width models (hidden 768, 12 heads) of 12 layers, the last half calibrated; one
forward pass over a batch of ``--documents`` documents. Host reads are caught twice: the Python calls
that read a tensor (a ``TorchFunctionMode``; ``.tolist()`` reaches no ATen operation on a CPU tensor) and
the ATen operations under the others (the profiler). ``tests/core/test_forward_cost.py`` asserts these
counts on small models in CI.

``--fused`` counts the path a GPU runs by default, the fused Triton kernel (on the CPU through Triton's
interpreter, which emulates the kernel with ATen operations inside the kernel's profiler range: they are
left out and the launch counts as one operation, as on a GPU). Its counts do not depend on the length
(one launch per calibrated layer), so 512 tokens stand for all; for mean pooling at full width the
interpreter takes over an hour (``tests/core/test_forward_cost.py`` counts it on a narrow model).

    python benchmarks/bench_ops.py                     # gte cls/mean at 512 and 2,048, Qwen3 last at 2,048
    python benchmarks/bench_ops.py --cases gte-mean-8192 --documents 1
    python benchmarks/bench_ops.py --fused --cases gte-cls-512,qwen3-last-2048
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_calibration as bench  # noqa: E402  (the same random models, documents and calibration)

HOST_READ_CALLS = {"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu"}
"""Tensor methods that bring a value to the host (``cpu`` and ``to("cpu")`` copy it there from a GPU)."""
HOST_READ_OPS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select"}
"""ATen operations that read a device value on the host: the one under ``.item()``, ``bool()``, ``int()``, and
the ones whose output shape depends on the data (boolean-mask indexing runs ``nonzero``)."""


def counts(run) -> tuple[Counter, int]:
    """The ATen operations of one call of ``run`` (after a warm-up call that keeps first-use checks and lazy
    initialisation out of the count), and its host reads."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.profiler import ProfilerActivity, profile

    class HostReads(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            to_host = name == "to" and any(str(arg) == "cpu" for arg in (*args[1:], *kwargs.values()))
            self.calls += name in HOST_READ_CALLS or to_host
            return func(*args, **kwargs)

    with torch.inference_mode():
        run()
        reads = HostReads()
        with profile(activities=[ProfilerActivity.CPU]) as profiler, reads:
            run()
    from mteb_fairpos.triton_attention import PROFILE_NAME  # here: TRITON_INTERPRET is set before it is imported

    ops = Counter(event.name for event in profiler.events()
                  if event.name == PROFILE_NAME or (event.name.startswith("aten::") and not _in_kernel(event, PROFILE_NAME)))
    return ops, reads.calls + sum(ops[name] for name in HOST_READ_OPS)


def _in_kernel(event, kernel: str) -> bool:
    """Whether a profiled operation ran inside the fused Triton kernel's range: on CPU tensors Triton's
    interpreter emulates the kernel with ATen operations, where a GPU runs one launch (counted as one)."""
    while event.cpu_parent is not None:
        event = event.cpu_parent
        if event.name == kernel:
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="gte-cls-512,gte-mean-512,gte-cls-2048,gte-mean-2048,qwen3-last-2048")
    parser.add_argument("--documents", type=bench._at_least_one, default=2, help="documents in the one batch (default 2)")
    parser.add_argument("--fused", action="store_true", help="count the fused kernel's path (what CUDA runs)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch

    if args.fused and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernel is defined (at the module's import)
    from mteb_fairpos.attention import fused_kernel
    from mteb_fairpos.offline import minilm_path

    cases = {case.name: case for case in bench.CASES}
    unknown = [name for name in args.cases.split(",") if name not in cases]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(cases)}")
    with tempfile.TemporaryDirectory(prefix="fairpos-ops-") as scratch:
        bench.build_random(Path(scratch), 12, minilm_path())
        print(f"{'case':<16} | {'plain ops':>9} {'calibrated':>10} {'ratio':>6} | {'host reads plain':>16} {'calibrated':>10}")
        for name in args.cases.split(","):
            case = replace(cases[name], documents=args.documents, batch_size=args.documents)
            device = "cuda" if args.fused and torch.cuda.is_available() else "cpu"
            runs = bench.encoders(case, args.documents, scratch, device, "fp32", False)

            def calibrated(fast=runs["fast"]):
                with fused_kernel(args.fused):
                    return fast()

            (plain, plain_reads), (fast, fast_reads) = counts(runs["plain"]), counts(calibrated)
            total_plain, total_fast = sum(plain.values()), sum(fast.values())
            print(f"{name:<16} | {total_plain:>9} {total_fast:>10} {total_fast / total_plain:>6.2f} | "
                  f"{plain_reads:>16} {fast_reads:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
