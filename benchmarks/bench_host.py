"""The host's own time in a calibrated forward pass against the plain one: what a GPU waits for when the host is the
bottleneck (docs/gpu.md: qwen3-last-2048's end-to-end shortfall).

On a GPU the host launches a pass's kernels and goes on to tokenize the next batch while the device computes; where
tokenizing a batch takes about as long as the device's pass, every millisecond of host work the calibrated pass adds
counts in full. Here the models are tiny (hidden 64, 12 layers, 64 tokens, 8 documents), so the arithmetic is small
and the time is mostly the host's: the Python of the calibration backend, its layout, its switch of the model's
attention, its dispatcher calls. The calibrated layers take the path CUDA takes (the fused kernel, half the layers),
with the kernel's launch itself replaced by a no-op: compiled it runs on CUDA only, and under Triton's interpreter its
emulation would be all the time measured. A real launch adds some 20-40 µs of host time per calibrated layer.

    python benchmarks/bench_host.py                    # gte (cls) and qwen3 (last), 30 interleaved rounds
    python benchmarks/bench_host.py --rounds 60 --documents 32
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernel module is imported: the kernel is then replaced
sys.path.insert(0, str(Path(__file__).parent))

import bench_calibration as bench  # noqa: E402  (the offline tokenizer and the argument checks)


class InterpretedFunction:
    """Stands in for the Triton kernel object: ``kernel[grid](...)`` counts the launch and returns at once. Named as
    Triton's interpreter names a kernel, which is what lets the wrapper take CPU tensors (`_interpreting`)."""

    launches = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs) -> None:
            self.launches += 1
        return launch


def tiny_model(architecture: str, folder: Path, tokens: int):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer, GteConfig, Qwen3Config

    from mteb_fairpos.offline import minilm_path

    common = dict(vocab_size=30522, hidden_size=64, num_hidden_layers=12, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=8192, pad_token_id=0)
    config = Qwen3Config(**common, num_key_value_heads=2, head_dim=16) if architecture == "qwen3" else GteConfig(**common)
    AutoModel.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformer = Transformer(str(folder), max_seq_length=tokens)
    pooling = "lasttoken" if architecture == "qwen3" else "cls"
    return SentenceTransformer(modules=[transformer, Pooling(64, pooling)], device="cpu")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=bench._at_least_one, default=8, help="documents in the batch (default 8)")
    parser.add_argument("--tokens", type=bench._at_least_one, default=64, help="tokens per document (default 64)")
    parser.add_argument("--rounds", type=bench._at_least_one, default=30, help="interleaved timed rounds (default 30)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, triton_attention
    from mteb_fairpos.attention import fused_kernel

    torch.set_num_threads(1)  # the host's thread: a GPU pass is launched from one
    kernel = triton_attention._calibrated_attention_kernel = InterpretedFunction()
    triton_attention._VERIFIED.clear()
    print(f"{'model':<12} | {'plain ms':>9} {'calibrated ms':>14} {'added ms':>9} {'ratio':>6}   "
          f"(per pass of {args.documents} x {args.tokens} tokens, medians of {args.rounds} rounds)")
    for architecture in ("gte", "qwen3"):
        with tempfile.TemporaryDirectory(prefix="fairpos-host-") as scratch:
            plain = tiny_model(architecture, Path(scratch), args.tokens)
            fair = FairSentenceTransformer(plain, CalibrationConfig.parse("b8_lhalf_a0.5"))
            texts = [" ".join(["word"] * (args.tokens + 16))] * args.documents
            batches = {"plain": (plain, plain.preprocess(texts, task="document")),
                       "calibrated": (fair, fair.preprocess(texts, task="document"))}

            def run(name: str) -> float:
                model, features = batches[name]
                start = time.perf_counter()
                with torch.inference_mode(), fused_kernel(True), getattr(model, "tallying", contextlib.nullcontext)():
                    model.forward(dict(features), task="document")
                return time.perf_counter() - start

            # the launch is a no-op, so the first-use check would find the kernel wrong: it is taken as passed here
            triton_attention._VERIFIED.update({key: True for key in _kinds(fair)})
            for _ in range(3):
                run("plain"), run("calibrated")
            times: dict[str, list[float]] = {"plain": [], "calibrated": []}
            for round_ in range(args.rounds):
                for name in ("plain", "calibrated")[:: 1 if round_ % 2 else -1]:
                    times[name].append(run(name))
            if kernel.launches < args.rounds:
                raise SystemExit("bench_host.py: the calibrated passes did not take the fused kernel's path.")
            p, c = statistics.median(times["plain"]) * 1e3, statistics.median(times["calibrated"]) * 1e3
            print(f"{architecture:<12} | {p:>9.2f} {c:>14.2f} {c - p:>9.2f} {c / p:>6.2f}")
    return 0


def _kinds(fair) -> list[tuple]:
    """The first-use check's entries the tiny model's calibrated layers look up (CPU, fp32, head size 16)."""
    import torch

    pooled = fair.plan.pooling != "mean"
    shares = tuple(share for _, share in fair.plan.config.isolated_tokens(fair.plan.pooling))
    return [("cpu", 0, torch.float32, 16, pooled, causal, shares) for causal in (False, True)]


if __name__ == "__main__":
    raise SystemExit(main())
