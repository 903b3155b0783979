"""The fused kernel builds for the GPUs it is meant for, on a machine without one: every kernel the package can
launch compiles to a Hopper (sm_90) and an Ampere (sm_80) binary, fits the GPU's shared memory, and in half precision
keeps its registers unspilled at the supported architectures' head sizes (``kernel_build.py`` beside this file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mteb_fairpos import triton_attention

pytestmark = pytest.mark.skipif(triton_attention.triton is None, reason="triton is not installed (pip install -e '.[test]')")

SHARED_LIMIT = {90: 232_448, 80: 166_912}
"""The most shared memory one block may take (227 KB on sm_90, 163 KB on sm_80)."""


@pytest.fixture(scope="module")
def builds() -> list[dict]:
    pytest.importorskip("triton.backends.nvidia.compiler", reason="this Triton has no NVIDIA backend")
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}  # compiled, not interpreted
    script = Path(__file__).with_name("kernel_build.py")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_every_kernel_the_package_launches_builds_for_hopper_and_ampere(builds):
    assert {(b["arch"], b["dtype"]) for b in builds} == {(90, "bf16"), (90, "fp16"), (90, "fp32"), (80, "bf16")}
    assert {(b["head"], b["pooled"]) for b in builds} == {(h, p) for h in (32, 64, 128, 256) for p in (True, False)}
    # both loops on both architectures: one basket closed per key block where the basket fits one, else baskets
    # spanning blocks
    assert {(b["arch"], b["one_block"]) for b in builds if b["dtype"] != "fp32"} == {(a, o) for a in (90, 80) for o in (True, False)}
    assert [b for b in builds if "error" in b] == []
    assert all(0 < b["shared"] <= SHARED_LIMIT[b["arch"]] for b in builds)


def test_the_setting_that_reads_blocks_through_tensor_descriptors_builds_for_hopper(builds):
    """Both loops, with and without causality, at gte's and Qwen3's head sizes: what ``bench_kernels.py --tune`` may
    pick on a Hopper GPU (its spills are the tuning's to weigh; the defaults do not use it)."""
    descriptors = [b for b in builds if b.get("tma")]
    assert {(b["head"], b["one_block"], b["causal"]) for b in descriptors} == {
        (h, o, c) for h in (64, 128) for o in (True, False) for c in (False, True)}
    assert all(b["arch"] == 90 and "error" not in b for b in descriptors)
    # K and V come through the tensor memory accelerator there, and only there
    assert all(b["bulk_copies"] > 0 for b in descriptors) and all(b.get("bulk_copies", 0) == 0 for b in builds if not b.get("tma"))


def test_in_half_precision_no_build_spills_registers_at_the_supported_head_sizes(builds):
    half = [b for b in builds if b["dtype"] != "fp32" and b["head"] <= 128 and not b.get("tma")]
    assert len(half) == 2 * (2 * 3 + 2) + 2 * 3 * 2 + 2 * 3 * 2 and [b for b in half if b["spills"]] == []
