"""PosIR (SPEC 3.4): position-aware retrieval in 10 languages (14 selectable) and 31 domains.

The dataset ``infgrad/PosIR-Benchmark-v1`` is laid out ``{language}/{domain}/`` with
``queries.parquet`` (``_id, text, pos_char_span, pos_char_length, pos_token_length``),
``corpus.parquet`` (``_id, text``) and ``qrels/test.parquet`` (``query-id, corpus-id, score``);
every (language, domain) pair is its own retrieval problem with its own corpus.

Two tasks, one mteb subset per (query language, domain), named ``"{language}.{domain}"``
(``"deu-Latn.law_judiciary"``):

* ``PosIR``: multilingual setting, queries and corpus in the same language (10 x 31 subsets);
* ``PosIRCrossLingual``: queries in a language other than English against the same domain's
  English corpus (8 x 31 subsets: the parallel languages the retrieval paper reports; Chinese and
  English are not among them).

The paper's ten (eight cross-lingual) languages are the default, so results stay comparable with
the paper. The dataset holds four more, ``hin-Deva``, ``pol-Latn``, ``ben-Beng`` and ``jpn-Jpan``
(`EXTRA_LANGUAGES`), in both settings; they run when named: ``PosIR(languages=["hin"])``, mteb's
``-l hin`` / ``get_task(..., languages=["hin"])``, or by subset name. They were uploaded after the
pinned revision, so they need ``revision="main"``.

The 31 domains are IndustryCorpus2's 30 English-named industry categories (the source of most
documents: corpus ids read ``IndustryCorpus2_<category>_<n>``) plus ``fineweb``, the web-text
domain, as the PosIR authors list them. A domain folder may carry the ``IndustryCorpus2_`` prefix or
not. Loading lists each language folder once and reconciles it with the declared subsets: a declared
domain the data lacks is skipped and named in a warning, a folder that matches no declared domain is
named in a warning too; nothing is dropped silently.

Subsets are read lazily: ``load_data`` only lists folders, and each subset's files are read,
embedded, scored and freed when mteb evaluates that subset, so memory does not grow with the
number of subsets (and mteb caches every finished subset, so an interrupted run resumes).

Selecting: one language with mteb's own filter (``mteb.get_task("PosIR", languages=["deu"])``)
or ``PosIR(languages=[...])``; one domain with ``PosIR(domains=[...])`` or the environment
variable ``MTEB_FAIRPOS_POSIR_DOMAINS=finance_economics,law_judiciary`` (so ``mteb run`` can too).
The choice survives mteb's own ``filter_languages``, which mteb calls on every task it hands out.

Comparability with the paper: the PosIR authors prepend one instruction to the queries of every
model (`PAPER_QUERY_INSTRUCTION`) and run at 8,192 tokens. ``PosIR(query_instruction=True)`` (or a
string of your own) prepends it to every query text, in front of which a model still puts its own
query prompt, if it has one; ``PosIRInstructed`` and ``PosIRCrossLingualInstructed`` are the
registered tasks with the paper's instruction, so their results never mix with the default's.

Dataset revision: `LAST_KNOWN_REVISION` is the commit the authors' mteb pull request pinned,
made before the four extra languages were uploaded; it is the default, and
``PosIR(revision="main")`` (or ``MTEB_FAIRPOS_POSIR_REVISION=main``) reads the newest files. The
revision in use is the one recorded in every result.

Scores of a subset: mteb's retrieval metrics (``ndcg_at_10`` is the main score) plus

* ``ndcg_at_10_Q1`` .. ``_Q4`` and ``psi_Q1`` .. ``_Q4``: per length bucket of the positive
  document (``pos_token_length`` in [0,512), [512,1024), [1024,1536), [1536,inf)), the unweighted
  mean over its non-empty relative-position bins and the PSI over them;
* ``position_<bin>`` for the 20 relative-position bins ``[k/20, (k+1)/20)`` (the span midpoint
  over the document length, clipped to [0, 1]; 1.0 falls in the last bin), pooled over the length
  buckets, with ``psi`` and ``harmonic_mean`` over them;
* ``cells``: per (bucket, bin) query count and nDCG@10 sum, from which the per-language pooling
  is recomputed exactly; ``n_queries``, ``unplaced_queries``, ``skipped_queries``;
  ``language``, ``domain``, ``corpus_language``.

The papers report per language, pooled across domains: `language_figures` does that pooling
from a TaskResult (nDCG@10 query-weighted over the domains, PSI over the 20 bins pooled across
domains and lengths) and `average_over_languages` the final means; `summarize_scores` gives both
and is what ``mteb-fairpos compare`` shows for these tasks.

The PosIR authors' analysis bins with right-closed intervals (``(0,512]``, ``[0,0.05]``,
``(0.05,0.1]``, ...); SPEC 3.4 asks for the half-open ones above, which differ only for values
exactly on a boundary.
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

from ..hub import hub_access
from ..results.schema import load
from ._base import (
    DatasetSchemaError,
    PositionGroupedRetrieval,
    check_columns,
    resolve_data_dir,
    retrieval_split,
    without_hub_hint,
)
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
"""The paper's ten query languages: the default selection of `PosIR`."""
CROSS_LINGUAL_LANGUAGES: tuple[str, ...] = (
    "ara-Arab", "deu-Latn", "fra-Latn", "ita-Latn", "kor-Kore", "por-Latn", "rus-Cyrl", "spa-Latn",
)
"""The paper's eight cross-lingual query languages: the default selection of `PosIRCrossLingual`."""
EXTRA_LANGUAGES: tuple[str, ...] = ("hin-Deva", "pol-Latn", "ben-Beng", "jpn-Jpan")
"""Languages the dataset holds beyond the paper's: declared in both settings, run only when named."""
POSIR_DOMAINS: tuple[str, ...] = (
    "accommodation_catering_hotel", "aerospace", "agriculture_forestry_animal_husbandry_fishery",
    "artificial_intelligence_machine_learning", "automobile", "biomedicine", "computer_communication",
    "computer_programming_code", "current_affairs_government_administration", "electric_power_energy",
    "film_entertainment", "finance_economics", "fire_safety_food_safety", "game", "law_judiciary",
    "literature_emotion", "mathematics_statistics",
    "medicine_health_psychology_traditional_chinese_medicine", "mining", "news_media",
    "other_information_services_information_security", "other_manufacturing", "petrochemical",
    "real_estate_construction", "sports", "subject_education_education", "technology_scientific_research",
    "tourism_geography", "transportation", "water_resources_ocean", "fineweb",
)
"""PosIR's 31 domain folders: IndustryCorpus2's 30 categories by their English names, plus
``fineweb`` (the list of the authors' mteb pull request; their aggregation asserts 31 domains)."""
DOMAIN_FOLDER_PREFIX = "IndustryCorpus2_"
ENGLISH = "eng-Latn"
DOMAINS_ENV = "MTEB_FAIRPOS_POSIR_DOMAINS"
REVISION_ENV = "MTEB_FAIRPOS_POSIR_REVISION"
LAST_KNOWN_REVISION = "8faa66a19e4b2cf5764bc2e2adb19e9eca503d63"
"""The dataset commit pinned by the authors' mteb pull request (before the extra languages)."""
PAPER_QUERY_INSTRUCTION = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "
"""What the PosIR authors prepend to every query of every model."""
SPLIT = "test"

