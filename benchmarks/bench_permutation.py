"""Benchmark of the permutation probe: forward passes and run time against the number of documents.

Counts the sequences that actually go through the model (a hook on its first module) and shows

1. forward passes == unique standalone segments + documents, for growing runs of one instance;
2. across instances in one session, segments are embedded once and shared;
3. run time grows linearly with the number of documents (seconds per document stays flat).

Run offline on the bundled sample with all-MiniLM-L6-v2 (max length 512):

    python benchmarks/bench_permutation.py [--sets 2 4 8 16] [--subset n3_en] [--calibrated]
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np


class ForwardCounter:
    """Sequences through the model's first (Transformer) module, i.e. rows of forward passes."""

    def __init__(self, st):
        self.count = 0
        self.batches = 0
        st[0].register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        features = args[0] if args else kwargs["features"]
        self.count += int(features["input_ids"].shape[0])
        self.batches += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, nargs="+", default=[2, 4, 8, 16], help="segment sets per run")
    parser.add_argument("--subset", default="n3_en")
    parser.add_argument("--calibrated", action="store_true", help="calibrate documents (CalibrationConfig())")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from sentence_transformers import SentenceTransformer

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, minilm_path
    from mteb_fairpos.permutation import ProbeSession, ProbeSettings, sample_corpus
    from mteb_fairpos.results import load

    base = SentenceTransformer(minilm_path(), device="cpu")
    base.max_seq_length = 512
    model = FairSentenceTransformer(base, CalibrationConfig() if args.calibrated else None)
    counter = ForwardCounter(model)
    corpus = sample_corpus()
    encode = {"batch_size": args.batch_size}

    # warm-up (first forward passes pay one-off costs)
    ProbeSession(corpus, model, ProbeSettings(num_sets=2), encode_kwargs=encode).run(args.subset)

    print(f"1. one instance ({args.subset}), fresh session per run, {'calibrated' if args.calibrated else 'uncalibrated'} all-MiniLM-L6-v2")
    print(f"{'sets':>5} {'docs':>5} {'unique seg':>10} {'expected':>9} {'forward':>8} {'equal':>6} {'seconds':>8} "
          f"{'s/doc':>7} {'docs ratio':>10} {'time ratio':>10}")
    rows = []
    for sets in args.sets:
        session = ProbeSession(corpus, model, ProbeSettings(num_sets=sets), encode_kwargs=encode)
        before = counter.count
        tick = time.perf_counter()
        result = session.run(args.subset)
        seconds = time.perf_counter() - tick
        forward = counter.count - before
        counts = load(result.scores).counts
        docs, unique = counts.documents, counts.segments
        rows.append((docs, seconds))
        print(f"{sets:>5} {docs:>5} {unique:>10} {unique + docs:>9} {forward:>8} {str(forward == unique + docs):>6} "
              f"{seconds:>8.2f} {seconds / docs:>7.3f} {docs / rows[0][0]:>10.2f} {seconds / rows[0][1]:>10.2f}")
    docs_arr, secs = np.array(rows, dtype=float).T
    slope, intercept = np.polyfit(docs_arr, secs, 1)
    fit = slope * docs_arr + intercept
    r2 = 1 - ((secs - fit) ** 2).sum() / max(((secs - secs.mean()) ** 2).sum(), 1e-12)
    print(f"linear fit: seconds = {slope:.4f} * documents + {intercept:.2f}  (R^2 = {r2:.4f})")

    print("\n2. four instances in one session: standalone segments shared across instances")
    session = ProbeSession(corpus, model, ProbeSettings(num_sets=4), encode_kwargs=encode)
    before = counter.count
    per_instance = 0
    docs = 0
    for name in ("n3_en", "n3_de", "n3_en-de", "n3_de-en"):
        counts = load(session.run(name).scores).counts
        per_instance += counts.segments
        docs += counts.documents
        print(f"  {name:<9} docs {counts.documents:>3}  unique segments in the instance {counts.segments:>3}")
    forward = counter.count - before
    shared = len(session.segment_cache)
    print(f"  segments embedded {shared} (sum over instances {per_instance}), documents {docs}, "
          f"forward passes {forward} == {shared} + {docs}: {forward == shared + docs}")


if __name__ == "__main__":
    main()
