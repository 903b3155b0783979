"""What calibration costs inside the fused kernel's loop, read in the Hopper binary: no GPU needed.

For each launch setting (the default of :data:`~mteb_fairpos.triton_attention.CONFIGS` and those ``bench_kernels.py
--tune`` times; bf16, heads of 64 as gte-mean-2048's or with ``--head 128`` Qwen3's, every row of mean pooling in
baskets of 128) this builds two
kernels for sm_90 (H100, H200) with Triton's own compiler: the fused calibrated kernel and the plain flash-attention
loop of ``bench_kernels.py`` (``plain_triton_attention``: same setting, same reads of key and value blocks, no
calibration). It disassembles each (``nvdisasm``, in Triton's wheel), finds the loop that runs the tensor-core
instructions (``HGMMA``), and counts the instructions one thread runs in a pass of it (one key block), along the
pass with the fewest and the one with the most, by kind along the fewest. The fused/plain ratios say how much more
work a key block costs the fused kernel than the loop it cannot beat, the figure a GPU run's ``fused x plain loop``
column times. Also: registers and spills (``ptxas -v``), shared
memory, and the waits for the tensor cores inside the loop (``WARPGROUP.DEPBAR``): a wait right after each matrix
product means the softmax does not overlap the tensor cores, as it does in hand-written Hopper kernels.

    python benchmarks/gpu/kernel_loop.py                 # every setting: a table, then one JSON line per kernel
    python benchmarks/gpu/kernel_loop.py --settings default
    python benchmarks/gpu/kernel_loop.py --head 128 --settings tuning
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from bench_kernels import TUNING, _plain_attention_kernel  # neighbours: run as a script, this folder is on the path
from kernel_build import compile_fused, compile_kernel, register_use
from triton.backends.nvidia.compiler import get_ptxas

from mteb_fairpos import triton_attention

FLOATING = ("FFMA", "FADD", "FMUL", "FMNMX", "FSEL", "FSETP", "MUFU", "F2FP")
"""Floating-point instructions on the CUDA cores (MUFU: exp2; F2FP: packing fp32 to bf16)."""
BASKET = 128


def loop_passes(cubin: bytes, which: int = 0) -> tuple[list[str], list[str]] | None:
    """The instructions (without predicates) one thread runs in a pass of one of the binary's main loops, those that
    hold tensor-core instructions (``HGMMA`` on Hopper, ``HMMA`` before), in the order of the code: ``which`` 0, the
    first (where the kernel runs its whole key blocks in a loop of their own, that one), 1 the next (then the masked
    blocks' loop), ``None`` where there is no such loop. Along its fewest and its most instructions: a pass takes
    one side of each branch inside (a key block with or without its mask; a basket closed or not). A branch out of
    the loop that comes back (a retried wait on a barrier) counts as not taken, and the unconditional jump back from
    such a wait closes no loop."""
    nvdisasm = Path(get_ptxas(90).path).with_name("nvdisasm")
    with tempfile.TemporaryDirectory() as folder:
        binary = Path(folder) / "kernel.cubin"
        binary.write_bytes(cubin)
        listing = subprocess.run([str(nvdisasm), "-c", str(binary)], check=True, capture_output=True, text=True).stdout
    code: list[str] = []
    predicated: list[bool] = []
    labels: dict[str, int] = {}
    for line in listing.splitlines():
        label = re.match(r"\s*(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(code)
        instruction = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?(.*?)\s*;", line)
        if instruction:
            predicated.append(instruction.group(1) is not None)
            code.append(instruction.group(2))
    # a branch: "@P0 BRA `(.L_x_3)" or, on Hopper, "BRA P0, `(.L_x_3)" (conditional), "BRA `(.L_x_3)" (not)
    branches = [re.match(r"BRA(?:\.\w+)*\s+(!?U?P[0-6T],\s*)?`\((\.L_x_\d+)\)", text) for text in code]
    target = [labels.get(m.group(2)) if m else None for m in branches]
    predicated = [before or bool(m and m.group(1) and m.group(1).strip(", ") != "PT") for before, m in zip(predicated, branches)]
    loops = sorted((target[end], end) for end in range(len(code)) if target[end] is not None and target[end] <= end
                   and predicated[end] and any(text.startswith(("HGMMA", "HMMA")) for text in code[target[end]:end]))
    if which == 0 and not loops:
        raise ValueError("no loop with tensor-core instructions in the binary")
    if which >= len(loops):
        return None
    first, last = loops[which]
    # every path from the loop's first instruction to its backward branch: branches inside go forward
    paths: dict[int, tuple[list[str], list[str]]] = {first: ([], [])}
    for at in range(first, last + 1):
        if at not in paths:
            continue
        fewest, most = (path + [code[at]] for path in paths.pop(at))
        if at == last:
            return fewest, most
        jump = target[at]
        onward = ([at + 1] if predicated[at] or jump is None or not first < jump <= last else []) + \
                 ([jump] if jump is not None and at < jump <= last else [])
        for step in onward or [at + 1]:
            known = paths.get(step)
            paths[step] = (fewest if known is None or len(fewest) < len(known[0]) else known[0],
                           most if known is None or len(most) > len(known[1]) else known[1])
    raise ValueError("the loop's backward branch is not reached from its first instruction")


def measure(name: str, compiled) -> dict:
    """One kernel's row: the instructions of a pass of its loop (fewest and most, by kind along the fewest; where the
    masked blocks run in a loop of their own, its pass too), registers, spills, shared memory."""
    fewest, most = loop_passes(compiled.asm["cubin"])
    masked_loop = loop_passes(compiled.asm["cubin"], 1)
    ops = collections.Counter(text.split()[0].split(".")[0] for text in fewest)
    registers, spills = register_use(compiled, 90)
    return {"kernel": name, "instructions": len(fewest), "most": len(most), "floating": sum(ops[op] for op in FLOATING),
            **{op: ops[op] for op in FLOATING}, "tensor": ops["HGMMA"] + ops["HMMA"],
            "tensor_waits": sum(text.startswith("WARPGROUP.DEPBAR") for text in fewest),
            "registers": registers, "spills": spills, "shared": compiled.metadata.shared,
            "masked_loop": [len(path) for path in masked_loop] if masked_loop else None}


def compile_plain(config, head: int) -> object:
    """``bench_kernels.py``'s plain Triton loop, compiled for sm_90 as the fused kernel is (bf16, head size ``head``)."""
    block = f"tensordesc<bf16[1,1,{config.block_n},{head}]>" if config.tma else "*bf16"
    types = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "KD": block, "VD": block, "Out": "*bf16", "scale_log2": "fp32"}
    constants = dict(HEAD_DIM=head, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=False,
                     DOT_PRECISION="tf32", TMA=config.tma)
    aligned = ("Q", "K", "V", "Out") + (() if config.tma else ("KD", "VD"))
    return compile_kernel(_plain_attention_kernel(), 90, types, constants, aligned, config)


