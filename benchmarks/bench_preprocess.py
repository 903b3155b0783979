"""Host-side cost of a calibrated model's tokenization: ``FairSentenceTransformer.preprocess`` against the
plain model's on the same documents.

On a GPU the forward pass is fast enough that tokenization, done on the host, is a large share of an
``encode`` call, so host work the calibrated model adds shows up in its throughput almost one for
one; the first H200 run (``docs/gpu.md``) lost a quarter of it with cls pooling, which recomputes a
single row per sequence, most likely to the second tokenization this benchmark measured. The documents are longer than the limit, as in ``bench_calibration.py``, so every one is
truncated and counted for the truncation warning.

    python benchmarks/bench_preprocess.py                 # 512 and 2,048 tokens, 7 interleaved rounds
    python benchmarks/bench_preprocess.py --documents 256 --rounds 11
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_calibration as bench  # noqa: E402  (the same random models and documents)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=bench._at_least_one, default=128, help="documents per call (default 128)")
    parser.add_argument("--rounds", type=bench._at_least_one, default=7, help="interleaved timed rounds (default 7)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.offline import minilm_path

    cases = {case.name: case for case in bench.CASES}
    with tempfile.TemporaryDirectory(prefix="fairpos-preprocess-") as scratch:
        bench.build_random(Path(scratch), 1, minilm_path())  # tokenization needs no depth
        plain = SentenceTransformer(str(Path(scratch) / "gte" / "cls"), device="cpu")
        print(f"{'tokens':>6} {'docs':>5} | {'plain ms':>9} {'fair ms':>9} | {'plain/fair (min-max)':>22}")
        for name in ("gte-cls-512", "gte-cls-2048"):
            case = cases[name]
            plain.max_seq_length = case.tokens
            fair = FairSentenceTransformer(plain, CalibrationConfig.parse(case.calibration))
            texts = bench.documents(case, args.documents)
            times: dict[str, list[float]] = {"plain": [], "fair": []}
            for round_ in range(args.rounds + 1):  # the first round warms up
                for label, model in (("plain", plain), ("fair", fair))[:: 1 if round_ % 2 else -1]:
                    start = time.perf_counter()
                    model.preprocess(texts)
                    if round_:
                        times[label].append(time.perf_counter() - start)
            ratios = [p / f for p, f in zip(times["plain"], times["fair"])]
            print(f"{case.tokens:>6} {args.documents:>5} | {statistics.median(times['plain']) * 1e3:>9.1f} "
                  f"{statistics.median(times['fair']) * 1e3:>9.1f} | "
                  f"{statistics.median(ratios):>8.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
