"""The leaderboard page of a full sweep: how long it takes to build and how big it is.

A synthetic results folder in mteb's layout: 5 base models, each its uncalibrated twin and 13
calibration configs (70 models), over the FairPos benchmark (SQuADPosQ, FineWebPosQ, PosIR with 310
subsets, PosIRCrossLingual with 248, PermutationFairness with its subsets and their intervals).
The baseline, measured in the same run, is reading that folder with ``collect`` (what ``compare``
does before it prints anything); printed are both times, their ratio and the page's size against
the targets (built in < 30 s, page < 5 MB), and, where Debian's chromium and Playwright are
installed, how long the page takes to open, sort and filter there.

Usage::

    python benchmarks/bench_leaderboard.py
    python benchmarks/bench_leaderboard.py --keep fairpos-output/bench-site   # keep the page to open it
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mteb_fairpos.mteb_models import BASE_MODELS, calibrated_name, twin_name  # noqa: E402
from mteb_fairpos.mteb_plugin import register  # noqa: E402
from mteb_fairpos.results import collect  # noqa: E402
from mteb_fairpos.results.schema import Counts, Estimate, Profile, ScoreEntry, Settings, dump  # noqa: E402
from mteb_fairpos.grid import grid  # noqa: E402
from mteb_fairpos.tasks.grouped_metrics import LENGTH_BUCKETS, POSITION_BINS  # noqa: E402

CONFIGS = grid([64, 128], ["half", "last"], [0.25, 0.5, 1.0]) + grid([256], ["half"], [0.5])
SUBSETS = {"PosIR": 310, "PosIRCrossLingual": 248}


def entries(task, rng: random.Random, quality: float) -> list[dict]:
    """Synthetic score entries, written through the results schema as the tasks write theirs."""
    name = task.metadata.name
    if name.startswith("PermutationFairness"):
        return [probe_entry(subset, rng, quality) for subset in task.metadata.hf_subsets]
    if name in SUBSETS:
        return [posir_entry(subset, rng, quality) for subset in task.metadata.hf_subsets[:SUBSETS[name]]]
    values = [quality * rng.uniform(0.7, 1.0) for _ in range(10)]
    main = sum(values) / len(values)
    profile = Profile({str(k): Estimate(v) for k, v in enumerate(values)})
    return [{"hf_subset": "default", "languages": ["eng-Latn"], "main_score": main, "ndcg_at_10": main,
             **dump(ScoreEntry(profiles={"": profile}))}]


def probe_entry(subset: str, rng: random.Random, quality: float) -> dict:
    n = int(subset[1])
    means = [quality * rng.uniform(0.5, 0.7) for _ in range(n)]
    fairness = min(means) / max(means)
    profile = Profile({str(p): Estimate(mean, ci_low=mean - 0.02, ci_high=mean + 0.02)
                       for p, mean in enumerate(means, start=1)}, fairness=fairness)
    terms = {f"beta_{p}": Estimate(means[p - 1] - means[0], se=0.01, pvalue=0.01) for p in range(2, n + 1)}
    entry = ScoreEntry(profiles={"": profile}, terms=terms,
                       settings=Settings(corpus="wiki_comparable_corpus", hash="1a2b3c4d5e6f", sets=10, seed=42,
                                         model_length=8192))
    return {"hf_subset": subset, "languages": ["eng-Latn"], "main_score": fairness, **dump(entry)}


def posir_entry(subset: str, rng: random.Random, quality: float) -> dict:
    """A (language, domain) subset of ~40 queries: that many (length bucket, position bin) cells at most."""
    cells: dict[str, dict[str, list]] = {bucket: {} for bucket, _, _ in LENGTH_BUCKETS}
    for _ in range(40):
        cell = cells[rng.choice(LENGTH_BUCKETS)[0]].setdefault(rng.choice(POSITION_BINS), [0, 0.0])
        cell[0] += 1
        cell[1] += quality * rng.uniform(0.4, 1.0)
    n = sum(c for bins in cells.values() for c, _ in bins.values())
    ndcg = sum(t for bins in cells.values() for _, t in bins.values()) / n
    entry = ScoreEntry(psi=0.1, counts=Counts(queries=n), details={"cells": cells})
    return {"hf_subset": subset, "languages": [subset.split(".")[0]], "main_score": ndcg, "ndcg_at_10": ndcg,
            **dump(entry)}


def write_sweep(root: Path) -> int:
    import mteb

    tasks = [mteb.get_task(name) for name in ("SQuADPosQ", "FineWebPosQ", "PosIR", "PosIRCrossLingual", "PermutationFairness")]
    rng = random.Random(0)
    files = 0
    for base in BASE_MODELS:
        for k, name in enumerate([twin_name(base)] + [calibrated_name(base, c) for c in CONFIGS]):
            revision = base.weights_revision or "no_revision_available"
            folder = root / name.replace("/", "__") / revision
            folder.mkdir(parents=True)
            (folder / "model_meta.json").write_text(json.dumps({"name": name, "revision": revision}))
            for task in tasks:
                result = {"dataset_revision": "1", "task_name": task.metadata.name, "mteb_version": "2.26.24",
                          "scores": {"test": entries(task, rng, 0.6 + 0.01 * k)}, "evaluation_time": 1.0, "kg_co2_emissions": None}
                (folder / f"{task.metadata.name}.json").write_text(json.dumps(result))
                files += 1
    return files


def browse(page: Path) -> None:
    """Open the page in headless chromium from disk; time the load, one sort and one filter."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        print("in the browser: skipped (no chromium or playwright)")
        return
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        start = time.perf_counter()
        tab.goto(page.as_uri())
        opened = time.perf_counter() - start
        sort = tab.evaluate("""() => { const th = document.querySelector('#board th[data-col*="|psi|"]');
            const t = performance.now(); th.click(); return performance.now() - t; }""")
        filtered = tab.evaluate("""() => { const s = document.getElementById('filter-family'); s.value = 'probe';
            const t = performance.now(); s.dispatchEvent(new Event('change')); return performance.now() - t; }""")
        browser.close()
    print(f"in the browser:               opened in {opened:.1f} s, sorted in {sort:.0f} ms, filtered in {filtered:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, default=None, help="copy the page here")
    args = parser.parse_args()
    register()
    from mteb_fairpos.leaderboard import publish

    work = Path(tempfile.mkdtemp(prefix="bench-leaderboard-"))
    try:
        files = write_sweep(work / "results")
        start = time.perf_counter()
        found = collect(work / "results")
        read = time.perf_counter() - start
        start = time.perf_counter()
        board, page = publish([work / "results"], work / "site")
        built = time.perf_counter() - start
        size = page.stat().st_size / 1e6
        print(f"results: {files} files, {len(found.models)} models, {len(found.tasks)} tasks")
        print(f"read with collect (baseline): {read:6.1f} s")
        print(f"leaderboard page built:       {built:6.1f} s   ratio to the baseline {built / read:.2f}   (target < 30 s)")
        print(f"page size:                    {size:6.2f} MB  ({len(board.rows)} rows, {len(board.columns)} columns)   (target < 5 MB)")
        browse(page)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(page, args.keep / "index.html")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
