"""The results folder of the leaderboard tests: every task family, plus a partial result, a model missing
a task, and foreign and corrupt files (the page must list them). Written with `results_folders`."""

from __future__ import annotations

from pathlib import Path

import pytest
from results_folders import add_unreadable, posir_entry, probe_entry, register_tasks, retrieval_entry, write_result

RETRIEVAL = "FairPosTinyRetrieval"
PROBE = "PermutationFairnessSample"
POSIR = "PosIR"
COMMIT = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
MINILM = ("fair-off/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2-b64_llast_a1")


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
    register_tasks()


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
    add_unreadable(root, root / "fair__all-MiniLM-L6-v2" / COMMIT)
    return root.parent


@pytest.fixture
def paired_results(tmp_path) -> Path:
    """SQuAD-PosQ with per-query sidecars, as separate runs write them: the twin, a config that lifts every
    query (its changes exclude 0) and one that only adds noise (its main-score change spans 0)."""
    import numpy as np
    from results_folders import simulated_queries, write_grouped_result

    root = tmp_path / "paired" / "results"
    scores, groups = simulated_queries(400, 3)
    rng = np.random.default_rng(4)
    write_grouped_result(root, MINILM[0], COMMIT, scores, groups)
    write_grouped_result(root, MINILM[1], COMMIT, {q: min(1.0, v + 0.08 + rng.normal(0, 0.02)) for q, v in scores.items()}, groups)
    write_grouped_result(root, MINILM[2], COMMIT, {q: float(np.clip(v + rng.normal(0, 0.03), 0, 1)) for q, v in scores.items()}, groups)
    return root.parent
