"""A tiny in-memory retrieval task for the plugin tests (no data set download).

Registered with mteb in-process by the tests, and in ``mteb run`` subprocesses through
``MTEB_FAIRPOS_EXTRA_TASKS=fairpos_tiny_tasks`` (with this folder on ``PYTHONPATH``). Its scores
follow the plugin's position convention: ``position_<group>`` per position group and ``psi``.
"""

from __future__ import annotations

from datasets import Dataset
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata

from mteb_fairpos.fairness import psi

TOPICS = {
    "lighthouse": ("The lighthouse keeper", "climbed the spiral stairs at dusk and trimmed the wick of the great lamp"),
    "orchard": ("The orchard", "was pruned in late winter so that the apple trees would carry more fruit"),
    "glacier": ("The glacier", "retreated several hundred metres during the last century as summers grew warmer"),
    "bakery": ("The village bakery", "fired its wood oven before dawn and sold rye bread to the early workers"),
    "observatory": ("The mountain observatory", "recorded the passage of a bright comet across the northern sky"),
    "harbour": ("The fishing harbour", "was rebuilt with granite breakwaters after a storm destroyed the old pier"),
}
FACTS = {
    "lighthouse": "The lamp of the lighthouse was fuelled by whale oil until eighteen ninety.",
    "orchard": "The orchard's oldest pear tree was planted by a monk in the fifteenth century.",
    "glacier": "A scientist measured the glacier's ice thickness with radar from a small aircraft.",
    "bakery": "The baker won a regional prize for a cinnamon pastry shaped like a snail.",
    "observatory": "The observatory's telescope mirror was ground by hand over three long years.",
    "harbour": "The harbour master kept a ledger of every ship that sheltered there in winter.",
}
QUERIES = {
    "lighthouse": "What fuel did the lighthouse lamp use?",
    "orchard": "Who planted the oldest pear tree in the orchard?",
    "glacier": "How was the thickness of the glacier ice measured?",
    "bakery": "Which pastry won the baker a regional prize?",
    "observatory": "How was the telescope mirror of the observatory made?",
    "harbour": "What did the harbour master record in his ledger?",
}
GROUPS = ("begin", "middle", "end")


def _document(topic: str, group: str) -> str:
    subject, predicate = TOPICS[topic]
    filler = [
        f"{subject} {predicate}, as the local chronicle notes in its entry number {i}, "
        f"which describes the weather and the visitors."
        for i in range(1, 6)
    ]
    at = {"begin": 0, "middle": len(filler) // 2, "end": len(filler)}[group]
    return " ".join(filler[:at] + [FACTS[topic]] + filler[at:])


def _group_of(index: int) -> str:
    return GROUPS[index % len(GROUPS)]


class FairPosTinyRetrieval(AbsTaskRetrieval):
    """Six long documents, one question each, the answer at the begin, middle or end."""

    metadata = TaskMetadata(
        name="FairPosTinyRetrieval",
        description="A tiny in-memory position-aware retrieval task for mteb-fairpos tests.",
        dataset={"path": "mteb-fairpos/tiny-retrieval", "revision": "1"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="ndcg_at_10",
        date=("2026-01-01", "2026-01-02"),
        domains=["Written"],
        task_subtypes=[],
        license="apache-2.0",
        annotations_creators="derived",
        dialect=[],
        sample_creation="created",
        bibtex_citation="",
    )

    def load_data(self, num_proc: int | None = None, **kwargs) -> None:
        if self.data_loaded:
            return
        topics = list(TOPICS)
        corpus = Dataset.from_dict({
            "id": [f"d-{t}" for t in topics],
            "title": ["" for _ in topics],
            "text": [_document(t, _group_of(i)) for i, t in enumerate(topics)],
        })
        queries = Dataset.from_dict({"id": [f"q-{t}" for t in topics], "text": [QUERIES[t] for t in topics]})
        qrels = {f"q-{t}": {f"d-{t}": 1} for t in topics}
        self.dataset = {"default": {"test": {"corpus": corpus, "queries": queries, "relevant_docs": qrels, "top_ranked": None}}}
        self.data_loaded = True

    def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
        by_group: dict[str, list[float]] = {g: [] for g in GROUPS}
        for i, topic in enumerate(TOPICS):
            value = scores.get(f"q-{topic}", {}).get("ndcg_cut_10")
            if value is not None:
                by_group[_group_of(i)].append(float(value))
        means = {g: sum(v) / len(v) for g, v in by_group.items() if v}
        out: dict[str, float] = {f"position_{g}": m for g, m in means.items()}
        out["psi"] = psi(means.values())
        return out


class FairPosTinyTwoSubsets(FairPosTinyRetrieval):
    """The same documents as two subsets of three topics each, for code that handles subsets one by one."""

    metadata = FairPosTinyRetrieval.metadata.model_copy(update={
        "name": "FairPosTinyTwoSubsets",
        "description": "The tiny position-aware retrieval task split into two subsets.",
        "eval_langs": {"early": ["eng-Latn"], "late": ["eng-Latn"]},
    })

    def load_data(self, num_proc: int | None = None, **kwargs) -> None:
        if self.data_loaded:
            return
        topics = list(TOPICS)
        self.dataset = {}
        for subset, chosen in (("early", topics[:3]), ("late", topics[3:])):
            corpus = Dataset.from_dict({
                "id": [f"d-{t}" for t in chosen],
                "title": ["" for _ in chosen],
                "text": [_document(t, _group_of(topics.index(t))) for t in chosen],
            })
            queries = Dataset.from_dict({"id": [f"q-{t}" for t in chosen], "text": [QUERIES[t] for t in chosen]})
            qrels = {f"q-{t}": {f"d-{t}": 1} for t in chosen}
            self.dataset[subset] = {"test": {"corpus": corpus, "queries": queries, "relevant_docs": qrels,
                                             "top_ranked": None}}
        self.data_loaded = True


TASKS = [FairPosTinyRetrieval, FairPosTinyTwoSubsets]


def register() -> None:
    """Register the tiny task with mteb in this process."""
    from mteb_fairpos.mteb_plugin import register_tasks

    register_tasks(TASKS)


class FairPosTinyBroken(FairPosTinyRetrieval):
    """The tiny task with an evaluation that always fails: for code that must go on past a failed unit."""

    metadata = FairPosTinyRetrieval.metadata.model_copy(update={
        "name": "FairPosTinyBroken",
        "description": "The tiny position-aware retrieval task, failing in evaluation.",
    })

    def _evaluate_subset(self, *args, **kwargs):
        raise RuntimeError("the tiny broken task fails on purpose\n(a second line that a one-line report leaves out)")
