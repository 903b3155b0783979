"""What a calibrated forward pass costs beyond the plain one, counted on the CPU: host reads and ATen operations.

On a GPU every value read back to the host (``bool(t)``, ``int(t)``, ``.tolist()``, ``nonzero``, a
boolean-mask index) makes the host wait for the device, and every ATen operation is a kernel launch;
both counts are the same on any device, so they are counted here, with ``benchmarks/bench_ops.py``'s
counter (which reports them at full width, 512-8,192 tokens). Two paths: the PyTorch one the CPU runs, and
the fused Triton kernel's, which CUDA runs by default (here through Triton's interpreter, its launch counted
as one operation; compiled where there is a GPU).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, GteConfig, Qwen3Config

from mteb_fairpos import attention, triton_attention
from mteb_fairpos.attention import attach, fused_kernel
from mteb_fairpos.calibration import basket_layout
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
    baskets the running sums read the host per basket on the CPU, where that costs nothing: a read-free variant,
    one more fused pass over all keys, ran 1.3-1.6x slower there. On a GPU they rescale without reading: see
    the next test.)"""
    _, _, plain_reads, half_reads = _costs(model_name, "mean", 64, "last_half")
    _, _, _, every_reads = _costs(model_name, "mean", 64, 1.0)
    assert half_reads - plain_reads == 1 and every_reads - plain_reads == 1, (plain_reads, half_reads, every_reads)


def test_on_a_gpu_the_running_sums_rescale_without_reading_the_host_and_give_the_same_sums():
    """The PyTorch path's running sums over more than four baskets (CUDA's when the kernel is refused): without the
    host check (``check_on_host=False``, what a CUDA tensor gets) every basket rescales, by exactly 1 where a row's
    frame stays, so the sums are bit for bit those of the checked path, with no host read. Frames move here: a
    later basket outweighs the first by more than e^20 in some rows, and some rows see no key of the first ones."""
    n_b, shape = 8, (2, 3, 40)
    generator = torch.Generator().manual_seed(0)
    outputs = torch.randn(n_b, *shape, 16, generator=generator)
    lses = torch.randn(n_b, *shape, generator=generator) * 3
    lses[5, :, :, :10] += 40.0  # frames move at the sixth basket
    lses[:3, 1, :, 20:] = float("-inf")  # rows that see nothing of the first three baskets
    outputs[:3, 1, :, 20:] = 0.0

    def sums(check_on_host: bool) -> tuple[torch.Tensor, ...]:
        filled = torch.empty(n_b, *shape)
        attended = ((outputs[b].clone(), lses[b]) for b in range(n_b))  # fresh, as from a kernel: the first is summed into
        return (*attention._running_sums(attended, filled, check_on_host=check_on_host), filled)

    checked, unchecked = sums(True), sums(False)
    assert all(torch.equal(a, b) for a, b in zip(checked, unchecked, strict=True))
    assert counts(lambda: sums(False))[1] == 0 and counts(lambda: sums(True))[1] > 0


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


@pytest.mark.skipif(triton_attention.triton is None, reason="triton is not installed (pip install -e '.[test]')")
def test_encode_reads_nothing_from_the_device_once_the_models_mask_was_checked_at_that_length(minilm):
    """``preprocess`` makes the layout's host values from the tokenizer's mask before the batch goes to the device,
    and the model's mask, checked at the longest length seen (the first batch ``encode`` runs), is not checked again
    at that length or shorter: on the kernel's path a pass then reads the device no more than the plain model's
    does, with the host values a pass would have read."""
    from mteb_fairpos import FairSentenceTransformer
    from mteb_fairpos.attention import HOST_LAYOUT

    fair = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=8, layers="last", strength=0.5))
    texts = ["a lighthouse on the harbour wall is repainted every spring", "the final ended after a late penalty"]
    features, plain = fair.preprocess(texts, task="document"), minilm.preprocess(texts)
    given = features[HOST_LAYOUT]
    assert HOST_LAYOUT not in fair.preprocess(texts, task="query")  # queries are not calibrated: nothing to make
    config, pooling = fair.plan.config, fair.plan.pooling  # the layout as a pass reads it from the device:
    read = basket_layout(features["attention_mask"], pooling, config.basket_size, config.isolated_tokens(pooling)).on_host()[0]
    assert given == dataclasses.replace(read, contiguous=True, full=True, shape=(2, features["attention_mask"].shape[1]),
                                        isolated=tuple(name for name, _ in config.isolated_tokens(pooling)))
    assert given.any_active
    def tallied() -> dict:  # as encode runs a pass: its warnings' count (the truncation count too) included
        with fair.tallying() as tally:
            output = fair.forward(dict(features), task="document")
        assert tally.calibrated == 2
        return output

    with fused_kernel(True):
        _, reads = counts(tallied)
    _, plain_reads = counts(lambda: minilm.forward(dict(plain)))
    assert reads == plain_reads, (reads, plain_reads)