QUERY_COLUMNS = ("_id", "text", "pos_char_span", "pos_char_length", "pos_token_length")
CORPUS_COLUMNS = ("_id", "text")
QRELS_COLUMNS = ("query-id", "corpus-id", "score")
TEXT_COLUMNS = ("text",)
"""Columns that must hold strings: they are embedded."""
QUERIES_FILE = "queries.parquet"
CORPUS_FILE = "corpus.parquet"
QRELS_FILE = "qrels/test.parquet"

_POSIR_CITATION = r"""@misc{zeng2026posir,
  title = {PosIR: Position-Aware Heterogeneous Information Retrieval Benchmark},
  author = {Zeng, Ziyang and Zhang, Dun and Yan, Yu and Sun, Xu and Pan, Cuiqiaoshu and Zhou, Yudong and Yang, Yuqing},
  year = {2026},
  eprint = {2601.08363},
  archivePrefix = {arXiv},
}"""


def subset_name(language: str, domain: str) -> str:
    """The mteb subset of one (language, domain) pair: ``"deu-Latn.law_judiciary"``."""
    return f"{language}.{domain}"


def split_subset(subset: str) -> tuple[str, str]:
    """``(language, domain)`` of a subset name."""
    language, _, domain = subset.partition(".")
    return language, domain


