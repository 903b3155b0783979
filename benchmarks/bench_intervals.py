"""What the retrieval intervals cost: the bootstrap over queries against the encoding of the same run.

SQuAD-PosQ evaluated with ``mteb.evaluate`` and the offline all-MiniLM-L6-v2 on the CPU, twice:

* ``fixture``: the test fixture (``tests/fixtures/squad_v2``: 9 questions, 8 contexts);
* ``scaled``: the same fixture grown to ``--queries`` questions over half as many distinct contexts
  (each question and context made distinct by a numbered suffix), so that the bootstrap works on as
  many queries as a real run's and the encoder on texts of SQuAD's length.

In the same run the script times the model's ``encode`` calls (queries and corpus), the bootstrap
(`mteb_fairpos.retrieval_intervals.intervals` as the task calls it, 2,000 resamples) and the whole
evaluation, and prints the bootstrap's share of each. Target: the bootstrap under 5 % of the evaluation.
Writing the per-query sidecar is timed too (``units.write_beside``, through mteb's save with a cache).

Usage::

    python benchmarks/bench_intervals.py                 # fixture and 2,000 queries
    python benchmarks/bench_intervals.py --queries 10000 # the size of SQuADPosQTiny
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import mteb  # noqa: E402
from mteb.cache import ResultCache  # noqa: E402
from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from mteb_fairpos import minilm_path  # noqa: E402
from mteb_fairpos.results import units  # noqa: E402
from mteb_fairpos.tasks import _base  # noqa: E402
from mteb_fairpos.tasks._base import retrieval_split  # noqa: E402
from mteb_fairpos.tasks.posq import SQuADPosQ  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "squad_v2"


class _Scaled(SQuADPosQ):
    """The fixture grown to ``queries`` distinct questions over ``queries / 2`` distinct contexts."""

    queries = 2000

    def _build(self, source: str, revision: str | None) -> tuple[dict[str, Any], dict[str, tuple[str, ...]], dict[str, int]]:
        split, memberships, skipped = super()._build(source, revision)
        corpus = dict(zip(split["corpus"]["id"], split["corpus"]["text"], strict=True))
        questions = dict(zip(split["queries"]["id"], split["queries"]["text"], strict=True))
        seeds = list(questions)
        texts, asked, relevant, groups = {}, {}, {}, {}
        for k in range(self.queries):
            qid = seeds[k % len(seeds)]
            document = next(iter(split["relevant_docs"][qid]))
            pid = f"{document}-{k // 2}"
            texts[pid] = f"{corpus[document]} (Section {k // 2}.)"
            asked[f"{qid}-{k}"] = f"{questions[qid]} (number {k})"
            relevant[f"{qid}-{k}"] = pid
            groups[f"{qid}-{k}"] = memberships[qid]
        return retrieval_split(texts, asked, relevant), groups, skipped


def _run(task: SQuADPosQ, encoder: Any, cache: Path) -> dict[str, float]:
    spent = {"encode": 0.0, "bootstrap": 0.0, "sidecar": 0.0}

    def timed(name: str, function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start
        return call

    original_encode, original_intervals, original_write = encoder.encode, _base.intervals, units.write_beside
    encoder.encode = timed("encode", original_encode)
    _base.intervals, units.write_beside = timed("bootstrap", original_intervals), timed("sidecar", original_write)
    try:
        task.load_data()
        start = time.perf_counter()
        mteb.evaluate(encoder, task, cache=ResultCache(cache), co2_tracker=False, overwrite_strategy="always")
        spent["evaluation"] = time.perf_counter() - start
    finally:
        encoder.encode, _base.intervals, units.write_beside = original_encode, original_intervals, original_write
    spent["queries"] = len(task.dataset["default"]["test"]["queries"])
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=2000, help="questions of the scaled case")
    args = parser.parse_args()
    encoder = SentenceTransformerEncoderWrapper(SentenceTransformer(str(minilm_path()), device="cpu"))
    _Scaled.queries = args.queries
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| case | queries | encode s | bootstrap s | sidecar s | evaluation s | bootstrap / encode | bootstrap / evaluation |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for name, task in (("fixture", SQuADPosQ(data_dir=FIXTURE)), ("scaled", _Scaled(data_dir=FIXTURE))):
            found = _run(task, encoder, Path(folder) / name)
            print(f"| {name} | {found['queries']:,.0f} | {found['encode']:.2f} | {found['bootstrap']:.3f} | {found['sidecar']:.3f} | "
                  f"{found['evaluation']:.2f} | {found['bootstrap'] / found['encode']:.3f} | "
                  f"{found['bootstrap'] / found['evaluation']:.3f} |")


if __name__ == "__main__":
    main()
