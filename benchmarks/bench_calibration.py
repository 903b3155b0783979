"""Cost of calibration: the fast backend against the uncalibrated model and the nnsight reference.

For each case (model, sequence length) three modes encode the same documents with
``encode_document`` semantics:

* ``plain``     : the uncalibrated sentence-transformers model, SDPA attention;
* ``fast``      : ``FairSentenceTransformer.encode_document`` (the ``fairpos`` backend);
* ``reference`` : :func:`mteb_fairpos.reference.reference_embeddings` (eager attention, softmax
  edited through nnsight).

What is measured:

* throughput: documents per second, best of ``--reps`` timed rounds in one process after a warm-up
  round; every round runs the three modes in a rotated order, so load from other processes on a
  shared machine hits all of them alike (the load average is printed);
* peak memory: each mode once, cold, in its own fresh Python process (so no mode sees another's
  allocator caches), two ways:

  - tensor peak: the most bytes PyTorch's CPU allocator held at any moment of the call above what
    it held at the start, from the allocation/release events of ``torch.profiler`` with
    ``profile_memory=True`` (deterministic; what the 1.1x target is checked against);
  - RSS rise: the process's peak resident set size (Linux ``VmHWM``, reset through
    ``/proc/self/clear_refs`` just before the call) minus its resident size at that moment. It
    counts every allocation (Python objects, BLAS workspaces, allocator fragmentation), but glibc's
    reuse of freed pages makes it vary by tens of MB from run to run.
* ``max|fast-ref|``: the largest difference between the fast and the reference embeddings.

Cases: the real all-MiniLM-L6-v2 (mean pooling, so every query row is calibrated) at 256 and
512 tokens, and a randomly initialised full-width gte (hidden 768, 12 heads, cls pooling) at 2,048
and 8,192 tokens. Calibration: basket 128, last half of the layers, strength 0.5.

Targets (SPEC 1.5): at 8,192 tokens the fast path keeps >= 0.9 of the uncalibrated throughput and
<= 1.1x its peak memory; from 2,048 tokens up it is >= 3x faster than the nnsight reference.

    python benchmarks/bench_calibration.py            # ~6 min of CPU on 2 idle cores (12 min wall at load 5)
    python benchmarks/bench_calibration.py --quick    # fewer documents and repetitions
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODES = ("plain", "fast", "reference")
CALIBRATION = "b128_lhalf_a0.5"
WORDS = ("river stone museum harbor winter market garden letter silver forest bridge station "
         "teacher window mountain village engine report council summer doctor island camera "
         "theatre kitchen history planet number school weather animal").split()


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # "minilm" or "gte"
    tokens: int
    documents: int
    quick_documents: int
    batch_size: int


CASES = [
    Case("minilm-256", "minilm", 256, 16, 8, 16),
    Case("minilm-512", "minilm", 512, 8, 4, 8),
    Case("gte-2048", "gte", 2048, 4, 2, 2),
    Case("gte-8192", "gte", 8192, 1, 1, 1),
]


# ------------------------------------------------------------------------------ memory
def _status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


# ------------------------------------------------------------------------------ models
def build_gte(folder: Path, layers: int) -> None:
    """Save a randomly initialised full-width gte (with the offline MiniLM tokenizer) as an ST model dir."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer, GteConfig

    from mteb_fairpos.offline import minilm_path

    torch.manual_seed(0)
    config = GteConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
                       intermediate_size=3072, max_position_embeddings=8192, pad_token_id=0)
    raw = folder / "hf"
    AutoModel.from_config(config).save_pretrained(raw)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformer = Transformer(str(raw), max_seq_length=8192)
    SentenceTransformer(modules=[transformer, Pooling(768, "cls")], device="cpu").save(str(folder / "st"))


def load(case: Case, gte_dir: str):
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.offline import minilm_path

    path = minilm_path() if case.model == "minilm" else str(Path(gte_dir) / "st")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(path, device="cpu")
    model.max_seq_length = case.tokens
    return model


def documents(case: Case, count: int) -> list[str]:
    """Documents longer than the case's length (they are cut at exactly ``case.tokens`` tokens)."""
    return [" ".join(WORDS[(i * 7 + j * (i + 3)) % len(WORDS)] for j in range(case.tokens + 64)) for i in range(count)]


