"""The permutation fairness probe (docs/method.md#s2) as mteb tasks with their own evaluation.

Each hf subset is one experiment instance ``(n, L)``, named ``n3_de`` (monolingual) or
``n3_en-de`` (lead ``en`` at position 1, ``de`` at positions 2..n). The scores of a subset
(stored through `mteb_fairpos.results.schema`): ``position_fairness`` (main score, min/max of the per-position mean sigma, 1 = fair,
with its bootstrap interval ``position_fairness_ci_low`` / ``_ci_high`` and, given a ``baseline``, the paired
``change_position_fairness``; docs/method.md#s5-1),
``position_<p>`` (mean sigma at position p, with ``_se``, ``_ci_low``, ``_ci_high``),
``beta_0`` and ``beta_<p>`` (OLS with position dummies, SE clustered by segment set, and by topic
too where sets share topics, with ``_se``, ``_pvalue``, ``_ci_low``, ``_ci_high``), the same with a ``tau_`` prefix for
mean-pooled models (``tau_status`` says why it is N/A otherwise), ``lead_vs_later`` and
``language_effect`` for mixed instances, and the run's counts (documents, unique segments,
truncated segments, excluded topics by reason ...).

Tasks:

* :class:`PermutationFairness`: the paper's Wikipedia corpus, n in {3, 4}, the six
  monolingual instances and the mixed ones with later language en or de (32 subsets,
  about 6,700 documents); sized for one GPU and a 300M model in well under an hour.
* :class:`PermutationFairnessPaper`: paper scale, n in {3, 4, 5, 6}, all 6 monolingual and
  30 mixed configurations, 1,002 / 1,008 / 1,080 / 10,080 documents per instance.
* :class:`PermutationFairnessSample`: the small sample bundled with the package (en, de, fr,
  it), offline; used by the tests.
* :class:`PermutationFairnessManpages`: translated Linux man pages bundled with the package, offline;
  :class:`PermutationFairnessManpagesDemo` is its three subsets that ``mteb-fairpos demo`` runs.

Every task takes keyword arguments to override the corpus (a local JSONL/Parquet file or a
:class:`~mteb_fairpos.permutation.ComparableCorpus`), the number of segment sets, the orders per
set, the segment window, the maximum document length, the selection mode and the seed.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from mteb.abstasks.abstask import AbsTask

from ..permutation.corpus import (
    HF_DATASET,
    ComparableCorpus,
    CorpusError,
    load_hf_corpus,
    MANPAGES_FINGERPRINT,
    load_local_corpus,
    manpages_corpus,
    sample_corpus,
)
from ..permutation.instances import LanguageConfig
from ..permutation.languages import LanguageTagError, mteb_language
from ..permutation.probe import Observations, ProbeSession, ProbeSettings
from ..permutation.selection import SelectionSettings
from ..resampling import Resampling, drawable
from ..results import units
from ..results.schema import load
from .metadata import FairPosTaskMetadata

logger = logging.getLogger(__name__)

PAPER_REFERENCE = "https://arxiv.org/abs/2601.16934"
PAPER_BIBTEX = r"""@misc{schuhmacher2026fairness,
  title = {Information Representation Fairness in Long-Document Embeddings: The Peculiar Interaction of Positional and Language Bias},
  author = {Schuhmacher, Elias and Michail, Andrianos and Opitz, Juri and Sennrich, Rico and Clematide, Simon},
  year = {2026},
  eprint = {2601.16934},
  archivePrefix = {arXiv},
}"""


def subset_names(ns: Sequence[int], languages: Sequence[str], later_languages: Sequence[str] | None = None) -> list[str]:
    """Subset names: for each n, the monolingual instances, then the mixed ones.

    ``later_languages`` lists the later-position languages of the mixed instances (each paired
    with every other language as lead); ``None`` means all ordered pairs.
    """
    names: list[str] = []
    later_languages = list(languages) if later_languages is None else list(later_languages)
    for n in ns:
        names += [LanguageConfig.monolingual(n, lang).name for lang in languages]
        names += [LanguageConfig(n, lead, later).name for later in later_languages for lead in languages if lead != later]
    return names


def eval_langs(names: Sequence[str]) -> dict[str, list[str]]:
    out = {}
    for name in names:
        config = LanguageConfig.parse(name)
        try:
            out[name] = [mteb_language(lang) for lang in dict.fromkeys((config.lead, config.later))]
        except LanguageTagError as err:
            raise CorpusError(f"subset {name}: {err}") from None
    return out


def settings_suffix(*, corpus: ComparableCorpus | None = None, num_sets: Mapping[int, int] | None = None,
                    orders_per_set: int | None = None, segment_window: tuple[int, int] | None = None,
                    max_document_tokens: int | None = None, segment_mode: str | None = None,
                    length_tolerance: float | None = None, seed: int | None = None, resamples: int | None = None,
                    resampling_seed: int | None = None) -> str:
    """The settings that differ from a task's defaults, as a readable, file-name-safe suffix.

    ``None`` means "the task's default" and adds nothing, so a task run with its defaults keeps its
    plain name (``PermutationFairness``) while, say, three segment sets and seed 7 on a user's
    corpus give ``PermutationFairness.corpus-mydocs-1a2b3c4d5e6f.sets-3.seed-7``.
    """
    parts = []
    if corpus is not None:
        stem = re.sub(r"[^A-Za-z0-9_]+", "_", Path(corpus.source).stem if corpus.source != "<memory>" else "memory")
        parts.append(f"corpus-{stem.strip('_')[:40] or 'corpus'}-{corpus.fingerprint()}")
    if num_sets is not None:
        counts = set(num_sets.values())
        parts.append(f"sets-{counts.pop()}" if len(counts) == 1 else "sets-" + "-".join(f"n{n}x{k}" for n, k in sorted(num_sets.items())))
    labelled = [
        ("orders", orders_per_set),
        ("window", None if segment_window is None else f"{segment_window[0]}-{segment_window[1]}"),
        ("maxlen", max_document_tokens),
        ("mode", segment_mode),
        ("tolerance", None if length_tolerance is None else f"{length_tolerance:g}"),
        ("seed", seed),
        ("resamples", resamples),
        ("bootseed", resampling_seed),
    ]
    parts += [f"{label}-{value}" for label, value in labelled if value is not None]
    return ".".join(parts)


class AbsTaskPermutationFairness(AbsTask):
    """Base class: loads a comparable corpus and evaluates each subset with a :class:`ProbeSession`.

    Subclasses set ``metadata`` and the class defaults below.

    Args:
        seed: draws the segment sets and sampled orders.
        corpus: a local JSONL/Parquet path or a ``ComparableCorpus`` instead of the task's own.
        num_sets: segment sets per instance, one number or ``{n: sets}`` (sizes not named keep the default).
        orders_per_set: sample this many orders per set instead of all ``n!``.
        segment_window: ``(low, high)`` segment tokens; default scaled to the model's maximum length.
        max_document_tokens: longest document; default the model's maximum length.
        segment_mode: ``"filter"`` (the paper) or ``"lead"`` (cut long texts to leading sentences);
            default the task's (``"lead"`` for the man pages, whose excerpts end mid-section anyway).
        length_tolerance: the +/-70 % cross-language length rule (0.7).
        resamples / resampling_seed: the bootstrap of the fairness intervals and paired changes
            (default 2000 resamples, seed 0; docs/method.md#s5-1).
        baseline: a baseline model's observations per subset (its task's ``observations`` after its run,
            e.g. the uncalibrated twin's): each subset also gets its paired change of fairness against them.
    """

    default_num_sets: ClassVar[Mapping[int, int]] = {3: 10, 4: 3}
    default_segment_mode: ClassVar[str] = "filter"
    corpus_source: ClassVar[str] = "sample"
    _support_cross_encoder = False
    _support_search = False

    def __init__(
        self,
        seed: int = 42,
        *,
        corpus: str | Path | ComparableCorpus | None = None,
        num_sets: int | Mapping[int, int] | None = None,
        orders_per_set: int | None = None,
        segment_window: tuple[int, int] | None = None,
        max_document_tokens: int | None = None,
        segment_mode: str | None = None,
        length_tolerance: float = 0.7,
        resamples: int | None = None,
        resampling_seed: int | None = None,
        baseline: Mapping[str, Observations] | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:  # mteb's AbsTask takes any keyword and ignores it: a misspelt setting would run the defaults
            known = [name for name in inspect.signature(AbsTaskPermutationFairness.__init__).parameters
                     if name not in ("self", "kwargs")]
            raise TypeError(f"{type(self).__name__} got unknown setting(s) {', '.join(map(repr, sorted(kwargs)))}; "
                            f"its settings: {', '.join(known)}.")
        segment_mode = segment_mode or self.default_segment_mode
        ns = self.sizes()
        if isinstance(num_sets, Mapping) and (other := [n for n in num_sets if n not in ns]):
            raise ValueError(f"num_sets names {', '.join(map(repr, other))}, which {type(self).__name__} does not build: "
                             f"its keys are numbers of segments, {', '.join(map(str, ns))}.")
        self.probe_settings = ProbeSettings(  # first: a bad seed is named here, not by numpy inside mteb
            num_sets={**self.default_num_sets, **num_sets} if isinstance(num_sets, Mapping) else
            dict(self.default_num_sets) if num_sets is None else num_sets,
            orders_per_set=orders_per_set,
            seed=seed,
            selection=SelectionSettings(
                segment_window=tuple(segment_window) if segment_window is not None else None,  # type: ignore[arg-type]
                max_document_tokens=max_document_tokens,
                length_tolerance=length_tolerance,
                mode=segment_mode,  # type: ignore[arg-type]
            ),
            resampling=drawable(Resampling(resamples=Resampling.resamples if resamples is None else resamples,
                                           seed=Resampling.seed if resampling_seed is None else resampling_seed)),
        )
        with _quiet_beta_notice():
            super().__init__(seed=seed)
        if corpus is not None and not isinstance(corpus, ComparableCorpus):
            if not isinstance(corpus, (str, os.PathLike)):
                raise TypeError(f"corpus must be a path to a JSONL/Parquet file or a save_to_disk folder, or a "
                                f"ComparableCorpus; got {type(corpus).__name__}.")
            corpus = load_local_corpus(corpus)
        self.corpus_override = corpus
        if corpus is not None:
            self._declare_corpus_languages(corpus)
        self.session: ProbeSession | None = None
        self.baseline = dict(baseline or {})
        self.observations: dict[str, Observations] = {}
        """Each evaluated subset's observations, kept after mteb unloads the data (a later run's baseline)."""
        self._name_the_settings(seed, num_sets, orders_per_set, segment_window, max_document_tokens, segment_mode,
                                length_tolerance, resamples, resampling_seed)

    @classmethod
    def sizes(cls) -> list[int]:
        """The numbers of segments this task's documents have (its subsets' n)."""
        return sorted({LanguageConfig.parse(name).n for name in cls.metadata.hf_subsets})

    def _name_the_settings(self, seed: int, num_sets: int | Mapping[int, int] | None, orders_per_set: int | None,
                           segment_window: tuple[int, int] | None, max_document_tokens: int | None, segment_mode: str,
                           length_tolerance: float, resamples: int | None, resampling_seed: int | None) -> None:
        """Make every setting that changes the numbers part of the task name (see :func:`settings_suffix`),
        so mteb's result cache never hands back a result computed with other settings; a user's corpus
        also becomes the dataset, its content hash the dataset revision."""
        ns = self.sizes()
        sets = {n: self.probe_settings.sets_for(n) for n in ns}
        suffix = settings_suffix(
            corpus=self.corpus_override,
            num_sets=None if sets == {n: self.default_num_sets[n] for n in ns} else sets,
            orders_per_set=orders_per_set, segment_window=segment_window, max_document_tokens=max_document_tokens,
            segment_mode=None if segment_mode == self.default_segment_mode else segment_mode,
            length_tolerance=None if length_tolerance == 0.7 else length_tolerance,
            seed=None if seed == 42 else seed,
            resamples=None if resamples in (None, Resampling.resamples) else resamples,
            resampling_seed=None if resampling_seed in (None, Resampling.seed) else resampling_seed,
        )
        update: dict[str, Any] = {}
        if suffix:
            update["name"] = f"{type(self).metadata.name}.{suffix}"
        if self.corpus_override is not None:
            update["dataset"] = {"path": self.corpus_override.source, "revision": self.corpus_override.fingerprint()}
        if update:
            self.metadata = self.metadata.model_copy(update=update)

    def _declare_corpus_languages(self, corpus: ComparableCorpus) -> None:
        """The subsets of a user's corpus: this task's sizes n over the languages the corpus has
        (mixed instances keep the task's later languages where the corpus has them)."""
        declared = [LanguageConfig.parse(name) for name in self.metadata.hf_subsets]
        ns = sorted({c.n for c in declared})
        have = list(corpus.languages)
        if not have:  # no subset to evaluate: mteb would record a result of no scores, and count the task done
            skipped = "; ".join(f"{count} {reason}" for reason, count in sorted(corpus.skipped.items()))
            raise CorpusError(f"the corpus {corpus.source} holds no texts" + (f" (skipped: {skipped})" if skipped else "")
                              + '; one row per topic: {"id": ..., "texts": {"en": ..., "de": ...}}.')
        later = [lang for lang in dict.fromkeys(c.later for c in declared if c.mixed) if lang in have] or have
        names = subset_names(ns, have, later)
        self.metadata = self.metadata.model_copy(update={"eval_langs": eval_langs(names)})
        self.hf_subsets = list(self.metadata.hf_subsets)

    def filter_languages(self, languages: Sequence[str] | None, script: Sequence[str] | None = None,
                         hf_subsets: Sequence[str] | None = None, exclusive_language_filter: bool = False) -> Any:
        """mteb's filter; subsets named outright that a user's corpus cannot build are kept, so that
        loading names the languages the corpus lacks."""
        if hf_subsets and self.corpus_override is not None and not set(hf_subsets) <= set(self.metadata.hf_subsets):
            self.hf_subsets = [LanguageConfig.parse(name).name for name in hf_subsets]
            return self
        return super().filter_languages(languages, script, hf_subsets=hf_subsets,
                                        exclusive_language_filter=exclusive_language_filter)

    # ------------------------------------------------------------------ data
    @property
    def corpus_languages(self) -> list[str]:
        langs: dict[str, None] = {}
        for name in self.hf_subsets:
            config = LanguageConfig.parse(name)
            langs.update({config.lead: None, config.later: None})
        return list(langs)

    def load_corpus(self) -> ComparableCorpus:
        if isinstance(self.corpus_override, ComparableCorpus):
            return self.corpus_override
        if self.corpus_override is not None:
            return self.corpus_override
        if self.corpus_source == "sample":
            return sample_corpus()
        if self.corpus_source == "manpages":
            return manpages_corpus()
        return load_hf_corpus(self.metadata.dataset["path"], revision=self.metadata.dataset["revision"],
                              languages=self.corpus_languages)

    def load_data(self, num_proc: int | None = None, *, timer: Any = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        corpus = self.load_corpus()
        corpus.require_languages(self.corpus_languages)
        self.dataset = {name: {split: corpus for split in self.eval_splits} for name in self.hf_subsets}  # type: ignore[misc]
        self.data_loaded = True

    def unload_data(self) -> None:
        super().unload_data()
        self.session = None

    # ------------------------------------------------------------------ evaluation
    def _session_for(self, model: Any, corpus: ComparableCorpus, hf_split: str, encode_kwargs: Mapping[str, Any]) -> ProbeSession:
        session = self.session
        if session is None or session.model is not model or session.corpus is not corpus:
            session = ProbeSession(corpus, model, self.probe_settings, task_metadata=self.metadata,
                                   hf_split=hf_split, encode_kwargs=dict(encode_kwargs))
            self.session = session
        return session

    def _evaluate_subset(self, model: Any, data_split: Any, *, hf_split: str, hf_subset: str, encode_kwargs: Any,
                         prediction_folder: Path | None = None, num_proc: int | None = None, timer: Any = None,
                         **kwargs: Any) -> dict[str, Any]:
        session = self._session_for(model, data_split, hf_split, encode_kwargs)
        result = session.run(hf_subset, baseline=self.baseline.get(hf_subset))
        self.observations[hf_subset] = result.observations
        entry = load(result.scores)
        logger.info("%s %s: position_fairness=%.4f (%d documents, %.1f s)", self.metadata.name, hf_subset,
                    entry.profile().fairness, entry.counts.documents, result.seconds)
        if prediction_folder is not None:
            obs = result.observations
            self._save_task_predictions(
                {"position": obs.position.tolist(), "segment_set": obs.cluster.tolist(),
                 "topic": obs.topic.tolist(), "language": obs.language.tolist(),
                 "document": obs.document.tolist(), "order": obs.order.tolist(),
                 "sigma": obs.sigma.tolist(), "tau": [None if t != t else t for t in obs.tau.tolist()]},
                model, prediction_folder, hf_split=hf_split, hf_subset=hf_subset,
            )
        # ---- per-observation sidecar (mteb_fairpos.results.units): one row per (document, position), for
        # paired changes across runs; the probe's own statistics do not read it
        obs, scores = result.observations, dict(result.scores)
        measured = {"tau": obs.tau.astype(np.float32)} if np.isfinite(obs.tau).any() else {}  # tau: mean pooling only
        rows = units.rows([f"{d}:{p}" for d, p in zip(obs.document.tolist(), obs.position.tolist(), strict=True)],
                          [str(p) for p in obs.position.tolist()], obs.sigma,
                          segment_set=[str(c) for c in obs.cluster.tolist()], topic=[str(t) for t in obs.topic.tolist()],
                          **measured)
        scores[units.DIGEST] = units.hand_over(self.metadata.name, hf_split, hf_subset, rows, kind="probe")
        return scores

    def _calculate_descriptive_statistics_from_split(self, split: str, *, hf_subset: str | None = None,
                                                     compute_overall: bool = False, num_proc: int | None = None) -> dict[str, Any]:
        if not self.data_loaded:
            self.load_data()
        names = [hf_subset] if hf_subset else list(self.hf_subsets)
        corpus: ComparableCorpus = self.dataset[names[0]][split]  # type: ignore[index]
        languages = Counter()
        for name in names:
            config = LanguageConfig.parse(name)
            languages.update({config.lead: 1, config.later: 1})
        texts = [t.texts[lang] for t in corpus for lang in languages if lang in t.texts]
        return {
            "num_samples": len(corpus),
            "number_of_characters": sum(len(t) for t in texts),
            "num_texts": len(texts),
            "topics_per_language": {lang: n for lang, n in corpus.coverage().items() if lang in languages},
        }


@contextlib.contextmanager
def _quiet_beta_notice() -> Iterator[None]:
    """Silence mteb's "this task is in beta" notice: the flag only keeps the probe out of type filters."""

    def not_beta(record: logging.LogRecord) -> bool:
        return "currently in beta" not in record.getMessage()

    abstask_logger = logging.getLogger("mteb.abstasks.abstask")
    abstask_logger.addFilter(not_beta)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*currently in beta")
            yield
    finally:
        abstask_logger.removeFilter(not_beta)


def _metadata(name: str, description: str, dataset: dict[str, str], names: Sequence[str], *, sample: bool,
              **overrides: Any) -> FairPosTaskMetadata:
    fields: dict[str, Any] = dict(
        name=name,
        description=description,
        reference=PAPER_REFERENCE,
        dataset=dataset,
        # No mteb task family fits a probe that scores positions, not pairs. is_beta keeps it out
        # of mteb's filters by type (get_tasks(task_types=["STS"]) excludes it) while `mteb run -t`
        # and get_task still find it by name; "STS" is only the nearest type mteb has.
        type="STS",
        is_beta=True,
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=eval_langs(names),
        main_score="position_fairness",
        # Wikipedia articles: written between Wikipedia's launch and the corpus' release with the paper.
        date=("2026-01-01", "2026-06-30") if sample else ("2001-01-15", "2026-01-31"),
        domains=["Encyclopaedic", "Written"],
        task_subtypes=[],  # none of mteb's subtypes describes a probe of positions
        license="apache-2.0" if sample else "not specified",
        annotations_creators="derived",
        dialect=[],
        sample_creation="created" if sample else "found",
        bibtex_citation=PAPER_BIBTEX,
    )
    return FairPosTaskMetadata(**(fields | overrides))


WIKI_LANGUAGES = ("en", "de", "hi", "it", "ko", "zh")
SAMPLE_LANGUAGES = ("en", "de", "fr", "it")
MANPAGES_LANGUAGES = ("en", "de", "fr", "es", "ja", "ru")


class PermutationFairness(AbsTaskPermutationFairness):
    """The permutation probe on the paper's comparable Wikipedia corpus, GPU-hour sized."""

    corpus_source = "hf"
    default_num_sets = {3: 30, 4: 10}
    metadata = _metadata(
        "PermutationFairness",
        "Permutation-based positional fairness of long-document embeddings (Schuhmacher et al.): documents of n "
        "Wikipedia articles in every order; how well the document embedding represents the segment at each position "
        "(sigma, main score position_fairness = min/max of the per-position mean) and, for mean-pooled models, how much "
        "of each segment survives in context (tau). n in {3, 4}; monolingual and mixed (later language en or de) "
        "instances, 30 segment sets x 6 orders (n=3) and 10 x 24 (n=4) per instance.",
        {"path": HF_DATASET, "revision": "main"},
        subset_names((3, 4), WIKI_LANGUAGES, later_languages=("en", "de")),
        sample=False,
    )


class PermutationFairnessPaper(AbsTaskPermutationFairness):
    """Paper scale: n in {3..6}, all 36 language configurations, ~1,000 documents per instance (n=6: 10,080)."""

    corpus_source = "hf"
    default_num_sets = {3: 167, 4: 42, 5: 9, 6: 14}
    metadata = _metadata(
        "PermutationFairnessPaper",
        "Paper-scale permutation fairness probe on the comparable Wikipedia corpus: n in {3, 4, 5, 6}, all monolingual "
        "and mixed-language configurations of en, de, hi, it, ko, zh, with 1,002 / 1,008 / 1,080 / 10,080 documents per "
        "instance (167 / 42 / 9 / 14 segment sets in all n! orders).",
        {"path": HF_DATASET, "revision": "main"},
        subset_names((3, 4, 5, 6), WIKI_LANGUAGES),
        sample=False,
    )


class PermutationFairnessSample(AbsTaskPermutationFairness):
    """The probe on the small sample bundled with the package (offline)."""

    corpus_source = "sample"
    default_num_sets = {3: 10, 4: 3}
    metadata = _metadata(
        "PermutationFairnessSample",
        "Permutation fairness probe on a small comparable sample bundled with mteb-fairpos (short encyclopedic texts "
        "on everyday topics in en, de, fr, it, written for the package): a smoke test and offline demo, not a benchmark.",
        {"path": "mteb-fairpos/comparable-sample", "revision": "1"},
        subset_names((3, 4), SAMPLE_LANGUAGES, later_languages=("en", "de")),
        sample=True,
    )


class PermutationFairnessManpages(AbsTaskPermutationFairness):
    """The probe on real text, offline: translated Linux manual pages bundled with the package."""

    corpus_source = "manpages"
    default_num_sets = {3: 12, 4: 4}
    default_segment_mode = "lead"
    metadata = _metadata(
        "PermutationFairnessManpages",
        "Permutation fairness probe on real multilingual technical text bundled with mteb-fairpos: 164 pages of the "
        "Linux man-pages project (NAME line and leading DESCRIPTION paragraphs) with the translations Debian ships "
        "(same page = same topic; en 164, ru 137, ja 124, fr 117, de 113, es 96 topics). Texts longer than the segment "
        "window keep their leading sentences (segment_mode='lead'). Sources, versions and licences: "
        "mteb_fairpos/data/manpages_corpus.NOTICE.md.",
        {"path": "mteb-fairpos/manpages-corpus", "revision": MANPAGES_FINGERPRINT},
        subset_names((3, 4), MANPAGES_LANGUAGES, later_languages=("en", "de")),
        sample=False,
        date=("2023-02-05", "2023-02-05"),
        domains=["Programming", "Written"],
        license="gpl-3.0",
        annotations_creators="derived",
        sample_creation="found",
    )


DEMO_SUBSETS = ("n3_en", "n3_de", "n3_en-de")


class PermutationFairnessManpagesDemo(PermutationFairnessManpages):
    """What ``mteb-fairpos demo`` runs: the man-page probe on exactly the three subsets the demo shows, so that
    its results are a complete task (not 3 of 32 subsets)."""

    metadata = PermutationFairnessManpages.metadata.model_copy(update={
        "name": "PermutationFairnessManpagesDemo",
        "description": "The offline demo of the permutation fairness probe: the bundled Linux man pages "
        "(PermutationFairnessManpages) on n3_en, n3_de and n3_en-de, 12 segment sets in all 6 orders per subset.",
        "eval_langs": eval_langs(DEMO_SUBSETS),
    })


PERMUTATION_TASKS: list[type[AbsTaskPermutationFairness]] = [
    PermutationFairness,
    PermutationFairnessPaper,
    PermutationFairnessSample,
    PermutationFairnessManpages,
    PermutationFairnessManpagesDemo,
]
