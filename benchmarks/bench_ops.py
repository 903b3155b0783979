"""Device operations and host reads of a calibrated forward pass against the plain one, counted on the CPU.

On a GPU every ATen operation that computes is a kernel launch, and every value read back to the
host (``bool(t.any())``, ``int(t.max())``) makes the host wait for the device. Where a batch's
arithmetic is small next to them, these counts decide the calibrated path's throughput, and they
are the same on any device, so this script counts them with ``torch.profiler`` where no GPU is at
hand. Random full-width models (hidden 768, 12 heads) of 12 layers, the last half calibrated; one
forward pass over a batch of ``--documents`` documents.

    python benchmarks/bench_ops.py                     # gte cls/mean at 512, mean at 2,048, Qwen3 last at 2,048
    python benchmarks/bench_ops.py --cases gte-mean-8192 --documents 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_calibration as bench  # noqa: E402  (the same random models, documents and calibration)

HOST_READ = "aten::_local_scalar_dense"
"""The operation under every ``.item()``, ``bool()`` or ``int()`` of a device tensor."""


def counts(run) -> Counter:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        run()  # warm: first-use checks and lazy initialisation stay out of the count
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            run()
    return Counter(event.name for event in profiler.events() if event.name.startswith("aten::"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="gte-cls-512,gte-mean-512,gte-mean-2048,qwen3-last-2048")
    parser.add_argument("--documents", type=bench._at_least_one, default=2, help="documents in the one batch (default 2)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
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
            runs = bench.encoders(case, args.documents, scratch, "cpu", "fp32", False)
            plain, fast = counts(runs["plain"]), counts(runs["fast"])
            total_plain, total_fast = sum(plain.values()), sum(fast.values())
            print(f"{name:<16} | {total_plain:>9} {total_fast:>10} {total_fast / total_plain:>6.2f} | "
                  f"{plain[HOST_READ]:>16} {fast[HOST_READ]:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
