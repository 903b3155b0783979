"""Results folders written as mteb writes them, for the tests of the reader, ``compare`` and the leaderboard:
one writer and one entry builder per task family, and the unreadable files a folder may hold."""

from __future__ import annotations

import json
from pathlib import Path


def register_tasks() -> None:
    """The plugin's tasks and the tiny in-memory retrieval task, so that mteb knows every result's task."""
    import fairpos_tiny_tasks
    from mteb_fairpos.mteb_plugin import register

    register()
    fairpos_tiny_tasks.register()


def write_result(root: Path, model: str, revision: str, task: str, scores: dict, *, meta: bool = True) -> Path:
    """``<root>/<model>/<revision>/<task>.json`` (and its ``model_meta.json`` unless ``meta`` is False)."""
    folder = root / model.replace("/", "__") / revision
    folder.mkdir(parents=True, exist_ok=True)
    if meta:
        (folder / "model_meta.json").write_text(json.dumps({"name": model, "revision": revision, "loader": "FairEncoder"}))
    path = folder / f"{task}.json"
    path.write_text(json.dumps({"dataset_revision": "1", "task_name": task, "mteb_version": "2.26.24",
                                "scores": scores, "evaluation_time": 1.0, "kg_co2_emissions": None}))
    return path


def retrieval_entry(main: float, profile: dict[str, float] | None = None, psi: float | None = None) -> dict:
    """A position-grouped retrieval entry: nDCG@10, ``position_<group>`` and, where given, PSI."""
    entry = {"hf_subset": "default", "languages": ["eng-Latn"], "main_score": main, "ndcg_at_10": main}
    entry.update({f"position_{k}": v for k, v in (profile or {}).items()})
    if psi is not None:
        entry["psi"] = psi
    return entry


def probe_entry(subset: str, means: list[float], seed: int = 42) -> dict:
    """A permutation-probe subset: its profile with 95 % intervals, its betas and the settings it records."""
    entry = {"hf_subset": subset, "languages": ["eng-Latn"], "main_score": min(means) / max(means),
             "position_fairness": min(means) / max(means), "corpus": "manpages", "corpus_fingerprint": "1a2b3c4d5e6f",
             "num_segment_sets": 10, "seed": seed, "model_max_length": 512}
    for p, mean in enumerate(means, start=1):
        entry.update({f"position_{p}": mean, f"position_{p}_ci_low": mean - 0.02, f"position_{p}_ci_high": mean + 0.02})
        if p > 1:
            entry.update({f"beta_{p}": mean - means[0], f"beta_{p}_se": 0.01, f"beta_{p}_pvalue": 0.0004})
    return entry


def posir_entry(subset: str, ndcg: float, cells: dict) -> dict:
    """A PosIR (language, domain) subset with the per-cell counts its per-language pooling needs."""
    n = sum(count for bins in cells.values() for count, _ in bins.values())
    return {"hf_subset": subset, "languages": [subset.split(".")[0]], "main_score": ndcg, "ndcg_at_10": ndcg,
            "n_queries": n, "cells": cells, "psi": 0.0, "position_0.00-0.05": ndcg}


def add_unreadable(root: Path, folder: Path) -> None:
    """A foreign JSON file and a corrupt one in ``folder``, and a stray text file in ``root``."""
    (folder / "Notes.json").write_text(json.dumps({"hello": "world"}))
    (folder / "Broken.json").write_text('{"task_name": "Broken", "scores": ')
    (root / "README.txt").write_text("not results")


