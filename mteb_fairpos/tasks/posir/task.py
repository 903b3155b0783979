"""The four PosIR tasks: mteb retrieval per (language, domain) subset, read lazily, with each
subset's scores grouped by where the answer sits in its document (docs/method.md#s3-4)."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mteb.timing import TimingStack

from .._base import DatasetSchemaError, PositionGroupedRetrieval, resolve_data_dir
from ...results.schema import Counts, ScoreEntry, dump, load
from ...results import units
from ...retrieval_intervals import relevant_clusters
from ..grouped_metrics import add_to_cells, cell_figures, empty_cells, per_query_scores
from .corpus_cache import CorpusCache
from .dataset import (
    CROSS_LINGUAL_LANGUAGES,
    DOMAINS_ENV,
    ENGLISH,
    EXTRA_LANGUAGES,
    PAPER_QUERY_INSTRUCTION,
    POSIR_DOMAINS,
    POSIR_HUB_ID,
    POSIR_LANGUAGES,
    REVISION_ENV,
    SPLIT,
    split_subset,
    subset_name,
)
from .domain import DomainRef, load_domain
from .metadata import task_metadata
from .pooling import summarize_scores
from .selection import instruction_text, resolve_domains, resolve_languages, selection
from .source import PosIRSource

logger = logging.getLogger(__name__)

QUERY_SCORES = "query_scores"
"""The key under which `PosIR.task_specific_scores` hands each query's nDCG@10 back to
`PosIR._evaluate_subset`, which replaces it with the positional figures; never written."""


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
    metadata = task_metadata("PosIR", POSIR_LANGUAGES + EXTRA_LANGUAGES, cross=False)

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
        name = self.metadata.name
        known = list(dict.fromkeys(split_subset(s)[0] for s in self.metadata.hf_subsets))
        self._languages = resolve_languages(name, known, selection(languages, None)) if languages is not None else None
        self._domains = resolve_domains(name, selection(domains, DOMAINS_ENV))
        self.hf_subsets = self._selected(self.hf_subsets, named=False)
        if query_instruction is not None and instruction_text(query_instruction) != self.query_instruction:
            self.query_instruction = instruction_text(query_instruction)
            self._name_the_settings(instruction=_instruction_label(self.query_instruction))
        revision = revision or os.environ.get(REVISION_ENV, "").strip() or None
        if revision and revision != self.metadata.dataset["revision"]:
            self.metadata = self.metadata.model_copy(update={"dataset": {**self.metadata.dataset, "revision": revision}})
        self._corpus_cache = CorpusCache()
        self.skipped_subsets: list[str] = []
        """Selected subsets the data lacked at the last `load_data`, and those `evaluate` left out (no query left);
        each also logged as a warning."""

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
                        source.check_types(source.local / relative, relative)
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
    def evaluate(self, model: Any, split: str = "test", subsets_to_run: list[str] | None = None,
                 **kwargs: Any) -> dict[str, Any]:
        """mteb's evaluation, less the subsets left without a query to score: a subset with no nDCG would make
        mteb's own aggregation of the result fail. Each is named in a warning and in `skipped_subsets`; a later
        run tries it again (mteb finds it missing)."""
        scores = dict(super().evaluate(model, split, subsets_to_run, **kwargs))
        for subset in [subset for subset, entry in scores.items() if load(entry).counts.queries == 0]:
            logger.warning("%s %s: no query left to evaluate; the subset is left out of the result.",
                           self.metadata.name, subset)
            del scores[subset]
            self.skipped_subsets.append(subset)
        return scores

    def _evaluate_subset(self, model: Any, data_split: Any, *, hf_split: str, hf_subset: str, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(data_split, DomainRef):
            raise TypeError(f"{self.metadata.name} evaluates DomainRef subsets, got {type(data_split).__name__}.")
        data = load_domain(data_split, self.query_instruction)
        for reason, count in data.skipped.items():
            if count:
                logger.warning("%s %s: skipped %d quer(ies) (%s).", self.metadata.name, hf_subset, count, reason)
        where = {"language": data_split.language, "domain": data_split.domain, "corpus_language": data_split.corpus_language}
        if not data.split["relevant_docs"]:  # taken out of the result by `evaluate`
            return {"ndcg_at_10": None, **where, **dump(ScoreEntry(counts=Counts(queries=0, skipped=data.skipped)))}
        source = data_split.source
        encoder = self._corpus_cache.wrap(model, (str(source), source.revision, data_split.corpus_language,
                                                  data_split.corpus_folder))
        scores = super()._evaluate_subset(encoder, data.split, hf_split=hf_split, hf_subset=hf_subset, **kwargs)
        query_scores = scores.pop(QUERY_SCORES)
        scores.update(position_scores(query_scores, data.positions))
        placed = {qid: place for qid, place in data.positions.items() if place is not None}
        scores[units.DIGEST] = self.hand_over_units(hf_split, hf_subset, query_scores, {q: (p[1],) for q, p in placed.items()},
                                                    bucket={q: p[0] for q, p in placed.items()},
                                                    cluster=relevant_clusters(data.split["relevant_docs"]))
        scores.update(dump(ScoreEntry(counts=Counts(skipped=data.skipped))))
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
        """Each query's nDCG@10 under `QUERY_SCORES`: where its answer sits is known to the caller,
        `_evaluate_subset`, which turns them into the positional figures (`position_scores`)."""
        query_scores, _ = per_query_scores(scores, qrels.keys())
        return {QUERY_SCORES: query_scores}

    def _calculate_descriptive_statistics_from_split(self, split: str, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{self.metadata.name} reads each (language, domain) subset lazily during evaluation; "
            "descriptive statistics are not computed."
        )

    @staticmethod
    def unit_stratum(subset: str) -> str:
        """The papers pool a language's subsets and average the languages: a query's stratum for the
        bootstrap (`mteb_fairpos.retrieval_intervals`) is its subset's query language."""
        return split_subset(subset)[0]

    def unit_corpus(self, subset: str) -> str:
        """Cross-lingual subsets search their domain's English corpus: a document queried in several languages is
        one unit of the bootstrap, drawn with all its queries (docs/method.md#s3-1)."""
        _, domain = split_subset(subset)
        return subset_name(ENGLISH, domain) if self.cross_lingual else subset

    summarize_scores = staticmethod(summarize_scores)
    """How ``mteb-fairpos compare`` pools this task's subsets (the papers' per-language figures)."""


