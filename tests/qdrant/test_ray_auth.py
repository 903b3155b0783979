"""Ray's token authentication (Ray >= 2.52) with the cluster recipe: `ray start --head`, a worker
joining by address, a driver joining with `--address`.

The slow test starts a real head node and a worker node with `ray start --block` in their own
process groups (stopped afterwards by group id, so no other Ray on the machine is touched), with
HOME pointed at a temporary folder: the token file is the test's own. The drivers run in
subprocesses because Ray reads its authentication mode once per process.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

from mteb_fairpos.integrations.ray import runtime  # noqa: E402

# What Ray 2.60's GCS answered the probe of a process without the token (recorded from the slow test below).
REFUSAL = ("RPC error: InvalidAuthToken: Authentication token is missing or incorrect. Note: RAY_AUTH_MODE is "
           "currently 'disabled' ()")


def test_an_authentication_refusal_is_reported_as_one():
    err = runtime.auth_refused("10.0.0.5:6379", REFUSAL)
    assert isinstance(err, runtime.RayAuthenticationError) and runtime.is_auth_failure(REFUSAL)
    text = str(err)
    assert "10.0.0.5:6379 uses token authentication" in text and "InvalidAuthToken" in text
    for what in ("RAY_AUTH_MODE=token", "~/.ray/auth_token", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN environment",
                 "ray get-auth-token", "ray start --address"):
        assert what in text
    assert "not as a Ray cluster's GCS" not in text
    assert not runtime.is_auth_failure("RPC error: Unavailable: failed to connect to all addresses")


_HANDED: set[int] = set()
"""Ports given out in this run: a port probed and closed is often the next one probed, and two Ray components told
the same port fail to start."""


def _free_port() -> int:
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _HANDED:
            _HANDED.add(port)
            return port


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    ports = [f"--node-manager-port={_free_port()}", f"--object-manager-port={_free_port()}",
             f"--dashboard-agent-listen-port={_free_port()}", f"--metrics-export-port={_free_port()}",
             f"--runtime-env-agent-port={_free_port()}", f"--dashboard-agent-grpc-port={_free_port()}"]
    return subprocess.Popen(["ray", "start", "--block", "--num-cpus=1", "--disable-usage-stats", *ports, *args],
                            env=env, start_new_session=True, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen) -> None:
    """Stop a `ray start --block` and the Ray processes it started (its own process group)."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # the group's other members (GCS, raylet) get a moment to exit too
            time.sleep(2)


def _driver(address: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    code = ("import ray\nfrom mteb_fairpos.integrations.ray import runtime\n"
            f"runtime.init({address!r})\n"
            "print('nodes', sum(n['Alive'] for n in ray.nodes()))\nray.shutdown()\n")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_the_cluster_recipe_works_with_token_authentication(tmp_path):
    import tempfile

    sessions = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Unix socket paths must stay under 108 bytes
    home = tmp_path / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    base.update(HOME=str(home), PYTHONPATH=os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")) if p))
    # a token exists, as after any local ray.init: `ray start --head` turns authentication on by itself
    subprocess.run(["ray", "get-auth-token", "--generate"], env=base, check=True, capture_output=True, timeout=60)
    token = (home / ".ray" / "auth_token").read_text().strip()
    port = _free_port()
    address = f"127.0.0.1:{port}"
    head = _ray_start(["--head", f"--port={port}", "--include-dashboard=false",
                       f"--ray-client-server-port={_free_port()}", f"--temp-dir={sessions}"],
                      base, tmp_path / "head.log")
    worker = None
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and head.poll() is None, (tmp_path / "head.log").read_text()
                time.sleep(0.5)
        # a worker on another machine: no token file, the head's token and the mode in its environment
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        worker_env = dict(base, HOME=str(elsewhere), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        worker = _ray_start([f"--address={address}"], worker_env, tmp_path / "worker.log")
        # the driver beside the head: nothing set, the token file is found and used (the rule of `ray start --head`)
        joined = _driver(address, base, tmp_path)
        assert joined.returncode == 0, joined.stderr[-2000:]
        deadline = time.monotonic() + 60
        while "nodes 2" not in joined.stdout and time.monotonic() < deadline:  # the worker may still be joining
            time.sleep(2)
            joined = _driver(address, base, tmp_path)
        assert "nodes 2" in joined.stdout, joined.stdout + (tmp_path / "worker.log").read_text()[-2000:]
        # a driver without the token: one clear error saying what to set, not a stack trace from Ray
        refused = _driver(address, dict(base, HOME=str(elsewhere)), tmp_path)
        assert refused.returncode != 0
        last = refused.stderr.strip().splitlines()[-1]
        assert last.startswith("mteb_fairpos.integrations.ray.runtime.RayAuthenticationError")
        assert "uses token authentication" in last and "RAY_AUTH_MODE=token" in last and "RAY_AUTH_TOKEN" in last
    finally:
        for process in (worker, head):
            if process is not None:
                _stop(process)
        shutil.rmtree(sessions, ignore_errors=True)
