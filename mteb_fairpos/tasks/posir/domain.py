"""One PosIR subset: where its three files are (`DomainRef`) and what they hold once read
(`DomainData`: mteb's retrieval split, each query's place in its document, skipped counts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._base import DatasetSchemaError, retrieval_split
from ..grouped_metrics import length_bucket, position_bin, relative_position
from .dataset import CORPUS_COLUMNS, CORPUS_FILE, QRELS_COLUMNS, QRELS_FILE, QUERIES_FILE, QUERY_COLUMNS
from .source import PosIRSource


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
    """One subset once read: mteb's retrieval split, each kept query's (length bucket, position bin)
    (``None`` when its position is unusable), and the queries left out, counted by reason."""

    split: dict[str, Any]
    positions: dict[str, tuple[str, str] | None]
    skipped: dict[str, int]


def load_domain(ref: DomainRef, query_instruction: str = "") -> DomainData:
    """One (language, domain): queries, corpus (of ``ref.corpus_language``), qrels, positions.

    Queries without text, whose relevant document is absent from the corpus, or that have no qrels,
    are left out and counted; qrels of unknown queries are ignored and counted. A repeated id, or a
    document without text, is an error naming the folder. ``query_instruction`` is
    prepended to every query text.
    """
    q, c, r = (ref.source.read(*file) for file in ref.files())

    corpus: dict[str, str] = {}
    for doc_id, text in zip(c["_id"], c["text"]):
        doc_id = str(doc_id)
        if doc_id in corpus:
            raise DatasetSchemaError(f"PosIR {ref.corpus_language}/{ref.corpus_folder}: corpus id {doc_id!r} appears twice.")
        if text is None:  # every document is searched: one left out would change the ranking of the rest
            raise DatasetSchemaError(f"PosIR {ref.corpus_language}/{ref.corpus_folder}: corpus id {doc_id!r} has no text.")
        corpus[doc_id] = text

    skipped = {"no_query_text": 0, "relevant_doc_missing": 0, "no_qrels": 0, "qrels_of_unknown_query": 0}
    query_text: dict[str, str | None] = {}
    for qid, text in zip(q["_id"], q["text"]):
        qid = str(qid)
        if qid in query_text:  # a second row would replace the first's text and position
            raise DatasetSchemaError(f"PosIR {ref.language}/{ref.query_folder}: query id {qid!r} appears twice.")
        query_text[qid] = text
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
        text = query_text[qid]
        if text is None or not text.strip():
            skipped["no_query_text"] += 1
            continue
        docs = relevant.get(qid)
        if not docs:
            skipped["no_qrels"] += 1
            continue
        if any(d not in corpus for d in docs):
            skipped["relevant_doc_missing"] += 1
            continue
        queries[qid] = query_instruction + text
        kept[qid] = docs
        relpos = relative_position(span, char_length)
        bucket = length_bucket(float(token_length)) if token_length is not None else None
        positions[qid] = (bucket, position_bin(relpos)) if relpos is not None and bucket is not None else None
    return DomainData(retrieval_split(corpus, queries, kept), positions, skipped)
