"""Result scores: what tasks write (`schema`), reading a results folder (`reader`), and the
tables (`tables`) and figures (`plots`) that ``compare``, ``probe`` and ``sweep`` show.

``from mteb_fairpos.results import collect`` reads a folder into a :class:`Collection` of
:class:`TaskScores` per (:class:`ModelKey`, task), with an :class:`Issue` for everything that could
not be read whole.
"""

from .reader import (
    Collection,
    Issue,
    ModelKey,
    TaskScores,
    collect,
    is_twin,
    model_order,
    plugin_base,
    position_profiles,
    profile_psi,
    read_result,
    results_root,
    summarize,
    twin_for,
)
from .schema import Counts, Estimate, Profile, ScoreEntry, Settings, dump, load

__all__ = [
    "Collection",
    "Counts",
    "Estimate",
    "Issue",
    "ModelKey",
    "Profile",
    "ScoreEntry",
    "Settings",
    "TaskScores",
    "collect",
    "is_twin",
    "dump",
    "load",
    "model_order",
    "plugin_base",
    "position_profiles",
    "profile_psi",
    "read_result",
    "results_root",
    "summarize",
    "twin_for",
]