def settings(which: str, head: int) -> dict[str, object]:
    """Name -> launch setting: ``default`` (CONFIGS' for this shape on Hopper), ``tuning`` (bench_kernels.TUNING), or
    both (``all``)."""
    found = {}
    if which in ("default", "all"):
        found["default"] = triton_attention.launch_config(torch.bfloat16, head, False, 90, BASKET)
    if which in ("tuning", "all"):
        for setting in TUNING:
            config = triton_attention.LaunchConfig(*setting)
            found[setting_name(config)] = config
    return found


def setting_name(config) -> str:
    """``64x128 w4 s3``, with `` tma`` where the setting reads blocks through tensor descriptors."""
    return f"{config.block_m}x{config.block_n} w{config.num_warps} s{config.num_stages}" + " tma" * config.tma


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", choices=("default", "tuning", "all"), default="all")
    parser.add_argument("--head", type=int, choices=(64, 128), default=64,
                        help="head size: gte's 64 (the default) or Qwen3's 128")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        parser.error("unset TRITON_INTERPRET: the interpreter gives no compilable kernel")
    rows = []
    for name, config in settings(args.settings, args.head).items():
        fused = measure("fused", compile_fused(90, torch.bfloat16, args.head, False, False, BASKET, config=config)[0])
        plain = measure("plain", compile_plain(config, args.head))
        rows.append((name, {**fused, "tma": config.tma}, {**plain, "tma": config.tma}))
    print("Instructions per thread in one pass of the loop, fused / plain (the fewest; the most, where a block is masked "
          "or a basket closed); by kind along the fewest\n")
    print("| setting | instructions | the most | floating point | exp2 (MUFU) | tensor (HGMMA) | waits for the tensor "
          "cores | registers | spills |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, fused, plain in rows:
        ratio = ("instructions", "most", "floating")
        cells = [f"{fused[key]} / {plain[key]}" + (f" = {fused[key] / plain[key]:.2f}" if key in ratio else "")
                 for key in ("instructions", "most", "floating", "MUFU", "tensor", "tensor_waits", "registers", "spills")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nThrough descriptors, a pass of the masked blocks' own loop (fewest; most), fused / plain\n")
    for name, fused, plain in rows:
        if fused["masked_loop"]:
            print(f"- {name}: " + "; ".join(f"{f} / {p}" for f, p in zip(fused["masked_loop"], plain["masked_loop"])))
    for name, fused, plain in rows:
        for row in (fused, plain):
            print(json.dumps({"setting": name, **row}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
