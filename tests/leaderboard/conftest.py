"""Results folders for the leaderboard tests: every task family, written as mteb writes them, plus a
partial result, a model missing a task, and foreign and corrupt files (the page must list them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fairpos_tiny_tasks

RETRIEVAL = "FairPosTinyRetrieval"
PROBE = "PermutationFairnessSample"
POSIR = "PosIR"
COMMIT = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
MINILM = ("fair-off/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2-b64_llast_a1")


def write_result(root: Path, model: str, revision: str, task: str, scores: dict, *, meta: bool = True) -> Path:
    folder = root / model.replace("/", "__") / revision
    folder.mkdir(parents=True, exist_ok=True)
    if meta:
        (folder / "model_meta.json").write_text(json.dumps({"name": model, "revision": revision, "loader": "FairEncoder"}))
    path = folder / f"{task}.json"
    path.write_text(json.dumps({"dataset_revision": "1", "task_name": task, "mteb_version": "2.26.24",
                                "scores": scores, "evaluation_time": 1.0, "kg_co2_emissions": None}))
    return path


def retrieval_entry(main: float, profile: dict[str, float], psi: float | None = None) -> dict:
    entry = {"hf_subset": "default", "languages": ["eng-Latn"], "main_score": main, "ndcg_at_10": main}
    entry.update({f"position_{k}": v for k, v in profile.items()})
    if psi is not None:
        entry["psi"] = psi
    return entry


def probe_entry(subset: str, means: list[float], seed: int = 42) -> dict:
    entry = {"hf_subset": subset, "languages": ["eng-Latn"], "main_score": min(means) / max(means),
             "position_fairness": min(means) / max(means), "corpus": "manpages", "corpus_fingerprint": "1a2b3c4d5e6f",
             "num_segment_sets": 10, "seed": seed, "model_max_length": 512}
    for p, mean in enumerate(means, start=1):
        entry.update({f"position_{p}": mean, f"position_{p}_ci_low": mean - 0.02, f"position_{p}_ci_high": mean + 0.02})
        if p > 1:
            entry.update({f"beta_{p}": mean - means[0], f"beta_{p}_se": 0.01, f"beta_{p}_pvalue": 0.0004})
    return entry


def posir_entry(subset: str, ndcg: float, cells: dict) -> dict:
    n = sum(count for bins in cells.values() for count, _ in bins.values())
    return {"hf_subset": subset, "languages": [subset.split(".")[0]], "main_score": ndcg, "ndcg_at_10": ndcg,
            "n_queries": n, "cells": cells, "psi": 0.0, "position_0.00-0.05": ndcg}


def posir_entries(shift: float) -> list[dict]:
    from mteb_fairpos.tasks.grouped_metrics import empty_cells

    entries = []
    for language, base in (("deu-Latn", 0.8), ("eng-Latn", 0.7)):
        cells = empty_cells()
        cells["Q1"] = {"0.00-0.05": [3, 3 * base], "0.50-0.55": [2, 2 * (base - 0.3 + shift)]}
        cells["Q2"] = {"0.00-0.05": [1, base - 0.1], "0.95-1.00": [2, 2 * (base - 0.4 + shift)]}
        entries.append(posir_entry(f"{language}.game", base, cells))
    return entries


@pytest.fixture(scope="session", autouse=True)
def _tasks():
    from mteb_fairpos.mteb_plugin import register

    register()
    fairpos_tiny_tasks.register()


@pytest.fixture
def results(tmp_path) -> Path:
    return make_results(tmp_path)


def make_results(tmp_path: Path) -> Path:
    """A sweep of all-MiniLM-L6-v2 (twin and two configs) over a retrieval task, the probe and PosIR;
    bge-m3 calibrated only, with a partial result; foreign and corrupt files; a model missing a task."""
    root = tmp_path / "run" / "results"
    profiles = {MINILM[0]: (0.72, {"begin": 0.9, "middle": 0.7, "end": 0.6}, 0.3333),
                MINILM[1]: (0.81, {"begin": 0.85, "middle": 0.8, "end": 0.78}, 0.0824),
                MINILM[2]: (0.70, {"begin": 0.75, "middle": 0.74, "end": 0.73}, None)}
    for k, (name, (main, profile, psi)) in enumerate(profiles.items()):
        write_result(root, name, COMMIT, RETRIEVAL, {"test": [retrieval_entry(main, profile, psi)]})
        write_result(root, name, COMMIT, PROBE, {"test": [probe_entry("n3_en", [0.6, 0.6 - 0.02 * (2 - k), 0.55 + 0.02 * k]),
                                                          probe_entry("n3_de", [0.5, 0.5, 0.42 + 0.03 * k])]})
        if k < 2:
            write_result(root, name, COMMIT, POSIR, {"test": posir_entries(0.1 * k)})
    # partial: the split "test" is absent; no model_meta.json
    write_result(root, "fair/bge-m3", "b128_lhalf_a0.5", RETRIEVAL, {"dev": [retrieval_entry(0.6, {"begin": 0.7, "end": 0.5})]},
                 meta=False)
    folder = root / "fair__all-MiniLM-L6-v2" / COMMIT
    (folder / "Notes.json").write_text(json.dumps({"hello": "world"}))
    (folder / "Broken.json").write_text('{"task_name": "Broken", "scores": ')
    (root / "README.txt").write_text("not results")
    return root.parent
