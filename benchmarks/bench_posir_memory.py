"""PosIR memory against the number of (language, domain) subsets evaluated in one run.

Writes a synthetic local copy of PosIR (one language, K domains, the published layout and
schema), then runs ``mteb.evaluate`` of all-MiniLM-L6-v2 on ``PosIR`` in a fresh process per
case and reports that process's peak resident memory:

* ``lazy K``: the task as shipped; each subset's files are read when mteb reaches it and freed
  after, so the peak should not grow with K;
* ``eager K``: the same run after reading every subset up front and keeping it (what a loader
  that materialises all subsets in ``load_data`` would hold), the baseline the lazy path avoids.

Ratios are against ``lazy`` with the fewest subsets, measured in the same run::

    python benchmarks/bench_posir_memory.py [--domains 2 8 24] [--docs 400] [--chars 8000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = ("market bank river law court energy grid patient vaccine engine orbit harvest mine school "
         "film game news tariff policy sports hotel coast reactor code model data storm crop").split()


def write_copy(root: Path, n_domains: int, n_docs: int, chars: int, seed: int = 0) -> None:
    """``root/eng-Latn/IndustryCorpus2_<domain>/`` with queries, corpus and qrels parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mteb_fairpos.tasks.posir import POSIR_DOMAINS

    rng = random.Random(seed)
    for domain in POSIR_DOMAINS[:n_domains]:
        folder = root / "eng-Latn" / f"IndustryCorpus2_{domain}"
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        docs, queries, qrels = [], [], []
        for i in range(n_docs):
            text = " ".join(rng.choice(WORDS) for _ in range(chars // 6))[:chars]
            doc_id = f"IndustryCorpus2_{domain}_{i}"
            docs.append({"_id": doc_id, "text": text})
            start = rng.randrange(0, len(text) - 40)
            queries.append({"_id": f"{domain}-q{i}", "text": text[start:start + 40], "pos_char_span": [start, start + 40],
                            "pos_char_length": len(text), "pos_token_length": rng.randrange(100, 2500)})
            qrels.append({"query-id": f"{domain}-q{i}", "corpus-id": doc_id, "score": 1})
        pq.write_table(pa.Table.from_pylist(docs), folder / "corpus.parquet")
        pq.write_table(pa.Table.from_pylist(queries, schema=pa.schema([
            ("_id", pa.string()), ("text", pa.string()), ("pos_char_span", pa.list_(pa.int64())),
            ("pos_char_length", pa.int64()), ("pos_token_length", pa.int64())])), folder / "queries.parquet")
        pq.write_table(pa.Table.from_pylist(qrels), folder / "qrels" / "test.parquet")


def run_case(root: Path, n_domains: int, eager: bool) -> dict:
    """One evaluation in this process; returns its peak RSS in MiB and the subsets scored."""
    import logging

    import mteb
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos import minilm_path
    from mteb_fairpos.tasks.posir import POSIR_DOMAINS, PosIR, load_domain

    logging.disable(logging.WARNING)
    model = SentenceTransformer(str(minilm_path()), device="cpu")
    model.max_seq_length = 64  # memory, not accuracy, is measured: keep the forward passes short
    task = PosIR(data_dir=root, languages=["eng"], domains=list(POSIR_DOMAINS[:n_domains]))
    task.load_data()
    held = [load_domain(task.dataset[s]["test"]) for s in task.hf_subsets] if eager else []
    result = mteb.evaluate(SentenceTransformerEncoderWrapper(model), task, cache=None, co2_tracker=False,
                           show_progress_bar=False).task_results[0]
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"peak_mib": peak_mib, "subsets": len(result.scores["test"]), "held": len(held)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", type=int, nargs="+", default=[2, 8, 24])
    parser.add_argument("--docs", type=int, default=400, help="documents (and queries) per subset")
    parser.add_argument("--chars", type=int, default=8000, help="characters per document")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = parser.parse_args()
    if args.case:
        root, n, mode = args.case.split("|")
        print(json.dumps(run_case(Path(root), int(n), mode == "eager")))
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "posir"
        write_copy(root, max(args.domains), args.docs, args.chars)
        cases = [(n, "lazy") for n in sorted(args.domains)] + [(max(args.domains), "eager")]
        rows = []
        for n, mode in cases:
            out = subprocess.run([sys.executable, __file__, "--case", f"{root}|{n}|{mode}"],
                                 check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            rows.append((n, mode, json.loads(out)))
    base = rows[0][2]["peak_mib"]
    print(f"PosIR peak RSS, {args.docs} documents of {args.chars} characters per subset (all-MiniLM-L6-v2)")
    print(f"{'mode':<6} {'subsets':>7} {'peak MiB':>9} {'ratio':>6}")
    for n, mode, res in rows:
        assert res["subsets"] == n, res
        print(f"{mode:<6} {n:>7} {res['peak_mib']:>9.0f} {res['peak_mib'] / base:>6.2f}")


if __name__ == "__main__":
    main()