def test_host_values_made_for_a_batch_of_another_shape_are_not_used():
    """The host values ``preprocess`` makes travel beside the batch; where the mask changed shape on the way (padded
    again before the device), or another model's plan made them (features of one model given to another, with
    other baskets or other isolated tokens), the pass reads its own instead of using values made for another layout."""
    torch.manual_seed(0)
    model = AutoModel.from_config(MODELS["gte"], attn_implementation="sdpa").eval()
    plan = attach(model, CalibrationConfig(basket_size=16, layers=1.0, strength=0.5), "mean")
    others = [attach(model, CalibrationConfig(basket_size=4, layers=1.0, strength=0.5), "mean"),
              attach(model, CalibrationConfig(basket_size=16, layers=1.0, strength=0.5, isolate_bos=True), "mean")]
    ids = torch.randint(1, 100, (2, 64), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 64, dtype=torch.long)
    mask[1, 12:] = 0  # 12 tokens: calibrated in baskets of 4, not in baskets of 16
    foreign = [(other.host_layout(mask), False) for other in others]
    for host, made_here in ((plan.host_layout(torch.ones(3, 64, dtype=torch.long)), False), *foreign,
                            (plan.host_layout(mask), True)):
        with torch.no_grad(), plan.applied(mask, host=host) as layout:
            model(input_ids=ids, attention_mask=mask)
        assert (layout.known() is host) == made_here and layout.known().active == [1, 0]
    with pytest.raises(ValueError, match="attention_mask on the CPU, not on meta"):  # a mask already on a device
        plan.host_layout(mask.to("meta"))


def test_the_gpu_runs_wait_counter_names_each_waits_line_and_ignores_other_warnings():
    """``benchmarks/gpu/syncs.py``'s counter, given the warning PyTorch's sync debug mode raises on CUDA (it cannot run
    here: a CPU never synchronizes, so the test raises that warning itself): each wait counts once, at the innermost
    line outside the warnings machinery where no package it traces is on the stack, with its thread; other warnings
    are not waits."""
    import warnings

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "gpu"))
    from syncs import located

    def wait() -> None:
        warnings.warn("called a synchronizing CUDA operation", UserWarning)

    def call() -> None:
        wait()
        wait()
        warnings.warn("a truncation warning, not a wait", UserWarning)

    places = located(call, "cpu")
    assert len(places) == 1 and sum(places.values()) == 2, places
    (place,) = places
    assert f"test_forward_cost.py:{wait.__code__.co_firstlineno + 1} wait (thread MainThread)" in place, place


def test_the_benchmarks_forward_stages_run_a_calibrated_pass_as_encode_does(minilm):
    """The forward pass alone and its launch (``bench_calibration.py``'s stages, which ``kernel_time.py`` profiles) run
    outside ``encode``, where gradients are on: a calibrated pass refuses to record them, so the stages run without,
    as ``encode`` does, and give ``encode_document``'s embeddings."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from bench_calibration import stages

    from mteb_fairpos import FairSentenceTransformer

    fair = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=8, layers="last", strength=0.5))
    texts = ["a lighthouse on the harbour wall is repainted every spring", "the final ended after a late penalty"]
    runs = stages(minilm, fair, texts, 2, "cpu", host=True)
    assert torch.is_grad_enabled()
    embeddings = runs["fast forward"]()
    assert torch.allclose(embeddings, fair.encode_document(texts, convert_to_tensor=True), atol=1e-6)
    assert not torch.allclose(embeddings, runs["plain forward"](), atol=1e-3)  # calibration changed them
    assert runs["fast launch"]() > 0 and runs["plain launch"]() > 0


def test_kernel_time_groups_what_a_pass_ran_by_name():
    """``benchmarks/gpu/kernel_time.py`` groups what one call ran by name, with its own time (on a CPU, the ATen
    operations; a GPU's kernels are grouped alike), and lists the calibrated pass's differences largest first."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "gpu"))
    from kernel_time import device_time, differences

    a = torch.randn(64, 64)

    def plain() -> None:
        a @ a

    def calibrated() -> None:
        a @ a
        a @ a
        a + a

    found = device_time(calibrated, "cpu")
    assert found["aten::mm"][1] == 2 and found["aten::add"][1] == 1 and found["aten::mm"][0] > 0
    rows = {name: (extra, more) for name, extra, more in differences(device_time(plain, "cpu"), found)}
    assert rows["aten::mm"][1] == 1 and rows["aten::add"] == (found["aten::add"][0], 1)
    extras = [abs(extra) for _, extra, _ in differences(device_time(plain, "cpu"), found)]
    assert extras == sorted(extras, reverse=True)
