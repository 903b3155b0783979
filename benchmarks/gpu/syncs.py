"""Where one ``encode_document`` call makes the host wait for the GPU, plain against calibrated.

On CUDA, PyTorch's sync debug mode warns at each synchronizing operation it checks (a read of a device value such as
``.item()``, ``.cpu()`` or ``nonzero``, a blocking copy; not an explicit ``synchronize()``); this script counts those
warnings per call and names the innermost line of this package, sentence-transformers or transformers they came from
(else the innermost line outside the warnings machinery, with its thread). A host wait inside the pass ends the
overlap of tokenizing the next batch with the device's work, which is what the end-to-end ratio loses where the
forward-pass ratio does not. CUDA only: on a CPU nothing is checked and the counts are zero.

    python benchmarks/gpu/syncs.py --device cuda --cases qwen3-last-2048,gte-cls-8192 --scale 16
"""
from __future__ import annotations

import collections
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_calibration import _at_least_one, diagnostic_cases, diagnostic_parser, encoders  # noqa: E402

TRACED = ("mteb_fairpos", "sentence_transformers", "transformers")
"""The packages whose innermost line names a wait."""


def located(run: Callable[[], object], device: str) -> collections.Counter:
    """The innermost :data:`TRACED` line of every synchronizing operation in one call of ``run``."""
    import torch

    places: collections.Counter = collections.Counter()

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):
            return
        stack = [f for f in traceback.extract_stack()[:-1] if not f.filename.endswith(("warnings.py", "threading.py"))]
        traced = [f for f in stack if any(f"/{name}/" in f.filename for name in TRACED)]
        frame, where = (traced[-1], "") if traced else (stack[-1], f" (thread {threading.current_thread().name})")
        places[f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno} {frame.name}{where}"] += 1

    with warnings.catch_warnings():  # restores warnings.showwarning on leaving
        warnings.simplefilter("always")
        warnings.showwarning = record
        if device.startswith("cuda"):
            torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
        finally:
            if device.startswith("cuda"):
                torch.cuda.set_sync_debug_mode("default")
    return places


def main(argv: list[str] | None = None) -> int:
    parser = diagnostic_parser(__doc__.split("\n\n")[0], "qwen3-last-2048,gte-cls-8192,gte-mean-2048")
    parser.add_argument("--documents", type=_at_least_one, default=8, help="documents per call, times --scale (default 8)")
    args = parser.parse_args(argv)
    with diagnostic_cases(parser, args) as (cases, scratch):
        for case in cases:
            runs = encoders(case, args.documents * args.scale, scratch, args.device, args.dtype, references=False)
            for mode in ("plain", "fast"):
                runs[mode]()  # warm-up: first-use checks and compilation are not what a call costs
                places = located(runs[mode], args.device)
                batches = -(-(args.documents * args.scale) // case.batch_size)
                print(f"{case.name} {mode}: {sum(places.values())} host wait(s) in one call of {batches} batch(es)")
                for place, count in places.most_common():
                    print(f"    {count:4d}  {place}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
