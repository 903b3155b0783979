"""The mteb metadata of the PosIR tasks: one subset per (query language, domain)."""

from __future__ import annotations

from collections.abc import Sequence

from ..metadata import FairPosTaskMetadata

from .dataset import ENGLISH, LAST_KNOWN_REVISION, POSIR_CITATION, POSIR_DOMAINS, POSIR_HUB_ID, SPLIT, subset_name


def task_metadata(name: str, languages: Sequence[str], cross: bool, *, instructed: bool = False) -> FairPosTaskMetadata:
    setting = "queries in each language, English corpus of the same domain" if cross else "queries and corpus in the same language"
    instruction = " Every query carries the authors' instruction, as in the paper." if instructed else ""
    # cross-lingual subsets run domain by domain, so each English corpus is embedded once and reused
    pairs = ([(lang, domain) for domain in POSIR_DOMAINS for lang in languages] if cross
             else [(lang, domain) for lang in languages for domain in POSIR_DOMAINS])
    return FairPosTaskMetadata(
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
        bibtex_citation=POSIR_CITATION,
    )
