"""Independent nDCG@10 for the retrieval-task tests: rank the corpus by cosine similarity with a
SentenceTransformer ourselves, without mteb, and score each query's single relevant passage."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures"


def own_ndcg_at_10(model, split: Mapping) -> dict[str, float]:
    """nDCG@10 (binary relevance) of every query of an mteb RetrievalSplitData."""
    corpus_ids = list(split["corpus"]["id"])
    doc_vecs = model.encode(list(split["corpus"]["text"]), normalize_embeddings=True, convert_to_numpy=True)
    qids = list(split["queries"]["id"])
    query_vecs = model.encode(list(split["queries"]["text"]), normalize_embeddings=True, convert_to_numpy=True)
    sims = query_vecs @ doc_vecs.T
    out = {}
    for row, qid in enumerate(qids):
        relevant = {d for d, s in split["relevant_docs"][qid].items() if s > 0}
        order = np.argsort(-sims[row], kind="stable")[:10]
        dcg = sum(1.0 / math.log2(rank + 2) for rank, idx in enumerate(order) if corpus_ids[idx] in relevant)
        ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(relevant), 10)))
        out[qid] = dcg / ideal
    return out


def group_means(scores: Mapping[str, float], memberships: Mapping[str, Iterable[str]], groups) -> dict:
    out = {}
    for g in groups:
        values = [s for q, s in scores.items() if g in memberships.get(q, ())]
        out[g] = sum(values) / len(values) if values else None
    return out
