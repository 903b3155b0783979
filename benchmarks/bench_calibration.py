"""Cost of calibration: the fast backend against the uncalibrated model, the tiled path and the nnsight reference.

For each case (model, pooling, calibrated layers, sequence length) four modes encode the same
documents with ``encode_document`` semantics:

* ``plain``     : the uncalibrated sentence-transformers model, SDPA attention;
* ``fast``      : ``FairSentenceTransformer.encode_document`` (the ``fairpos`` backend; for mean
  pooling the fused group path, ``mean_kernel("grouped")``);
* ``tiled``     : the same with the explicit-softmax query tiles (``mean_kernel("tiled")``), the
  path mean pooling took before the fused kernels and its fallback now (for cls/last pooling it is ``fast``);
* ``reference`` : :func:`mteb_fairpos.reference.reference_embeddings` (eager attention, softmax
  edited through nnsight); skipped where it would need the L x L matrix of a long mean-pooled case.

and, in the same interleaved rounds, ``plain`` and ``fast`` split into their stages (:func:`stages`): the
forward pass alone, on batches tokenized beforehand and already on the device, and preprocessing
alone. On a GPU, end to end below the sum of the two shows the host tokenizing while the device works.
``--host`` adds the host's own share of each batch's forward pass (from an idle device until the call returns):
where preprocessing plus launch reaches the forward pass, end to end waits on the host; and ``wrapped``, the
calibrated model's class with calibration off, which splits what ``fast`` adds into the wrapper's part (its
truncation count) and calibration's.

What is measured:

* throughput: documents per second over ``--reps`` timed rounds in one process after a warm-up
  round; every round runs the modes in a rotated order, so load from other processes on a
  shared machine hits all of them alike (the load average is printed). Ratios are of medians,
  with the min-max of the per-round ratios;
* peak memory: one cold call per fresh Python process (so no mode sees another's allocator
  caches), two ways, each in processes of its own (on the CPU, the profiler that sees tensor
  memory keeps records of its own: under it the fast path's RSS at 8,192 tokens read 3.2x plain's):

  - tensor peak: the most bytes PyTorch's allocator held at any moment of the call above what it
    held at the start (what the 1.1x target is checked against). On CPU from the allocation/release
    events of ``torch.profiler`` with ``profile_memory=True`` (deterministic); on CUDA from the
    allocator's own peak statistics (``torch.cuda.max_memory_allocated``);
  - RSS rise: the process's peak resident set size (Linux ``VmHWM``, reset through
    ``/proc/self/clear_refs`` just before the call) minus its resident size at that moment.
    Each process first encodes one short document in the same mode, so the code the call runs
    is paged in beforehand: otherwise that (about 50 MB, the same for every mode) would be half of
    a short case's rise. The rest varies from process to process with how glibc's arenas fill (at
    2,048 tokens, plain read 480-588 MB over three processes), so it is taken in ``--memory-runs``
    processes per mode and printed as median (min-max).
* ``max|fast-ref|`` / ``max|fast-tiled|``: the largest differences between the embeddings.

Cases: the real all-MiniLM-L6-v2 (mean pooling) at 256 and 512 tokens with the last half and all
layers calibrated, and a randomly initialised bert of its shape (``bert-mean-512``, what a GPU run times: the
weights stay here); a randomly initialised full-width gte (hidden 768, 12 heads, ``--gte-layers``)
with mean and with cls pooling at 512, 2,048 and 8,192 tokens; a randomly initialised causal
Qwen3 (hidden 768, 12 heads, 4 KV heads) with last-token pooling at 2,048 tokens. Calibration:
basket 128, strength 0.5.

Targets: mean pooling >= 0.9 of plain throughput (aim 0.95), cls/last >= 0.97, peak
tensor memory <= 1.1x everywhere. On CUDA: mean >= 0.95, cls/last >= 0.97, memory <= 1.05x.

On a GPU (``docs/gpu.md``; ``benchmarks/gpu/run.sh`` runs it so): ``--dtype bf16`` loads the models in
that dtype, ``--same-process`` measures each mode's tensor peak in the timing process (the CUDA
allocator's peak statistics are reset around one call per mode, so no fresh process is needed; on a
CPU, for the dry run, the profiler's memory events) and skips RSS, which says nothing of GPU memory, ``--all-references`` runs the nnsight
reference in every case (its L x L matrices fit a GPU's memory), ``--json`` writes every figure.

    python benchmarks/bench_calibration.py                     # every case (about half an hour on 2 cores)
    python benchmarks/bench_calibration.py --quick             # fewer documents and one timed round
    python benchmarks/bench_calibration.py --cases minilm-512,gte-mean-2048
    python benchmarks/bench_calibration.py --device cpu       # default: cuda when a GPU is present
    python benchmarks/bench_calibration.py --device cuda --dtype bf16 --gte-layers 12 --same-process \
        --all-references --cases gte-mean-512,gte-cls-512,qwen3-last-2048 --json calibration-bf16.json

Nothing here is CPU-specific: on a GPU the same script times the same cases (each timed call ends
with a device synchronisation).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODES = ("plain", "fast", "tiled", "reference")
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
TARGETS = {"cpu": {"mean": 0.9, "cls": 0.97, "last": 0.97, "memory": 1.1},
           "cuda": {"mean": 0.95, "mean 8192": 0.9, "cls": 0.97, "last": 0.97, "memory": 1.05}}
"""Throughput of the fast path over plain, by pooling (and length, where it has its own: on CUDA mean pooling at 8,192
tokens, where attention is most of a layer), and its peak tensor memory over plain, by device type."""
CALIBRATION = "b128_l{layers}_a0.5"
WORDS = ("river stone museum harbor winter market garden letter silver forest bridge station "
         "teacher window mountain village engine report council summer doctor island camera "
         "theatre kitchen history planet number school weather animal").split()


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # "minilm", "bert", "gte" or "qwen3"
    pooling: str  # "mean", "cls" or "last"
    tokens: int
    documents: int
    quick_documents: int
    batch_size: int
    layers: str = "half"  # calibrated layers, text form
    reference: bool = True

    @property
    def calibration(self) -> str:
        return CALIBRATION.format(layers=self.layers)


def throughput_target(targets: dict, case: Case) -> float:
    """The case's throughput target in ``targets`` (one device type's :data:`TARGETS`)."""
    return targets.get(f"{case.pooling} {case.tokens}", targets[case.pooling])


CASES = [
    Case("minilm-256", "minilm", "mean", 256, 16, 8, 16),
    Case("minilm-512", "minilm", "mean", 512, 8, 4, 8),
    Case("minilm-512-all", "minilm", "mean", 512, 8, 4, 8, layers="1.0"),
    Case("bert-mean-512", "bert", "mean", 512, 8, 4, 8),
    Case("gte-mean-512", "gte", "mean", 512, 8, 4, 8),
    Case("gte-mean-2048", "gte", "mean", 2048, 4, 2, 2, reference=False),
    Case("gte-mean-8192", "gte", "mean", 8192, 1, 1, 1, reference=False),
    Case("gte-cls-512", "gte", "cls", 512, 8, 4, 8),
    Case("gte-cls-2048", "gte", "cls", 2048, 4, 2, 2),
    Case("gte-cls-8192", "gte", "cls", 8192, 1, 1, 1),
    Case("qwen3-last-2048", "qwen3", "last", 2048, 4, 2, 2, reference=False),
]


def diagnostic_parser(description: str, cases: str) -> argparse.ArgumentParser:
    """The options the GPU diagnostics beside this script share (``benchmarks/gpu/syncs.py``, ``kernel_time.py``):
    device, dtype, cases (default ``cases``), layers of the random models, their tokenizer, and ``--scale``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--cases", default=cases)
    parser.add_argument("--layers", type=int, default=12, help="layers of the random models (default 12)")
    parser.add_argument("--scale", type=_at_least_one, default=1,
                        help="batch size times this, as bench_calibration.py's (default 1)")
    parser.add_argument("--tokenizer", default=os.environ.get("FAIRPOS_TOKENIZER_DIR"))
    return parser


