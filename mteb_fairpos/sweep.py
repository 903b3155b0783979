"""A sweep: one model evaluated over a grid of calibration configs, each grid point an mteb model.

`grid` builds the configs (the retrieval paper's grid by default, in the CLI); a `SweepPoint` is
one of them (or the uncalibrated twin) as the mteb ``ModelMeta`` that `mteb.evaluate` runs and
names its results after. The sequential sweep (``mteb-fairpos sweep``) and the distributed one
(`mteb_fairpos.integrations.ray.sweep`) build the same points, so they write the same result files.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .config import CalibrationConfig, parse_layers


def grid(baskets: Iterable[int], layers: Iterable[str], strengths: Iterable[float]) -> list[CalibrationConfig]:
    """Every combination, in basket, layer set, strength order; duplicates removed."""
    configs = []
    for basket, layer_text, strength in itertools.product(baskets, layers, strengths):
        configs.append(CalibrationConfig(basket_size=int(basket), layers=parse_layers(layer_text), strength=float(strength)))
    return list(dict.fromkeys(configs))


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: a plugin model's base with one calibration (``None``: the uncalibrated twin)."""

    model: str
    calibration: CalibrationConfig | None
    device: str | None = None
    max_length: int | None = None
    """A length other than the model's own is an mteb experiment: its own results folder."""

    def meta(self) -> Any:
        """The mteb ``ModelMeta`` of this point (named ``fair/<model>-<config>`` or ``fair-off/<model>``)."""
        from .mteb_models import base_model, calibrated_name, fair_model_meta

        meta = fair_model_meta(calibrated_name(base_model(self.model)), self.calibration)
        if self.device:
            meta = meta.model_copy(update={"loader_kwargs": {**meta.loader_kwargs, "device": self.device}})
        if self.max_length:
            meta = meta.model_copy(update={"experiment_kwargs": {"max_seq_length": self.max_length}})
        return meta


def is_cached(cache: Any, point: SweepPoint, task_name: str) -> bool:
    """Whether mteb's results folder already holds this point's result for the task."""
    return cache.get_task_result_path(task_name, point.meta()).is_file()
