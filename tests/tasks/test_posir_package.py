"""PosIR's hooks share nothing through the task: each subset's positions travel with its call."""

from __future__ import annotations

import copy

import pytest

from mteb_fairpos.tasks.posir import PosIR
from mteb_fairpos.tasks.posir.task import QUERY_SCORES, position_scores


def test_position_scores_place_each_query_and_count_the_rest():
    positions = {"q1": ("Q1", "0.00-0.05"), "q2": ("Q1", "0.00-0.05"), "q3": ("Q4", "0.95-1.00"), "q4": None}
    out = position_scores({"q1": 1.0, "q2": 0.5, "q3": 0.25, "q4": 1.0, "q5": 0.0}, positions)
    assert out["cells"]["Q1"] == {"0.00-0.05": [2, 1.5]} and out["cells"]["Q4"] == {"0.95-1.00": [1, 0.25]}
    assert out["n_queries"] == 5 and out["unplaced_queries"] == 2  # q4 has no usable place, q5 none at all
    assert out["position_0.00-0.05"] == 0.75 and out["position_0.95-1.00"] == 0.25
    assert out["psi"] == pytest.approx(1 - 0.25 / 0.75)


def test_task_specific_scores_read_nothing_left_on_the_task():
    task = PosIR(languages="deu", domains="finance_economics")
    before = copy.deepcopy(vars(task))
    scores = {"a": {"ndcg_cut_10": 0.5}, "b": {"ndcg_cut_10": 1.0}}
    out = task.task_specific_scores(scores, {"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d3": 1}}, {}, "test", "x")
    assert out == {QUERY_SCORES: {"a": 0.5, "b": 1.0, "c": 0.0}}  # c was not scored by pytrec_eval: 0
    assert vars(task).keys() == before.keys() and vars(task)["hf_subsets"] == before["hf_subsets"]
