"""mteb-fairpos: position-fair document embeddings for the MTEB ecosystem.

The calibration math is in :mod:`mteb_fairpos.calibration` (docs/method.md#s1), the fast attention
backend in :mod:`mteb_fairpos.attention`, the model wrapper in :mod:`mteb_fairpos.model`.

Names are imported on first use (PEP 562), so registering the plugin with mteb, which imports
this package, does not pull in torch and transformers before anything needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "CalibrationConfig": "config",
    "ConfigError": "config",
    "CalibrationPlan": "attention",
    "UnsupportedModelError": "attention",
    "attach": "attention",
    "FairSentenceTransformer": "model",
    "TruncationWarning": "segmented",
    "minilm_path": "offline",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"

if TYPE_CHECKING:
    from .attention import CalibrationPlan, UnsupportedModelError, attach
    from .config import CalibrationConfig, ConfigError
    from .model import FairSentenceTransformer
    from .segmented import TruncationWarning
    from .offline import minilm_path


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