def domain_of_folder(folder: str) -> str:
    """The domain a dataset folder holds: its name without the ``IndustryCorpus2_`` prefix."""
    return folder.removeprefix(DOMAIN_FOLDER_PREFIX)


# --------------------------------------------------------------------------- data source
class PosIRSource:
    """Reads PosIR files from a local copy or the Hugging Face hub, one file at a time."""

    def __init__(self, hub_id: str, revision: str | None, local: Path | None) -> None:
        self.hub_id = hub_id
        self.revision = revision
        self.local = local

    def __str__(self) -> str:
        return str(self.local) if self.local is not None else f"hf://datasets/{self.hub_id}"

    def folders(self, language: str) -> dict[str, str]:
        """``{domain: folder}`` for the domain folders of ``language`` (empty if it has none)."""
        if self.local is not None:
            root = self.local / language
            names = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        else:
            from huggingface_hub import HfApi
            from huggingface_hub.errors import RemoteEntryNotFoundError
            from huggingface_hub.hf_api import RepoFolder

            with hub_access(f"the folder list of {self.hub_id}/{language}", without_hub_hint(self.hub_id)):
                try:
                    tree = HfApi().list_repo_tree(self.hub_id, path_in_repo=language, repo_type="dataset", revision=self.revision)
                    names = [item.path.rsplit("/", 1)[-1] for item in tree if isinstance(item, RepoFolder)]
                except RemoteEntryNotFoundError:  # the dataset has no folder for this language
                    names = []
        return {domain_of_folder(name): name for name in sorted(names)}

    def read(self, language: str, folder: str, name: str, columns: Sequence[str]) -> dict[str, list[Any]]:
        """The given columns of ``{language}/{folder}/{name}`` as Python lists."""
        relative = f"{language}/{folder}/{name}"
        if self.local is not None:
            path = self.local / relative
        else:
            from huggingface_hub import hf_hub_download

            with hub_access(f"{relative} of {self.hub_id}", without_hub_hint(self.hub_id)):
                path = Path(hf_hub_download(self.hub_id, relative, repo_type="dataset", revision=self.revision))
        self.check_file(path, relative, columns)
        return pq.read_table(path, columns=list(columns)).to_pydict()

    def check_file(self, path: Path, relative: str, columns: Sequence[str]) -> None:
        """The file exists and has ``columns``, its text columns as strings (reads the footer only)."""
        if not path.is_file():
            raise DatasetSchemaError(f"PosIR: {path} is missing.")
        schema = self._schema(path, relative)
        check_columns(schema.names, columns, f"PosIR file {relative} of {self}")
        self.check_text_types(path, relative)

    def check_text_types(self, path: Path, relative: str) -> None:
        """A text column (`TEXT_COLUMNS`) of a present file that holds no strings is an error;
        cheap enough (the footer only) to run on every local file before anything is embedded."""
        import pyarrow as pa

        if not path.is_file():
            return  # reported when the subset is read
        schema = self._schema(path, relative)
        for column in TEXT_COLUMNS:
            if column in schema.names and not (pa.types.is_string(schema.field(column).type)
                                               or pa.types.is_large_string(schema.field(column).type)):
                raise DatasetSchemaError(
                    f"PosIR file {relative} of {self}: column {column!r} holds {schema.field(column).type}, "
                    "not strings; the texts must be UTF-8 strings."
                )

    def _schema(self, path: Path, relative: str) -> Any:
        import pyarrow as pa

        try:
            return pq.read_schema(path)
        except (OSError, pa.ArrowException) as err:
            raise DatasetSchemaError(f"PosIR file {relative} of {self}: not a readable Parquet file ({err}).") from None