@contextlib.contextmanager
def diagnostic_cases(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Iterator[tuple[list[Case], str]]:
    """The cases ``args.cases`` names (batch sizes times ``args.scale``; an unknown name is the parser's error), and a
    scratch folder holding the random models they load, for the duration of the block."""
    from mteb_fairpos.offline import minilm_path

    known = {case.name: replace(case, batch_size=case.batch_size * args.scale) for case in CASES}
    unknown = [name for name in args.cases.split(",") if name not in known]
    if unknown:
        parser.error(f"--cases: unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    with tempfile.TemporaryDirectory(prefix="fairpos-diagnostic-") as scratch:
        build_random(Path(scratch), args.layers, args.tokenizer or minilm_path())
        yield [known[name] for name in args.cases.split(",")], scratch


# ------------------------------------------------------------------------------ memory
WARM_UP_WORDS = 640
"""Words in the RSS measure's warm-up document: up to five baskets of 128 (as many as the case's
length allows), so the long-document paths of the calibrated rows run in the warm-up too."""


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
def build_random(folder: Path, layers: int, tokenizer: str) -> None:
    """Save randomly initialised full-width models (with the offline MiniLM tokenizer) as ST model dirs:
    gte with cls and with mean pooling, a causal Qwen3 with last-token pooling, and a bert of MiniLM's shape (6
    layers of 384, 12 heads of 32, whatever ``layers``) with mean pooling: MiniLM's own weights do not travel to a
    GPU machine, and its speed there does not depend on them."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer, BertConfig, GteConfig, Qwen3Config

    configs = {
        "gte": GteConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
                         intermediate_size=3072, max_position_embeddings=8192, pad_token_id=0),
        "qwen3": Qwen3Config(vocab_size=30522, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
                             num_key_value_heads=4, head_dim=64, intermediate_size=3072, max_position_embeddings=8192,
                             pad_token_id=0),
        "bert": BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                           intermediate_size=1536, max_position_embeddings=512, pad_token_id=0),
    }
    poolings = {"gte": ("cls", "mean"), "qwen3": ("lasttoken",), "bert": ("mean",)}
    for name, config in configs.items():
        torch.manual_seed(0)
        raw = folder / name / "hf"
        AutoModel.from_config(config).save_pretrained(raw)
        AutoTokenizer.from_pretrained(tokenizer).save_pretrained(raw)
        for pooling in poolings[name]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                transformer = Transformer(str(raw), max_seq_length=8192)
            SentenceTransformer(modules=[transformer, Pooling(config.hidden_size, pooling)], device="cpu").save(
                str(folder / name / pooling))


def load(case: Case, random_dir: str, device: str, dtype: str):
    import torch
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.offline import minilm_path

    pooling = "lasttoken" if case.pooling == "last" else case.pooling
    path = minilm_path() if case.model == "minilm" else str(Path(random_dir) / case.model / pooling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(path, device=device)
    model.max_seq_length = case.tokens
    return model.to(getattr(torch, DTYPES[dtype]))


def documents(case: Case, count: int, words: int | None = None) -> list[str]:
    """Documents of ``words`` words, by default longer than the case's length (so they are cut at
    exactly ``case.tokens`` tokens)."""
    words = case.tokens + 64 if words is None else words
    return [" ".join(WORDS[(i * 7 + j * (i + 3)) % len(WORDS)] for j in range(words)) for i in range(count)]


# ------------------------------------------------------------------------------ worker
def _synchronize(device: str) -> None:
    """Wait for queued device work, so a timed call includes it (a no-op on CPU)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def encoders(case: Case, count: int, random_dir: str, device: str, dtype: str, references: bool,
             host: bool = False) -> dict:
    """The ways to encode the case's documents (or the ``texts`` given), on one loaded model, and their stages
    (:func:`stages`). ``host``: also the host's launch of the forward pass, and ``wrapped``: the calibrated model's
    class with calibration off (its input checks and truncation count, no calibration), which splits what ``fast``
    adds to ``plain`` into the wrapper's part and calibration's."""
    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.attention import mean_kernel
    from mteb_fairpos.reference import reference_embeddings

    model = load(case, random_dir, device, dtype)
    config = CalibrationConfig.parse(case.calibration)
    texts = documents(case, count)
    fair = FairSentenceTransformer(model, config)

    def plain(texts=texts):
        return model.encode_document(texts, batch_size=case.batch_size, convert_to_tensor=True)

    def fast(texts=texts):
        with mean_kernel("grouped"):
            return fair.encode_document(texts, batch_size=case.batch_size, convert_to_tensor=True)

    def wrapped(texts=texts):
        with fair.calibration_disabled():
            return fair.encode_document(texts, batch_size=case.batch_size, convert_to_tensor=True)

    def tiled(texts=texts):
        with mean_kernel("tiled"):
            return fair.encode_document(texts, batch_size=case.batch_size, convert_to_tensor=True)

    def reference(texts=texts):
        return reference_embeddings(fair, texts, config, batch_size=case.batch_size)

    tokens = int(model.preprocess(texts[:1])["attention_mask"].sum())
    runs = {"plain": plain, "fast": fast, "tokens": tokens, **stages(model, fair, texts, case.batch_size, device, host)}
    if host:
        runs["wrapped"] = wrapped
    if times_tiled(case, device):
        runs["tiled"] = tiled
    if case.reference or references:
        runs["reference"] = reference
    return runs


def times_tiled(case: Case, device: str) -> bool:
    """Whether the case times the tiled path: on a GPU only up to 512 tokens. On an H200 it ran at 0.11-0.12x plain
    there and 0.03x at 2,048 tokens (docs/gpu.md); at 8,192 it alone would outlast the GPU run's step."""
    return case.tokens <= 512 or not device.startswith("cuda")


def stages(model, fair, texts: list[str], batch_size: int, device: str, host: bool = False) -> dict:
    """The two stages of ``plain`` and ``fast`` on their own: preprocessing alone (tokenizing the batches on the
    host) and the forward pass alone (the model on batches tokenized beforehand and already on the device).
    Where the host overlaps tokenization with the device's work, end to end takes less than their sum; a
    host read inside the forward pass ends that overlap.

    With ``host`` also the host's own share of the forward pass (:data:`HOST_TIMED`): each batch's pass from an idle
    device until the call returns, the device's work left running (on a CPU the host computes the pass: all of it;
    on a GPU a pass that reads a device value, or fills CUDA's launch queue, waits for the device inside it, and that
    wait counts too). Where preprocessing plus launching a batch takes as long as the device computes it, end to end
    waits on the host, and every millisecond the host spends per batch counts in full."""
    import torch

    batches = [texts[start:start + batch_size] for start in range(0, len(texts), batch_size)]

    def on_device(features: dict) -> dict:
        return {name: value.to(device) if hasattr(value, "to") else value for name, value in features.items()}

    @contextlib.contextmanager
    def as_encode(transformer):
        """What encode opens around its passes: no gradients (a calibrated pass refuses to record them), and the
        calibrated model's count for its warnings."""
        with torch.inference_mode(), getattr(transformer, "tallying", contextlib.nullcontext)():
            yield

    def forward(transformer, features: list[dict], **kwargs):
        def run():
            with as_encode(transformer):
                return [transformer.forward(dict(batch), **kwargs)["sentence_embedding"] for batch in features][-1]
        return run

    def launched(transformer, features: list[dict], **kwargs):
        def run() -> float:
            seconds = 0.0
            with as_encode(transformer):
                for batch in features:
                    _synchronize(device)
                    start = time.perf_counter()
                    transformer.forward(dict(batch), **kwargs)
                    seconds += time.perf_counter() - start
            _synchronize(device)
            return seconds
        return run

    # as encode_document tokenizes: the calibrated model's features carry the layout's host values and the batch's
    # truncation count, which its forward pass takes (the count runs once the pass is launched)
    plain_features = [on_device(model.preprocess(batch, task="document")) for batch in batches]
    fair_features = [on_device(fair.preprocess(batch, task="document")) for batch in batches]
    runs = {"plain forward": forward(model, plain_features, task="document"),
            "fast forward": forward(fair, fair_features, task="document"),
            "plain preprocess": lambda: [model.preprocess(batch, task="document") for batch in batches],
            "fast preprocess": lambda: [fair.preprocess(batch, task="document") for batch in batches],
            "batches": len(batches)}
    if host:
        runs.update({"plain launch": launched(model, plain_features, task="document"),
                     "fast launch": launched(fair, fair_features, task="document")})
    return runs


STAGES = ("plain forward", "fast forward", "plain preprocess", "fast preprocess", "plain launch", "fast launch")
HOST_TIMED = ("plain launch", "fast launch")
"""Stages whose run returns the host's seconds (timed inside), recorded instead of the call's wall time."""


def memory_worker(case: Case, mode: str, measure: str, count: int, random_dir: str, device: str, dtype: str,
                  references: bool, out: str) -> None:
    """One cold encode call in a fresh process, measuring one thing: ``rss`` (the rise of peak RSS;
    the embeddings are saved too) or ``tensors`` (peak tensor memory)."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    warnings.simplefilter("ignore")
    runs = encoders(case, count, random_dir, device, dtype, references)
    on_cuda = device.startswith("cuda")
    if on_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        held = torch.cuda.memory_allocated(device)
    profiled = measure == "tensors" and not on_cuda
    if measure == "rss":  # page in the code the call runs (the same for every mode, ~50 MB) on one short document
        with torch.inference_mode():
            runs[mode](documents(case, 1, words=WARM_UP_WORDS))
    recorder = profile(activities=[ProfilerActivity.CPU], profile_memory=True) if profiled else contextlib.nullcontext()
    with torch.inference_mode(), recorder as profiler:
        _reset_peak()
        base = _status_mb("VmRSS")
        start = time.perf_counter()
        embeddings = runs[mode]()
        _synchronize(device)
        seconds = time.perf_counter() - start
        peak = _status_mb("VmHWM")
    if measure == "rss":
        np.save(out + ".npy", embeddings.float().cpu().numpy())
        measured = {"tokens": runs["tokens"], "cold_s": seconds, "base_mb": base, "peak_mb": peak, "rss_mb": peak - base}
    else:
        measured = {"tensor_mb": (torch.cuda.max_memory_allocated(device) - held) / 2**20 if on_cuda
                    else _tensor_peak_mb(profiler)}
    with open(out + ".json", "w") as handle:
        json.dump(measured, handle)


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


def timing_worker(case: Case, count: int, reps: int, random_dir: str, device: str, dtype: str, references: bool,
                  same_process: bool, host: bool, out: str) -> None:
    """Throughput: a warm-up round (short inputs only), then ``reps`` rounds; every round runs the timed
    modes in a rotated order, so load from other processes on the machine hits all modes alike. With
    ``same_process``, then one more call per mode for its peak tensor memory and its embeddings."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    warnings.simplefilter("ignore")
    runs = encoders(case, count, random_dir, device, dtype, references, host)
    modes = [m for m in ("plain", "fast", "tiled", "wrapped", *STAGES) if m in runs] + (
        ["reference"] if case.tokens <= 2048 and "reference" in runs else [])
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    with torch.inference_mode():
        if case.tokens <= 2048 or device.startswith("cuda"):  # warm-up round; on a CPU one long forward pass amortises its own start-up
            for mode in modes:
                runs[mode]()
        for round_ in range(reps):
            shift = round_ % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                start = time.perf_counter()
                returned = runs[mode]()
                _synchronize(device)
                times[mode].append(returned if mode in HOST_TIMED else time.perf_counter() - start)
        memory = {}
        for mode in [m for m in MODES if m in runs] if same_process else ():
            on_cuda = device.startswith("cuda")
            if on_cuda:
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
                held = torch.cuda.memory_allocated(device)
            recorder = contextlib.nullcontext() if on_cuda else profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with recorder as profiler:
                embeddings = runs[mode]()
                _synchronize(device)
            peak = (torch.cuda.max_memory_allocated(device) - held) / 2**20 if on_cuda else _tensor_peak_mb(profiler)
            memory[mode] = {"tensor_mb": peak, "tokens": runs["tokens"], "rss_runs": []}
            np.save(f"{out}-{mode}.npy", embeddings.float().cpu().numpy())
    with open(out + ".json", "w") as handle:
        json.dump({"times": times, "batches": runs["batches"], "threads": torch.get_num_threads(), "memory": memory}, handle)


# ------------------------------------------------------------------------------ driver
def _spawn(arguments: list[str]) -> str | None:
    done = subprocess.run([sys.executable, __file__, *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        return f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-3:])
    return None


def run_case(case: Case, count: int, reps: int, memory_runs: int, random_dir: str, device: str, scratch: str,
             options: list[str]) -> dict:
    """Every measure of one case, each in processes of its own; ``options`` are the flags the workers share."""
    import numpy as np

    common = ["--documents", str(count), "--gte-dir", random_dir, "--device", device, *options]
    same_process = "--same-process" in options
    result: dict = {}
    for mode in MODES:
        if same_process or mode == "reference" and not (case.reference or "--all-references" in options) or \
                mode == "tiled" and not times_tiled(case, device):
            continue
        result[mode] = {"rss_runs": []}
        processes = [("rss", run) for run in range(memory_runs)] + [("tensors", 0)]  # the tensor peak is deterministic
        for measure, run in processes:
            out = os.path.join(scratch, f"{case.name}-{mode}-{measure}-{run}")
            error = _spawn(["--worker", case.name, f"{measure}:{mode}", *common, "--out", out])
            if error:
                result[mode] = {"error": error}
                break
            with open(out + ".json") as handle:
                measured = json.load(handle)
            if measure == "rss":
                result[mode]["rss_runs"].append(measured.pop("rss_mb"))
            result[mode].update(measured)
        else:
            result[mode]["embeddings"] = np.load(os.path.join(scratch, f"{case.name}-{mode}-rss-0.npy"))
    out = os.path.join(scratch, f"{case.name}-timing")
    error = _spawn(["--worker", case.name, "timing", *common, "--reps", str(reps), "--out", out])
    if error:
        result["timing_error"] = error
    else:
        with open(out + ".json") as handle:
            timed = json.load(handle)
        result["times"] = timed["times"]
        result["batches_per_call"] = timed["batches"]
        for mode, measured in timed["memory"].items():
            result[mode] = {**measured, "embeddings": np.load(f"{out}-{mode}.npy")}
    return result


def _ratio(times: dict[str, list[float]], mode: str, base: str = "plain") -> tuple[float, float, float]:
    """Throughput of ``mode`` over ``base``: ratio of medians, and the min and max of the per-round ratios."""
    per_round = _per_round(times, mode, base)
    return statistics.median(times[base]) / statistics.median(times[mode]), min(per_round), max(per_round)


def _per_round(times: dict[str, list[float]], mode: str, base: str = "plain") -> list[float]:
    """Each round's time of ``base`` over ``mode``'s (every round runs every mode)."""
    return [p / m for p, m in zip(times[base], times[mode])]


def _round_median(times: dict[str, list[float]], mode: str, base: str = "plain") -> float:
    """The median of the per-round ratios of ``base`` over ``mode``: the rounds are paired (each runs every mode),
    so this one is not moved by a round that was slow for every mode, as the ratio of medians can be."""
    return statistics.median(_per_round(times, mode, base))


def per_batch_ms(times: dict[str, list[float]], batches: int) -> dict[str, dict[str, float]]:
    """Median milliseconds per batch of each stage timed (forward, preprocess, and with ``--host`` launch), plain and fast."""
    return {stage: {side: 1e3 * statistics.median(times[f"{side} {stage}"]) / batches for side in ("plain", "fast")}
            for stage in ("forward", "preprocess", "launch") if f"plain {stage}" in times}


def _spread(values: list[float]) -> str:
    """Median and, over several runs, min-max: ``412 (398-455)``."""
    median = f"{statistics.median(values):.0f}"
    return median if len(values) == 1 else f"{median} ({min(values):.0f}-{max(values):.0f})"


def _write_json(path: str | None, report: dict) -> None:
    """Every figure so far, rewritten after each case: a run cut short still leaves the cases it finished."""
    if path:
        with open(path, "w") as handle:
            json.dump(report, handle, indent=1)


def _at_least_one(text: str) -> int:
    """argparse type for counts of rounds and processes: a clear message instead of an empty median."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def use_kernel_configs(path: str) -> list[dict]:
    """Put each launch setting ``bench_kernels.py --tune`` picked (its JSON's ``launch_configs``) in
    ``triton_attention.CONFIGS`` in this process, so a run can time them before they are committed; returns them. A
    pick goes right before the first entry it would take over (same dtype, pooling and largest head size, on its
    GPU), so the entries before that one, for smaller heads, keep theirs: a setting tuned at head size 64 is not
    timed at 32; a pick no entry has the same bound as goes first."""
    import torch

    from mteb_fairpos import triton_attention

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    try:
        picked = json.loads(Path(path).read_text()).get("launch_configs", [])
        # each pick holds for the compute capability it was tuned on
        entries = tuple(((dtypes[p["dtype"]],), p["largest"], p["pooled"], range(p["arch"], p["arch"] + 1),
                         triton_attention.LaunchConfig(**p["config"])) for p in picked)
    except (OSError, ValueError) as err:
        raise SystemExit(f"--kernel-configs {path}: cannot read it ({err})") from err
    except (KeyError, TypeError) as err:
        raise SystemExit(f"--kernel-configs {path}: a launch_configs entry lacks or mistypes {err} (written by an "
                         "older bench_kernels.py? rerun it with --tune)") from err
    configs = list(triton_attention.CONFIGS)
    for entry in entries:
        (dtype,), largest, pooled, archs, _ = entry
        taken = [i for i, (dtypes, bound, rows_only, where, _) in enumerate(configs)
                 if dtype in dtypes and bound == largest and rows_only == pooled and archs[0] in where]
        configs.insert(taken[0] if taken else 0, entry)
    triton_attention.CONFIGS = tuple(configs)
    return picked


def _batches(documents: int, batch_size: int, batches: int) -> int:
    """``documents``, or ``batches`` full batches where that is more (``--batches``; 1 keeps every case as it is)."""
    return documents if batches == 1 else max(documents, batches * batch_size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer documents and one warm repetition")
    parser.add_argument("--cases", default=",".join(c.name for c in CASES), help="comma-separated subset of the cases")
    parser.add_argument("--gte-layers", type=int, default=4, help="layers of the random gte and qwen3 (default 4)")
    parser.add_argument("--reps", type=_at_least_one, default=None, help="timed rounds after the warm-up round (default 3, --quick 1)")
    parser.add_argument("--device", help="where the models run (default: cuda when available, else cpu)")
    parser.add_argument("--memory-runs", type=_at_least_one, default=None,
                        help="cold processes per mode for the RSS rise, which varies from process to process (default 3, --quick 1)")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32", help="the models' dtype (default fp32)")
    parser.add_argument("--same-process", action="store_true",
                        help="peak tensor memory in the timing process, no RSS processes: one process per case (for CUDA)")
    parser.add_argument("--all-references", action="store_true", help="the nnsight reference in every case (GPU memory)")
    parser.add_argument("--tokenizer", default=os.environ.get("FAIRPOS_TOKENIZER_DIR"),
                        help="tokenizer folder of the random models (default: $FAIRPOS_TOKENIZER_DIR, else the offline MiniLM's)")
    parser.add_argument("--scale", type=_at_least_one, default=1,
                        help="documents and batch size of every case times this (a GPU needs larger batches to be busy; default 1)")
    parser.add_argument("--batches", type=_at_least_one, default=1,
                        help="at least this many batches per call: a case's documents are raised to this many batch sizes "
                             "where fewer (nothing overlaps the first batch's tokenization, so a call of one or two batches "
                             "weighs it more than indexing does; default 1)")
    parser.add_argument("--host", action="store_true",
                        help="also time what the host adds: each batch's forward pass from an idle device until the call "
                             "returns (on a GPU, with preprocessing: whether end to end waits on the host), and 'wrapped', "
                             "the calibrated model's class with calibration off (its truncation count, no calibration)")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--kernel-configs", metavar="KERNELS_JSON",
                        help="the fused kernel's launch settings picked by bench_kernels.py --tune (its --json), ahead of "
                             "the package's own CONFIGS in every process of this run")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--documents", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--gte-dir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    by_name = {c.name: replace(c, documents=_batches(c.documents, c.batch_size, args.batches) * args.scale,
                               quick_documents=_batches(c.quick_documents, c.batch_size, args.batches) * args.scale,
                               batch_size=c.batch_size * args.scale) for c in CASES}
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    kernel_configs = use_kernel_configs(args.kernel_configs) if args.kernel_configs else []
    if args.worker:
        case, task = by_name[args.worker[0]], args.worker[1]
        if task == "timing":
            timing_worker(case, args.documents, args.reps, args.gte_dir, device, args.dtype, args.all_references,
                          args.same_process, args.host, args.out)
        else:
            measure, mode = task.split(":", 1)
            memory_worker(case, mode, measure, args.documents, args.gte_dir, device, args.dtype, args.all_references, args.out)
        return 0

    import numpy as np

    unknown = [name for name in args.cases.split(",") if name not in by_name]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    cases = [by_name[name] for name in args.cases.split(",")]
    reps = args.reps or (1 if args.quick else 3)
    memory_runs = args.memory_runs or (1 if args.quick else 3)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fairpos-bench-") as scratch:
        random_dir = os.path.join(scratch, "random")
        if any(c.model != "minilm" for c in cases):
            from mteb_fairpos.offline import minilm_path

            build_random(Path(random_dir), args.gte_layers, args.tokenizer or minilm_path())
        where = torch.cuda.get_device_name(device) if device.startswith("cuda") else f"cpu, {torch.get_num_threads()} threads"
        print(f"calibration b128, strength 0.5; {args.dtype}; torch {torch.__version__} on {where}; "
              f"gte and qwen3: random, hidden 768, 12 heads, {args.gte_layers} layers; {reps} timed round(s) per case")
        print(f"load average at start: {os.getloadavg()[0]:.2f} (other processes share these cores)")
        speed_header = (f"{'case':<16} {'layers':>6} {'tokens':>6} {'docs':>4} | {'plain docs/s':>12} | "
                        f"{'fast/plain (min-max)':>22} | {'tiled/plain (min-max)':>22} | {'fast/ref':>8} | "
                        f"{'max|fast-ref|':>13} {'max|fast-tiled|':>15}")
        memory_header = (f"{'case':<16} | {'tensor MB plain':>15} {'fast':>8} {'tiled':>8} | {'fast/plain':>10} "
                         f"{'tiled/plain':>11} | {'RSS +MB plain':>17} {'fast':>17} | {'fast/plain':>10}")
        options = ["--dtype", args.dtype, "--scale", str(args.scale)] + [flag for flag, on in (("--same-process", args.same_process),
                                                                   ("--all-references", args.all_references),
                                                                   ("--host", args.host)) if on]
        options += ["--kernel-configs", args.kernel_configs] if args.kernel_configs else []
        targets = TARGETS["cuda" if device.startswith("cuda") else "cpu"]
        stage_header = (f"{'case':<16} | {'end to end':>20} | {'forward alone':>20} | {'preprocessing alone':>20} | "
                        f"{'e2e rounds':>10} | {'plain s: e2e':>12} {'forward':>8} {'preproc':>8}")
        host_header = (f"{'case':<16} | " + " | ".join(f"{stage + ' plain':>16} {'fast':>8}" for stage in ("preprocess", "launch", "forward"))
                       + f" | {'wrapped/plain':>14} {'fast/wrapped':>12}")
        speed_lines, memory_lines, stage_lines, host_lines, verdicts = [], [], [], [], []
        report = {"device": where, "torch": torch.__version__, "dtype": args.dtype, "gte_layers": args.gte_layers,
                  "reps": reps, "scale": args.scale, "batches": args.batches, "targets": targets, "kernel_configs": kernel_configs, "cases": {}}
        if kernel_configs:
            print(f"fused kernel launch settings from {args.kernel_configs}: {kernel_configs}")
        for case in cases:
            count = case.quick_documents if args.quick else case.documents
            results = run_case(case, count, reps, memory_runs, random_dir, device, scratch, options)
            print(f"  done {case.name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
            errors = {m: r["error"] for m, r in results.items() if isinstance(r, dict) and "error" in r}
            if "timing_error" in results:
                errors["timing"] = results["timing_error"]
            if errors:
                speed_lines.append(f"{case.name:<16} failed: {errors}")
                report["cases"][case.name] = {"errors": errors}
                _write_json(args.json, report)
                continue
            times = results["times"]
            plain, fast, tiled = results["plain"], results["fast"], results.get("tiled")
            ratio, low, high = _ratio(times, "fast")
            tiled_ratio = _ratio(times, "tiled") if tiled else None
            speedup = (f"{statistics.median(times['reference']) / statistics.median(times['fast']):>8.2f}"
                       if "reference" in times else f"{'-':>8}")
            diff_ref = (f"{float(np.abs(fast['embeddings'] - results['reference']['embeddings']).max()):>13.2e}"
                        if "reference" in results else f"{'-':>13}")
            diff_tiled = float(np.abs(fast["embeddings"] - tiled["embeddings"]).max()) if tiled else None
            tiled_text = "{:>6.3f} ({:.3f}-{:.3f})".format(*tiled_ratio) if tiled else f"{'-':>20}"
            speed_lines.append(
                f"{case.name:<16} {case.layers:>6} {fast['tokens']:>6} {count:>4} | {count / statistics.median(times['plain']):>12.3f} | "
                f"{ratio:>6.3f} ({low:.3f}-{high:.3f}) | {tiled_text} | {speedup} | "
                f"{diff_ref} {'-' if diff_tiled is None else format(diff_tiled, '.2e'):>15}")
            stage = {name: _ratio(times, f"fast{suffix}", f"plain{suffix}")
                     for name, suffix in (("end_to_end", ""), ("forward", " forward"), ("preprocess", " preprocess"))}
            paired = {name: _round_median(times, f"fast{suffix}", f"plain{suffix}")
                      for name, suffix in (("end_to_end", ""), ("forward", " forward"), ("preprocess", " preprocess"))}
            stage_lines.append(f"{case.name:<16} | " + " | ".join(f"{r:>6.3f} ({lo:.3f}-{hi:.3f})" for r, lo, hi in stage.values())
                               + f" | {paired['end_to_end']:>10.3f} | " + " ".join(
                                   f"{statistics.median(times[m]):>{w}.3f}"
                                   for m, w in (("plain", 12), ("plain forward", 8), ("plain preprocess", 8))))
            batch_ms = per_batch_ms(times, results["batches_per_call"])
            split = {"wrapped_over_plain": _ratio(times, "wrapped")[0], "fast_over_wrapped": _ratio(times, "fast", "wrapped")[0],
                     "wrapped_over_plain_rounds": _round_median(times, "wrapped"),
                     "fast_over_wrapped_rounds": _round_median(times, "fast", "wrapped")} if "wrapped" in times else None
            if "launch" in batch_ms:
                host_lines.append(f"{case.name:<16} | " + " | ".join(
                    f"{batch_ms[stage]['plain']:>16.2f} {batch_ms[stage]['fast']:>8.2f}" for stage in ("preprocess", "launch", "forward"))
                    + (" | {wrapped_over_plain:>14.3f} {fast_over_wrapped:>12.3f}".format(**split) if split else ""))
            mem = fast["tensor_mb"] / max(plain["tensor_mb"], 1e-9)
            mem_tiled = tiled["tensor_mb"] / max(plain["tensor_mb"], 1e-9) if tiled else float("nan")
            if args.same_process:  # RSS says nothing of GPU memory
                rss = f"{'-':>17} {'-':>17} | {'-':>10}"
            else:
                rss_plain, rss_fast = (statistics.median(r["rss_runs"]) for r in (plain, fast))
                rss = (f"{_spread(plain['rss_runs']):>17} {_spread(fast['rss_runs']):>17} | "
                       f"{rss_fast / max(rss_plain, 1e-9):>10.3f}")
            memory_lines.append(
                f"{case.name:<16} | {plain['tensor_mb']:>15.1f} {fast['tensor_mb']:>8.1f} {tiled['tensor_mb'] if tiled else float('nan'):>8.1f} | "
                f"{mem:>10.3f} {mem_tiled:>11.3f} | {rss}")
            target = throughput_target(targets, case)
            verdicts.append(f"{case.name}: fast >= {target} x plain throughput: {'yes' if ratio >= target else 'NO'} ({ratio:.3f}); "
                            f"peak tensor memory <= {targets['memory']} x plain: {'yes' if mem <= targets['memory'] else 'NO'} ({mem:.3f})")
            report["cases"][case.name] = {
                "pooling": case.pooling, "tokens": fast["tokens"], "documents": count, "layers": case.layers,
                "seconds": times, "plain_docs_per_s": count / statistics.median(times["plain"]),
                "fast_over_plain": {"median": ratio, "min": low, "max": high, "round_median": paired["end_to_end"]},
                "tiled_over_plain": dict(zip(("median", "min", "max"), tiled_ratio)) if tiled else None,
                "stages_fast_over_plain": {name: {**dict(zip(("median", "min", "max"), r)), "round_median": paired[name]}
                                           for name, r in stage.items()},
                "batches_per_call": results["batches_per_call"], "per_batch_ms": batch_ms, "wrapped": split,
                "reference_over_fast": (statistics.median(times["reference"]) / statistics.median(times["fast"])
                                        if "reference" in times else None),
                "tensor_mb": {m: results[m]["tensor_mb"] for m in MODES if m in results},
                "memory_fast_over_plain": mem,
                "max_abs_fast_minus_reference": (float(np.abs(fast["embeddings"] - results["reference"]["embeddings"]).max())
                                                 if "reference" in results else None),
                "max_abs_fast_minus_tiled": diff_tiled,
                "meets_targets": ratio >= target and mem <= targets["memory"],
            }
            _write_json(args.json, report)
        print("throughput (ratios of medians over the timed rounds; min-max of the per-round ratios):")
        print(speed_header)
        print("-" * len(speed_header))
        print("\n".join(speed_lines))
        print("plain / calibrated time by stage, interleaved in the same rounds (median (min-max) over the rounds): end to end "
              "(encode_document), the forward pass alone (batches tokenized beforehand, on the device), preprocessing alone; "
              "the median of the per-round end-to-end ratios (rounds are paired); then plain's seconds per call:")
        print(stage_header)
        print("-" * len(stage_header))
        print("\n".join(stage_lines))
        if host_lines:
            print("milliseconds per batch, medians over the rounds: preprocessing, the host's launch of the forward pass "
                  "(from an idle device until the call returns), the forward pass; where preprocessing plus launch reaches "
                  "the forward pass, end to end waits on the host. Then end to end, the calibrated model's class with "
                  "calibration off ('wrapped': its truncation count, no calibration) over plain, and fast over it "
                  "(calibration alone), ratios of medians:")
            print(host_header)
            print("-" * len(host_header))
            print("\n".join(host_lines))
        print(f"peak memory of one cold encode call (tensor: PyTorch's {device} allocator; RSS: rise of VmHWM above the loaded model after a short warm-up call, "
              f"median (min-max) of {memory_runs} cold process(es) per mode):")
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
