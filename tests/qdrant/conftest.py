"""Fixtures shared by the Qdrant, load and Ray tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from mteb_fairpos.integrations.qdrant import store


@pytest.fixture(params=["local", "edge"])
def new_store(request, tmp_path) -> Iterator[Callable[[], object]]:
    """Makes fresh, empty embedded stores of one backend: local mode (in memory) and Qdrant Edge (a
    folder), so a test using it runs against both; every store it made is closed afterwards."""
    made = []
    names = itertools.count()

    def make():
        if request.param == "local":
            client = store.connect(":memory:")
        else:
            client = store.connect(str(tmp_path / f"edge-{next(names)}"), backend="edge")
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