@dataclass(frozen=True)
class DomainRef:
    """Where one subset's files are; nothing is read until the subset is evaluated."""

    language: str
    domain: str
    query_folder: str
    corpus_language: str
    corpus_folder: str
    source: PosIRSource

    def files(self) -> list[tuple[str, str, str, Sequence[str]]]:
        """``(language, folder, file name, columns)`` of the subset's three files."""
        return [
            (self.language, self.query_folder, QUERIES_FILE, QUERY_COLUMNS),
            (self.corpus_language, self.corpus_folder, CORPUS_FILE, CORPUS_COLUMNS),
            (self.language, self.query_folder, QRELS_FILE, QRELS_COLUMNS),
        ]


@dataclass
class DomainData:
    split: dict[str, Any]
    positions: dict[str, tuple[str, str] | None]
    skipped: dict[str, int]


def load_domain(ref: DomainRef, query_instruction: str = "") -> DomainData:
    """One (language, domain): queries, corpus (of ``ref.corpus_language``), qrels, positions.

    Queries whose relevant document is absent from the corpus, or that have no qrels, are left
    out and counted; qrels of unknown queries are ignored and counted. ``query_instruction`` is
    prepended to every query text.
    """
    q, c, r = (ref.source.read(*file) for file in ref.files())

    corpus: dict[str, str] = {}
    for doc_id, text in zip(c["_id"], c["text"]):
        doc_id = str(doc_id)
        if doc_id in corpus:
            raise DatasetSchemaError(f"PosIR {ref.corpus_language}/{ref.corpus_folder}: corpus id {doc_id!r} appears twice.")
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
        queries[qid] = query_instruction + (query_text[qid] or "")
        kept[qid] = docs
        relpos = relative_position(span, char_length)
        bucket = length_bucket(float(token_length)) if token_length is not None else None
        positions[qid] = (bucket, position_bin(relpos)) if relpos is not None and bucket is not None else None
    return DomainData(retrieval_split(corpus, queries, kept), positions, skipped)


def _instruction(value: bool | str) -> str:
    """The query instruction a task option asks for: ``True`` the paper's, ``False`` none."""
    if value is True:
        return PAPER_QUERY_INSTRUCTION
    if value is False:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"query_instruction must be True, False or a string, got {type(value).__name__}.")
    return value


class _CorpusCache:
    """The embeddings of the last corpus a task embedded, reused while the same corpus comes back.

    Cross-lingual subsets of one domain share the domain's English corpus and run one after the
    other (the metadata lists them domain by domain), so holding one corpus suffices. The key
    names the model object and its mteb name and revision (the calibration config is part of the
    name), the dataset source and revision, and the corpus file.
    """

    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None
        self.embeddings: Any = None
        self.hits = 0

    def wrap(self, model: Any, corpus_key: tuple[Any, ...]) -> Any:
        meta = getattr(model, "mteb_model_meta", None)
        key = (id(model), getattr(meta, "name", None), getattr(meta, "revision", None), *corpus_key)
        return _CorpusCachingEncoder(model, self, key)


class _CorpusCachingEncoder:
    """An mteb encoder that embeds a corpus through `_CorpusCache` and everything else directly."""

    def __init__(self, model: Any, cache: _CorpusCache, key: tuple[Any, ...]) -> None:
        self._model, self._cache, self._key = model, cache, key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encode(self, inputs: Any, *, prompt_type: Any = None, **kwargs: Any) -> Any:
        from mteb.types import PromptType

        if prompt_type != PromptType.document:
            return self._model.encode(inputs, prompt_type=prompt_type, **kwargs)
        if self._cache.key == self._key:
            self._cache.hits += 1
            return self._cache.embeddings
        self._cache.key, self._cache.embeddings = None, None  # free the previous corpus first
        embeddings = self._model.encode(inputs, prompt_type=prompt_type, **kwargs)
        self._cache.key, self._cache.embeddings = self._key, embeddings
        return embeddings


