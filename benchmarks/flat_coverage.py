"""How often the PSI and fairness intervals cover the truth as a profile approaches flat (docs/method.md#s5).

PSI (``1 - min/max``) and the probe's fairness (``min/max``) have no smooth estimator where groups tie: noise
makes the largest group mean larger and the smallest smaller, so the estimate is biased away from flat, and every
resample more so. This simulation shows how far that goes, against the profiles well apart that the tests'
coverage simulations use:

* retrieval: three position groups of ``--queries`` queries each, every query's nDCG@10 0 or 1 (so a group's true
  mean is its probability), the intervals of `mteb_fairpos.retrieval_intervals.intervals`;
* probe: 3 positions in every order of ``--sets`` segment sets, a set effect per position and noise, the
  intervals of `mteb_fairpos.permutation.intervals.fairness_bootstrap` (sets share no topic);
* pooled probe: the task's main score, the mean fairness of ``--subsets`` subsets of ``--subset-sets`` sets each,
  every subset with the same profile;
* change: the probe's fairness change of a calibrated model against its twin on the same observations (each
  observation's noise half shared, as a model and its twin's are), where either, both or neither is near flat.
  Coverage is counted on each side: an interval that misses on one side only is biased, on both too narrow.

    python benchmarks/flat_coverage.py                       # 200 datasets per profile, 400 resamples
    python benchmarks/flat_coverage.py --datasets 500
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

PSI_PROFILES = ([0.55, 0.55, 0.55], [0.56, 0.55, 0.54], [0.57, 0.55, 0.53], [0.58, 0.55, 0.52], [0.70, 0.55, 0.40])
FAIRNESS_PROFILES = ([0.62, 0.62, 0.62], [0.63, 0.62, 0.61], [0.66, 0.62, 0.57])
CHANGE_PAIRS = (  # (calibrated, twin): calibration brings a twin's profile to flat, or near it, or changes little
    ([0.62, 0.62, 0.62], [0.66, 0.62, 0.57]),
    ([0.63, 0.62, 0.61], [0.66, 0.62, 0.57]),
    ([0.62, 0.62, 0.60], [0.66, 0.62, 0.57]),
    ([0.62, 0.62, 0.60], [0.62, 0.61, 0.62]),
    ([0.66, 0.62, 0.57], [0.70, 0.62, 0.50]),
)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def psi_coverage(means: np.ndarray, queries: int, datasets: int, resamples: int, rng: np.random.Generator) -> float:
    from mteb_fairpos.resampling import Resampling
    from mteb_fairpos.retrieval_intervals import QueryScores, intervals

    groups = ("begin", "middle", "end")
    truth = 1 - means.min() / means.max()
    ids = [f"q{i}" for i in range(3 * queries)]
    memberships = {qid: (groups[i // queries],) for i, qid in enumerate(ids)}
    hits = 0
    for _ in range(datasets):
        scores = (rng.random(3 * queries) < np.repeat(means, queries)).astype(float)
        figure = intervals(QueryScores.build(dict(zip(ids, scores)), memberships, groups),
                           Resampling(resamples, seed=int(rng.integers(2**31))))["psi"]
        hits += figure.ci_low <= truth <= figure.ci_high
    return hits / datasets


def _probe_datasets(profiles: list[np.ndarray], sets: int, datasets: int, resamples: int, rng: np.random.Generator,
                    subsets: int = 1):
    """``datasets`` probe runs of one model per profile on the same observations (3 positions in every order of
    ``subsets * sets`` segment sets): yields the bootstrap of the first profile's fairness, its change against the
    second profile where one is given. Each observation has a set effect per position and noise (sd 0.03 each); the
    two models share the effects and half the noise (correlation 0.5), as a model and its twin do."""
    from mteb_fairpos.permutation.intervals import fairness_bootstrap
    from mteb_fairpos.resampling import Resampling

    rows = [(s, p + 1) for s in range(subsets * sets) for order in itertools.permutations(range(3)) for p in order]
    set_of, position = (np.array(column) for column in zip(*rows))
    strata = set_of // sets if subsets > 1 else None
    for _ in range(datasets):
        effect = rng.normal(0, 0.03, (subsets * sets, 3))[set_of, position - 1]
        noise = rng.normal(0, 0.03, len(position))
        values = [profiles[0][position - 1] + effect + noise]
        if len(profiles) > 1:  # the first model is the calibrated one: half its noise is its own
            own = rng.normal(0, 0.03 * 0.75 ** 0.5, len(position))
            values = [profiles[0][position - 1] + effect + 0.5 * noise + own, profiles[1][position - 1] + effect + noise]
        yield fairness_bootstrap(values[0], position, set_of, set_of, Resampling(resamples, seed=int(rng.integers(2**31))),
                                 baseline_values=values[1] if len(values) > 1 else None, strata=strata)


def fairness_coverage(profile: np.ndarray, sets: int, datasets: int, resamples: int, rng: np.random.Generator,
                      subsets: int = 1) -> float:
    """Coverage of the fairness of ``subsets`` subsets of ``sets`` segment sets each (their mean where several)."""
    truth = profile.min() / profile.max()
    hits = sum(run.fairness.ci_low <= truth <= run.fairness.ci_high
               for run in _probe_datasets([profile], sets, datasets, resamples, rng, subsets))
    return hits / datasets


def change_coverage(calibrated: np.ndarray, twin: np.ndarray, sets: int, datasets: int, resamples: int,
                    rng: np.random.Generator) -> tuple[float, float, float]:
    """How often the fairness change's interval lies wholly below the true change, and wholly above it; and its
    mean width."""
    truth = calibrated.min() / calibrated.max() - twin.min() / twin.max()
    bounds = np.array([(run.change.ci_low, run.change.ci_high)
                       for run in _probe_datasets([calibrated, twin], sets, datasets, resamples, rng)])
    return float(np.mean(bounds[:, 1] < truth)), float(np.mean(bounds[:, 0] > truth)), float(np.mean(bounds[:, 1] - bounds[:, 0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=_positive, default=200, help="simulated datasets per profile (default 200)")
    parser.add_argument("--resamples", type=_positive, default=400, help="bootstrap resamples (default 400)")
    parser.add_argument("--queries", type=_positive, default=200, help="queries per group (default 200)")
    parser.add_argument("--sets", type=_positive, default=40, help="segment sets of the probe (default 40)")
    parser.add_argument("--subsets", type=_positive, default=3, help="subsets of the pooled probe (default 3)")
    parser.add_argument("--subset-sets", type=_positive, default=12, help="segment sets per pooled subset (default 12)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"nominal 95 % intervals, {args.datasets} datasets per profile (coverage's standard error about "
          f"{(0.95 * 0.05 / args.datasets) ** 0.5:.3f})")
    print(f"{'figure':<9} | {'group means':<20} | {'truth':>6} | {'coverage':>8}")
    for means in map(np.array, PSI_PROFILES):
        coverage = psi_coverage(means, args.queries, args.datasets, args.resamples, rng)
        print(f"{'PSI':<9} | {str(means.tolist()):<20} | {1 - means.min() / means.max():>6.3f} | {coverage:>8.3f}")
    for profile in map(np.array, FAIRNESS_PROFILES):
        coverage = fairness_coverage(profile, args.sets, args.datasets, args.resamples, rng)
        print(f"{'fairness':<9} | {str(profile.tolist()):<20} | {profile.min() / profile.max():>6.3f} | {coverage:>8.3f}")
    for profile in map(np.array, FAIRNESS_PROFILES):
        coverage = fairness_coverage(profile, args.subset_sets, args.datasets, args.resamples, rng, args.subsets)
        print(f"{'pooled':<9} | {str(profile.tolist()):<20} | {profile.min() / profile.max():>6.3f} | {coverage:>8.3f}")
    print(f"\nthe fairness change, calibrated against its twin, {args.sets} segment sets")
    print(f"{'calibrated':<20} | {'twin':<20} | {'truth':>6} | {'coverage':>8} | {'below':>5} | {'above':>5} | {'width':>5}")
    for calibrated, twin in (tuple(map(np.array, pair)) for pair in CHANGE_PAIRS):
        below, above, width = change_coverage(calibrated, twin, args.sets, args.datasets, args.resamples, rng)
        truth = calibrated.min() / calibrated.max() - twin.min() / twin.max()
        print(f"{str(calibrated.tolist()):<20} | {str(twin.tolist()):<20} | {truth:>+6.3f} | {1 - below - above:>8.3f} | "
              f"{below:>5.3f} | {above:>5.3f} | {width:>5.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
