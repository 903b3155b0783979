"""What a calibrated forward pass costs beyond the plain one, counted on the CPU: host reads and ATen operations.

On a GPU every value read back to the host (``bool(t)``, ``int(t)``, ``.tolist()``, ``nonzero``, a
boolean-mask index) makes the host wait for the device, and every ATen operation is a kernel launch;
both counts are the same on any device, so they are counted here, with ``benchmarks/bench_ops.py``'s
counter (which reports them at full width, 512-8,192 tokens). Two paths: the PyTorch one the CPU runs, and
the fused Triton kernel's, which CUDA runs by default (here through Triton's interpreter, its launch counted
as one operation; compiled where there is a GPU).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, GteConfig, Qwen3Config

from mteb_fairpos import triton_attention
from mteb_fairpos.attention import attach, fused_kernel
from mteb_fairpos.config import CalibrationConfig

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from bench_ops import counts  # noqa: E402

MODELS = {
    "gte": GteConfig(vocab_size=100, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=1024, pad_token_id=0),
    "qwen3": Qwen3Config(vocab_size=100, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, intermediate_size=128, max_position_embeddings=1024, pad_token_id=0),
}


DEEP = {  # as deep as the full-width models of bench_ops.py (12 layers), as narrow as the interpreter needs
    "gte": GteConfig(vocab_size=100, hidden_size=32, num_hidden_layers=12, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=1024, pad_token_id=0),
    "qwen3": Qwen3Config(vocab_size=100, hidden_size=32, num_hidden_layers=12, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=16, intermediate_size=64, max_position_embeddings=1024,
                         pad_token_id=0),
}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
"""Where the fused kernel runs: compiled on a GPU, else through Triton's interpreter (tests/conftest.py)."""


def _costs(model_name: str, pooling: str, length: int, layers, fused: bool = False) -> tuple[int, int, int, int]:
    """(plain operations, calibrated operations, plain host reads, calibrated host reads) of one forward pass
    over two documents, the second a quarter shorter (padded), in baskets of 16: on the PyTorch path, or
    (``fused``) on the path a GPU runs, the fused kernel, its launch counted as one operation."""
    torch.manual_seed(0)
    device = DEVICE if fused else "cpu"
    model = AutoModel.from_config((DEEP if fused else MODELS)[model_name], attn_implementation="sdpa").eval().to(device)
    ids = torch.randint(1, 100, (2, length), generator=torch.Generator().manual_seed(0)).to(device)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, length * 3 // 4:] = 0
    mask = mask.to(device)
    plan = attach(model, CalibrationConfig(basket_size=16, layers=layers, strength=0.5), pooling)

    def calibrated():
        with fused_kernel(fused), plan.applied(mask) as layout:
            output = model(input_ids=ids, attention_mask=mask)
        layout.on_host()  # what FairSentenceTransformer reads per batch after the pass (its uncalibrated count)
        return output

    plain_ops, plain_reads = counts(lambda: model(input_ids=ids, attention_mask=mask))
    ops, reads = counts(calibrated)
    return sum(plain_ops.values()), sum(ops.values()), plain_reads, reads


@pytest.mark.parametrize(("model_name", "pooling"), [("gte", "cls"), ("qwen3", "last")])
def test_the_pooling_row_reads_the_host_once_per_pass_and_its_operations_do_not_grow_with_baskets(model_name, pooling):
    """cls and last-token pooling: one host read per pass whatever the number of calibrated layers (none
    inside a layer), the same operations at 8 and 32 baskets, and at most 1.4x the plain pass's operations
    with half the layers calibrated (1.8x before the pooling rows were batched)."""
    plain, half, plain_reads, half_reads = _costs(model_name, pooling, 128, "last_half")
    _, every, _, every_reads = _costs(model_name, pooling, 128, 1.0)
    long_plain, long_every, _, _ = _costs(model_name, pooling, 512, 1.0)
    assert half_reads - plain_reads == 1 and every_reads - plain_reads == 1, (plain_reads, half_reads, every_reads)
    assert long_every - long_plain == every - plain, (every - plain, long_every - long_plain)
    assert half / plain <= 1.4, (half, plain)


@pytest.mark.parametrize("model_name", ["gte", "qwen3"])
def test_mean_pooling_reads_the_host_once_per_pass_up_to_four_baskets(model_name):
    """Mean pooling over 4 baskets (their outputs held until they are combined): the layout and the check of
    the model's mask are read together, once per pass, whatever the number of calibrated layers. (Beyond four
    baskets the running sums still read the host per basket: a read-free variant, one more fused pass over
    all keys, ran 1.3-1.6x slower on the CPU.)"""
    _, _, plain_reads, half_reads = _costs(model_name, "mean", 64, "last_half")
    _, _, _, every_reads = _costs(model_name, "mean", 64, 1.0)
    assert half_reads - plain_reads == 1 and every_reads - plain_reads == 1, (plain_reads, half_reads, every_reads)


@pytest.mark.skipif(triton_attention.triton is None, reason="triton is not installed (pip install -e '.[test]')")
@pytest.mark.parametrize(("model_name", "pooling", "target"), [("gte", "cls", 1.15), ("qwen3", "last", 1.15),
                                                                ("gte", "mean", 1.3)])
def test_the_path_a_gpu_runs_reads_the_host_once_per_pass_in_few_operations(model_name, pooling, target):
    """The fused kernel's path (what CUDA runs by default), 12 layers with the last half calibrated: one host read
    per pass, for every pooling; at most ``target`` times the plain pass's operations (counting the kernel as its one
    launch: cls/last 1.15, mean 1.3); and the same operations at 32 and 64 tokens (2 and 4 baskets), so the count
    holds at any length (8,192 tokens: 512 baskets). A calibrated layer is SDPA and the kernel writing the pooling
    rows into its output (cls/last), or the kernel alone (mean)."""
    plain, calibrated, plain_reads, reads = _costs(model_name, pooling, 64, "last_half", fused=True)
    short_plain, short, _, _ = _costs(model_name, pooling, 32, "last_half", fused=True)
    assert reads - plain_reads == 1, (plain_reads, reads)
    assert calibrated - plain == short - short_plain, (calibrated - plain, short - short_plain)
    assert calibrated / plain <= target, (calibrated, plain, calibrated / plain)
