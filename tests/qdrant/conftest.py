"""Fixtures shared by the Qdrant, load and Ray tests: the model, and stores of both embedded backends."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
from mteb_fairpos.integrations.qdrant import store


@pytest.fixture(scope="session")
def model(minilm_dir):
    """The real all-MiniLM-L6-v2 with basket size 8, which keeps calibration active on short documents."""
    return FairSentenceTransformer(minilm_dir, CalibrationConfig(basket_size=8), device="cpu")


@pytest.fixture(params=["local", "edge"])
def backend(request) -> str:
    """Each embedded engine in turn: qdrant-client's local mode and Qdrant Edge."""
    if request.param == "edge":
        pytest.importorskip("qdrant_edge", reason='the Edge backend is an extra: pip install "mteb-fairpos[edge]"')
    return request.param


@pytest.fixture()
def open_store(backend, tmp_path) -> Iterator[Callable[[str], object]]:
    """Opens the folder ``tmp_path / name`` with this test's backend (again: a new process would);
    every store it opened and left open is closed afterwards."""
    opened = []

    def make(name: str):
        client = store.open_store(str(tmp_path / name), backend=backend)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


@pytest.fixture()
def new_store(backend, tmp_path) -> Iterator[Callable[[], object]]:
    """Makes fresh, empty stores of this test's backend (local mode in memory, Edge in a folder), so a
    test using it runs against both; every store it made is closed afterwards."""
    made = []
    names = itertools.count()

    def make():
        if backend == "local":
            client = store.open_store(":memory:")
        else:
            client = store.open_store(str(tmp_path / f"edge-{next(names)}"), backend="edge")
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
