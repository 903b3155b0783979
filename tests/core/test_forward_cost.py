"""What a calibrated forward pass costs beyond the plain one, counted on the CPU: host reads and ATen operations.

On a GPU every value read back to the host (``bool(t)``, ``int(t)``, ``.tolist()``, ``nonzero``, a
boolean-mask index) makes the host wait for the device, and every ATen operation is a kernel launch;
both counts are the same on any device, so they are counted here, with ``benchmarks/bench_ops.py``'s
counter (which reports them at full width, 512-8,192 tokens).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, GteConfig, Qwen3Config

from mteb_fairpos.attention import attach
from mteb_fairpos.config import CalibrationConfig

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from bench_ops import counts  # noqa: E402

MODELS = {
    "gte": GteConfig(vocab_size=100, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=1024, pad_token_id=0),
    "qwen3": Qwen3Config(vocab_size=100, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, intermediate_size=128, max_position_embeddings=1024, pad_token_id=0),
}


def _costs(model_name: str, pooling: str, length: int, layers) -> tuple[int, int, int, int]:
    """(plain operations, calibrated operations, plain host reads, calibrated host reads) of one forward pass
    over two documents, the second a quarter shorter (padded), in baskets of 16."""
    torch.manual_seed(0)
    model = AutoModel.from_config(MODELS[model_name], attn_implementation="sdpa").eval()
    ids = torch.randint(1, 100, (2, length), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, length * 3 // 4:] = 0
    plan = attach(model, CalibrationConfig(basket_size=16, layers=layers, strength=0.5), pooling)

    def calibrated():
        with plan.applied(mask) as layout:
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
