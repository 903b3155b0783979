"""Gather what run.sh wrote into one Markdown file: environment, tests, kernels, calibration.

    python benchmarks/gpu/summarize.py OUT     # reads OUT/*.json and OUT/tests*.xml, writes OUT/summary.md
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_calibration import _round_median  # noqa: E402  (the median of the per-round ratios, as the benchmark takes it)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(row) + " |" for row in rows]


def _number(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def environment(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = ["## Environment", "", f"- device: {data['device']}"]
    lines += [f"- {name} {version}" for name, version in data["versions"].items()]
    lines += [f"- declared range {line}" for line in data["ranges"]]
    return lines


def tests(path: Path) -> list[str]:
    """One pytest step's counts and failures (``tests.xml``: the CUDA tests; ``tests-triton.xml``: the kernel's)."""
    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    lines = [f"## Tests ({path.name})", "", f"{counts['tests']} collected: {counts['tests'] - counts['failures'] - counts['errors'] - counts['skipped']} "
             f"passed, {counts['failures']} failed, {counts['errors']} errors, {counts['skipped']} skipped", ""]
    for case in suite.iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is not None:
                message = (found.get("message") or "").splitlines()[0][:200] if found.get("message") else ""
                lines.append(f"- {outcome}: `{case.get('name')}`: {message}")
    return lines


def fused_kernel(data: dict) -> list[str]:
    """The fused calibrated-attention kernel's table (``bench_kernels.py``'s first)."""
    rows = [[r["dtype"], r["case"], f"{r['n']}x{r['length']}", f"{r['heads']}/{r['kv_heads']} x {r['head_dim']}",
             str(r["exact"]), _number(r.get("sdpa_ms")), _number(r.get("fused_ms")), _number(r.get("path_ms")),
             _number(r.get("fused_vs_sdpa"), 2), _number(r.get("fused_vs_path"), 2),
             f"{r['max_abs_vs_path']:.2g}" if "max_abs_vs_path" in r else "-", _number(r.get("plain_triton_ms")),
             _number(r.get("fused_vs_plain_triton"), 2), _number(r.get("plain_triton_vs_sdpa"), 2)]
            for r in data.get("fused", [])]
    if not rows:
        return []
    lines = ["## Fused calibrated attention (time over SDPA on the same inputs, over the PyTorch path, and over a "
             "plain Triton loop of the same launch setting)", "",
             f"{data['device']}, torch {data['torch']}", ""]
    lines += _table(["dtype", "case", "size", "heads (q/kv x size)", "exact", "SDPA ms", "fused ms", "path ms", "x SDPA",
                     "x path", "max diff vs path", "plain loop ms", "x plain loop", "plain loop x SDPA"], rows)
    lines += [f"- {r['dtype']} {r['case']} set aside: {r['why']}" for r in data.get("fused", []) if r.get("why")]
    # bench_kernels.py --tune: the fastest exact launch setting per dtype and head size (mean rows), over SDPA, and the
    # plain Triton loop under the same setting over SDPA
    for pick in data.get("launch_configs", []):
        ratios = [f"{pick['vs_default']:.2f} x the default"]
        if "vs_sdpa" in pick:
            ratios.append(f"{pick['vs_sdpa']:.2f} x SDPA")
        if "plain_triton_vs_sdpa" in pick:
            ratios.append(f"the plain Triton loop under it {pick['plain_triton_vs_sdpa']:.2f} x SDPA")
        shape = f" ({pick['case']})" if "case" in pick else ""  # files of the first tuned run do not name it
        lines.append(f"- fastest launch setting, {pick['dtype']} mean rows, head size {pick['largest']}{shape}: "
                     f"{pick['config']} ({'; '.join(ratios)})")
    for row in [r for r in data.get("across", []) if "vs_default" in r]:  # the same setting at the other lengths
        sdpa = f"; {row['ms'] / row['sdpa_ms']:.2f} x SDPA" if "sdpa_ms" in row else ""
        lines.append(f"- {row['config']} on {row['case']} ({row['dtype']}): {row['vs_default']:.2f} x the default{sdpa}")
    return lines + [""]


def kernels(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = fused_kernel(data)
    if not data["rows"]:
        return lines
    rows = [[r["dtype"], r["mask"], f"{r['n']}x{r['length']}", r["kernel"], str(r["exact"]),
             _number(r.get("ms")), _number(r.get("vs_sdpa"), 2)] for r in data["rows"]]
    lines += ["## Kernels (one basket of 128 keys; time over plain SDPA on the same keys)", "", f"{data['device']}, torch {data['torch']}", ""]
    lines += _table(["dtype", "mask", "size", "kernel", "exact", "ms", "x SDPA"], rows)
    lines += [""] + [f"- fastest exact fused kernel for {key}: {pick['kernel']} ({pick['vs_sdpa']:.2f} x SDPA)"
                     for key, pick in data["picks"].items()]
    why = {r["kernel"]: r["why"] for r in data["rows"] if r.get("why")}
    return lines + [f"- {name} set aside: {reason}" for name, reason in why.items()]


def calibration(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = [f"## Calibration, {data['dtype']} ({path.name})", "",
             f"{data['device']}, torch {data['torch']}; random models of {data['gte_layers']} layers; {data['reps']} timed rounds; "
             f"targets {data['targets']}", ""]
    rows = []  # the round medians from the rounds' seconds: files from before the benchmark wrote them have those
    for name, case in data["cases"].items():
        if "errors" in case:
            rows.append([name, "failed: " + "; ".join(f"{k}: {v}" for k, v in case["errors"].items())[:300]] + [""] * 10)
            continue
        fast, tiled = case["fast_over_plain"], case["tiled_over_plain"]
        mb = case["tensor_mb"]
        stages = case.get("stages_fast_over_plain", {})
        rows.append([name, str(case["tokens"]), _number(case["plain_docs_per_s"], 2),
                     f"{fast['median']:.3f} ({fast['min']:.3f}-{fast['max']:.3f})", _number(_round_median(case["seconds"], "fast"), 3),
                     *(f"{stages[s]['median']:.3f}" if s in stages else "-" for s in ("forward", "preprocess")),
                     f"{tiled['median']:.3f} ({tiled['min']:.3f}-{tiled['max']:.3f})" if tiled else "-",
                     _number(case["reference_over_fast"], 2),
                     f"{mb['plain']:.0f} / {mb['fast']:.0f} = {case['memory_fast_over_plain']:.3f}",
                     _number(case["max_abs_fast_minus_reference"], 6) if case["max_abs_fast_minus_reference"] is not None else "-",
                     "yes" if case["meets_targets"] else "NO"])
    lines += _table(["case", "tokens", "plain docs/s", "fast/plain (min-max)", "median of round ratios", "forward alone",
                     "preprocessing alone", "tiled/plain", "ref time / fast",
                     "tensor MB plain / fast", "max abs fast-ref", "targets met"], rows)
    # where preprocessing plus the host's launch of a batch reaches the device's forward pass, end to end waits on the host
    hosts = [[name, *(f"{case['per_batch_ms'][stage][side]:.2f}" for stage in ("preprocess", "launch", "forward")
                      for side in ("plain", "fast")),
              *(f"{case['wrapped'][r]:.3f} ({case['wrapped'][r + '_rounds']:.3f})" if case.get("wrapped") else "-"
                for r in ("wrapped_over_plain", "fast_over_wrapped"))]
             for name, case in data["cases"].items() if "launch" in case.get("per_batch_ms", {})]
    if hosts:
        lines += ["", "Milliseconds per batch (medians over the rounds): preprocessing, the host's launch of the forward pass "
                  "(from an idle device until the call returns), the forward pass; then end to end, the calibrated model's "
                  "class with calibration off ('wrapped': its truncation count, no calibration) over plain, and fast over "
                  "it (calibration alone): ratio of medians (median of round ratios)", ""]
        lines += _table(["case", "preprocess plain", "fast", "launch plain", "fast", "forward plain", "fast",
                         "wrapped/plain", "fast/wrapped"], hosts)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the folder run.sh wrote (its --out, or $OUT there)")
    folder = Path(parser.parse_args(argv).out)
    if not folder.is_dir():
        parser.error(f"no such folder: {folder}")
    parts = [["# GPU run of the calibrated path", ""]]
    makers = [("environment.json", environment), ("tests.xml", tests), ("tests-triton.xml", tests), ("kernels.json", kernels)]
    for name, maker in makers:
        path = folder / name
        parts.append(maker(path) if path.is_file() else [f"## {name}: not written (see log.txt)"])
    parts += [calibration(path) for path in sorted(folder.glob("calibration-*.json"))]
    (folder / "summary.md").write_text("\n\n".join("\n".join(part) for part in parts) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
