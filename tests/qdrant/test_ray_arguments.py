"""Arguments of the Ray engine that Ray would fail on deep inside, wait on for minutes, or take for something else
are refused before any input is read, any model loaded or any Ray runtime started (none starts here)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

from mteb_fairpos.integrations.qdrant.encode import MANIFEST, encode_to_parts  # noqa: E402
from mteb_fairpos.integrations.ray import runtime  # noqa: E402
from mteb_fairpos.offline import MINILM_HUB_ID  # noqa: E402

from corpus import records, write_jsonl  # noqa: E402


@pytest.fixture(autouse=True)
def _no_ray_here():
    if ray.is_initialized():  # another module's runtime would be joined instead of refused
        pytest.skip("a Ray runtime is up in this process")
    yield
    assert not ray.is_initialized(), "a refused call started Ray"


@pytest.mark.parametrize(("options", "message"), [
    ({"part_size": 2.5}, "part_size must be a positive integer, got 2.5"),  # it made one part of every document
    ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),  # checked inside a Ray actor
    ({"actors": 1.5}, "actors must be a positive integer, got 1.5"),
    ({"gpus_per_actor": -1}, "gpus_per_actor must be a number of at least 0"),
    ({"gpus_per_actor": "0"}, "gpus_per_actor must be a number of at least 0"),
])
def test_counts_ray_would_fail_on_are_named_first(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        encode_to_parts(write_jsonl(tmp_path / "d.jsonl", records(2)), tmp_path / "o", MINILM_HUB_ID, "p",
                        engine="ray", **options)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("address", ["127.0.0.1:abc", "127.0.0.1:99999", " 127.0.0.1:1 "])
def test_an_address_that_is_no_host_and_port_is_named_as_one(address):
    with pytest.raises(runtime.RayUnavailableError, match=f"Ray address {address!r} is not host:port"):
        runtime.check_address(address)  # urllib's "Port could not be cast to integer value" named no address


def test_an_unreachable_ray_address_in_the_environment_is_reported_at_once(tmp_path, monkeypatch):
    """ray.init follows RAY_ADDRESS when no address is given, and retried an unreachable one for minutes."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(runtime.RayUnavailableError, match="RAY_ADDRESS: cannot reach the Ray cluster at 127.0.0.1:1"):
        runtime.init()
    with pytest.raises(runtime.RayUnavailableError, match="RAY_ADDRESS: cannot reach"):
        encode_to_parts(write_jsonl(tmp_path / "d.jsonl", records(2)), tmp_path / "o", MINILM_HUB_ID, "p", engine="ray")
    with pytest.raises(runtime.RayUnavailableError, match="RAY_ADDRESS: cannot reach"):
        runtime.init("auto")  # ray.init follows RAY_ADDRESS for "auto" too
    assert not (tmp_path / "o").exists()


def test_a_cluster_that_cannot_be_joined_leaves_a_finished_folder_finished(tmp_path, minilm_dir, monkeypatch):
    """The manifest of a complete folder was deleted before Ray was joined, so a failed join left it unfinished."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # "auto" would follow it
    source = write_jsonl(tmp_path / "d.jsonl", records(4))
    encode_to_parts(source, tmp_path / "parts", MINILM_HUB_ID, "p", show_progress=False)
    manifest = (tmp_path / "parts" / MANIFEST).read_bytes()
    with pytest.raises(runtime.RayUnavailableError, match="cannot join the Ray cluster at 'auto': Could not find any running"):
        encode_to_parts(source, tmp_path / "parts", MINILM_HUB_ID, "p", engine="ray", address="auto", show_progress=False)
    assert (tmp_path / "parts" / MANIFEST).read_bytes() == manifest
