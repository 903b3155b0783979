"""The grouped scores of a subset read the position groups kept in that subset's own data."""

from __future__ import annotations

from mteb_fairpos.results.schema import load
from mteb_fairpos.tasks._base import PositionGroupedRetrieval, retrieval_split, with_groups
from mteb_fairpos.tasks.posq import SQuADPosQTiny


class _TwoSubsets(SQuADPosQTiny):
    """Two subsets and two splits whose queries sit in opposite groups."""

    position_groups = ("begin", "end")

    def load_data(self, **kwargs):
        split = retrieval_split({"d1": "one", "d2": "two"}, {"q1": "first?", "q2": "second?"}, {"q1": "d1", "q2": "d2"})
        self.dataset = {
            "a": {"test": with_groups(split, {"q1": ("begin",), "q2": ("end",)}, {"unanswerable": 1})},
            "b": {"dev": with_groups(split, {"q1": ("end",), "q2": ("begin",)}, {"unanswerable": 3})},
        }
        self.data_loaded = True


def test_each_subset_and_split_is_scored_with_its_own_groups():
    task = _TwoSubsets()
    task.load_data()
    assert isinstance(task, PositionGroupedRetrieval) and not any("membership" in name for name in vars(task))
    scores = {"q1": {"ndcg_cut_10": 1.0}, "q2": {"ndcg_cut_10": 0.25}}
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    a = load(task.task_specific_scores(scores, qrels, {}, hf_split="test", hf_subset="a"))
    b = load(task.task_specific_scores(scores, qrels, {}, hf_split="dev", hf_subset="b"))
    assert a.profile().values == {"begin": 1.0, "end": 0.25}
    assert b.profile().values == {"begin": 0.25, "end": 1.0}
    assert (a.counts.skipped, b.counts.skipped) == ({"unanswerable": 1}, {"unanswerable": 3})
