"""mteb-fairpos: position-fair document embeddings for the MTEB ecosystem.

The calibration math is in :mod:`mteb_fairpos.calibration` (SPEC section 1), the fast attention
backend in :mod:`mteb_fairpos.attention`, the model wrapper in :mod:`mteb_fairpos.model`.
"""

from .attention import CalibrationPlan, UnsupportedModelError, attach
from .config import CalibrationConfig, ConfigError
from .model import FairSentenceTransformer, TruncationWarning
from .offline import minilm_path

__all__ = [
    "CalibrationConfig",
    "CalibrationPlan",
    "ConfigError",
    "FairSentenceTransformer",
    "TruncationWarning",
    "UnsupportedModelError",
    "attach",
    "minilm_path",
]
__version__ = "0.1.0"
