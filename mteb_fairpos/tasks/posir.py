"""PosIR (SPEC 3.4): position-aware retrieval in 10 languages and 31 domains.

The dataset ``infgrad/PosIR-Benchmark-v1`` is laid out ``{language}/{domain}/`` with
``queries.parquet`` (``_id, text, pos_char_span, pos_char_length, pos_token_length``),
``corpus.parquet`` (``_id, text``) and ``qrels/test.parquet`` (``query-id, corpus-id, score``);
every (language, domain) pair is its own retrieval problem with its own corpus.

Two tasks, one mteb subset per query language:

* ``PosIR``: multilingual setting, queries and corpus in the same language (10 languages);
* ``PosIRCrossLingual``: queries in a language other than English, the same domain's English
  corpus (8 languages: the parallel ones the retrieval paper reports; Chinese and English are
  not among them).

Within a language subset the domains are found in the data (the folder names), then loaded,
embedded, searched and scored **one at a time** with mteb's retrieval machinery, and freed before
the next, so memory does not grow with the number of domains. One language alone: mteb's own
language filter (``mteb.get_task("PosIR", languages=["deu"])``) or ``PosIR(languages=[...])``.
One domain alone: ``PosIR(domains=[...])`` or the environment variable
``MTEB_FAIRPOS_POSIR_DOMAINS=finance,law`` (so ``mteb run`` can do it too).

Scores of a language subset (pooled over its domains, as the PosIR protocol does):

* mteb's retrieval metrics (``ndcg_at_10`` is the main score), each the query-weighted mean over
  the domains, i.e. the mean over every query of the language;
* ``ndcg_at_10_Q1`` .. ``_Q4`` and ``psi_Q1`` .. ``_Q4``: per length bucket of the positive
  document (``pos_token_length`` in [0,512), [512,1024), [1024,1536), [1536,inf)), the unweighted
  mean over its non-empty relative-position bins and the PSI over them;
* ``position_<bin>`` for the 20 relative-position bins ``[k/20, (k+1)/20)`` (the span midpoint
  over the document length, clipped to [0, 1]; 1.0 falls in the last bin), pooled over the length
  buckets, with ``psi`` (the language's PSI) and ``harmonic_mean`` over them;
* ``domains``: per-domain nDCG@10, query count and skips; ``cells``: the per (bucket, bin) query
  counts and nDCG sums, from which any other pooling can be recomputed; ``skipped_queries``.

The PosIR authors' analysis bins with right-closed intervals (``(0,512]``, ``[0,0.05]``,
``(0.05,0.1]``, ...); SPEC 3.4 asks for the half-open ones above, which differ only for values
exactly on a boundary. `average_over_languages` gives the papers' final averages.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.timing import TimingStack

from ._base import DatasetSchemaError, PositionGroupedRetrieval, check_columns, resolve_data_dir, retrieval_split
from .grouped_metrics import (
    Cells,
    add_to_cells,
    cell_figures,
    empty_cells,
    length_bucket,
    merge_cells,
    per_query_scores,
    position_bin,
    relative_position,
)

logger = logging.getLogger(__name__)

POSIR_HUB_ID = "infgrad/PosIR-Benchmark-v1"
POSIR_LANGUAGES: tuple[str, ...] = (
    "ara-Arab", "cmn-Hans", "deu-Latn", "eng-Latn", "fra-Latn",
    "ita-Latn", "kor-Kore", "por-Latn", "rus-Cyrl", "spa-Latn",
)
CROSS_LINGUAL_LANGUAGES: tuple[str, ...] = (
    "ara-Arab", "deu-Latn", "fra-Latn", "ita-Latn", "kor-Kore", "por-Latn", "rus-Cyrl", "spa-Latn",
)
ENGLISH = "eng-Latn"
DOMAINS_ENV = "MTEB_FAIRPOS_POSIR_DOMAINS"
SPLIT = "test"

QUERY_COLUMNS = ("_id", "text", "pos_char_span", "pos_char_length", "pos_token_length")
CORPUS_COLUMNS = ("_id", "text")
QRELS_COLUMNS = ("query-id", "corpus-id", "score")
QUERIES_FILE = "queries.parquet"
CORPUS_FILE = "corpus.parquet"
QRELS_FILE = "qrels/test.parquet"

_POOLED_PREFIXES = ("ndcg_at_", "map_at_", "recall_at_", "precision_at_", "mrr_at_", "hit_rate_at_")

_POSIR_CITATION = r"""@misc{zeng2026posir,
  title = {PosIR: Position-Aware Heterogeneous Information Retrieval Benchmark},
  author = {Zeng, Ziyang and Zhang, Dun and Yan, Yu and Sun, Xu and Pan, Cuiqiaoshu and Zhou, Yudong and Yang, Yuqing},
  year = {2026},
  eprint = {2601.08363},
  archivePrefix = {arXiv},
}"""


# --------------------------------------------------------------------------- data source
class PosIRSource:
    """Reads PosIR files from a local copy or the Hugging Face hub, one file at a time."""

    def __init__(self, hub_id: str, revision: str | None, local: Path | None) -> None:
        self.hub_id = hub_id
        self.revision = revision
        self.local = local

    def __str__(self) -> str:
        return str(self.local) if self.local is not None else f"hf://datasets/{self.hub_id}"

    def domains(self, language: str) -> list[str]:
        """The domain folders of ``language`` that hold a queries file."""
        if self.local is not None:
            folder = self.local / language
            if not folder.is_dir():
                raise DatasetSchemaError(f"PosIR: {self} has no folder for language {language!r}.")
            return sorted(p.name for p in folder.iterdir() if (p / QUERIES_FILE).is_file())
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFolder

        tree = HfApi().list_repo_tree(self.hub_id, path_in_repo=language, repo_type="dataset", revision=self.revision)
        return sorted(item.path.rsplit("/", 1)[-1] for item in tree if isinstance(item, RepoFolder))

    def read(self, language: str, domain: str, name: str, columns: Sequence[str]) -> dict[str, list[Any]]:
        """The given columns of ``{language}/{domain}/{name}`` as Python lists."""
        relative = f"{language}/{domain}/{name}"
        if self.local is not None:
            path = self.local / relative
            if not path.is_file():
                raise DatasetSchemaError(f"PosIR: {path} is missing.")
        else:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(self.hub_id, relative, repo_type="dataset", revision=self.revision))
        schema = pq.read_schema(path)
        check_columns(schema.names, columns, f"PosIR file {relative} of {self}")
        return pq.read_table(path, columns=list(columns)).to_pydict()


@dataclass
class LanguageUnit:
    """What one language subset evaluates: its domains, read lazily from ``source``."""

    language: str
    corpus_language: str
    domains: list[str]
    source: PosIRSource


@dataclass
class DomainData:
    split: dict[str, Any]
    positions: dict[str, tuple[str, str] | None]
    skipped: dict[str, int]


def load_domain(unit: LanguageUnit, domain: str) -> DomainData:
    """One (language, domain): queries, corpus (of ``unit.corpus_language``), qrels, positions.

    Queries whose relevant document is absent from the corpus, or that have no qrels, are left
    out and counted; qrels of unknown queries are ignored and counted.
    """
    src = unit.source
    q = src.read(unit.language, domain, QUERIES_FILE, QUERY_COLUMNS)
    c = src.read(unit.corpus_language, domain, CORPUS_FILE, CORPUS_COLUMNS)
    r = src.read(unit.language, domain, QRELS_FILE, QRELS_COLUMNS)

    corpus: dict[str, str] = {}
    for doc_id, text in zip(c["_id"], c["text"]):
        doc_id = str(doc_id)
        if doc_id in corpus:
            raise DatasetSchemaError(f"PosIR {unit.corpus_language}/{domain}: corpus id {doc_id!r} appears twice.")
        corpus[doc_id] = text or ""

    skipped = {"relevant_doc_missing": 0, "no_qrels": 0, "qrels_of_unknown_query": 0}
    query_text = {str(i): t for i, t in zip(q["_id"], q["text"])}
    relevant: dict[str, list[str]] = {}
    for qid, doc_id, score in zip(r["query-id"], r["corpus-id"], r["score"]):
        qid, doc_id = str(qid), str(doc_id)
        if qid not in query_text:
            skipped["qrels_of_unknown_query"] += 1
        elif score is not None and score > 0:
            relevant.setdefault(qid, []).append(doc_id)

    queries: dict[str, str] = {}
    kept: dict[str, list[str]] = {}
    positions: dict[str, tuple[str, str] | None] = {}
    for qid, span, char_length, token_length in zip(
        q["_id"], q["pos_char_span"], q["pos_char_length"], q["pos_token_length"]
    ):
        qid = str(qid)
        docs = relevant.get(qid)
        if not docs:
            skipped["no_qrels"] += 1
            continue
        if any(d not in corpus for d in docs):
            skipped["relevant_doc_missing"] += 1
            continue
        queries[qid] = query_text[qid] or ""
        kept[qid] = docs
        relpos = relative_position(span, char_length)
        bucket = length_bucket(float(token_length)) if token_length is not None else None
        positions[qid] = (bucket, position_bin(relpos)) if relpos is not None and bucket is not None else None
    return DomainData(retrieval_split(corpus, queries, kept), positions, skipped)


def _selection(names: Iterable[str] | None, env: str | None) -> list[str] | None:
    if names is not None:
        chosen = [n for n in names]
    elif env and os.environ.get(env, "").strip():
        chosen = [n.strip() for n in os.environ[env].split(",") if n.strip()]
    else:
        return None
    if not chosen:
        raise ValueError("an empty selection selects nothing; pass None to keep everything.")
    return chosen


def _metadata(name: str, languages: Sequence[str], cross: bool) -> TaskMetadata:
    setting = "queries in each language, English corpus of the same domain" if cross else "queries and corpus in the same language"
    return TaskMetadata(
        name=name,
        description=(
            f"PosIR position-aware retrieval ({setting}); each (language, domain) pair has its own corpus. "
            "nDCG@10 over all queries of a language (main score), per-length-bucket nDCG@10 and PSI over 20 "
            "relative-position bins, and the language's PSI over the bins pooled across lengths."
        ),
        reference="https://arxiv.org/abs/2601.08363",
        dataset={"path": POSIR_HUB_ID, "revision": "main"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[SPLIT],
        eval_langs={lang: ([lang, ENGLISH] if cross else [lang]) for lang in languages},
        main_score="ndcg_at_10",
        date=("2025-01-01", "2026-01-13"),
        domains=["Web", "Written", "Non-fiction"],
        task_subtypes=["Question answering"],
        license="not specified",
        annotations_creators="LM-generated and reviewed",
        dialect=[],
        sample_creation="LM-generated and verified",
        bibtex_citation=_POSIR_CITATION,
    )


# --------------------------------------------------------------------------- tasks
class PosIR(PositionGroupedRetrieval):
    """PosIR, multilingual setting: each language's queries against its own corpus."""

    hub_id = POSIR_HUB_ID
    cross_lingual = False
    metadata = _metadata("PosIR", POSIR_LANGUAGES, cross=False)

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        languages: Iterable[str] | None = None,
        domains: Iterable[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_dir=data_dir, **kwargs)
        if languages is not None:
            self.hf_subsets = self._resolve_languages(list(languages))
        self.domains = _selection(domains, DOMAINS_ENV)
        self._positions: dict[str, tuple[str, str] | None] = {}

    def _resolve_languages(self, languages: list[str]) -> list[str]:
        known = list(self.metadata.hf_subsets)
        chosen: list[str] = []
        for lang in languages:
            matches = [k for k in known if k == lang or k.split("-")[0] == lang]
            if not matches:
                raise ValueError(f"{self.metadata.name}: unknown language {lang!r}; known: {known}.")
            chosen.extend(m for m in matches if m not in chosen)
        if not chosen:
            raise ValueError(f"{self.metadata.name}: an empty language selection selects nothing.")
        return chosen

    # ---------------------------------------------------------------- loading (lazy)
    def load_data(self, num_proc: int | None = None, *, timer: TimingStack | None = None, **kwargs: Any) -> None:
        """Find each selected language's domains; the domains' files are read at evaluation."""
        if self.data_loaded:
            return
        local = resolve_data_dir(self.hub_id, self.data_dir)
        source = PosIRSource(self.hub_id, None if local is not None else self.metadata.dataset["revision"], local)
        timer = timer or TimingStack()
        dataset: dict[str, dict[str, LanguageUnit]] = {}
        with timer("Data loading", log_message=f"Listing {self.metadata.name} domains in {source}..."):
            for lang in self.hf_subsets:
                available = source.domains(lang)
                if not available:
                    raise DatasetSchemaError(f"{self.metadata.name}: {source} has no domain for {lang!r}.")
                if self.domains is None:
                    chosen = available
                else:
                    unknown = [d for d in self.domains if d not in available]
                    if unknown:
                        raise ValueError(
                            f"{self.metadata.name}: unknown domain(s) {unknown} for {lang!r}; available: {available}."
                        )
                    chosen = list(self.domains)
                corpus_language = ENGLISH if self.cross_lingual else lang
                dataset[lang] = {SPLIT: LanguageUnit(lang, corpus_language, chosen, source)}
        self.dataset = dataset
        self.data_loaded = True

    # ---------------------------------------------------------------- evaluation
    def _evaluate_subset(self, model: Any, data_split: Any, *, hf_split: str, hf_subset: str, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(data_split, LanguageUnit):
            raise TypeError(f"{self.metadata.name} evaluates LanguageUnit subsets, got {type(data_split).__name__}.")
        per_domain: dict[str, dict[str, Any]] = {}
        parts: list[Cells] = []
        pooled: dict[str, float] = {}
        skipped_total: dict[str, int] = {}
        n_total = 0
        for domain in data_split.domains:
            data = load_domain(data_split, domain)
            skipped = data.skipped
            for reason, count in skipped.items():
                skipped_total[reason] = skipped_total.get(reason, 0) + count
                if count:
                    logger.warning("%s %s/%s: skipped %d quer(ies) (%s).", self.metadata.name, hf_subset, domain, count, reason)
            if not data.split["relevant_docs"]:
                per_domain[domain] = {"n_queries": 0, "ndcg_at_10": None, "skipped_queries": skipped}
                continue
            self._positions = data.positions
            scores = super()._evaluate_subset(model, data.split, hf_split=hf_split, hf_subset=f"{hf_subset}/{domain}", **kwargs)
            del data  # free this domain before loading the next
            cells = scores.pop("cells")
            parts.append(cells)
            n = scores["n_queries"]
            n_total += n
            for key, value in scores.items():
                if isinstance(value, float) and (key.startswith(_POOLED_PREFIXES) or key == "accuracy"):
                    pooled[key] = pooled.get(key, 0.0) + value * n
            per_domain[domain] = {
                "n_queries": n,
                "ndcg_at_10": scores["ndcg_at_10"],
                "psi": cell_figures(cells)["psi"],
                "unplaced_queries": scores["unplaced_queries"],
                "skipped_queries": skipped,
            }
        self._positions = {}
        merged = merge_cells(parts)
        out: dict[str, Any] = {key: (total / n_total) for key, total in pooled.items()} if n_total else {"ndcg_at_10": None}
        out.update(cell_figures(merged))
        out["n_queries"] = n_total
        out["n_domains"] = len(data_split.domains)
        out["unplaced_queries"] = sum(d.get("unplaced_queries") or 0 for d in per_domain.values())
        out["skipped_queries"] = skipped_total
        out["domains"] = per_domain
        out["cells"] = merged
        out["corpus_language"] = data_split.corpus_language
        return out

    def task_specific_scores(
        self,
        scores: dict[str, dict[str, float]],
        qrels: Mapping[str, Mapping[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, Any]:
        query_scores, _ = per_query_scores(scores, qrels.keys())
        cells = empty_cells()
        unplaced = 0
        for qid, score in query_scores.items():
            place = self._positions.get(qid)
            if place is None:
                unplaced += 1
            else:
                add_to_cells(cells, place[0], place[1], score)
        return {"cells": cells, "n_queries": len(query_scores), "unplaced_queries": unplaced}

    def _calculate_descriptive_statistics_from_split(self, split: str, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{self.metadata.name} reads its (language, domain) data lazily during evaluation; "
            "descriptive statistics are not computed."
        )


class PosIRCrossLingual(PosIR):
    """PosIR, cross-lingual setting: non-English queries against the English corpus of the domain."""

    cross_lingual = True
    metadata = _metadata("PosIRCrossLingual", CROSS_LINGUAL_LANGUAGES, cross=True)


# --------------------------------------------------------------------------- summaries
def average_over_languages(language_scores: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The papers' final figures: the plain mean over languages of each language-level figure.

    ``language_scores`` are the per-subset score dicts of a PosIR TaskResult (e.g.
    ``result.scores["test"]``). Figures a language lacks (``None``) are left out of that mean.
    """
    rows = list(language_scores)
    keys = ["ndcg_at_10", "psi"] + [f"{m}_Q{i}" for m in ("ndcg_at_10", "psi") for i in range(1, 5)]
    out: dict[str, Any] = {"n_languages": len(rows)}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = sum(values) / len(values) if values else None
    return out
