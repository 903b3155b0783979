"""Grids of calibration configs, and the retrieval paper's: the one home of the grid it swept.

The registry registers `PAPER_GRID` as ``fair/<model>-<config>``; ``mteb-fairpos sweep`` sweeps it
by default.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from .config import CalibrationConfig, parse_layers

PAPER_BASKETS = (128, 256, 512)
PAPER_LAYERS = ("last", "last_half")
PAPER_STRENGTHS = (0.5, 1.0)


def grid(baskets: Iterable[int], layers: Iterable[str], strengths: Iterable[float]) -> list[CalibrationConfig]:
    """Every combination, in basket, layer set, strength order; duplicates removed."""
    configs = []
    for basket, layer_text, strength in itertools.product(baskets, layers, strengths):
        configs.append(CalibrationConfig(basket_size=int(basket), layers=parse_layers(layer_text), strength=float(strength)))
    return list(dict.fromkeys(configs))


PAPER_GRID: tuple[CalibrationConfig, ...] = tuple(grid(PAPER_BASKETS, PAPER_LAYERS, PAPER_STRENGTHS))
"""The retrieval paper's sweep: basket size x layer set x strength, 12 configs."""
