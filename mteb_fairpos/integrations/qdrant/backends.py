"""What each store backend can do, so writers and readers ask about a capability, never a backend.

Three backends hold a collection: Qdrant Edge (the embedded default: the server's engine in this
process, see :mod:`.edge`), qdrant-client's local mode (embedded, pure Python) and a Qdrant
server or cluster. All three answer the same ``QdrantClient`` calls this package makes; where
they differ, the difference is one of these flags, read from the client's public state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .edge import EdgeClient


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers; the writer and the loader act on these flags."""

    name: str
    """``"edge"``, ``"local"`` or ``"server"``: for messages and reports only."""
    remote: bool
    """Behind a network: probed before the first write, and it may drop metadata it does not know."""
    payload_indexes: bool
    """Payload indexes exist (local mode scans every payload, so it has none)."""
    hnsw_settings: bool
    """HNSW settings can be changed: a bulk load defers index building (``m=0``) and restores it."""
    indexes_on_request: bool
    """Indexes are built only when asked (Edge optimizes when told to, after the writes)."""
    concurrent_writers: bool
    """Writes may come from another thread or process (an embedded store belongs to the thread that opened it)."""


EDGE = Capabilities("edge", remote=False, payload_indexes=True, hnsw_settings=False, indexes_on_request=True,
                    concurrent_writers=False)
LOCAL = Capabilities("local", remote=False, payload_indexes=False, hnsw_settings=False, indexes_on_request=False,
                     concurrent_writers=False)
SERVER = Capabilities("server", remote=True, payload_indexes=True, hnsw_settings=True, indexes_on_request=False,
                      concurrent_writers=True)


def capabilities(client: Any) -> Capabilities:
    """The capabilities of ``client``'s backend (from ``QdrantClient.init_options``, its public settings)."""
    if isinstance(client, EdgeClient):
        return EDGE
    options = getattr(client, "init_options", None) or {}
    if options.get("path") is not None or options.get("location") == ":memory:":
        return LOCAL
    return SERVER