class PosIRCrossLingual(PosIR):
    """PosIR, cross-lingual setting: non-English queries against the English corpus of the domain."""

    cross_lingual = True
    default_languages = CROSS_LINGUAL_LANGUAGES
    metadata = task_metadata("PosIRCrossLingual", CROSS_LINGUAL_LANGUAGES + EXTRA_LANGUAGES, cross=True)


def _instruction_label(instruction: str) -> str:
    """How a task's name says which query instruction it ran with: ``paper``, ``none`` or the text's digest."""
    if instruction == PAPER_QUERY_INSTRUCTION:
        return "paper"
    return hashlib.sha256(instruction.encode("utf-8")).hexdigest()[:12] if instruction else "none"


class PosIRInstructed(PosIR):
    """`PosIR` with the authors' query instruction on every query, as the paper ran it."""

    query_instruction = PAPER_QUERY_INSTRUCTION
    metadata = task_metadata("PosIRInstructed", POSIR_LANGUAGES + EXTRA_LANGUAGES, cross=False, instructed=True)


class PosIRCrossLingualInstructed(PosIRCrossLingual):
    """`PosIRCrossLingual` with the authors' query instruction on every query, as the paper ran it."""

    query_instruction = PAPER_QUERY_INSTRUCTION
    metadata = task_metadata("PosIRCrossLingualInstructed", CROSS_LINGUAL_LANGUAGES + EXTRA_LANGUAGES,
                             cross=True, instructed=True)


def position_scores(query_scores: Mapping[str, float], positions: Mapping[str, tuple[str, str] | None]) -> dict[str, Any]:
    """A subset's positional figures (`cell_figures`) and its ``cells``, from each query's nDCG@10
    and its (length bucket, position bin); queries without a place are counted as unplaced."""
    cells = empty_cells()
    unplaced = 0
    for qid, score in query_scores.items():
        place = positions.get(qid)
        if place is None:
            unplaced += 1
        else:
            add_to_cells(cells, place[0], place[1], score)
    return {**cell_figures(cells), "cells": cells, **dump(ScoreEntry(counts=Counts(queries=len(query_scores), unplaced=unplaced)))}
