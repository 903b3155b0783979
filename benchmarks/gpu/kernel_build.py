"""Build the fused kernel for NVIDIA GPUs on a machine without one, and print one JSON line per build.

Triton compiles a kernel to a GPU binary without a GPU: its wheel brings ``ptxas``. So the kernels the package
launches (each launch config of :data:`~mteb_fairpos.triton_attention.CONFIGS` at the default calibration's baskets and
at baskets within a key block, with the compile-time arguments ``fused_calibrated_attention`` passes; not the masked
fallback of a setting that reads through descriptors) are built here for Hopper (sm_90: H100, H200) and Ampere (sm_80: A100), the
common half-precision calls also for Ada (sm_89: L4, L40S, RTX 4090) and Blackwell (sm_100: B200; sm_120: RTX 50
series), and ``ptxas -v`` reports its registers and spills. The interpreter tests check what the kernel computes; this checks
that the compiler takes it, and that it fits the GPU's shared memory. Run without ``TRITON_INTERPRET`` (under the
interpreter ``triton.jit`` gives no compilable function). ``tests/core/test_kernel_build.py`` runs it in CI;
``kernel_loop.py`` beside it reads the built loop's instructions::

    python benchmarks/gpu/kernel_build.py        # every build, one JSON line each
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
from triton.compiler import ASTSource

from mteb_fairpos import triton_attention
from mteb_fairpos.sweep import one_line

HEADS = (32, 64, 128, 256)
"""The head sizes of the supported architectures (MiniLM 32, gte and bge 64, Qwen3 128) and the largest CONFIGS takes."""
DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
SHARES = ("original", "equal")
"""The default share policies of the two isolated tokens (docs/method.md#s1-3)."""


BASKET = 128
"""The default calibration's basket size: wider than most configs' key blocks, so a basket spans several."""
SHORT_BASKET = 16
"""A basket within every config's key block: the kernel's other loop, one basket closed per block."""


OTHER_ARCHS = (89, 100, 120)
"""GPUs the launch settings were not tuned on (they take :data:`~mteb_fairpos.triton_attention.CONFIGS`' untimed entries),
built in bf16 at gte's and Qwen3's head sizes: Ada (L4, L40S, RTX 4090), Blackwell (B200) and consumer Blackwell."""


def builds() -> list[dict]:
    """(arch, dtype, head size, pooled, causal, basket size) of every build, each with the launch setting the package
    takes: all calls on Hopper, causal ones at Qwen3's head size, half precision with baskets that fit a key block
    too, and bf16 on Ampere with both; then, on Hopper at gte's and Qwen3's head sizes, the mean rows with those tiles
    read through tensor descriptors (``tma``: what ``bench_kernels.py --tune`` may pick where the package does not
    read so); then bf16 on the :data:`OTHER_ARCHS`."""
    hopper = [dict(arch=90, dtype=dtype, head=head, pooled=pooled, causal=causal, basket=BASKET)
              for dtype in DTYPES for head in HEADS for pooled in (True, False)
              for causal in ((False, True) if head == 128 else (False,))]
    short = [dict(arch=90, dtype=dtype, head=head, pooled=pooled, causal=False, basket=SHORT_BASKET)
             for dtype in (torch.bfloat16, torch.float16) for head in HEADS for pooled in (True, False)]
    ampere = [dict(arch=80, dtype=torch.bfloat16, head=head, pooled=pooled, causal=False, basket=basket)
              for basket in (BASKET, SHORT_BASKET) for head in HEADS for pooled in (True, False)]
    descriptors = [dict(arch=90, dtype=torch.bfloat16, head=head, pooled=False, causal=causal, basket=basket, tma=True)
                   for head in (64, 128) for basket in (BASKET, 2 * BASKET) for causal in (False, True)]
    others = [dict(arch=arch, dtype=torch.bfloat16, head=head, pooled=pooled, causal=False, basket=BASKET)
              for arch in OTHER_ARCHS for head in (64, 128) for pooled in (True, False)]
    return hopper + short + ampere + descriptors + others


def build(arch: int, dtype: torch.dtype, head: int, pooled: bool, causal: bool, basket: int, tma: bool | None = None
          ) -> dict:
    """Compile one kernel for ``sm_<arch>`` (with the launch setting the package takes; ``tma``: its tiles with key
    and value blocks read through tensor descriptors, or not, whatever the package does); which loop it runs, its tensor
    copies (TMA), shared memory, registers and spill bytes (from ``ptxas -v``). ``launch``: ``package`` where the build
    is the package's own launch, ``tuning`` where ``tma`` overrode it."""
    compiled, config, constants = compile_fused(arch, dtype, head, pooled, causal, basket, tma)
    registers, spills = register_use(compiled, arch)
    package = triton_attention.launch_config(dtype, head, pooled, arch, basket)
    return {"tma": config.tma, "launch": "package" if config == package else "tuning",
            "bulk_copies": compiled.asm["ptx"].count("cp.async.bulk.tensor"),  # the TMA's copies
            "one_block": constants["ONE_BLOCK"], "shared": compiled.metadata.shared, "registers": registers,
            "spills": spills, "block_m": config.block_m, "block_n": config.block_n}


def compile_fused(arch: int, dtype: torch.dtype, head: int, pooled: bool, causal: bool, basket: int,
                  tma: bool | None = None, config: triton_attention.LaunchConfig | None = None):
    """The fused kernel compiled for ``sm_<arch>`` as :func:`build` describes (or with launch setting ``config``); with
    its launch setting and compile-time arguments."""
    kernel = triton_attention._calibrated_attention_kernel
    config = config or triton_attention.launch_config(dtype, head, pooled, arch, basket)
    if tma is not None:
        config = dataclasses.replace(config, tma=tma)
    pointer = f"*{DTYPES[dtype]}"
    block = f"tensordesc<{DTYPES[dtype]}[1,1,{config.block_n},{triton_attention._block_d(head)}]>" if config.tma else pointer
    types = {"Q": pointer, "K": pointer, "V": pointer, "KD": block, "VD": block, "Out": pointer, "Sequences": "*i32",
             "scale_log2": "fp32", "strength": "fp32", "fixed_0": "fp32", "fixed_1": "fp32"}
    constants = triton_attention.kernel_constants(dtype, head, config, pooled, causal, SHARES, basket)
    aligned = ("Q", "K", "V", "Out", "Sequences") + (() if config.tma else ("KD", "VD"))
    return compile_kernel(kernel, arch, types, constants, aligned, config), config, constants


def compile_kernel(kernel, arch: int, types: dict[str, str], constants: dict, aligned: tuple[str, ...],
                   config: triton_attention.LaunchConfig):
    """``triton.compile`` of a jitted kernel for ``sm_<arch>``, specialized as a launch on (N, H, L, D) views with
    contiguous heads specializes it: the head dimension's strides (``stride_?d``) are 1, compile-time constants; the
    ``aligned`` pointers and every other stride are multiples of 16. ``types``: the non-integer arguments' types
    (the others are i32)."""
    unit = {p.name: 1 for p in kernel.params if p.name in {f"stride_{t}d" for t in "qkvo"}}
    signature = {p.name: "constexpr" if p.is_constexpr or p.name in unit else types.get(p.name, "i32") for p in kernel.params}
    divisible = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(kernel.params)
                 if p.name in aligned or (p.name.startswith("stride_") and p.name not in unit)}
    return triton.compile(ASTSource(kernel, signature, {**constants, **unit}, divisible), target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": config.num_warps, "num_stages": config.num_stages})


def register_use(compiled, arch: int) -> tuple[int | None, int]:
    """(registers per thread, spilled bytes) of a compiled kernel, as ``ptxas -v`` reports them."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(compiled.asm["ptx"])
        report = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name={sm_arch_from_capability(arch)}", str(source),
                                 "-o", str(Path(folder) / "kernel.cubin")], check=True, capture_output=True, text=True).stderr
    registers = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return int(registers.group(1)) if registers else None, int(spills.group(1)) if spills else 0


def main() -> int:
    for case in builds():
        try:
            found = build(**case)
        except Exception as err:  # noqa: BLE001 - a compiler error is the finding, reported per build
            found = {"error": one_line(err)}
        print(json.dumps({**case, "dtype": DTYPES[case["dtype"]], **found}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