def _selection(names: str | Iterable[str] | None, env: str | None) -> list[str] | None:
    """The names asked for (one name may be given as a plain string), else those of ``env``."""
    if names is not None:
        chosen = [names] if isinstance(names, str) else list(names)
    elif env and os.environ.get(env, "").strip():
        chosen = [n.strip() for n in os.environ[env].split(",") if n.strip()]
    else:
        return None
    if not chosen:
        raise ValueError("an empty selection selects nothing; pass None to keep everything.")
    return chosen


def _metadata(name: str, languages: Sequence[str], cross: bool, *, instructed: bool = False) -> TaskMetadata:
    setting = "queries in each language, English corpus of the same domain" if cross else "queries and corpus in the same language"
    instruction = " Every query carries the authors' instruction, as in the paper." if instructed else ""
    # cross-lingual subsets run domain by domain, so each English corpus is embedded once and reused
    pairs = ([(lang, domain) for domain in POSIR_DOMAINS for lang in languages] if cross
             else [(lang, domain) for lang in languages for domain in POSIR_DOMAINS])
    return TaskMetadata(
        name=name,
        description=(
            f"PosIR position-aware retrieval ({setting}); one subset per (language, domain), each with its "
            "own corpus. nDCG@10 (main score), per-length-bucket nDCG@10 and PSI over 20 relative-position "
            f"bins, and the PSI over the bins pooled across lengths.{instruction}"
        ),
        reference="https://arxiv.org/abs/2601.08363",
        dataset={"path": POSIR_HUB_ID, "revision": LAST_KNOWN_REVISION},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[SPLIT],
        eval_langs={subset_name(lang, domain): ([lang, ENGLISH] if cross else [lang]) for lang, domain in pairs},
        main_score="ndcg_at_10",
        date=("2025-01-01", "2026-01-13"),
        domains=["Web", "Written", "Non-fiction"],
        task_subtypes=["Question answering"],
        license="mit",
        annotations_creators="LM-generated and reviewed",
        dialect=[],
        sample_creation="LM-generated and verified",
        bibtex_citation=_POSIR_CITATION,
    )


