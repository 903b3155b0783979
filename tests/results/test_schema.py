"""The score-entry schema: what writers store round-trips, and result files of earlier releases still read."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mteb_fairpos.results import Counts, Estimate, ModelKey, Profile, ScoreEntry, Settings, collect, dump, load
from mteb_fairpos.results.schema import reported

EARLIER = Path(__file__).resolve().parents[1] / "fixtures" / "earlier_release"


def test_an_entry_round_trips_through_the_stored_form():
    entry = ScoreEntry(
        profiles={"": Profile({"1": Estimate(0.7, se=0.01, ci_low=0.68, ci_high=0.72), "2": Estimate(0.5, se=math.nan,
                                                                                              ci_low=math.nan, ci_high=math.nan)},
                              fairness=0.5 / 0.7),
                  "tau": Profile(fairness=math.nan)},
        terms={"beta_2": Estimate(-0.2, 0.01, 0.0004, -0.22, -0.18), "language_effect": Estimate(None)},
        psi=reported(None),
        counts=Counts(documents=4, excluded={"too_short": 3}),
        settings=Settings(corpus="manpages", hash="1a2b3c4d5e6f", seed=42),
        details={"n": 2, "tau_status": "n/a: CLS pooling", "notes": ["a"]},
    )
    stored = dump(entry)
    assert stored["position_2_se"] is None and stored["tau_position_fairness"] is None and stored["psi"] is None
    assert stored["language_effect"] is None and "language_effect_se" not in stored and "position_1_pvalue" not in stored
    assert json.loads(json.dumps(stored)) == stored  # plain JSON, as mteb writes it
    back = load(stored)
    assert dump(back) == stored
    assert back.profiles[""].values == {"1": 0.7, "2": 0.5}
    assert back.profiles[""].intervals == {"1": (0.68, 0.72)}  # an undefined interval is no interval
    assert math.isnan(back.profiles["tau"].fairness) and back.profiles["tau"].points == {}
    assert back.terms["beta_2"] == Estimate(-0.2, 0.01, 0.0004, -0.22, -0.18) and math.isnan(back.psi)
    assert back.details == entry.details
    assert back.counts == entry.counts and back.settings == entry.settings
    assert stored["excluded_topics"] == {"too_short": 3} and stored["corpus_fingerprint"] == "1a2b3c4d5e6f"


def test_the_labels_that_are_not_positions_do_not_collide():
    stored = {"position_fairness": 0.8, "position_counts": {"a": 2, "b": 0}, "position_a": 0.8, "position_b": None,
              "position_0.05-0.10": 0.5, "position_0.05-0.10_n": 4, "tau_position_fairness": None,
              "ndcg_at_10_Q1": 0.4, "psi_Q1": None, "num_tau_unmeasured": 0, "position_note": "text"}
    entry = load(stored)
    main = entry.profiles[""]
    assert main.values == {"a": 0.8, "b": None, "0.05-0.10": 0.5} and main.points["0.05-0.10"].n == 4
    assert main.fairness == 0.8 and main.counts == {"a": 2, "b": 0}
    assert set(entry.profiles) == {"", "tau"} and entry.psi is None
    assert entry.details == {"ndcg_at_10_Q1": 0.4, "psi_Q1": None, "num_tau_unmeasured": 0, "position_note": "text"}
    assert dump(entry) == stored


def test_the_probe_statistics_are_stored_as_they_were_computed():
    from mteb_fairpos.permutation.stats import profile_entry, profile_scores, position_means

    rng = np.random.default_rng(3)
    positions = np.tile([1, 2, 3], 40)
    clusters = np.repeat(np.arange(20), 6).astype(str)
    values = 0.6 - 0.05 * positions + rng.normal(0, 0.02, len(positions))
    stored = profile_scores(values, positions, clusters, 3, prefix="tau_")
    means = position_means(values, positions, clusters, 3)
    assert stored["tau_position_2"] == means[2].estimate and stored["tau_position_2_ci_high"] == means[2].ci_high
    assert load(stored).profiles["tau"].points["3"].se == means[3].se
    assert dump(profile_entry(values, positions, clusters, 3, family="tau")) == stored


def test_result_files_of_an_earlier_release_still_read():
    found = collect(EARLIER)
    off, fair = found.models
    assert (off.name, off.revision, fair.revision) == ("fair-off/all-MiniLM-L6-v2", "off", "b128_lhalf_a0.5")
    probe = found.get(off, "PermutationFairnessSample")
    assert probe.main_score == 0.875 and probe.psi == pytest.approx(0.125)  # no psi: 1 - position_fairness
    assert probe.profiles["n3_en"] == {"1": 0.64, "2": 0.6, "3": 0.56}
    assert probe.intervals["n3_en"] == {"1": (0.62, 0.66), "2": (0.56, 0.64)}
    assert probe.effects["n3_en"] == {"beta_2": (-0.04, 0.01, 0.0004), "beta_3": (-0.08, 0.02, 0.002)}
    retrieval = found.get(fair, "SQuADPosQ")
    assert retrieval.main_score == 0.5 and retrieval.profile == {"begin": 0.6, "middle": 0.5, "end": 0.42}
    assert retrieval.psi == pytest.approx(1 - 0.42 / 0.6)  # no psi, no fairness: from the profile
    [probe_entry] = _entries(off, "PermutationFairnessSample")
    assert dump(load(probe_entry)) == probe_entry  # the probe's flat keys are still this schema's stored form
    [mapped] = _entries(fair, "SQuADPosQ")  # the earlier "positions" mapping is stored as today's keys
    assert {k: v for k, v in dump(load(mapped)).items() if k.startswith("position_")} == {
        "position_begin": 0.6, "position_middle": 0.5, "position_end": 0.42, "position_counts": {"begin": 4, "middle": 3, "end": 2}}


def test_counts_and_settings_of_an_earlier_release_read_typed():
    [probe_entry] = _entries(ModelKey("fair-off/all-MiniLM-L6-v2", "off"), "PermutationFairnessSample")
    entry = load(probe_entry)
    assert entry.counts == Counts(documents=60, excluded={"too_short": 2})
    assert entry.settings == Settings(sets=10, window_low=100, window_high=200)
    assert entry.settings.stored() == {"num_segment_sets": 10, "segment_window_low": 100, "segment_window_high": 200}
    assert "num_documents" not in entry.details and entry.details["n"] == 3  # untyped keys stay details
    found = collect(EARLIER)
    probe = found.get(found.models[0], "PermutationFairnessSample")
    assert probe.settings == {"num_segment_sets": [10], "segment_window_low": [100], "segment_window_high": [200]}


def test_a_stored_null_count_stays_as_it_was():
    """A ``null`` under a typed key is not a count: it stays in details and is written back as ``null``."""
    stored = {"main_score": 0.5, "skipped_queries": None, "empty_groups": ["end"], "seed": 7}
    entry = load(stored)
    assert entry.counts.skipped is None and entry.details == {"main_score": 0.5, "skipped_queries": None}
    assert entry.counts.empty == ["end"] and entry.settings.seed == 7
    assert dump(entry) == stored


def _entries(model, task: str) -> list[dict]:
    file = EARLIER / model.name.replace("/", "__") / model.revision / f"{task}.json"
    return json.loads(file.read_text())["scores"]["test"]


def test_only_the_schema_spells_the_statistics_keys():
    """No other module builds or parses ``..._se`` / ``_pvalue`` / ``_ci_low`` / ``_ci_high`` keys (docstrings aside)."""
    import ast

    package = Path(__file__).resolve().parents[2] / "mteb_fairpos"
    spelled = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and any(stat in node.value for stat in ("_ci_low", "_ci_high", "_pvalue"))):
                spelled.add(path.relative_to(package).as_posix())
    assert spelled <= {"results/schema.py"}, spelled


def test_every_count_a_task_writes_reads_typed():
    """The probe's and the retrieval tasks' counts come back as `Counts` fields, the per-bucket query
    counts as one mapping; the stored keys are those of earlier releases."""
    stored = {"num_observations": 54, "num_clusters": 3, "num_tau_unaligned_documents": 0, "usable_topics": 6,
              "n_queries": 7, "unplaced_queries": 1, "n_queries_Q1": 4, "n_queries_Q2": 3, "n_bins_Q1": 2,
              "ndcg_at_10_Q1": 0.5, "num_tau_unmeasured": 2}
    entry = load(stored)
    assert entry.counts == Counts(observations=54, clusters=3, unaligned=0, usable=6, queries=7, unplaced=1,
                                  buckets={"Q1": 4, "Q2": 3})
    assert entry.details == {"n_bins_Q1": 2, "ndcg_at_10_Q1": 0.5, "num_tau_unmeasured": 2}
    assert dump(entry) == stored
    assert load({"n_queries_Q1": None}).details == {"n_queries_Q1": None}  # a stored null stays as it was


def test_headline_intervals_and_paired_changes_round_trip_without_becoming_positions():
    entry = ScoreEntry(
        profiles={"": Profile({"1": Estimate(0.7), "2": Estimate(0.5)}, fairness=0.5 / 0.7)},
        psi=0.2,
        intervals={"position_fairness": (0.6, 0.8), "psi": (math.nan, 0.3), "harmonic_mean": (0.4, 0.5)},
        changes={"position_fairness": Estimate(0.05, pvalue=0.01, ci_low=0.02, ci_high=0.08)},
        settings=Settings(resamples=2000, resampling_seed=7, resampled="queries"),
        details={"harmonic_mean": 0.45},
    )
    stored = dump(entry)
    assert stored["position_fairness_ci_low"] == 0.6 and stored["psi_ci_low"] is None and stored["harmonic_mean_ci_high"] == 0.5
    assert stored["change_position_fairness_pvalue"] == 0.01 and stored["bootstrap_units"] == "queries"
    back = load(stored)
    assert dump(back) == stored
    assert set(back.profiles[""].points) == {"1", "2"}  # "fairness" is not read as a position label
    assert back.intervals["position_fairness"] == (0.6, 0.8) and math.isnan(back.intervals["psi"][0])
    assert back.changes == entry.changes and back.details == {"harmonic_mean": 0.45}
    assert (back.settings.resamples, back.settings.resampling_seed) == (2000, 7)


def test_an_entry_without_intervals_reads_as_before():
    back = load({"position_fairness": 0.8, "position_1": 0.7, "position_2": 0.56, "psi": 0.2})
    assert back.intervals == {} and back.changes == {} and back.settings.resamples is None


@pytest.mark.parametrize(("stored", "fault"), [
    ({"n_queries": "5"}, "n_queries is a str, not an integer"),
    ({"n_queries": True}, "n_queries is a bool, not an integer"),
    ({"num_documents": 2.5}, "num_documents is a float, not an integer"),
    ({"excluded_topics": {"too_short": "1"}}, "excluded_topics is a dict, not a mapping of counts"),
    ({"empty_groups": "0.00-0.05"}, "empty_groups is a str, not a list of text"),
    ({"segment_mode": 3}, "segment_mode is an int, not text"),
    ({"length_tolerance": "0.7"}, "length_tolerance is a str, not a number"),
    ({"n_queries": -3}, "n_queries is -3, below 0: no count, size or seed is"),  # a weight below 0 in the pooling
    ({"n_queries_Q1": -3}, "n_queries_Q1 is -3, below 0: no count, size or seed is"),
    ({"excluded_topics": {"too_short": -1}}, "excluded_topics is a dict, not a mapping of counts"),
])
def test_a_count_or_setting_of_another_type_is_named_not_taken(stored, fault):
    """Before, ``"n_queries": "5"`` was taken as the count, and failed far from the file (adding an int to a str) or
    weighed wrongly; now it is left in ``details`` and named, as a position value of another type is."""
    from mteb_fairpos.results.schema import faults

    entry = load(stored)
    assert entry.counts == Counts() and entry.settings == Settings() and entry.details == stored
    assert faults(entry) == [fault]
    assert dump(entry) == stored  # written back as it was


def test_a_count_or_setting_of_another_type_is_refused_where_it_is_written():
    """dump wrote ``"n_queries": "ten"``, which every reader then took out as damaged."""
    for entry, message in ((ScoreEntry(counts=Counts(queries="ten")), r"Counts.queries \(n_queries\) must be an integer of at least 0, got 'ten'"),
                           (ScoreEntry(counts=Counts(queries=-1)), r"Counts.queries \(n_queries\) must be an integer of at least 0, got -1"),
                           (ScoreEntry(settings=Settings(mode=3)), r"Settings.mode \(segment_mode\) must be text, got 3")):
        with pytest.raises(TypeError, match=message):
            dump(entry)


def test_an_interval_with_its_ends_reversed_is_a_fault_and_taken_out():
    """A stored interval [0.8, 0.6] was read, tabled and drawn as it stood."""
    from mteb_fairpos.results.schema import faults

    entry = load({"position_1": 0.7, "position_1_ci_low": 0.8, "position_1_ci_high": 0.6, "position_2": 0.5,
                  "position_2_ci_low": 0.4, "position_2_ci_high": 0.6, "psi": 0.2, "psi_ci_low": 0.3, "psi_ci_high": 0.1,
                  "harmonic_mean_ci_low": None, "harmonic_mean_ci_high": 0.5})
    assert faults(entry) == ["position_1's interval [0.8, 0.6] has its ends reversed",
                             "psi's interval [0.3, 0.1] has its ends reversed"]
    assert entry.profiles[""].intervals == {"2": (0.4, 0.6)} and "psi" not in entry.intervals
    assert entry.profiles[""].points["1"].value == 0.7  # the value itself stays


def test_a_psi_that_is_nan_is_a_fault_as_an_infinite_one_is():
    from mteb_fairpos.results.schema import faults

    entry = load({"psi": math.nan})
    assert faults(entry) == ["psi is nan, not a finite number"] and entry.psi is None


@pytest.mark.parametrize("stored", [None, [("psi", 0.1)], "psi"])
def test_a_score_entry_that_is_not_a_mapping_is_a_type_error(stored):
    with pytest.raises(TypeError, match=f"a score entry is a mapping of score names to values, got {type(stored).__name__}"):
        load(stored)


def test_details_that_repeat_a_measured_key_are_refused_not_written_over_it():
    entry = ScoreEntry(psi=0.2, details={"psi": 0.9, "main_score": 0.5})
    entry.profile().points["1"] = Estimate(0.7)
    with pytest.raises(ValueError, match=r"details repeat measured keys \(psi\); a figure is written once"):
        dump(entry)
    entry.details = {"position_1": 0.1}
    with pytest.raises(ValueError, match=r"details repeat measured keys \(position_1\)"):
        dump(entry)
