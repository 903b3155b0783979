"""Host-side cost of a calibrated model's tokenization: ``FairSentenceTransformer.preprocess`` against the
plain model's on the same documents, and the truncation count its forward pass runs once the pass is launched.

On a GPU the forward pass is fast enough that tokenization, done on the host, is a large share of an
``encode`` call, so host work the calibrated model adds shows up in its throughput almost one for one, unless
the host waits on the device anyway. The documents are longer than the limit, as in ``bench_calibration.py``,
so every one is truncated and counted for the truncation warning; ``--fitting`` makes a share of them 64 words
shorter than the limit instead (only the documents that fill the limit are looked at).

``--loop B`` also times the host's side of ``encode``'s loop over B batches back to back: plain tokenization
against the calibrated model's with each batch's count, as its forward pass runs it
(``benchmarks/gpu/run.sh --steps install,host`` runs this on a GPU machine's host).

    python benchmarks/bench_preprocess.py                 # 512 and 2,048 tokens, 7 interleaved rounds
    python benchmarks/bench_preprocess.py --documents 256 --rounds 11
    python benchmarks/bench_preprocess.py --documents 32 --fitting 0.5
    python benchmarks/bench_preprocess.py --documents 32 --loop 6
"""

from __future__ import annotations

import argparse
import os
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
    parser.add_argument("--fitting", type=_share, default=0.0,
                        help="the share of documents within the limit, the rest longer (default 0: every one truncated)")
    parser.add_argument("--loop", type=bench._at_least_one, default=None, metavar="B",
                        help="also time B batches back to back: plain against calibrated with the count")
    parser.add_argument("--tokenizer", default=os.environ.get("FAIRPOS_TOKENIZER_DIR"),
                        help="tokenizer folder (default: $FAIRPOS_TOKENIZER_DIR, else the offline MiniLM's)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.model import TRUNCATION
    from mteb_fairpos.offline import minilm_path

    cases = {case.name: case for case in bench.CASES}
    loops: list[tuple[int, dict[str, list[float]]]] = []
    with tempfile.TemporaryDirectory(prefix="fairpos-preprocess-") as scratch:
        bench.build_random(Path(scratch), 1, args.tokenizer or minilm_path())  # tokenization needs no depth
        plain = SentenceTransformer(str(Path(scratch) / "gte" / "cls"), device="cpu")
        print(f"{'tokens':>6} {'docs':>5} {'fitting':>7} | {'plain ms':>9} {'fair ms':>8} {'count ms':>9} | "
              f"{'plain/fair (min-max)':>22} | {'plain/(fair + count)':>22}")
        for name in ("gte-cls-512", "gte-cls-2048"):
            case = cases[name]
            plain.max_seq_length = case.tokens
            fair = FairSentenceTransformer(plain, CalibrationConfig.parse(case.calibration))
            fitting = round(args.fitting * args.documents)
            texts = (bench.documents(case, fitting, words=case.tokens - 64)  # a token per word: within the limit
                     + bench.documents(case, args.documents - fitting))
            times: dict[str, list[float]] = {"plain": [], "fair": [], "count": []}
            for round_ in range(args.rounds + 1):  # the first round warms up
                for label in ("plain", "fair")[:: 1 if round_ % 2 else -1]:
                    start = time.perf_counter()
                    features = (plain if label == "plain" else fair).preprocess(texts, task="document")
                    tokenized = time.perf_counter()
                    if label == "fair" and TRUNCATION in features:  # what the forward pass runs once it is launched
                        features[TRUNCATION]()  # (absent where the batch is narrower than the limit)
                    if round_:
                        times[label].append(tokenized - start)
                        if label == "fair":
                            times["count"].append(time.perf_counter() - tokenized)
            before = [p / f for p, f in zip(times["plain"], times["fair"])]
            host = [p / (f + c) for p, f, c in zip(times["plain"], times["fair"], times["count"])]
            print(f"{case.tokens:>6} {args.documents:>5} {fitting:>7} | "
                  + " ".join(f"{statistics.median(times[k]) * 1e3:>{w}.1f}" for k, w in (("plain", 9), ("fair", 8), ("count", 9)))
                  + " | " + " | ".join(f"{statistics.median(r):>8.2f} ({min(r):.2f}-{max(r):.2f})" for r in (before, host)))
            if args.loop:
                loops.append((case.tokens, _loop(plain, fair, texts, args.loop, args.rounds)))
        for tokens, per_batch in loops:
            ratios = [p / f for p, f in zip(per_batch["plain"], per_batch["fair"])]
            print(f"{tokens} tokens, {args.loop} batches of {args.documents} back to back, ms per batch: "
                  + ", ".join(f"{way} {statistics.median(values) * 1e3:.1f}" for way, values in per_batch.items())
                  + f"; plain/fair {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


def _loop(plain, fair, texts: list[str], batches: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per batch of ``batches`` batches tokenized back to back, per round: ``plain``, and ``fair``, the
    calibrated model's with each batch's truncation count run before the next batch is tokenized."""
    from mteb_fairpos.model import TRUNCATION

    def run(model) -> float:
        start = time.perf_counter()
        for _ in range(batches):
            count = model.preprocess(texts, task="document").get(TRUNCATION)
            if count is not None:
                count()
        return (time.perf_counter() - start) / batches

    times: dict[str, list[float]] = {"plain": [], "fair": []}
    for round_ in range(rounds + 1):  # the first round warms up
        for way in list(times)[:: 1 if round_ % 2 else -1]:
            seconds = run(plain if way == "plain" else fair)
            if round_:
                times[way].append(seconds)
    return times


def _share(text: str) -> float:
    """argparse type for a share of the documents: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {text!r}")
    return value


if __name__ == "__main__":
    raise SystemExit(main())
