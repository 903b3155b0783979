"""Device time by kernel of one forward pass, plain against calibrated: where a calibrated pass spends its extra time.

For each case, one batch of the case's size (times ``--scale``), tokenized beforehand and on the device (the forward
pass alone of ``bench_calibration.py``): a warm-up pass each way, then one pass each under ``torch.profiler``. On a
GPU the kernels (and copies) are grouped by name with their device time; on a CPU the ATen operations with their own
CPU time. Printed per case: the total and the number of kernels, plain and calibrated, then the names whose time
differs most. Where the forward-pass ratio of ``bench_calibration.py`` falls short, this says which kernels hold
the difference (the calibrated kernel itself, the layout's small kernels, or a plain kernel that ran otherwise).

    python benchmarks/gpu/kernel_time.py --device cuda --cases gte-cls-512,gte-mean-8192 --scale 16
"""
from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_calibration import _at_least_one, diagnostic_cases, diagnostic_parser, encoders  # noqa: E402


def device_time(run: Callable[[], object], device: str) -> dict[str, tuple[float, int]]:
    """Name -> (microseconds, count) of what one call of ``run`` ran: its CUDA kernels and copies with their device
    time, or on a CPU its ATen operations with their own CPU time (an operation's time without those it calls)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    on_cuda = device.startswith("cuda")
    with profile(activities=[ProfilerActivity.CUDA if on_cuda else ProfilerActivity.CPU]) as profiler:
        run()
        if on_cuda:
            torch.cuda.synchronize(device)
    found: dict[str, tuple[float, int]] = {}
    for event in profiler.key_averages():
        if on_cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            found[event.key] = (event.self_device_time_total, event.count)
        elif not on_cuda and event.key.startswith("aten::"):
            found[event.key] = (event.self_cpu_time_total, event.count)
    return found


def differences(plain: dict[str, tuple[float, int]], fast: dict[str, tuple[float, int]]) -> list[tuple[str, float, int]]:
    """(name, calibrated minus plain microseconds, calibrated minus plain count), the largest time first."""
    names = set(plain) | set(fast)
    rows = [(name, fast.get(name, (0.0, 0))[0] - plain.get(name, (0.0, 0))[0],
             fast.get(name, (0.0, 0))[1] - plain.get(name, (0.0, 0))[1]) for name in names]
    return sorted(rows, key=lambda row: -abs(row[1]))


def main(argv: list[str] | None = None) -> int:
    parser = diagnostic_parser(__doc__.split("\n\n")[0], "gte-cls-512,qwen3-last-2048,gte-mean-8192")
    parser.add_argument("--top", type=_at_least_one, default=12, help="kernel names listed per case (default 12)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    measured = "device time" if args.device.startswith("cuda") else "CPU time (operations' own)"
    things = "kernels" if args.device.startswith("cuda") else "operations"
    with diagnostic_cases(parser, args) as (cases, scratch):
        for case in cases:
            runs = encoders(case, case.batch_size, scratch, args.device, args.dtype, references=False)
            timed = {}
            for mode in ("plain forward", "fast forward"):
                runs[mode]()  # warm-up: first-use checks and compilation are not what a pass costs
                timed[mode] = device_time(runs[mode], args.device)
            (plain, fast) = timed.values()
            total = {mode: sum(t for t, _ in found.values()) for mode, found in timed.items()}
            counts = {mode: sum(c for _, c in found.values()) for mode, found in timed.items()}
            print(f"{case.name}, one batch of {case.batch_size}, {measured}: plain {total['plain forward'] / 1e3:.3f} ms in "
                  f"{counts['plain forward']} {things}, calibrated {total['fast forward'] / 1e3:.3f} ms in "
                  f"{counts['fast forward']} (plain/calibrated {total['plain forward'] / total['fast forward']:.3f})")
            for kernel, extra, more in differences(plain, fast)[:args.top]:
                print(f"    {extra / 1e3:+9.3f} ms {more:+6d}  {kernel[:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
