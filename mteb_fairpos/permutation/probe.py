"""The permutation fairness probe end to end: select, build, embed, measure, fit (docs/method.md#s2).

A :class:`ProbeSession` binds one corpus to one model. It measures segments with the model's
tokenizer once, then runs configurations one by one (as mteb runs subsets): each unique
standalone segment is embedded once for the whole session (shared by all permutations, sets
and configurations that use it) and each document once; for mean-pooled models that single
document pass also yields the late-chunking vectors for tau.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import whole
from ..resampling import Resampling
from ..results.schema import Counts, Estimate, ScoreEntry, Settings, dump
from .access import ModelAccess
from .corpus import ComparableCorpus, CorpusError
from .instances import MAX_ORDERS, Instance, LanguageConfig, SegmentKey, build_instance
from .intervals import sets_share_topics
from .selection import SegmentPool, SelectionSettings, build_pool, eligible_topics
from .spans import document_tokens
from .stats import language_effect, lead_contrast, profile_entry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeSettings:
    """Sizes and seeds of a probe run.

    Args:
        num_sets: segment sets per configuration, one number or ``{n: sets}``.
        orders_per_set: ``None`` builds all ``n!`` orders (up to ``max_orders``); a number
            samples that many distinct orders per set.
        seed: draws the sets (and sampled orders).
        selection: the segment window, maximum document length, +/-70 % rule, mode.
        separator: joins segments into a document (docs/method.md#s2-2: a single space).
        resampling: the bootstrap of the fairness intervals and paired changes (docs/method.md#s5-1).
    """

    num_sets: int | Mapping[int, int] = 10
    orders_per_set: int | None = None
    seed: int = 42
    selection: SelectionSettings = field(default_factory=SelectionSettings)
    separator: str = " "
    max_orders: int = MAX_ORDERS
    resampling: Resampling = field(default_factory=Resampling)

    def __post_init__(self) -> None:
        """Refuse sizes no run can use before any model loads; standard errors are clustered by segment set."""
        sizes = self.num_sets.items() if isinstance(self.num_sets, Mapping) else [(None, self.num_sets)]
        for n, sets in sizes:
            if n is not None and (not whole(n) or n < 2):
                raise ValueError(f"num_sets: {n!r} is no number of segments n (an integer of at least 2).")
            if not whole(sets) or sets < 2:
                raise ValueError(f"num_sets{'' if n is None else f'[{n}]'} must be an integer of at least 2 (standard "
                                 f"errors are clustered by segment set); got {sets!r}.")
        if self.orders_per_set is not None and (not whole(self.orders_per_set) or self.orders_per_set < 1):
            raise ValueError(f"orders_per_set must be None (all orders) or an integer of at least 1; got {self.orders_per_set!r}.")
        if not whole(self.seed) or not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be an integer from 0 to 2**32 - 1; got {self.seed!r}.")

    def sets_for(self, n: int) -> int:
        if isinstance(self.num_sets, Mapping):
            if n not in self.num_sets:
                raise ValueError(f"no number of segment sets given for n={n} (num_sets has {sorted(self.num_sets)}).")
            return int(self.num_sets[n])
        return int(self.num_sets)


@dataclass
class Observations:
    """One row per (document, position) that was measured."""

    cluster: np.ndarray
    """Segment-set key (its sorted topic ids), for clustered standard errors."""
    position: np.ndarray
    sigma: np.ndarray
    tau: np.ndarray
    """NaN where tau is not defined or not measurable."""
    language: np.ndarray
    topic: np.ndarray
    """The topic of the segment measured (a row's segment is ``(topic, language)``)."""
    document: np.ndarray
    """Index of the document in the instance; with ``order`` it says which permutation a row comes from."""
    order: np.ndarray
    """The document's order of its set's topics, e.g. ``"2-0-1"``."""


@dataclass
class ConfigResult:
    config: LanguageConfig
    instance: Instance
    observations: Observations
    scores: dict[str, Any]
    seconds: float


class ProbeSession:
    """One model on one corpus (see the module docstring).

    Args:
        corpus: the comparable corpus.
        model: a sentence-transformers model, an mteb wrapper, or any mteb encoder.
        languages: every language any configuration of this session will use.
        settings: sizes, seed and selection.
        task_metadata / hf_split / encode_kwargs: for the mteb protocol route.
    """

    def __init__(self, corpus: ComparableCorpus, model: Any, settings: ProbeSettings | None = None, *,
                 task_metadata: Any = None, hf_split: str = "test", encode_kwargs: dict[str, Any] | None = None) -> None:
        self.corpus = corpus
        self.settings = settings or ProbeSettings()
        self.model = model
        self.access = ModelAccess(model, task_metadata=task_metadata, hf_split=hf_split, encode_kwargs=encode_kwargs)
        self.pool: SegmentPool | None = None
        self.segment_cache: dict[SegmentKey, np.ndarray] = {}
        self.results: dict[str, ConfigResult] = {}
        self.documents_encoded = 0

    def measure_languages(self, languages: Iterable[str]) -> SegmentPool:
        """Measure the texts of ``languages`` not measured yet (token counts, window) and return the pool."""
        wanted = list(dict.fromkeys(languages))
        done = set(self.pool.outside) if self.pool is not None else set()
        todo = [lang for lang in wanted if lang not in done]
        if todo:
            new = build_pool(self.corpus, todo, self.access.tokenizer, self.settings.selection, self.access.max_length)
            if self.pool is None:
                self.pool = new
            else:
                self.pool.texts.update(new.texts)
                self.pool.lengths.update(new.lengths)
                self.pool.outside.update(new.outside)
                self.pool.shortest.update(new.shortest)
        assert self.pool is not None
        return self.pool

    # ------------------------------------------------------------------ instances
    def instance(self, config: LanguageConfig) -> tuple[Instance, int, dict[str, int]]:
        """The documents of ``config``, the number of usable topics and the excluded topics by reason."""
        self.measure_languages((config.lead, config.later))
        topics, excluded = eligible_topics(self.pool, self.corpus, config.lead, config.later,
                                           self.settings.selection.length_tolerance)
        if len(topics) < config.n:
            raise CorpusError(
                f"{config.name}: only {len(topics)} usable topic(s) for documents of {config.n} segments "
                f"(segment window {list(self.pool.window)} tokens; excluded: {excluded or 'none'})."
            )
        lengths = self.pool.lengths
        budget = self.pool.max_document_tokens - self.access.special_tokens - self.access.prompt_tokens - config.n

        def fits(topic_set: tuple[str, ...]) -> bool:
            later = sum(lengths[(t, config.later)] for t in topic_set)
            return later + max(lengths[(t, config.lead)] - lengths[(t, config.later)] for t in topic_set) <= budget

        requested = self.settings.sets_for(config.n)
        built = build_instance(config, topics, self.pool.texts, num_sets=requested,
                               seed=self.settings.seed, orders_per_set=self.settings.orders_per_set,
                               separator=self.settings.separator, fits=fits, max_orders=self.settings.max_orders)
        if len(built.sets) < 2:
            raise CorpusError(f"{config.name}: only {len(built.sets)} segment set of {config.n} usable topics fits; "
                              "clustered standard errors need at least 2.")
        return built, len(topics), excluded

    # ------------------------------------------------------------------ running
    def embed_segments(self, keys: Iterable[SegmentKey]) -> None:
        """Embed the segments not embedded yet in this session."""
        missing = sorted(set(keys) - self.segment_cache.keys())
        if missing:
            vectors = self.access.encode_segments([self.pool.texts[key] for key in missing])
            self.segment_cache.update(zip(missing, vectors))

    def run(self, config: LanguageConfig | str, baseline: Observations | None = None) -> ConfigResult:
        """Measure one configuration and fit its statistics; given a ``baseline`` model's observations of the
        same configuration (the uncalibrated twin's), also the paired change of fairness against it."""
        config = LanguageConfig.parse(config) if isinstance(config, str) else config
        start = time.perf_counter()
        instance, usable, excluded = self.instance(config)
        docs = instance.documents
        self.embed_segments(instance.segment_keys)

        n = config.n
        tau = np.full((len(docs), n), np.nan)
        truncated = np.zeros((len(docs), n), dtype=bool)
        unaligned = 0
        tokens = document_tokens(self.access.tokenizer, [d.text for d in docs], [d.char_spans for d in docs],
                                 self.access.max_length, prompt=self.access.prompt)
        for row, info in enumerate(tokens):
            truncated[row] = info.truncated

        want_tau = self.access.tau_status is None
        encoded = self.access.encode_documents([d.text for d in docs], tokens, late_chunks=want_tau)
        if encoded.late_chunks is not None:
            for index, (chunks, aligned) in enumerate(zip(encoded.late_chunks, encoded.aligned)):
                if not aligned:
                    unaligned += 1
                    continue
                for pos, context in enumerate(chunks):
                    if context is not None and not truncated[index, pos]:
                        tau[index, pos] = float(context @ self.segment_cache[docs[index].keys[pos]])
        doc_vectors = encoded.vectors
        self.documents_encoded += len(docs)
        segment_vectors = np.stack([[self.segment_cache[key] for key in d.keys] for d in docs])  # (docs, n, dim)
        sigma = np.einsum("dnk,dk->dn", segment_vectors, doc_vectors)

        keep = ~truncated
        if truncated.any():
            logger.warning("%s: %d segment(s) cut by the maximum length of %d tokens are reported, not measured.",
                           config.name, int(truncated.sum()), self.access.max_length)
            lost = [p + 1 for p in range(n) if not keep[:, p].any()]
            if lost:
                raise CorpusError(
                    f"{config.name}: the model's maximum length of {self.access.max_length} tokens cuts position(s) {lost} "
                    f"in every document ({int(truncated.sum())} truncated segments); lower max_document_tokens or the "
                    "segment window, or use a model with a longer maximum length."
                )
        cluster_of_set = ["|".join(sorted(topics)) for topics in instance.sets]
        obs = Observations(
            cluster=np.array([[cluster_of_set[d.set_index]] * n for d in docs], dtype=object)[keep],
            position=np.tile(np.arange(1, n + 1), (len(docs), 1))[keep],
            sigma=sigma[keep],
            tau=tau[keep],
            language=np.array([list(config.languages)] * len(docs), dtype=object)[keep],
            topic=np.array([[key[0] for key in d.keys] for d in docs], dtype=object)[keep],
            document=np.repeat(np.arange(len(docs))[:, None], n, axis=1)[keep],
            order=np.array([["-".join(map(str, d.order))] * n for d in docs], dtype=object)[keep],
        )
        scores = self._scores(config, instance, obs, usable, excluded, int(truncated.sum()), unaligned, baseline)
        result = ConfigResult(config, instance, obs, scores, time.perf_counter() - start)
        self.results[config.name] = result
        return result

    # ------------------------------------------------------------------ scores
    def _scores(self, config: LanguageConfig, instance: Instance, obs: Observations, usable: int,
                excluded: dict[str, int], truncated: int, unaligned: int, baseline: Observations | None) -> dict[str, Any]:
        n = config.n
        resampling = self.settings.resampling
        paired = baseline is not None and _same_observations(obs, baseline)
        entry = profile_entry(obs.sigma, obs.position, obs.cluster, n, topics=obs.topic, resampling=resampling,
                              baseline_values=baseline.sigma if paired else None)
        scores = entry.details
        measured = np.isfinite(obs.tau)
        if self.access.tau_status is not None:
            scores["tau_status"] = self.access.tau_status
        elif not measured.any():
            scores["tau_status"] = "n/a: no segment could be located in its document"
        if "tau_status" in scores:
            entry.profile("tau").fairness = math.nan  # reported as undefined; tau_status says why
        else:
            entry.update(profile_entry(obs.tau[measured], obs.position[measured], obs.cluster[measured], n, family="tau",
                                       topics=obs.topic[measured], resampling=resampling,
                                       baseline_values=baseline.tau[measured] if paired else None))
            scores["tau_status"] = "measured"
        if config.mixed:
            self._add_mixed_terms(config, obs, entry)
        window = self.pool.window
        scores.update({
            "n": n,
            "lead_language": config.lead,
            "later_language": config.later,
            "mixed": config.mixed,
            "all_orders": instance.orders_per_set == math.factorial(n),
            "num_tau_unmeasured": int((~measured).sum()) if self.access.tau_status is None else None,
            "route": self.access.route,
            "notes": list(instance.notes) + _few_clusters_notes(instance, obs)
                     + ([] if baseline is None or paired else [_UNPAIRED]),
        })
        entry.counts = Counts(
            documents=len(instance.documents),
            segments=len(instance.segment_keys),
            topics=len({t for topics in instance.sets for t in topics}),
            truncated=truncated,
            excluded=excluded,
            observations=int(len(obs.sigma)),
            clusters=int(len(set(obs.cluster.tolist()))),
            unaligned=unaligned,
            usable=usable,
        )
        entry.settings = Settings(
            corpus=self.corpus.source,
            hash=self.corpus.fingerprint(),
            sets=len(instance.sets),
            orders=instance.orders_per_set,
            window_low=window[0],
            window_high=window[1],
            mode=self.settings.selection.mode,
            tolerance=self.settings.selection.length_tolerance,
            document_tokens=self.pool.max_document_tokens,
            model_length=self.access.max_length,
            seed=self.settings.seed,
            resamples=resampling.resamples,
            resampling_seed=resampling.seed,
            resampled=entry.settings.resampled,
        )
        return dump(entry)

    def _add_mixed_terms(self, config: LanguageConfig, obs: Observations, entry: ScoreEntry) -> None:
        """Lead (position 1, lead language) vs later positions; net language effect when monolingual runs exist."""
        entry.terms["lead_vs_later"] = lead_contrast(obs.sigma, obs.position, obs.cluster, obs.topic).as_estimate()
        pooled = [(obs, obs.position == 1)]
        used = []
        for lang, flag in ((config.later, False), (config.lead, True)):
            mono = self.results.get(LanguageConfig.monolingual(config.n, lang).name)
            if mono is not None:
                pooled.append((mono.observations, np.full(len(mono.observations.sigma), flag)))
                used.append(mono.config.name)
        if used:
            values = np.concatenate([o.sigma for o, _ in pooled])
            positions = np.concatenate([o.position for o, _ in pooled])
            clusters = np.concatenate([o.cluster for o, _ in pooled])
            topics = np.concatenate([o.topic for o, _ in pooled])
            lead = np.concatenate([flag for _, flag in pooled])
            entry.terms["language_effect"] = language_effect(values, positions, clusters, lead, config.n, topics).as_estimate()
            entry.details["language_effect_pooled_with"] = used
        else:
            entry.terms["language_effect"] = Estimate(None)
            entry.details["language_effect_pooled_with"] = []
            entry.details["language_effect_status"] = (
                f"run {LanguageConfig.monolingual(config.n, config.later).name} (or "
                f"{LanguageConfig.monolingual(config.n, config.lead).name}) before {config.name} in the same session to estimate it"
            )


MIN_CLUSTERS = 10
"""Below this many segment sets (or, where sets share topics, distinct topics) the clustered errors and the
bootstrap rest on few units. The t intervals held their coverage down to 5 sets in the simulation of
docs/method.md#s5-1, but there the effects are normal; skewed real effects need more clusters."""

_UNPAIRED = ("no paired change against the baseline: its observations differ from these (other documents, "
             "segments cut or unmeasured), so the two models were not scored on the same instances.")


def _few_clusters_notes(instance: Instance, obs: Observations) -> list[str]:
    """A note where inference is weak because there are few clusters (see :data:`MIN_CLUSTERS`)."""
    sets = len(instance.sets)
    shared = sets_share_topics(obs.cluster, obs.topic)
    topics = len(set(obs.topic.tolist()))
    clusters = min(sets, topics) if shared else sets
    if clusters >= MIN_CLUSTERS:
        return []
    what = f"{sets} segment sets on {topics} distinct topics" if shared else f"{sets} segment sets"
    note = (f"only {what}: intervals and p-values rest on {clusters} clusters (fewer than {MIN_CLUSTERS}) and "
            "are somewhat too narrow; use more sets (and a corpus with more usable topics) for conclusions.")
    logger.warning("%s: %s", instance.config.name, note)
    return [note]


def _same_observations(obs: Observations, baseline: Observations) -> bool:
    """Whether ``baseline`` holds the same observations row by row (document, position, set and topic)."""
    return all(np.array_equal(getattr(obs, name), getattr(baseline, name))
               for name in ("document", "position", "cluster", "topic"))
