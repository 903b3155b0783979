"""The probe's console report shows each fairness with its interval and calls a change against the
uncalibrated model better or worse only when the change's interval excludes 0."""

from __future__ import annotations

from mteb_fairpos.permutation.report import format_profiles
from mteb_fairpos.results.schema import Counts, Estimate, Profile, ScoreEntry, dump


def _scores(fairness: float, interval: tuple[float, float], change: Estimate | None = None) -> dict:
    entry = ScoreEntry(profiles={"": Profile({"1": Estimate(0.7, ci_low=0.68, ci_high=0.72),
                                              "2": Estimate(0.7 * fairness, ci_low=0.5, ci_high=0.6)}, fairness=fairness)},
                       intervals={"position_fairness": interval}, counts=Counts(documents=12))
    if change is not None:
        entry.changes["position_fairness"] = change
    return dump(entry)


def test_fairness_shows_its_interval_and_a_change_its_verdict():
    runs = {
        "uncalibrated": {"n2_en": _scores(0.80, (0.75, 0.85))},
        "calibrated (a)": {"n2_en": _scores(0.86, (0.80, 0.92), Estimate(0.06, 0.01, 0.001, 0.04, 0.08))},
        "calibrated (b)": {"n2_en": _scores(0.81, (0.74, 0.88), Estimate(0.01, 0.02, 0.6, -0.03, 0.05))},
        "calibrated (c)": {"n2_en": _scores(0.70, (0.60, 0.80), Estimate(-0.10, 0.02, 0.001, -0.14, -0.06))},
    }
    lines = format_profiles(runs, ["n2_en"], "sigma").splitlines()
    row = {name: next(line for line in lines[2:] if name in line) for name in runs}  # below the legend and header
    assert row["uncalibrated"].rstrip().endswith("0.800 [0.750, 0.850]")  # the twin has no change of its own
    assert row["calibrated (a)"].endswith("0.860 [0.800, 0.920]  +0.060 [+0.040, +0.080] p=0.001 better")
    assert row["calibrated (b)"].endswith("+0.010 [-0.030, +0.050] p=0.600 not significant")
    assert row["calibrated (c)"].endswith("-0.100 [-0.140, -0.060] p=0.001 worse")
