"""The fused kernel builds for the GPUs it is meant for, on a machine without one: every kernel the package can
launch compiles to a Hopper (sm_90) and an Ampere (sm_80) binary, fits the GPU's shared memory, and in half precision
keeps its registers unspilled at the supported architectures' head sizes; the common bf16 calls compile for Ada and
Blackwell too (``benchmarks/gpu/kernel_build.py``)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mteb_fairpos import triton_attention

pytestmark = pytest.mark.skipif(triton_attention.triton is None, reason="triton is not installed (pip install -e '.[test]')")

SHARED_LIMIT = {90: 232_448, 80: 166_912, 89: 101_376, 100: 232_448, 120: 101_376}
"""The most shared memory one block may take (227 KB on sm_90 and sm_100, 163 KB on sm_80, 99 KB on sm_89 and
sm_120)."""
TUNED_ARCHS = (80, 90)
"""Where the launch settings were chosen with the spill check (the other architectures take untimed ones)."""


def _script(name: str) -> list[dict]:
    """The JSON lines a script of ``benchmarks/gpu`` prints, run compiled (not interpreted) in a process of its own."""
    pytest.importorskip("triton.backends.nvidia.compiler", reason="this Triton has no NVIDIA backend")
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    script = Path(__file__).parents[2] / "benchmarks" / "gpu" / name
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def builds() -> list[dict]:
    return _script("kernel_build.py")


def test_every_kernel_the_package_launches_builds_for_hopper_and_ampere(builds):
    assert {(b["arch"], b["dtype"]) for b in builds} == {(90, "bf16"), (90, "fp16"), (90, "fp32"), (80, "bf16"),
                                                          (89, "bf16"), (100, "bf16"), (120, "bf16")}
    assert {(b["head"], b["pooled"]) for b in builds} == {(h, p) for h in (32, 64, 128, 256) for p in (True, False)}
    # both loops on both architectures: one basket closed per key block where the basket fits one, else baskets
    # spanning blocks
    assert {(b["arch"], b["one_block"]) for b in builds if b["dtype"] != "fp32" and b["arch"] in TUNED_ARCHS} == {
        (a, o) for a in (90, 80) for o in (True, False)}
    assert [b for b in builds if "error" in b] == []
    assert all(0 < b["shared"] <= SHARED_LIMIT[b["arch"]] for b in builds)


def test_the_setting_that_reads_blocks_through_tensor_descriptors_builds_for_hopper(builds):
    """Both loops, with and without causality, at gte's and Qwen3's head sizes: what Hopper's half-precision mean rows
    take at head size 64, and what ``bench_kernels.py --tune`` may pick at 128 (its spills are the tuning's to weigh)."""
    descriptors = [b for b in builds if b.get("tma")]
    assert {(b["head"], b["one_block"], b["causal"]) for b in descriptors} == {
        (h, o, c) for h in (64, 128) for o in (True, False) for c in (False, True)}
    assert all(b["arch"] == 90 and "error" not in b for b in descriptors)
    # the package's own launches read so in one case only, the one timed: Hopper's bf16 mean rows at head size 64
    # (baskets that fit a key block; the builds with longer ones are the tuning's: that loop spills 4 bytes there)
    assert {(b["dtype"], b["head"], b["pooled"]) for b in builds if b["launch"] == "package" and b["tma"]} == {
        ("bf16", 64, False)}
    assert [b for b in builds if b["launch"] == "package" and b["arch"] == 90 and b["dtype"] == "bf16"
            and b["head"] == 64 and not b["pooled"] and not b["tma"]] == []
    # K and V come through the tensor memory accelerator there, and only there
    assert all(b["bulk_copies"] > 0 for b in descriptors) and all(b.get("bulk_copies", 0) == 0 for b in builds if not b.get("tma"))


def test_hoppers_mean_rows_read_through_descriptors_only_at_the_timed_head_size_and_baskets(monkeypatch):
    """The launch settings as a GPU gets them (not the interpreter's): descriptors for Hopper's bf16 mean rows at head
    size 64 where a basket fits a key block, as two H200 runs timed; masked loads with the same tiles where baskets
    span blocks, in fp16 and at other head sizes (untimed through descriptors), and everywhere else."""
    monkeypatch.setattr(triton_attention, "_interpreting", lambda: False)  # what a CUDA launch sees
    launch = triton_attention.launch_config
    fits = launch(torch.bfloat16, 64, False, 90, 128)
    assert fits.tma and launch(torch.bfloat16, 64, False, 90, 16).tma and launch(torch.bfloat16, 64, False, 90) == fits
    masked = dataclasses.replace(fits, tma=False)
    assert launch(torch.bfloat16, 64, False, 90, 256) == masked == launch(torch.float16, 64, False, 90, 128)
    assert launch(torch.bfloat16, 32, False, 90, 128) == masked == launch(torch.bfloat16, 48, False, 90, 128)
    assert not any(launch(*call, 128).tma for call in [(torch.float16, 64, False, 90), (torch.bfloat16, 128, False, 90),
                                                       (torch.bfloat16, 64, True, 90), (torch.float32, 64, False, 90),
                                                       (torch.bfloat16, 64, False, 80), (torch.bfloat16, 64, False, 89)])


def test_in_half_precision_no_build_spills_registers_at_the_supported_head_sizes(builds):
    half = [b for b in builds if b["dtype"] != "fp32" and b["head"] <= 128 and b["launch"] == "package" and b["arch"] in TUNED_ARCHS]
    # Hopper's, Hopper's with short baskets, Ampere's, and the two descriptor builds the package launches (bf16, head
    # size 64, baskets of one key block, with and without causality)
    assert len(half) == 2 * (2 * 3 + 2) + 2 * 3 * 2 + 2 * 3 * 2 + 2 and [b for b in half if b["spills"]] == []


def test_the_common_calls_build_for_ada_and_blackwell(builds):
    """bf16 at gte's and Qwen3's head sizes, pooling rows and every row, on the GPUs people index on besides Hopper
    and Ampere (L4, L40S, RTX 4090; B200; RTX 50 series): they compile and fit the block's shared memory (the first
    test), and the pooling rows and head size 64 keep their registers unspilled with the untimed settings."""
    others = [b for b in builds if b["arch"] not in TUNED_ARCHS]
    assert {(b["arch"], b["head"], b["pooled"]) for b in others} == {
        (a, h, p) for a in (89, 100, 120) for h in (64, 128) for p in (True, False)}
    assert [b for b in others if "error" in b] == []
    assert [b for b in others if b["spills"] and (b["pooled"] or b["head"] == 64)] == []


@pytest.fixture(scope="module")
def loops() -> dict[tuple[str, str], dict]:
    """(setting, kernel) -> what ``benchmarks/gpu/kernel_loop.py`` reads of one pass of the kernel's main loop, for the
    fused kernel and the plain Triton loop, at every setting ``bench_kernels.py --tune`` times (head size 64)."""
    return {(row["setting"], row["kernel"]): row for row in _script("kernel_loop.py")}


def test_calibration_adds_no_matrix_product_to_a_pass_of_the_loop(loops):
    """In the Hopper binary a pass of the fused kernel's loop runs the plain loop's tensor-core instructions, no more:
    calibration costs it instructions on the CUDA cores only (the basket's output and the running sums)."""
    settings = {setting for setting, _ in loops}
    assert "default" in settings and len(settings) > 10
    for setting in settings:
        fused, plain = loops[setting, "fused"], loops[setting, "plain"]
        assert fused["tensor"] == plain["tensor"] > 0, setting
        assert fused["floating"] > plain["floating"] and fused["MUFU"] >= plain["MUFU"] >= 32, setting


def test_a_whole_key_block_skips_the_mask_and_through_descriptors_stays_in_shared_memory(loops):
    """With masked loads the default's tiles select scores only behind a branch a block every row sees whole does not
    take; read through tensor descriptors (the default on Hopper), such blocks run in a loop compiled without a mask
    (values zeroed past a basket would pass through registers), which takes fewer instructions than masked loads do,
    without spills."""
    masked = loops["64x128 w4 s3", "fused"]  # the default's tiles, by masked loads
    assert masked["instructions"] < masked["most"] and masked["spills"] == 0
    descriptors = loops["default", "fused"]
    assert descriptors == {**loops["64x128 w4 s3 tma", "fused"], "setting": "default"} and descriptors["tma"]
    assert descriptors["instructions"] == descriptors["most"] < masked["instructions"] and descriptors["spills"] == 0
    assert masked["masked_loop"] is None and descriptors["masked_loop"][0] > descriptors["instructions"]


def test_through_descriptors_the_masked_blocks_loop_is_read_and_a_retried_wait_closes_no_loop(loops):
    """Each setting that reads blocks through descriptors has a second loop, the masked blocks' (a pass of it
    costs more than one of the whole blocks', whose values need no zeroing); the plain loop's has one as well, and no
    branch inside (a retried barrier wait jumps out and back, an unconditional jump that is no loop of its own)."""
    tma = {setting for (setting, _), row in loops.items() if row["tma"]}
    assert len(tma) == 5  # the four of the tuning, and the default
    for setting, kernel in loops:
        row = loops[setting, kernel]
        if setting not in tma:
            assert row["masked_loop"] is None, (setting, kernel)
            continue
        fewest, most = row["masked_loop"]
        assert row["instructions"] < fewest <= most, (setting, kernel)
        if kernel == "plain":
            assert fewest == most, setting
