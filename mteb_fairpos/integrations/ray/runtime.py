"""Starting or joining Ray: a local runtime by default, an existing cluster by address.

An address that cannot be reached is reported within seconds, before any input is read or any
model loaded (``ray.init`` alone would keep retrying for a minute or more).

Token authentication (Ray >= 2.52): once any local ``ray.init`` has run, ``~/.ray/auth_token``
exists and ``ray start --head`` turns authentication on. Joining a cluster, this process applies
the same rule (``RAY_AUTH_MODE`` unset and a token at hand: use it), so a driver beside the head
node needs nothing set; a refused token is reported as such, with what to set where.
"""

from __future__ import annotations

import logging
import numbers
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ...config import whole

AUTH_MODE = "RAY_AUTH_MODE"
AUTH_HELP = (f"set {AUTH_MODE}=token and give every process the head node's token (`ray get-auth-token` there prints "
             "it): the file ~/.ray/auth_token (or the file named by RAY_AUTH_TOKEN_PATH) or the RAY_AUTH_TOKEN "
             "environment variable, on the head (`ray start --head`), on each worker (`ray start --address`) and "
             "here (`encode --address`)")
AUTH_NOTICES = "ray._private.authentication.authentication_token_setup"
ACTOR_NOTE = re.compile(rb"core_worker\.cc:\d+: Actor with class name: .* has constructor arguments in the object store")
"""Ray's core prints this at its error level, once per process, when Ray Data starts its actor pool: Ray Data
itself puts the pool's constructor arguments in the object store (ray-project/ray#57733). Harmless here."""
LOCAL_ADDRESSES = (None, "", "local")
"""Addresses that mean: start a Ray runtime on this machine (``"auto"`` joins one started with ``ray start``)."""


class RayUnavailableError(RuntimeError):
    """Ray is not installed, or the cluster at the given address cannot be reached."""


class RayAuthenticationError(RayUnavailableError):
    """The cluster uses token authentication and refused this process's token (or its lack of one)."""


def require_ray() -> Any:
    """The ``ray`` module, or a clear error saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401 - the pipeline needs Ray Data, not only Ray Core
    except ImportError as err:
        raise RayUnavailableError('the Ray engine needs Ray Data: pip install "mteb-fairpos[ray]" '
                                  f"({err}). Without it, use --engine local.") from None
    return ray


def check_address(address: str | None, timeout: float = 5.0) -> None:
    """Fail fast with :class:`RayUnavailableError` if ``address`` (``host:port`` or ``ray://host:port``) is not reachable."""
    require_ray()
    if address in LOCAL_ADDRESSES or address == "auto":
        return
    if not isinstance(address, str):
        raise TypeError(f"a Ray address is text (host:port), got {type(address).__name__}.")
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        port = parts.port  # urllib raises on a port that is no number, or out of range
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise RayUnavailableError(f"Ray address {address!r} is not host:port (e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001).")
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            pass
    except OSError as err:
        raise _unreachable(address, str(err)) from None
    if not address.startswith("ray://"):  # a Ray Client server (ray://) is not the GCS: the TCP check is all
        use_cluster_token()
        _probe_gcs(address, timeout)


def _followed(address: str | None) -> str | None:
    """The address ``ray.init`` joins for ``address``: the one in ``RAY_ADDRESS`` for none or ``"auto"``, where set."""
    return (os.environ.get("RAY_ADDRESS") or address) if address in (None, "auto") else address


def checked_address(address: str | None) -> str | None:
    """The address to join, checked (`check_address`): ``address``, or for none or ``"auto"`` the one in
    ``RAY_ADDRESS`` where it is set, since ``ray.init`` follows it (retrying an unreachable one for minutes)."""
    followed = _followed(address)
    try:
        check_address(followed)
    except RayUnavailableError as err:
        raise type(err)(f"RAY_ADDRESS: {err}" if followed != address else str(err)) from None
    return followed


def use_cluster_token() -> bool:
    """Turn on token authentication here if ``RAY_AUTH_MODE`` is unset and a token is at hand.

    It is the rule ``ray start --head`` applies, through the function Ray applies it with (not
    public API: if a Ray release moves it, nothing changes and a refusal is still reported as one).
    Ray's notice that it did so is kept out of the output. Returns whether token mode is on."""
    if AUTH_MODE in os.environ:
        return os.environ[AUTH_MODE].lower() == "token"
    try:
        from ray._private.authentication import authentication_token_setup as setup  # AUTH_NOTICES
    except ImportError:  # pragma: no cover - depends on the Ray release
        return False
    with _auth_notices_off():
        return bool(setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False))


