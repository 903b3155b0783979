"""Benchmark of the probe's bootstrap: its time against the whole evaluation, on the demo.

Runs what ``mteb-fairpos demo`` runs (the bundled man pages, the demo's three subsets and 12 segment sets,
all-MiniLM-L6-v2 at 512 tokens, uncalibrated then the demo's calibrated configs paired with it) through
:class:`ProbeSession`, timing each subset's evaluation (selection, embedding, statistics, bootstrap
included), then times the bootstrap alone on the same observations: the fairness intervals of sigma and
tau and, for a calibrated config, the paired changes, as the run computed them. Prints the ratio measured
in the same run (target: under 5 % of the evaluation).

    python benchmarks/bench_probe_bootstrap.py [--resamples 2000] [--configs none b128_lhalf_a0.5 b64_lhalf_a1]
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--configs", nargs="+", default=["none", "b128_lhalf_a0.5", "b64_lhalf_a1"])
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from dataclasses import replace

    from sentence_transformers import SentenceTransformer

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, minilm_path
    from mteb_fairpos.permutation import ProbeSession, manpages_corpus
    from mteb_fairpos.permutation.intervals import fairness_bootstrap
    from mteb_fairpos.resampling import Resampling
    from mteb_fairpos.tasks.permutation import DEMO_SUBSETS, PermutationFairnessManpagesDemo

    base = SentenceTransformer(minilm_path(), device="cpu")
    base.max_seq_length = 512
    corpus = manpages_corpus()
    resampling = Resampling(resamples=args.resamples)
    settings = replace(PermutationFairnessManpagesDemo().probe_settings, resampling=resampling)
    baseline: dict[str, object] = {}
    evaluation = bootstrap = 0.0
    print(f"{'config':<18} {'subset':<9} {'docs':>5} {'evaluation s':>13} {'bootstrap s':>12} {'ratio':>7}")
    for text in args.configs:
        config = None if text == "none" else CalibrationConfig.parse(text)
        session = ProbeSession(corpus, FairSentenceTransformer(base, config), settings, encode_kwargs={"batch_size": 16})
        for subset in DEMO_SUBSETS:
            tick = time.perf_counter()
            result = session.run(subset, baseline=baseline.get(subset))
            spent = time.perf_counter() - tick
            obs, paired = result.observations, baseline.get(subset)
            tick = time.perf_counter()
            for measure in ("sigma", "tau"):
                values = getattr(obs, measure)
                if np.isfinite(values).any():
                    fairness_bootstrap(values, obs.position, obs.cluster, obs.topic, resampling,
                                       None if paired is None else getattr(paired, measure))
            alone = time.perf_counter() - tick
            evaluation += spent
            bootstrap += alone
            print(f"{text:<18} {subset:<9} {len(result.instance.documents):>5} {spent:>13.2f} {alone:>12.3f} {alone / spent:>7.2%}")
            if config is None:
                baseline[subset] = obs
    print(f"{'all':<18} {'':<9} {'':>5} {evaluation:>13.2f} {bootstrap:>12.3f} {bootstrap / evaluation:>7.2%}")


if __name__ == "__main__":
    main()
