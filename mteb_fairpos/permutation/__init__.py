"""The permutation fairness probe of the first paper (docs/method.md#s2).

Documents are built from ``n`` segments on distinct topics in every order; how similar the
document embedding stays to each segment's standalone embedding (sigma), and for mean-pooled
models how much of each segment survives inside the document (tau), is regressed on position.
The mteb tasks are in :mod:`mteb_fairpos.tasks.permutation`; ``mteb-fairpos probe`` runs it on any
corpus and ``mteb-fairpos demo`` on the bundled man-page corpus, offline.
"""

from ..segmented import find_sentence_transformer
from .access import ModelAccess
from .corpus import (
    HF_DATASET,
    MANPAGES_PATH,
    SAMPLE_PATH,
    ComparableCorpus,
    CorpusError,
    Topic,
    build_corpus,
    corpus_from_splits,
    load_corpus_file,
    load_hf_corpus,
    load_local_corpus,
    load_saved_corpus,
    manpages_corpus,
    sample_corpus,
)
from .intervals import FairnessBootstrap, fairness_bootstrap
from .instances import Instance, LanguageConfig, OrderedDocument, assemble, build_instance, draw_sets, orders
from .probe import ConfigResult, Observations, ProbeSession, ProbeSettings
from .selection import SelectionSettings, build_pool, count_tokens, eligible_topics
from .spans import DocumentTokens, assign_tokens, document_tokens
from .stats import language_effect, lead_contrast, position_fairness, position_means, position_model, profile_entry, profile_scores

__all__ = [
    "HF_DATASET",
    "MANPAGES_PATH",
    "SAMPLE_PATH",
    "ComparableCorpus",
    "ConfigResult",
    "CorpusError",
    "OrderedDocument",
    "DocumentTokens",
    "FairnessBootstrap",
    "Instance",
    "LanguageConfig",
    "ModelAccess",
    "Observations",
    "ProbeSession",
    "ProbeSettings",
    "SelectionSettings",
    "Topic",
    "assemble",
    "assign_tokens",
    "build_corpus",
    "build_instance",
    "build_pool",
    "corpus_from_splits",
    "count_tokens",
    "document_tokens",
    "draw_sets",
    "eligible_topics",
    "fairness_bootstrap",
    "find_sentence_transformer",
    "language_effect",
    "lead_contrast",
    "load_corpus_file",
    "load_hf_corpus",
    "load_local_corpus",
    "load_saved_corpus",
    "manpages_corpus",
    "orders",
    "position_fairness",
    "position_means",
    "position_model",
    "profile_entry",
    "profile_scores",
    "sample_corpus",
]
