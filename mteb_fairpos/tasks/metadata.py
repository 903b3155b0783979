"""Task metadata whose descriptive statistics live in this package, in mteb's own layout.

mteb reads (and ``calculate_descriptive_statistics`` writes) a task's statistics at
``<package>/descriptive_stats/<task type>/<task name>.json`` inside the *mteb* package. A plugin
must not write into mteb's install, so the plugin's tasks keep the same layout under
``mteb_fairpos/descriptive_stats``: mteb's routine, ``descriptive_stats`` and ``n_samples`` work
unchanged on them.
"""

from __future__ import annotations

from pathlib import Path

from mteb.abstasks.task_metadata import TaskMetadata

STATS_FOLDER = Path(__file__).resolve().parent.parent / "descriptive_stats"


class FairPosTaskMetadata(TaskMetadata):
    """mteb's ``TaskMetadata``, with the descriptive statistics stored in this package."""

    @property
    def descriptive_stat_path(self) -> Path:
        return STATS_FOLDER / str(self.type) / f"{self.name}.json"