@contextmanager
def _auth_notices_off() -> Iterator[None]:
    """Keep Ray's notices about the authentication mode it chose out of the output (errors still show)."""
    notices = logging.getLogger(AUTH_NOTICES)
    level = notices.level
    notices.setLevel(logging.ERROR)
    try:
        yield
    finally:
        notices.setLevel(level)


@contextmanager
def actor_note_dropped() -> Iterator[None]:
    """Inside the block, everything written to standard error passes through except :data:`ACTOR_NOTE`.

    Ray's core writes that line from C++ straight to file descriptor 2, past Python's ``sys.stderr``
    and its loggers, and its only switches hide its real errors too or turn off actor restarts. So
    the descriptor is pointed at a pipe into a small filter process that writes every other line to
    the original standard error. Being a process of its own, it still passes on what a crashing
    process wrote last. Where descriptor 2 cannot be duplicated or the filter cannot start, nothing
    is filtered."""
    if sys.stderr is not None:
        sys.stderr.flush()
    try:
        original = os.dup(2)
    except OSError:  # no standard error to filter
        yield
        return
    try:
        copier = subprocess.Popen([sys.executable, "-I", "-c", _FILTER, ACTOR_NOTE.pattern.decode()],
                                  stdin=subprocess.PIPE, stdout=original, stderr=original)
    except OSError:
        os.close(original)
        yield
        return
    os.dup2(copier.stdin.fileno(), 2)
    try:
        yield
    finally:
        if sys.stderr is not None:
            sys.stderr.flush()
        os.dup2(original, 2)
        os.close(original)
        copier.stdin.close()  # the filter ends once every writer is gone: processes started inside may hold on
        try:
            copier.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


_FILTER = ("import re, sys\n"
           "note = re.compile(sys.argv[1].encode())\n"
           "for line in sys.stdin.buffer:\n"
           "    if not note.search(line):\n"
           "        sys.stdout.buffer.write(line)\n"
           "        sys.stdout.buffer.flush()\n")
"""The filter process of :func:`actor_note_dropped`: standard input to standard output, line by line, less the note."""


def is_auth_failure(text: str) -> bool:
    """Whether a Ray error message is a token-authentication refusal (its RPC status or Ray's own wording)."""
    return any(mark in text for mark in ("InvalidAuthToken", "UNAUTHENTICATED", "Authentication token",
                                         "authentication token"))


def _probe_gcs(address: str, timeout: float) -> None:
    """Something listens at ``address``; ask it for a key as Ray's GCS would answer (fails fast if it is not Ray).

    Uses Ray's own GCS client, which is not public API: if a Ray release moves it, the probe is
    left out and ``ray.init`` reports the problem itself, only more slowly."""
    try:
        from ray._raylet import GcsClient
    except ImportError:  # pragma: no cover - depends on the Ray release
        return
    try:
        GcsClient(address=address, cluster_id=None).internal_kv_get(b"mteb-fairpos-probe", None, timeout=timeout)
    except Exception as err:  # noqa: BLE001 - Ray raises RpcError and friends
        if is_auth_failure(str(err)):
            raise auth_refused(address, str(err)) from None
        raise _unreachable(address, f"it answers, but not as a Ray cluster's GCS: {str(err)[:120]}") from None


def _require_joined(ray: Any, address: str | None) -> None:
    """Refuse a ``host:port`` other than the GCS of the cluster this process has already joined (the work would run
    there). Ports must agree, and hosts too where both resolve and neither is this machine (a local runtime's GCS
    is named by this node's address, a user may write 127.0.0.1); ``"auto"``, ``ray://`` and local addresses are
    taken as the joined cluster."""
    if address in LOCAL_ADDRESSES or address == "auto" or not isinstance(address, str) or address.startswith("ray://"):
        return
    current = ray.get_runtime_context().gcs_address
    joined, asked = urlsplit(f"ray://{current}"), urlsplit(f"ray://{address.strip()}")
    try:
        ports_differ = joined.port != asked.port
    except ValueError:  # not a port: check_address names it
        check_address(address)
        raise
    here = _resolved(ray.util.get_node_ip_address())

    def machine(host: str | None) -> str | None:  # this machine by any of its names is one machine
        found = _resolved(host)
        return "here" if found is not None and (found == here or found.startswith("127.")) else found

    hosts = {machine(joined.hostname), machine(asked.hostname)}
    if ports_differ or (None not in hosts and len(hosts) > 1):
        raise RayUnavailableError(f"this process has already joined the Ray cluster at {current}, not {address}; "
                                  "call ray.shutdown() first to join another.")


def _resolved(host: str | None) -> str | None:
    try:
        return socket.gethostbyname(host) if host else None
    except OSError:
        return None