# --------------------------------------------------------------------------- pooling as the papers do
def language_figures(entries: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per query language, its (language, domain) subsets pooled as SPEC 3.4 says.

    ``entries`` are the score entries of a PosIR TaskResult (``result.scores["test"]``). For each
    language: ``ndcg_at_10`` over all its queries (the query-weighted mean over its domains),
    the per-bucket figures and ``psi`` from the merged (bucket, bin) cells, ``n_queries`` and
    ``n_domains``. Subsets without queries add nothing.
    """
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        language = entry.get("language") or split_subset(str(entry.get("hf_subset", "")))[0]
        grouped.setdefault(language, []).append(entry)
    out: dict[str, dict[str, Any]] = {}
    for language, rows in grouped.items():
        scored = [r for r in rows if r.get("n_queries") and r.get("ndcg_at_10") is not None]
        n_queries = sum(int(r["n_queries"]) for r in scored)
        figures = cell_figures(merge_cells(_cells(r) for r in scored))
        figures["ndcg_at_10"] = sum(r["ndcg_at_10"] * r["n_queries"] for r in scored) / n_queries if n_queries else None
        figures["n_queries"] = n_queries
        figures["n_domains"] = len(scored)
        out[language] = figures
    return dict(sorted(out.items()))


def _cells(entry: Mapping[str, Any]) -> Cells:
    cells = entry.get("cells")
    if not isinstance(cells, Mapping):
        raise ValueError(f"PosIR subset {entry.get('hf_subset')!r} has no 'cells'; was it written by this task?")
    return {bucket: {position: list(cell) for position, cell in bins.items()} for bucket, bins in cells.items()}


def average_over_languages(language_scores: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The papers' final figures: the plain mean over languages of each language-level figure.

    ``language_scores`` are per-language figures (the values of `language_figures`). Figures a
    language lacks (``None``) are left out of that mean.
    """
    rows = list(language_scores)
    keys = ["ndcg_at_10", "psi"] + [f"{m}_Q{i}" for m in ("ndcg_at_10", "psi") for i in range(1, 5)]
    out: dict[str, Any] = {"n_languages": len(rows)}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = sum(values) / len(values) if values else None
    return out


def summarize_scores(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What the PosIR papers report, from a TaskResult's score entries.

    ``main_score`` and ``psi`` are the means over languages of the per-language nDCG@10 and PSI;
    ``positions`` the mean over languages of each relative-position bin; ``languages`` and
    ``average`` the per-language figures and their means.
    """
    per_language = language_figures(entries)
    average = average_over_languages(per_language.values())
    profiles = [load(figures).profile().values for figures in per_language.values()]
    positions: dict[str, float | None] = {}
    for label in profiles[0] if profiles else ():
        values = [profile[label] for profile in profiles if profile.get(label) is not None]
        positions[label] = sum(values) / len(values) if values else None
    return {
        "main_score": average["ndcg_at_10"],
        "psi": average["psi"],
        "positions": positions,
        "languages": per_language,
        "average": average,
    }


# --------------------------------------------------------------------------- tasks
class PosIR(PositionGroupedRetrieval):
    """PosIR, multilingual setting: each language's queries against its own corpus.

    Args:
        data_dir: a local copy of the dataset (see `resolve_data_dir`).
        languages: query languages to run (ISO 639-3 with or without script; one name may be a
            plain string); default the paper's (`default_languages`).
        domains: domains to run (with or without the folder prefix); default every domain, or
            those named in ``MTEB_FAIRPOS_POSIR_DOMAINS``.
        query_instruction: ``True`` for the authors' `PAPER_QUERY_INSTRUCTION`, a string for your
            own, prepended to every query text; default the class's (none for ``PosIR``).
        revision: dataset revision; default ``MTEB_FAIRPOS_POSIR_REVISION``, else
            `LAST_KNOWN_REVISION`. Recorded in the results.
    """

    hub_id = POSIR_HUB_ID
    cross_lingual = False
    default_languages: tuple[str, ...] = POSIR_LANGUAGES
    query_instruction: str = ""
    metadata = _metadata("PosIR", POSIR_LANGUAGES + EXTRA_LANGUAGES, cross=False)

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        languages: str | Iterable[str] | None = None,
        domains: str | Iterable[str] | None = None,
        query_instruction: bool | str | None = None,
        revision: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_dir=data_dir, **kwargs)
        self._languages = self._resolve_languages(_selection(languages, None)) if languages is not None else None
        self._domains = self._resolve_domains(_selection(domains, DOMAINS_ENV))
        self.hf_subsets = self._selected(self.hf_subsets, named=False)
        if query_instruction is not None:
            self.query_instruction = _instruction(query_instruction)
        revision = revision or os.environ.get(REVISION_ENV, "").strip() or None
        if revision and revision != self.metadata.dataset["revision"]:
            self.metadata = self.metadata.model_copy(update={"dataset": {**self.metadata.dataset, "revision": revision}})
        self._positions: dict[str, tuple[str, str] | None] = {}
        self._corpus_cache = _CorpusCache()
        self.skipped_subsets: list[str] = []
        """Selected subsets the data lacked at the last `load_data` (also logged as a warning)."""

    def filter_languages(
        self,
        languages: Sequence[str] | None,
        script: Sequence[str] | None = None,
        hf_subsets: Sequence[str] | None = None,
        exclusive_language_filter: bool = False,
    ) -> PosIR:
        """mteb's language filter, keeping this task's own language and domain choice.

        mteb rebuilds the subsets from the metadata here (``get_task`` always calls it), so the
        choice made at construction is applied again; languages named in this call may include
        the extra ones.
        """
        super().filter_languages(languages, script, hf_subsets=hf_subsets, exclusive_language_filter=exclusive_language_filter)
        kept = self._selected(self.hf_subsets, named=bool(languages) or bool(hf_subsets))
        if not kept:
            raise ValueError(
                f"{self.metadata.name}: no subset left after filtering by languages {languages} and subsets "
                f"{hf_subsets} within the chosen languages {self._languages or list(self.default_languages)} "
                f"and domains {self._domains or 'all'}."
            )
        self.hf_subsets = kept
        return self

    def _selected(self, subsets: Iterable[str], *, named: bool) -> list[str]:
        """``subsets`` within the chosen languages (the default ones unless ``named``) and domains."""
        languages = self._languages or (None if named else self.default_languages)
        return [
            subset for subset in subsets
            if (languages is None or split_subset(subset)[0] in languages)
            and (self._domains is None or split_subset(subset)[1] in self._domains)
        ]

    def _resolve_languages(self, languages: list[str]) -> list[str]:
        known = list(dict.fromkeys(split_subset(s)[0] for s in self.metadata.hf_subsets))
        chosen: list[str] = []
        for lang in languages:
            matches = [k for k in known if k == lang or k.split("-")[0] == lang]
            if not matches:
                raise ValueError(f"{self.metadata.name}: unknown language {lang!r}; known: {known}.")
            chosen.extend(m for m in matches if m not in chosen)
        return chosen

    def _resolve_domains(self, domains: list[str] | None) -> list[str] | None:
        if domains is None:
            return None
        names = [domain_of_folder(d) for d in domains]
        unknown = [d for d in names if d not in POSIR_DOMAINS]
        if unknown:
            raise ValueError(f"{self.metadata.name}: unknown domain(s) {unknown}; known: {list(POSIR_DOMAINS)}.")
        return names

    # ---------------------------------------------------------------- loading (lazy)
    def load_data(self, num_proc: int | None = None, *, timer: TimingStack | None = None, **kwargs: Any) -> None:
        """List the language folders and pair every selected subset with its files.

        Declared subsets that the data lacks are dropped from this run with a warning naming
        them; folders that match no declared domain are named in a warning as well.
        """
        if self.data_loaded:
            return
        local = resolve_data_dir(self.hub_id, self.data_dir)
        source = PosIRSource(self.hub_id, None if local is not None else self.metadata.dataset["revision"], local)
        timer = timer or TimingStack()
        with timer("Data loading", log_message=f"Listing {self.metadata.name} domains in {source}..."):
            by_language = [split_subset(s) for s in self.hf_subsets]
            query_languages = list(dict.fromkeys(lang for lang, _ in by_language))
            folders = {lang: source.folders(lang) for lang in query_languages}
            if self.cross_lingual:
                folders.setdefault(ENGLISH, source.folders(ENGLISH))
            self._report_undeclared(folders, source)

            dataset: dict[str, dict[str, DomainRef]] = {}
            absent: dict[str, list[str]] = {}
            for lang, domain in by_language:
                corpus_language = ENGLISH if self.cross_lingual else lang
                query_folder = folders[lang].get(domain)
                corpus_folder = folders[corpus_language].get(domain)
                if query_folder is None or corpus_folder is None:
                    absent.setdefault(lang, []).append(domain)
                    continue
                ref = DomainRef(lang, domain, query_folder, corpus_language, corpus_folder, source)
                if source.local is not None:  # local texts are checked now, before anything is embedded
                    for language, folder, name, _ in ref.files():
                        relative = f"{language}/{folder}/{name}"
                        source.check_text_types(source.local / relative, relative)
                dataset[subset_name(lang, domain)] = {SPLIT: ref}
        if not dataset:
            raise DatasetSchemaError(
                f"{self.metadata.name}: {source} holds none of the selected subsets "
                f"(languages {query_languages}); is it a copy of {self.hub_id}, laid out {{language}}/{{domain}}/?"
            )
        for lang, domains in absent.items():
            logger.warning(
                "%s: %s lacks %d of the selected domain(s) for %s; skipped: %s.",
                self.metadata.name, source, len(domains), lang, ", ".join(domains),
            )
        self.skipped_subsets = [subset_name(lang, d) for lang, domains in absent.items() for d in domains]
        self.hf_subsets = [s for s in self.hf_subsets if s in dataset]
        self.dataset = dataset
        self.data_loaded = True

    def _report_undeclared(self, folders: Mapping[str, Mapping[str, str]], source: PosIRSource) -> None:
        for lang, found in folders.items():
            extra = [folder for domain, folder in found.items() if domain not in POSIR_DOMAINS]
            if extra:
                logger.warning(
                    "%s: %s/%s has folder(s) that match no declared domain and are not evaluated: %s.",
                    self.metadata.name, source, lang, ", ".join(extra),
                )

    # ---------------------------------------------------------------- evaluation
    def _evaluate_subset(self, model: Any, data_split: Any, *, hf_split: str, hf_subset: str, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(data_split, DomainRef):
            raise TypeError(f"{self.metadata.name} evaluates DomainRef subsets, got {type(data_split).__name__}.")
        data = load_domain(data_split, self.query_instruction)
        for reason, count in data.skipped.items():
            if count:
                logger.warning("%s %s: skipped %d quer(ies) (%s).", self.metadata.name, hf_subset, count, reason)
        where = {"language": data_split.language, "domain": data_split.domain, "corpus_language": data_split.corpus_language}
        if not data.split["relevant_docs"]:
            logger.warning("%s %s: no query left to evaluate.", self.metadata.name, hf_subset)
            empty = cell_figures(empty_cells())
            return {"ndcg_at_10": None, **empty, "cells": empty_cells(), "n_queries": 0, "unplaced_queries": 0,
                    "skipped_queries": data.skipped, **where}
        self._positions = data.positions
        source = data_split.source
        encoder = self._corpus_cache.wrap(model, (str(source), source.revision, data_split.corpus_language,
                                                  data_split.corpus_folder))
        try:
            scores = super()._evaluate_subset(encoder, data.split, hf_split=hf_split, hf_subset=hf_subset, **kwargs)
        finally:
            self._positions = {}
        scores["skipped_queries"] = data.skipped
        scores["query_instruction"] = self.query_instruction
        scores.update(where)
        return scores

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
        return {**cell_figures(cells), "cells": cells, "n_queries": len(query_scores), "unplaced_queries": unplaced}

    def _calculate_descriptive_statistics_from_split(self, split: str, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{self.metadata.name} reads each (language, domain) subset lazily during evaluation; "
            "descriptive statistics are not computed."
        )

    summarize_scores = staticmethod(summarize_scores)
    """How ``mteb-fairpos compare`` pools this task's subsets (the papers' per-language figures)."""


class PosIRCrossLingual(PosIR):
    """PosIR, cross-lingual setting: non-English queries against the English corpus of the domain."""

    cross_lingual = True
    default_languages = CROSS_LINGUAL_LANGUAGES
    metadata = _metadata("PosIRCrossLingual", CROSS_LINGUAL_LANGUAGES + EXTRA_LANGUAGES, cross=True)


class PosIRInstructed(PosIR):
    """`PosIR` with the authors' query instruction on every query, as the paper ran it."""

    query_instruction = PAPER_QUERY_INSTRUCTION
    metadata = _metadata("PosIRInstructed", POSIR_LANGUAGES + EXTRA_LANGUAGES, cross=False, instructed=True)


class PosIRCrossLingualInstructed(PosIRCrossLingual):
    """`PosIRCrossLingual` with the authors' query instruction on every query, as the paper ran it."""

    query_instruction = PAPER_QUERY_INSTRUCTION
    metadata = _metadata("PosIRCrossLingualInstructed", CROSS_LINGUAL_LANGUAGES + EXTRA_LANGUAGES, cross=True,
                         instructed=True)
