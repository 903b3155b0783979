"""What the position-aware retrieval tasks share: where their data comes from, and the
retrieval task that adds position-grouped scores to mteb's own.

Data location. Every task loads its Hugging Face dataset by id, or a local copy of it: the same
files in the same layout (for instance what ``hf download --repo-type dataset ID --local-dir
DIR`` writes). A local copy is chosen by

* the task argument ``data_dir=`` (the dataset's own folder), or else
* the environment variable ``MTEB_FAIRPOS_DATA_DIR``: a root folder holding each dataset under
  its hub id, e.g. ``$MTEB_FAIRPOS_DATA_DIR/rajpurkar/squad_v2``.

Both go through the very same loading code as the hub.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.timing import TimingStack

from ..hub import hub_access
from ..resampling import Resampling
from ..results import units
from ..results.schema import Counts, ScoreEntry, dump
from ..retrieval_intervals import QueryScores, intervals, relevant_clusters
from .grouped_metrics import per_query_scores, summarize_groups

logger = logging.getLogger(__name__)

GROUPS = "query_groups"
"""Key of a split's data, beside mteb's ``corpus``, ``queries`` and ``relevant_docs``: the position
groups of each query (query id -> groups). mteb hands each subset's data to its hooks, so the
scores of a subset read the groups of that subset's own data."""

SKIPPED = "skipped_counts"
"""Key of a split's data: how many of the dataset's queries the task did not evaluate, by reason."""

DATA_DIR_ENV = "MTEB_FAIRPOS_DATA_DIR"
"""Root folder of local dataset copies, each under its hub id (``<root>/<org>/<name>``)."""


class DatasetSchemaError(ValueError):
    """A dataset (hub or local copy) lacks a split, file or column the task needs."""