def check_resources(gpus_per_actor: Any) -> None:
    """Refuse a GPU count per actor that Ray could not schedule (negative, text), before Ray starts."""
    if gpus_per_actor is None:
        return
    if isinstance(gpus_per_actor, bool) or not isinstance(gpus_per_actor, numbers.Real) or not \
            0 <= gpus_per_actor < float("inf") or (gpus_per_actor > 1 and not float(gpus_per_actor).is_integer()):
        raise ValueError(f"gpus_per_actor must be a number of at least 0 (a whole one above 1, as Ray schedules them), "
                         f"or None (one each where the cluster has GPUs), got {gpus_per_actor!r}.")


def gpus_for_actors(gpus_per_actor: float | None) -> float:
    """The GPUs each actor asks for: one where a node has any (``None``), else as given. A request no node can meet
    is refused on a machine alone that no autoscaler grows, where Ray would wait for the GPUs for ever; on a cluster
    it is said, since an autoscaler may add a node that has them."""
    ray = require_ray()
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    largest = max((resources.get("GPU", 0) for resources in nodes), default=0)
    if gpus_per_actor is None:
        return 1.0 if largest >= 1 else 0.0
    if gpus_per_actor <= largest:
        return float(gpus_per_actor)
    short = f"each actor asks for {gpus_per_actor:g} GPU(s), but no node of the Ray cluster has more than {largest:g}"
    if len(nodes) <= 1 and not _autoscaled():
        raise RayUnavailableError(f"{short}; give fewer (0 runs on CPUs), or join a cluster with GPUs. "
                                  "Nothing was sent to it.")
    logging.getLogger(__name__).warning("%s; the actors wait until a node that has them joins.", short)
    return float(gpus_per_actor)


def require_actor_gpus(device: str | None, gpus_per_actor: float) -> None:
    """Refuse a CUDA ``device`` for actors that get no GPU: Ray hides every GPU from them, and each would fail on
    torch's assertion."""
    if device and str(device).startswith("cuda") and not gpus_per_actor:
        raise RayUnavailableError(f"device {device!r}, but the Ray actors get no GPU (gpus per actor 0: no node has "
                                  "one, or none was asked for); leave the device out, or join a cluster with GPUs. "
                                  "Nothing was sent to it.")


def _autoscaled() -> bool:
    """Whether an autoscaler reported the cluster's configuration to its GCS (a local runtime has none). Ray's state
    API for it is not public: where it moves, the cluster is taken as one that may grow, and nothing is refused."""
    try:
        from ray._private.state import state

        return state.get_cluster_config() is not None
    except Exception:  # noqa: BLE001 - any failure of a private API means: unknown
        return True


def auth_refused(address: str, why: str) -> RayAuthenticationError:
    mode = os.environ.get(AUTH_MODE)
    return RayAuthenticationError(
        f"the Ray cluster at {address} uses token authentication and refused this process "
        f"({why.splitlines()[0][:100]}; {AUTH_MODE} is {'unset' if mode is None else repr(mode)} here): {AUTH_HELP}. "
        "Nothing was sent to it.")


def _unreachable(address: str, why: str) -> RayUnavailableError:
    return RayUnavailableError(
        f"cannot reach the Ray cluster at {address} ({why}); start it with `ray start --head` on the head node "
        "and give that node's address (port 6379), or leave out --address for a local Ray runtime. Nothing was sent to it.")


def init(address: str | None = None, *, num_cpus: int | None = None) -> None:
    """Join the cluster at ``address`` or start a local runtime (``num_cpus`` caps it); with no address, the one in
    ``RAY_ADDRESS`` where it is set, as ``ray.init`` does. Ray already up here is used if it is the cluster asked for,
    and refused if it is another."""
    ray = require_ray()
    if num_cpus is not None and (not whole(num_cpus) or num_cpus < 1):
        raise ValueError(f"num_cpus must be a positive integer or None (every core), got {num_cpus!r}.")
    if ray.is_initialized():  # compared, not probed: a client-mode process may not reach the GCS port
        _require_joined(ray, _followed(address))
        return
    address = checked_address(address)
    local = address in LOCAL_ADDRESSES
    # "local" asked for by name starts one even where RAY_ADDRESS is set, as ray.init("local") does
    target = "local" if address == "local" else None if local else address
    try:
        with _auth_notices_off():  # a local runtime turns token authentication on by default, and says so
            ray.init(address=target, num_cpus=num_cpus if local else None, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
    except ConnectionError as err:  # "auto" with no cluster started on this machine
        raise RayUnavailableError(f"cannot join the Ray cluster at {address!r}: {str(err).splitlines()[0]} "
                                  "Nothing was sent to it.") from None