# ------------------------------------------------------------------------------ worker
def encoders(case: Case, count: int, gte_dir: str) -> dict:
    """The three ways to encode the case's documents, on one loaded model."""
    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.reference import reference_embeddings

    model = load(case, gte_dir)
    config = CalibrationConfig.parse(CALIBRATION)
    texts = documents(case, count)
    fair = FairSentenceTransformer(model, config)  # switches the model to the "fairpos" backend
    inner = model.transformers_model

    def plain():
        inner.set_attn_implementation("sdpa")  # truly uncalibrated: transformers' own SDPA
        try:
            return model.encode_document(texts, batch_size=case.batch_size, convert_to_tensor=True)
        finally:
            inner.set_attn_implementation("fairpos")

    def fast():
        return fair.encode_document(texts, batch_size=case.batch_size, convert_to_tensor=True)

    def reference():
        return reference_embeddings(fair, texts, config, batch_size=case.batch_size)

    tokens = int(model.preprocess(texts[:1])["attention_mask"].sum())
    return {"plain": plain, "fast": fast, "reference": reference, "tokens": tokens}


def memory_worker(case: Case, mode: str, count: int, gte_dir: str, out: str) -> None:
    """One cold encode call in a fresh process: peak tensor memory and the rise of peak RSS."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    warnings.simplefilter("ignore")
    runs = encoders(case, count, gte_dir)
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        _reset_peak()
        base = _status_mb("VmRSS")
        start = time.perf_counter()
        embeddings = runs[mode]()
        seconds = time.perf_counter() - start
        peak = _status_mb("VmHWM")
    np.save(out + ".npy", embeddings.float().cpu().numpy())
    with open(out + ".json", "w") as handle:
        json.dump({"tokens": runs["tokens"], "cold_s": seconds, "base_mb": base, "peak_mb": peak,
                   "rss_mb": peak - base, "tensor_mb": _tensor_peak_mb(profiler)}, handle)


def _tensor_peak_mb(profiler) -> float:
    """Peak of the bytes held by PyTorch's CPU allocator during the profiled call, above its start.

    The profiler records every allocation (+bytes) and release (-bytes) of the allocator with a
    timestamp; the running sum in time order is the memory the call's tensors held at each moment.
    """
    events = sorted((e for e in profiler.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    held = peak = 0
    for event in events:
        held += event.nbytes()
        peak = max(peak, held)
    return peak / 2**20


def timing_worker(case: Case, count: int, reps: int, gte_dir: str, out: str) -> None:
    """Throughput: a warm-up round (short inputs only), then ``reps`` rounds; every round runs the three
    modes in a rotated order, so load from other processes on the machine hits all modes alike."""
    import torch

    warnings.simplefilter("ignore")
    runs = encoders(case, count, gte_dir)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    with torch.inference_mode():
        if case.tokens <= 2048:  # warm-up round; one long forward pass amortises its own start-up
            for mode in MODES:
                runs[mode]()
        for round_ in range(reps):
            for mode in MODES[round_ % 3:] + MODES[: round_ % 3]:
                start = time.perf_counter()
                runs[mode]()
                times[mode].append(time.perf_counter() - start)
    with open(out + ".json", "w") as handle:
        json.dump({"times": times, "threads": torch.get_num_threads()}, handle)


# ------------------------------------------------------------------------------ driver
def _spawn(arguments: list[str]) -> str | None:
    done = subprocess.run([sys.executable, __file__, *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        return f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-3:])
    return None


def run_case(case: Case, count: int, reps: int, gte_dir: str, scratch: str) -> dict:
    import numpy as np

    common = ["--documents", str(count), "--gte-dir", gte_dir]
    result: dict = {}
    for mode in MODES:
        out = os.path.join(scratch, f"{case.name}-{mode}")
        error = _spawn(["--worker", case.name, f"memory:{mode}", *common, "--out", out])
        if error:
            result[mode] = {"error": error}
            continue
        with open(out + ".json") as handle:
            result[mode] = json.load(handle)
        result[mode]["embeddings"] = np.load(out + ".npy")
    out = os.path.join(scratch, f"{case.name}-timing")
    error = _spawn(["--worker", case.name, "timing", *common, "--reps", str(reps), "--out", out])
    if error:
        result["timing_error"] = error
    else:
        with open(out + ".json") as handle:
            timing = json.load(handle)
        for mode in MODES:
            if "error" not in result[mode]:
                result[mode]["docs_per_s"] = count / min(timing["times"][mode])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer documents and one warm repetition")
    parser.add_argument("--cases", default=",".join(c.name for c in CASES), help="comma-separated subset of the cases")
    parser.add_argument("--gte-layers", type=int, default=2, help="layers of the random gte (default 2)")
    parser.add_argument("--reps", type=int, default=None, help="timed rounds after the warm-up round (default 3, --quick 1)")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--documents", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--gte-dir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}

    if args.worker:
        case, task = by_name[args.worker[0]], args.worker[1]
        if task == "timing":
            timing_worker(case, args.documents, args.reps, args.gte_dir, args.out)
        else:
            memory_worker(case, task.split(":", 1)[1], args.documents, args.gte_dir, args.out)
        return 0

    import numpy as np
    import torch

    cases = [by_name[name] for name in args.cases.split(",")]
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fairpos-bench-") as scratch:
        gte_dir = os.path.join(scratch, "gte")
        if any(c.model == "gte" for c in cases):
            build_gte(Path(gte_dir), args.gte_layers)
        print(f"calibration {CALIBRATION}; torch {torch.__version__}, {torch.get_num_threads()} threads; "
              f"gte: random, hidden 768, 12 heads, {args.gte_layers} layers; "
              f"{reps} timed round(s) per case")
        print(f"load average at start: {os.getloadavg()[0]:.2f} (other processes share these cores)")
        rows = []
        for case in cases:
            count = case.quick_documents if args.quick else case.documents
            results = run_case(case, count, reps, gte_dir, scratch)
            rows.append((case, count, results))
            print(f"  done {case.name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        speed_header = (f"{'case':<11} {'tokens':>6} {'docs':>4} | {'plain docs/s':>12} {'fast docs/s':>11} "
                        f"{'ref docs/s':>10} | {'fast/plain':>10} {'fast/ref':>8} | {'max|fast-ref|':>13}")
        memory_header = (f"{'case':<11} | {'tensor MB plain':>15} {'fast':>8} {'ref':>8} | {'fast/plain':>10} "
                         f"{'ref/plain':>9} | {'RSS +MB plain':>13} {'fast':>8} {'ref':>8} | {'fast/plain':>10}")
        speed_lines, memory_lines, verdicts = [], [], []
        for case, count, results in rows:
            errors = {m: r["error"] for m, r in results.items() if isinstance(r, dict) and "error" in r}
            if "timing_error" in results:
                errors["timing"] = results["timing_error"]
            if errors:
                speed_lines.append(f"{case.name:<11} failed: {errors}")
                continue
            plain, fast, ref = results["plain"], results["fast"], results["reference"]
            ratio = fast["docs_per_s"] / plain["docs_per_s"]
            speedup = fast["docs_per_s"] / ref["docs_per_s"]
            mem = fast["tensor_mb"] / max(plain["tensor_mb"], 1e-9)
            mem_ref = ref["tensor_mb"] / max(plain["tensor_mb"], 1e-9)
            rss = fast["rss_mb"] / max(plain["rss_mb"], 1e-9)
            diff = float(np.abs(fast["embeddings"] - ref["embeddings"]).max())
            speed_lines.append(
                f"{case.name:<11} {fast['tokens']:>6} {count:>4} | {plain['docs_per_s']:>12.3f} {fast['docs_per_s']:>11.3f} "
                f"{ref['docs_per_s']:>10.3f} | {ratio:>10.3f} {speedup:>8.2f} | {diff:>13.2e}")
            memory_lines.append(
                f"{case.name:<11} | {plain['tensor_mb']:>15.1f} {fast['tensor_mb']:>8.1f} {ref['tensor_mb']:>8.1f} | "
                f"{mem:>10.3f} {mem_ref:>9.2f} | {plain['rss_mb']:>13.1f} {fast['rss_mb']:>8.1f} {ref['rss_mb']:>8.1f} | "
                f"{rss:>10.3f}")
            if case.tokens >= 2048:
                verdicts.append(f"{case.name}: fast >= 3x reference: {'yes' if speedup >= 3 else 'NO'} ({speedup:.2f}x)")
            if case.tokens >= 8192:
                verdicts.append(f"{case.name}: fast >= 0.9 x plain throughput: {'yes' if ratio >= 0.9 else 'NO'} ({ratio:.3f})")
                verdicts.append(f"{case.name}: fast peak tensor memory <= 1.1 x plain: {'yes' if mem <= 1.1 else 'NO'} "
                                f"({mem:.3f}; RSS rise {rss:.3f})")
        print("throughput (best of the timed rounds):")
        print(speed_header)
        print("-" * len(speed_header))
        print("\n".join(speed_lines))
        print("peak memory of one cold encode call (tensor: PyTorch CPU allocator; RSS: rise of VmHWM above the loaded model):")
        print(memory_header)
        print("-" * len(memory_header))
        print("\n".join(memory_lines))
        print("targets:")
        for line in verdicts:
            print("  " + line)
        print(f"total {time.perf_counter() - started:.0f} s; load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
