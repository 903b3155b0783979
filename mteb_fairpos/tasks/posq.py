"""SQuAD-PosQ and FineWeb-PosQ (docs/method.md#s3-2, #s3-3) as mteb retrieval tasks with position groups.

Both are full-corpus retrieval: the corpus is every distinct passage of the dataset, a query's
only relevant passage is the one it was asked about. Scores: mteb's usual retrieval metrics plus
nDCG@10 per position group (``position_<group>``), their harmonic mean (the main score) and PSI.

* ``SQuADPosQ``: SQuAD v2 train + validation, unanswerable questions dropped, grouped by the
  character offset of the first answer: ``[0,100) [100,200) [200,300) [300,400) [400,500)
  [500,3120]``. The original script used closed intervals on both ends, so an offset of exactly
  100, 200, ... counted in two groups; here every bin is half-open (the last one also holds
  3120), so each question is in exactly one group. ``SQuADPosQTiny``: 10,000 questions drawn by a
  seeded shuffle (seed 42); the corpus stays complete.
* ``FineWebPosQ``: rows with a question are queries, tagged ``beginning`` / ``middle`` / ``end``
  (``span_class``, one or two tags; a question with two tags counts in both groups, one with any
  other tag is counted and left out); rows without a question are corpus only. ``FineWebPosQTiny``: after a seeded shuffle (seed 42) the first
  1,000 questions of each tag, each question once (as the authors' ``--query_sampling``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from datasets import load_dataset

from ..config import require_positive
from ._base import (DatasetSchemaError, PositionGroupedRetrieval, check_columns, first_unreadable, retrieval_split,
                    unique_passages)
from .grouped_metrics import bin_index, bin_label
from .metadata import FairPosTaskMetadata

TINY_SEED = 42

SQUAD_EDGES: tuple[int, ...] = (0, 100, 200, 300, 400, 500, 3120)
SQUAD_GROUPS: tuple[str, ...] = tuple(bin_label(lo, hi) for lo, hi in zip(SQUAD_EDGES, SQUAD_EDGES[1:]))
SQUAD_SPLITS: tuple[str, ...] = ("train", "validation")
SQUAD_COLUMNS: tuple[str, ...] = ("id", "context", "question", "answers")

FINEWEB_GROUPS: tuple[str, ...] = ("begin", "middle", "end")
FINEWEB_TAGS = {"beginning": "begin", "begin": "begin", "middle": "middle", "end": "end"}
FINEWEB_SPLIT = "train"
FINEWEB_COLUMNS: tuple[str, ...] = ("question", "content", "span_class")

_POSQ_CITATION = r"""@inproceedings{zeng2025positionbias,
  title = {An Empirical Study of Position Bias in Modern Information Retrieval},
  author = {Zeng, Ziyang and Zhang, Dun and Li, Jiacheng and Zou, Panxiang and Zhou, Yudong and Yang, Yuqing},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2025},
  year = {2025},
}"""


def load_hf_split(source: str, revision: str | None, split: str, required: tuple[str, ...], name: str) -> Any:
    """One split of a dataset (hub id or local copy), with a clear error for a missing split or column."""
    import pyarrow as pa
    from datasets.exceptions import DatasetGenerationError

    local = Path(source)
    try:
        data = load_dataset(source, split=split, revision=revision,
                            **({"cache_dir": local_cache(local)} if local.is_dir() else {}))
    except (DatasetGenerationError, StopIteration, pa.ArrowException) as err:  # a damaged file, named where it can be
        where = first_unreadable(local) if local.is_dir() else None
        raise DatasetSchemaError(f"{name}: {where}." if where else
                                 f"{name}: {source} cannot be read ({err.__cause__ or err!r}).") from None
    except ValueError as err:
        if "split" in str(err).lower():
            raise DatasetSchemaError(f"{name}: {source} has no split {split!r} ({err}).") from err
        raise
    check_columns(data.column_names, required, f"{name} split {split!r} of {source}")
    return data


def local_cache(folder: Path) -> str:
    """Where datasets caches a local copy: a folder of its own for these files as they are now. datasets keys its
    cache of a local folder by the folder's name and file patterns, not their contents, so a changed copy, or another
    copy under the same name, would be served the rows cached from the first one read."""
    import hashlib

    import datasets

    digest = hashlib.sha256(str(folder.resolve()).encode("utf-8"))
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"\0{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode("utf-8"))
    return str(Path(datasets.config.HF_DATASETS_CACHE) / "mteb-fairpos-local" / digest.hexdigest()[:20])


def _take_seeded(items: list[Any], n: int | None, seed: int = TINY_SEED) -> list[Any]:
    if n is None or n >= len(items):
        return items
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    return shuffled[:n]


def _metadata(name: str, path: str, description: str, reference: str, *, license: str, domains: list[str],
              date: tuple[str, str], annotations: str, creation: str) -> FairPosTaskMetadata:
    return FairPosTaskMetadata(
        name=name,
        description=description,
        reference=reference,
        dataset={"path": path, "revision": "main"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="harmonic_mean",
        date=date,
        domains=domains,
        task_subtypes=["Question answering"],
        license=license,
        annotations_creators=annotations,
        dialect=[],
        sample_creation=creation,
        bibtex_citation=_POSQ_CITATION,
    )


def _variant(metadata: FairPosTaskMetadata, name: str, description: str) -> FairPosTaskMetadata:
    """A sampled variant of a task: the same dataset and metadata under its own name."""
    return metadata.model_copy(update={"name": name, "description": description})


def _positive(name: str, value: int | None) -> int | None:
    if value is not None:
        require_positive(value, name)
    return value


class SQuADPosQ(PositionGroupedRetrieval):
    """SQuAD-PosQ: SQuAD v2 questions grouped by where their answer starts (docs/method.md#s3-2)."""

    hub_id = "rajpurkar/squad_v2"
    position_groups = SQUAD_GROUPS
    n_queries: int | None = None

    metadata = _metadata(
        "SQuADPosQ",
        "rajpurkar/squad_v2",
        "Position-aware retrieval on SQuAD v2 (train + validation, answerable questions) over every "
        "distinct context; nDCG@10 per answer-start group [0,100) ... [500,3120] (half-open), their "
        "harmonic mean (main score) and the Position Sensitivity Index.",
        "https://arxiv.org/abs/2505.13950",
        license="cc-by-sa-4.0",
        domains=["Encyclopaedic", "Written"],
        date=("2016-01-01", "2018-06-30"),
        annotations="human-annotated",
        creation="found",
    )

    def __init__(self, data_dir: Any = None, n_queries: int | None = None, **kwargs: Any) -> None:
        super().__init__(data_dir=data_dir, **kwargs)
        if _positive("n_queries", n_queries) is not None:
            self._name_the_settings(queries=None if n_queries == self.n_queries else n_queries)
            self.n_queries = n_queries

    def _build(self, source: str, revision: str | None) -> tuple[dict[str, Any], dict[str, tuple[str, ...]], dict[str, int]]:
        contexts: list[str] = []
        candidates: list[tuple[str, str, str, str]] = []  # (id, question, context, group)
        skipped = {"unanswerable": 0, "no_question": 0, "answer_start_outside_bins": 0, "duplicate_id": 0}
        seen: set[str] = set()
        for split in SQUAD_SPLITS:
            rows = load_hf_split(source, revision, split, SQUAD_COLUMNS, self.metadata.name)
            columns = rows.select_columns(list(SQUAD_COLUMNS)).to_dict()
            for row, (qid, context, question, answers) in enumerate(zip(
                columns["id"], columns["context"], columns["question"], columns["answers"]
            )):
                where = f"{self.metadata.name}: split {split!r} of {source}, row {row} (id {qid!r})"
                contexts.append(_passage(context, where, "context"))
                starts = (answers or {}).get("answer_start") or []
                if not starts:
                    skipped["unanswerable"] += 1
                    continue
                if not isinstance(question, str) or not question.strip():
                    skipped["no_question"] += 1
                    continue
                if qid in seen:
                    skipped["duplicate_id"] += 1
                    continue
                seen.add(qid)
                index = bin_index(float(starts[0]), SQUAD_EDGES)
                if index is None:
                    skipped["answer_start_outside_bins"] += 1
                    continue
                candidates.append((str(qid), question, context, SQUAD_GROUPS[index]))
        passage_ids = unique_passages(contexts, "squad-")
        chosen = _take_seeded(candidates, self.n_queries)
        queries = {qid: question for qid, question, _, _ in chosen}
        relevant = {qid: passage_ids[context] for qid, _, context, _ in chosen}
        memberships = {qid: (group,) for qid, _, _, group in chosen}
        corpus = {pid: text for text, pid in passage_ids.items()}
        return retrieval_split(corpus, queries, relevant), memberships, skipped


class SQuADPosQTiny(SQuADPosQ):
    """SQuAD-PosQ with 10,000 questions drawn by a seeded shuffle; the corpus stays complete."""

    n_queries = 10_000
    metadata = _variant(
        SQuADPosQ.metadata,
        "SQuADPosQTiny",
        "SQuAD-PosQ restricted to 10,000 answerable questions drawn by a seeded shuffle (seed 42), "
        "retrieving over the full set of distinct contexts.",
    )


def _passage(text: Any, where: str, column: str) -> str:
    """A passage of the corpus as given, or an error naming its row: every passage is embedded, so one
    without text cannot be skipped without changing the corpus the questions are searched in."""
    if not isinstance(text, str):
        raise DatasetSchemaError(f"{where} has no {column} text (it holds {text!r}).")
    return text


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class FineWebPosQ(PositionGroupedRetrieval):
    """FineWeb-PosQ: questions about the beginning, middle or end of long web passages (docs/method.md#s3-3)."""

    hub_id = "NovaSearch/FineWeb-PosQ"
    position_groups = FINEWEB_GROUPS
    per_group: int | None = None

    metadata = _metadata(
        "FineWebPosQ",
        "NovaSearch/FineWeb-PosQ",
        "Position-aware retrieval over 500-1,024-word FineWeb-edu passages with questions about their "
        "beginning, middle or end; nDCG@10 per group (a question with two tags counts in both), their "
        "harmonic mean (main score) and the Position Sensitivity Index.",
        "https://arxiv.org/abs/2505.13950",
        license="odc-by",
        domains=["Web", "Written"],
        date=("2024-01-01", "2025-05-31"),
        annotations="LM-generated",
        creation="LM-generated and verified",
    )

    def __init__(self, data_dir: Any = None, per_group: int | None = None, **kwargs: Any) -> None:
        super().__init__(data_dir=data_dir, **kwargs)
        if _positive("per_group", per_group) is not None:
            self._name_the_settings(per_group=None if per_group == self.per_group else per_group)
            self.per_group = per_group

    def _build(self, source: str, revision: str | None) -> tuple[dict[str, Any], dict[str, tuple[str, ...]], dict[str, int]]:
        rows = load_hf_split(source, revision, FINEWEB_SPLIT, FINEWEB_COLUMNS, self.metadata.name)
        columns = rows.select_columns(list(FINEWEB_COLUMNS)).to_dict()
        skipped = {"no_span_class": 0, "unknown_span_class": 0}
        candidates: list[tuple[str, str, str, tuple[str, ...]]] = []
        contents: list[str] = []
        width = len(str(max(len(columns["content"]) - 1, 0)))
        for row, (question, content, span_class) in enumerate(
            zip(columns["question"], columns["content"], columns["span_class"])
        ):
            contents.append(_passage(content, f"{self.metadata.name}: row {row} of {source}", "content"))
            if not question or not str(question).strip():
                continue  # corpus-only row
            tags = _tags(span_class)
            if not tags:
                skipped["no_span_class"] += 1
                continue
            if any(tag not in FINEWEB_TAGS for tag in tags):  # a tag half understood would place the question wrongly
                skipped["unknown_span_class"] += 1
                continue
            groups = tuple(dict.fromkeys(FINEWEB_TAGS[tag] for tag in tags))
            candidates.append((f"fwq-{row:0{width}d}", str(question), content, groups))
        if self.per_group is not None:
            candidates = self._sample(candidates, self.per_group)
        passage_ids = unique_passages(contents, "fineweb-")
        queries = {qid: question for qid, question, _, _ in candidates}
        relevant = {qid: passage_ids[content] for qid, _, content, _ in candidates}
        memberships = {qid: groups for qid, _, _, groups in candidates}
        corpus = {pid: text for text, pid in passage_ids.items()}
        return retrieval_split(corpus, queries, relevant), memberships, skipped

    @staticmethod
    def _sample(candidates: list[Any], per_group: int) -> list[Any]:
        shuffled = list(candidates)
        random.Random(TINY_SEED).shuffle(shuffled)
        chosen: dict[str, Any] = {}
        for group in FINEWEB_GROUPS:
            for item in [c for c in shuffled if group in c[3]][:per_group]:
                chosen.setdefault(item[0], item)
        return list(chosen.values())


class FineWebPosQTiny(FineWebPosQ):
    """FineWeb-PosQ with 1,000 seeded questions per position tag (about 3,000 questions)."""

    per_group = 1_000
    metadata = _variant(
        FineWebPosQ.metadata,
        "FineWebPosQTiny",
        "FineWeb-PosQ restricted to the first 1,000 questions of each position tag after a seeded "
        "shuffle (seed 42), each question once, retrieving over the full passage set.",
    )