def resolve_data_dir(hub_id: str, data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The local copy to read, or ``None`` to read ``hub_id`` from the Hugging Face hub.

    Raises:
        FileNotFoundError: ``data_dir`` is given but is not a folder, or ``MTEB_FAIRPOS_DATA_DIR``
            is set but holds no folder for ``hub_id``.
    """
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"data_dir {str(path)!r} is not a folder (expected a local copy of {hub_id}).")
        return path
    root = os.environ.get(DATA_DIR_ENV)
    if root:
        path = Path(root).expanduser() / hub_id
        if not path.is_dir():
            raise FileNotFoundError(
                f"{DATA_DIR_ENV}={root!r} is set but {str(path)!r} does not exist: put a copy of the "
                f"Hugging Face dataset {hub_id} there (same files and layout), or unset {DATA_DIR_ENV} "
                "to load it from the hub."
            )
        return path
    return None


def first_invalid_utf8(folder: Path) -> str | None:
    """``"<file> line <n>, column <c>"`` of the first byte sequence in ``folder``'s text files that
    is not UTF-8, or ``None`` when they all decode."""
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".json", ".jsonl", ".csv", ".txt", ".tsv")):
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as err:
                    return f"{path} line {number}, column {err.start + 1}"
    return None


def first_unreadable(folder: Path) -> str | None:
    """``"<file> line <n>: ..."`` of the first data file in ``folder`` that is empty, a JSON line that does not
    parse or a Parquet file whose footer cannot be read; ``None`` when none is (the library's error is all there is)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".json", ".jsonl", ".parquet")):
        if path.stat().st_size == 0:
            return f"{path} is empty"
        if path.suffix.lower() == ".parquet":
            try:
                pq.read_metadata(path)
            except (OSError, pa.ArrowException) as err:
                return f"{path} is not a readable Parquet file ({err})"
            continue
        if path.suffix.lower() == ".json":
            continue  # one document, not lines: the library's error says what is wrong
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError as err:
                        return f"{path} line {number} is not JSON ({err})"
    return None


def without_hub_hint(hub_id: str) -> str:
    """What to do when the hub cannot serve ``hub_id``: point the task at a local copy."""
    return (
        f"To run without the hub, put a copy of its files (same layout) in ${DATA_DIR_ENV}/{hub_id} "
        "or pass data_dir= to the task."
    )


def check_columns(columns: Iterable[str], required: Sequence[str], where: str) -> None:
    """Raise `DatasetSchemaError` naming every column of ``required`` missing from ``columns``."""
    present = set(columns)
    missing = [c for c in required if c not in present]
    if missing:
        raise DatasetSchemaError(
            f"{where} lacks the column(s) {missing}; it has {sorted(present)}. "
            "Is this the right dataset, in its published schema?"
        )


def retrieval_split(
    corpus: Mapping[str, str],
    queries: Mapping[str, str],
    relevant: Mapping[str, str | Iterable[str]],
) -> dict[str, Any]:
    """An mteb ``RetrievalSplitData``: corpus and queries as datasets, binary qrels as a dict."""
    qrels: dict[str, dict[str, int]] = {}
    for qid, docs in relevant.items():
        qrels[qid] = {docs: 1} if isinstance(docs, str) else dict.fromkeys(docs, 1)
    return {
        "corpus": Dataset.from_dict({"id": list(corpus), "text": list(corpus.values())}),
        "queries": Dataset.from_dict({"id": list(queries), "text": list(queries.values())}),
        "relevant_docs": qrels,
        "top_ranked": None,
    }


def unique_passages(texts: Iterable[str], prefix: str) -> dict[str, str]:
    """Every distinct passage once, in sorted order, under a stable id ``<prefix><index>``.

    Returns ``{text: id}``; each passage is embedded once however many queries point at it.
    """
    ordered = sorted(set(texts))
    width = len(str(max(len(ordered) - 1, 0)))
    return {text: f"{prefix}{i:0{width}d}" for i, text in enumerate(ordered)}


def with_groups(split: Mapping[str, Any], memberships: Mapping[str, Sequence[str]], skipped: Mapping[str, int]) -> dict[str, Any]:
    """An mteb ``RetrievalSplitData`` that also holds each query's position groups (`GROUPS`) and
    the counts of skipped queries (`SKIPPED`), for `PositionGroupedRetrieval.task_specific_scores`."""
    return {**split, GROUPS: dict(memberships), SKIPPED: dict(skipped)}


class PositionGroupedRetrieval(AbsTaskRetrieval):
    """mteb's retrieval task plus nDCG@10 per position group, harmonic mean and PSI.

    Subclasses build the data in `_build` and return, besides the split, the groups of each
    query and the counts of queries they skipped (with the reason as key); both are kept in the
    split's data (`GROUPS`, `SKIPPED`). Retrieval, search and pytrec_eval scoring are mteb's;
    `task_specific_scores` adds the grouped figures, with intervals from a bootstrap over queries (each relevant
    passage drawn with its questions), to the same score dict, so they land in the TaskResult JSON; each query's
    nDCG@10 and passage go to the per-unit sidecar beside it (`mteb_fairpos.results.units`), never into the JSON.
    """

    position_groups: tuple[str, ...] = ()
    hub_id: str = ""
    resampling = Resampling()
    """The bootstrap behind the intervals (docs/method.md#s3-1, #s5): resamples and seed, recorded in the result."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_dir = data_dir

    def _name_the_settings(self, **settings: str | int | None) -> None:
        """Put every setting that changes the numbers (``None``: the task's default) into the task's name,
        ``SQuADPosQ.queries-500``, so mteb's result cache never hands back a result computed with other settings
        (`mteb_fairpos.mteb_plugin.registered_task` finds the task such a name varies)."""
        suffix = ".".join(f"{key}-{value}" for key, value in settings.items() if value is not None)
        if suffix:
            self.metadata = self.metadata.model_copy(update={"name": f"{type(self).metadata.name}.{suffix}"})

    # ---------------------------------------------------------------- loading
    def _build(self, source: str, revision: str | None) -> tuple[dict[str, Any], dict[str, tuple[str, ...]], dict[str, int]]:
        raise NotImplementedError

    def load_data(self, num_proc: int | None = None, *, timer: TimingStack | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        local = resolve_data_dir(self.hub_id, self.data_dir)
        source = str(local) if local is not None else self.metadata.dataset["path"]
        revision = None if local is not None else self.metadata.dataset["revision"]
        timer = timer or TimingStack()
        reading = hub_access(f"dataset {self.hub_id}", without_hub_hint(self.hub_id)) if local is None else contextlib.nullcontext()
        with timer("Data loading", log_message=f"Loading dataset {self.metadata.name} from {source}..."), reading:
            try:
                split, memberships, skipped = self._build(source, revision)
            except UnicodeDecodeError as err:
                where = first_invalid_utf8(local) if local is not None else None
                raise DatasetSchemaError(
                    f"{self.metadata.name}: {where or source} is not valid UTF-8 ({err.reason}); "
                    "the dataset's text files must be UTF-8."
                ) from None
        if not split["relevant_docs"]:
            reasons = ", ".join(f"{count} {reason}" for reason, count in skipped.items() if count) or "none skipped"
            raise DatasetSchemaError(
                f"{self.metadata.name}: {source} yields no query to evaluate ({reasons}); "
                "is it the published dataset, with its question column filled?"
            )
        for reason, count in skipped.items():
            if count:
                logger.warning("%s: skipped %d quer%s (%s).", self.metadata.name, count, "y" if count == 1 else "ies", reason)
        self.dataset = {"default": {"test": with_groups(split, memberships, skipped)}}
        self.data_loaded = True

    # ---------------------------------------------------------------- scoring
    def task_specific_scores(
        self,
        scores: dict[str, dict[str, float]],
        qrels: Mapping[str, Mapping[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, Any]:
        data = self.dataset[hf_subset][hf_split]
        query_scores, unscored = per_query_scores(scores, qrels.keys())
        summary = summarize_groups(query_scores, data[GROUPS], self.position_groups)
        if unscored:
            summary.notes.append(f"{unscored} quer(ies) had no pytrec_eval score and count as nDCG@10 = 0.")
        clusters = relevant_clusters(qrels)  # queries of one passage are drawn together (docs/method.md#s5)
        queries = QueryScores.build(query_scores, data[GROUPS], self.position_groups, clusters=clusters)
        if (few := queries.few_units()) is not None:
            summary.notes.append(few)
        out = summary.to_scores(intervals(queries, self.resampling), self.resampling, resampled=queries.resampled)
        out.update(dump(ScoreEntry(counts=Counts(queries=len(query_scores), skipped=dict(data[SKIPPED])))))
        out[units.DIGEST] = self.hand_over_units(hf_split, hf_subset, query_scores, data[GROUPS], cluster=clusters)
        return out

    @staticmethod
    def unit_stratum(subset: str) -> str:
        """The stratum of a subset's queries for the bootstrap: subsets are averaged with equal weight, so
        each is its own (a task that pools subsets, as PosIR pools languages, says so here)."""
        return subset

    def unit_corpus(self, subset: str) -> str:
        """The subset whose corpus ``subset``'s queries search: the bootstrap's clusters (relevant documents) are
        named within it, so the queries of subsets that search one corpus share their documents' units. Each
        subset searches its own here."""
        return subset

    def hand_over_units(self, hf_split: str, hf_subset: str, query_scores: Mapping[str, float],
                        groups: Mapping[str, Iterable[str | None]], **extra: Mapping[str, Any]) -> str:
        """Hand each query's nDCG@10 to the sidecar writer (`mteb_fairpos.results.units`), one row per
        (query, group), a query in no group once with group null; ``extra``: further columns by query id.
        Returns the digest the score entry records."""
        pairs = [(qid, group) for qid in query_scores for group in (list(groups.get(qid, ())) or [None])]
        columns = {name: [values.get(qid) for qid, _ in pairs] for name, values in extra.items()}
        table = units.rows([q for q, _ in pairs], [g for _, g in pairs], [query_scores[q] for q, _ in pairs], **columns)
        return units.hand_over(self.metadata.name, hf_split, hf_subset, table)
