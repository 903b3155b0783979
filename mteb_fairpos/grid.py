"""Grids of calibration configs, and the retrieval paper's: the one home of the grid it swept.

The registry registers `PAPER_GRID` as ``fair/<model>-<config>``; ``mteb-fairpos sweep`` sweeps it
by default.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable

from .config import CalibrationConfig, ConfigError, parse_layers, whole

PAPER_BASKETS = (128, 256, 512)
PAPER_LAYERS = ("last", "last_half")
PAPER_STRENGTHS = (0.5, 1.0)


def grid(baskets: Iterable[int], layers: Iterable[str], strengths: Iterable[float]) -> list[CalibrationConfig]:
    """Every combination, in basket, layer set, strength order; duplicates removed."""
    for name, values in (("baskets", baskets), ("layers", layers), ("strengths", strengths)):
        if isinstance(values, (str, bytes)):  # "128" would be baskets 1, 2 and 8
            raise TypeError(f"{name} is a list; got the text {values!r} (write [{values!r}]).")
    configs = []
    for basket, layer_text, strength in itertools.product(baskets, layers, strengths):
        configs.append(CalibrationConfig(basket_size=_basket(basket), layers=parse_layers(layer_text), strength=float(strength)))
    return list(dict.fromkeys(configs))


def _basket(value: object) -> int:
    """A basket size as an integer: 128, "128" or 128.0; 128.7 would have been cut to 128."""
    if whole(value):
        return int(value)  # type: ignore[call-overload]
    try:
        number = float(value) if isinstance(value, (str, numbers.Real)) and not isinstance(value, bool) else None
    except ValueError:  # text that is no number
        number = None
    if number is None or not number.is_integer():
        raise ConfigError(f"a basket size is a whole number of tokens, got {value!r}.")
    return int(number)


PAPER_GRID: tuple[CalibrationConfig, ...] = tuple(grid(PAPER_BASKETS, PAPER_LAYERS, PAPER_STRENGTHS))
"""The retrieval paper's sweep: basket size x layer set x strength, 12 configs."""