def write_grouped_result(root: Path, model: str, revision: str, scores: dict[str, float], groups: dict[str, str]) -> Path:
    """A SQuAD-PosQ result and its per-query sidecar, as a run writes them: the entry from the task's own
    ``task_specific_scores`` (``groups``: query id -> its answer-start group; three questions per passage, in id
    order), the sidecar from the rows it hands over, through the writer mteb's save calls."""
    from mteb_fairpos.results import units
    from mteb_fairpos.tasks._base import retrieval_split, with_groups
    from mteb_fairpos.tasks.posq import SQuADPosQ

    task = SQuADPosQ()
    passages = {q: f"passage-{i // 3}" for i, q in enumerate(sorted(scores))}  # three questions per passage
    split = retrieval_split(dict.fromkeys(passages.values(), "text"), dict.fromkeys(scores, "question?"), passages)
    task.dataset = {"default": {"test": with_groups(split, {q: (g,) for q, g in groups.items()}, {})}}
    entry = task.task_specific_scores({q: {"ndcg_cut_10": v} for q, v in scores.items()}, split["relevant_docs"],
                                      {}, hf_split="test", hf_subset="default")
    entry.update({"hf_subset": "default", "languages": ["eng-Latn"], "main_score": entry["harmonic_mean"],
                  "ndcg_at_10": sum(scores.values()) / len(scores)})
    path = write_result(root, model, revision, "SQuADPosQ", {"test": [entry]})
    units.write_beside(path, "SQuADPosQ", {"test": [entry]}, model, revision)
    return path


def simulated_queries(n: int, seed: int) -> tuple[dict[str, float], dict[str, str]]:
    """``n`` queries spread over SQuAD-PosQ's groups with nDCG-like scores in [0, 1] (seeded)."""
    import numpy as np

    from mteb_fairpos.tasks.posq import SQUAD_GROUPS

    rng = np.random.default_rng(seed)
    ids = [f"q{i:04d}" for i in range(n)]
    return dict(zip(ids, rng.beta(2.0, 1.5, n).tolist())), {q: SQUAD_GROUPS[i % len(SQUAD_GROUPS)] for i, q in enumerate(ids)}


def simulated_probe_rows(seed: int, *, sets: int = 12, topics: int = 8, shift: float = 0.0, prefix: str = "") -> dict:
    """A probe subset's observations as its sidecar holds them (seeded): ``sets`` segment sets of three of
    ``topics`` topics (so sets share topics), every order of each set a document, sigma lower at later
    positions (``shift`` lowers position 3 further); ``prefix`` renames the documents (another corpus)."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(seed)
    effect = rng.normal(0.0, 0.03, topics)
    columns: dict[str, list] = {"unit": [], "group": [], "score": [], "segment_set": [], "topic": []}
    document = 0
    for _ in range(sets):
        members = sorted(rng.choice(topics, 3, replace=False).tolist())
        for order in itertools.permutations(members):
            for position, topic in enumerate(order, start=1):
                sigma = 0.6 - 0.04 * position - (shift if position == 3 else 0.0) + effect[topic] + rng.normal(0.0, 0.02)
                for name, value in (("unit", f"{prefix}{document}:{position}"), ("group", str(position)), ("score", sigma),
                                    ("segment_set", "|".join(f"t{m}" for m in members)), ("topic", f"t{topic}")):
                    columns[name].append(value)
            document += 1
    return columns


def write_probe_result(root: Path, model: str, revision: str, subsets: dict[str, dict], *, resamples: int, seed: int) -> Path:
    """A permutation-probe result and its per-observation sidecar, as a run writes them: per subset an entry
    whose profile is the rows' per-position means, recording the bootstrap settings and the rows' digest."""
    import numpy as np

    from mteb_fairpos.results import units

    task, entries = "PermutationFairnessSample", []
    for subset, columns in subsets.items():
        measured = {"tau": np.asarray(columns["tau"], dtype=np.float32)} if "tau" in columns else {}
        table = units.rows(columns["unit"], columns["group"], columns["score"],
                           segment_set=columns["segment_set"], topic=columns["topic"], **measured)
        scores = table.column("score").to_numpy().astype(np.float64)
        positions = np.asarray(columns["group"], dtype=int)
        entry = probe_entry(subset, [float(scores[positions == p].mean()) for p in range(1, positions.max() + 1)])
        if measured:  # the tau profile, as a mean-pooled model's entry holds it
            tau = measured["tau"].astype(np.float64)
            entry.update({f"tau_position_{p}": float(tau[positions == p].mean()) for p in range(1, positions.max() + 1)})
        entry.update({"bootstrap_resamples": resamples, "bootstrap_seed": seed, "bootstrap_units": "segment sets and topics"})
        entry[units.DIGEST] = units.hand_over(task, "test", subset, table, kind="probe")
        entries.append(entry)
    path = write_result(root, model, revision, task, {"test": entries})
    units.write_beside(path, task, {"test": entries}, model, revision)
    return path
