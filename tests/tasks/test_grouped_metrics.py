"""Grouped metrics checked against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from mteb_fairpos.tasks.grouped_metrics import (
    POSITION_BINS,
    add_to_cells,
    bin_index,
    cell_figures,
    empty_cells,
    harmonic_mean,
    length_bucket,
    merge_cells,
    per_query_scores,
    position_bin,
    psi,
    relative_position,
    summarize_groups,
)


def test_groups_by_hand_with_empty_group_and_two_tags():
    # a: q1 0.5, q2 1.0 -> 0.75;  b: q3 0.25, q4 1.0 -> 0.625;  c: q4 (second tag) -> 1.0;  d: empty
    scores = {"q1": 0.5, "q2": 1.0, "q3": 0.25, "q4": 1.0, "q5": 0.0}
    memberships = {"q1": ["a"], "q2": ["a"], "q3": ["b"], "q4": ["b", "c"]}  # q5 has no group
    summary = summarize_groups(scores, memberships, ["a", "b", "c", "d"])
    assert summary.scores == {"a": 0.75, "b": 0.625, "c": 1.0, "d": None}
    assert summary.counts == {"a": 2, "b": 2, "c": 1, "d": 0}
    # 3 / (4/3 + 8/5 + 1) = 45/59
    assert summary.harmonic_mean == pytest.approx(45 / 59)
    assert summary.psi == pytest.approx(1 - 0.625 / 1.0)
    assert summary.empty_groups == ["d"]
    assert any("empty group" in note and "'d'" in note for note in summary.notes)
    flat = summary.to_scores()
    assert flat["position_a"] == 0.75 and flat["position_d"] is None
    assert flat["harmonic_mean"] == pytest.approx(45 / 59) and flat["psi"] == pytest.approx(0.375)
    assert flat["position_counts"] == {"a": 2, "b": 2, "c": 1, "d": 0}


def test_a_group_scoring_zero_and_all_zero_never_divide_by_zero():
    summary = summarize_groups({"q1": 0.0, "q2": 0.8}, {"q1": ["a"], "q2": ["b"]}, ["a", "b"])
    assert summary.harmonic_mean == 0.0
    assert summary.psi == pytest.approx(1.0)
    zero = summarize_groups({"q1": 0.0}, {"q1": ["a"]}, ["a", "b"])
    assert zero.harmonic_mean == 0.0 and zero.psi is None
    assert any("undefined" in n for n in zero.notes)
    nothing = summarize_groups({}, {}, ["a"])
    assert nothing.harmonic_mean is None and nothing.psi is None and nothing.scores == {"a": None}


def test_summaries_of_plain_lists():
    assert harmonic_mean([]) is None and psi([]) is None
    assert psi([0.7]) is None and psi([0.7, None, float("nan")]) is None  # one non-empty group: undefined
    assert harmonic_mean([0.5, 0.5]) == pytest.approx(0.5)
    assert harmonic_mean([1.0, 0.5]) == pytest.approx(2 / 3)
    assert psi([0.8, 0.6, 0.4]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-negative"):
        harmonic_mean([0.5, -0.1])


def test_unknown_group_is_an_error():
    with pytest.raises(ValueError, match="unknown group"):
        summarize_groups({"q": 1.0}, {"q": ["z"]}, ["a"])


def test_half_open_bins_boundaries():
    edges = [0, 100, 200, 300, 400, 500, 3120]
    assert bin_index(0, edges) == 0
    assert bin_index(99.999, edges) == 0
    assert bin_index(100, edges) == 1  # a boundary opens the next bin, it is in exactly one
    assert bin_index(500, edges) == 5
    assert bin_index(3120, edges) == 5  # the last bin is closed
    assert bin_index(3120, edges, close_last=False) is None
    assert bin_index(3121, edges) is None and bin_index(-1, edges) is None
    assert bin_index(float("nan"), edges) is None
    with pytest.raises(ValueError):
        bin_index(1, [0])


def test_posir_position_and_length():
    assert relative_position([0, 20], 200) == pytest.approx(0.05)
    assert position_bin(0.05) == "0.05-0.10"  # boundary value: the bin it opens
    assert position_bin(0.0) == "0.00-0.05"
    assert position_bin(1.0) == "0.95-1.00"
    assert relative_position([190, 230], 200) == 1.0  # clipped
    assert relative_position([0, 10], 0) is None
    assert relative_position([-30, -10], 200) is None
    assert relative_position([5], 200) is None
    assert len(POSITION_BINS) == 20 and POSITION_BINS[-1] == "0.95-1.00"
    with pytest.raises(ValueError):
        position_bin(1.2)
    assert [length_bucket(x) for x in (0, 511, 512, 1023.5, 1024, 1535, 1536, 90000)] == [
        "Q1", "Q1", "Q2", "Q2", "Q3", "Q3", "Q4", "Q4"]
    assert length_bucket(-1) is None and length_bucket(float("nan")) is None


def test_cell_figures_by_hand():
    # Q1: bin 0.00-0.05 has 0.5 and 1.0 (mean 0.75), bin 0.50-0.55 has 0.5; Q2: bin 0.00-0.05 has 1.0
    a, b = "0.00-0.05", "0.50-0.55"
    part1, part2 = empty_cells(), empty_cells()
    add_to_cells(part1, "Q1", a, 0.5)
    add_to_cells(part1, "Q1", b, 0.5)
    add_to_cells(part2, "Q1", a, 1.0)
    add_to_cells(part2, "Q2", a, 1.0)
    cells = merge_cells([part1, part2])
    assert cells["Q1"][a] == [2, 1.5]
    fig = cell_figures(cells)
    assert fig["ndcg_at_10_Q1"] == pytest.approx((0.75 + 0.5) / 2)  # unweighted over non-empty bins
    assert fig["psi_Q1"] == pytest.approx(1 - 0.5 / 0.75)
    # a single non-empty bin has no spread to measure: PSI is undefined, not a flat 0.0
    assert fig["ndcg_at_10_Q2"] == 1.0 and fig["psi_Q2"] is None
    assert any(note.startswith("psi_Q2:") and "1 non-empty group" in note for note in fig["notes"])
    assert fig["ndcg_at_10_Q3"] is None and fig["psi_Q3"] is None and fig["n_queries_Q3"] == 0
    assert fig["n_queries_Q1"] == 3 and fig["n_bins_Q1"] == 2
    # pooled across lengths: bin a = (1.5 + 1.0) / 3, bin b = 0.5
    assert fig[f"position_{a}"] == pytest.approx(2.5 / 3)
    assert fig[f"position_{b}"] == pytest.approx(0.5)
    assert fig["psi"] == pytest.approx(1 - 0.5 / (2.5 / 3))
    assert fig["position_counts"][a] == 3 and fig["position_0.95-1.00"] is None
    assert fig["harmonic_mean"] == pytest.approx(2 / (3 / 2.5 + 2))


def test_per_query_scores_counts_missing_as_zero():
    scores, missing = per_query_scores({"q1": {"ndcg_cut_10": 0.5}, "q2": {}}, ["q1", "q2", "q3"])
    assert scores == {"q1": 0.5, "q2": 0.0, "q3": 0.0} and missing == 2
    assert math.isclose(sum(scores.values()), 0.5)


def test_one_rule_for_undefined_spread_everywhere():
    # every writer and reader of PSI / min-max shares mteb_fairpos.fairness's rule
    from mteb_fairpos.results import profile_psi
    from mteb_fairpos.fairness import min_max_ratio, undefined_reason
    from mteb_fairpos.integrations.qdrant.discoverability import DiscoverabilityReport
    from mteb_fairpos.permutation.stats import position_fairness

    assert min_max_ratio([0.5, 1.0]) == 0.5 and undefined_reason([0.5, 1.0]) is None
    assert "1 non-empty group" in undefined_reason([0.4, None])
    assert "above 0" in undefined_reason([0.0, 0.0])
    assert profile_psi({"1": 0.8, "2": None}) is None and profile_psi({"1": 0.8, "2": 0.4}) == pytest.approx(0.5)
    one = summarize_groups({"q1": 0.6}, {"q1": ["a"]}, ["a", "b"])
    assert one.psi is None and any("1 non-empty group" in n for n in one.notes)
    assert math.isnan(position_fairness([0.7]))
    report = DiscoverabilityReport("c", "m", "none", (1,), 10, rows=[
        {"vector": "calibrated", "position": 1, "n": 3, "recall@1": 1.0, "mrr": 0.9}])
    report.ranks = {"calibrated": []}
    assert report.psi("calibrated") is None
    assert "PSI of MRR over positions (1 - min/max, lower is fairer): calibrated n/a" in report.table()
    assert "1 non-empty group(s)" in report.table()
