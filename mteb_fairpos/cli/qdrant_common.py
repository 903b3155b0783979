"""What the Qdrant subcommands share once their arguments are parsed: the store for the connection
options (`options.add_connection_arguments`), the model a collection was built with, and the report.

Nothing heavy is imported at module level: building the CLI's parser (``--help``) must stay fast.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from ..offline import MINILM_HUB_ID
from .options import DEFAULT_STORE, refuse_ignored


def print_report(report: Any, path: Path | None) -> int:
    """With ``--report PATH``, write the run's JSON form (per-document lists in full, streamed); then print
    its summary, which names a few of each list and where the rest is. The exit status 0."""
    from ..integrations.qdrant.listing import write_json

    if path:
        write_json(path, report.to_dict(stream=True))
    print(report.summary(report=str(path) if path else None))
    return 0


CLUSTER_FLAGS = ("--shard-number", "--replication-factor", "--write-consistency-factor")
"""`options.add_cluster_arguments`' flags: a server's settings, refused without ``--url``."""


def opened_store(args: argparse.Namespace, *, existing: bool = False) -> AbstractContextManager[Any]:
    """The store of the parsed connection arguments, closed on leaving (see `removed_if_failed`); a server is
    probed before anything else, and the collection name is checked before the store is opened.

    ``existing``: the command only reads, so a local folder that does not exist is an error
    (a mistyped ``--path`` must not leave an empty store behind).
    """
    if args.url is not None:
        if args.backend is not None:
            raise ValueError("--backend chooses the embedded engine of --path; a server (--url) runs its own.")
        check_collection(args.collection, None)
        api_key = args.api_key if args.api_key is not None else os.environ.get("QDRANT_API_KEY")
        timeout = {} if args.timeout is None else {"timeout": args.timeout}  # else open_store's default
        return removed_if_failed(None, lambda: _store().open_store(url=args.url, api_key=api_key, **timeout))
    refuse_ignored([flag for flag in ("--api-key", "--timeout", "--parallel", *CLUSTER_FLAGS)
                    if getattr(args, flag[2:].replace("-", "_"), None) is not None],
                   "a server", "give --url as well (an embedded store is one shard in this process)")
    if args.backend == "edge" and args.path == ":memory:":
        raise ValueError("the Qdrant Edge backend stores its data in a folder; give --path FOLDER.")
    path = args.path or DEFAULT_STORE
    if existing and path != ":memory:" and not os.path.isdir(path):
        raise FileNotFoundError(f"no local Qdrant store at {path!r}; index into it first "
                                "(mteb-fairpos index ... --path) or give the folder you indexed into.")
    store = _store()
    check_collection(args.collection, store.embedded_backend(path, args.backend))
    if args.backend is None and path != ":memory:" and store.holds_local_mode(path) and not getattr(args, "quiet", False):
        print(f"note: {path} is a qdrant-client local-mode store, opened as it is; `mteb-fairpos copy {path} NEW "
              "-c COLLECTION` copies a collection into Qdrant Edge, the faster default.", file=sys.stderr)
    return removed_if_failed(path, lambda: store.open_store(path, backend=args.backend))


def check_collection(name: str | None, backend: str | None) -> None:
    """Refuse a collection name the store would refuse, before it is opened (``None``: the command's default,
    e.g. the one the parts name; ``backend`` ``None`` for a server)."""
    if name is None:
        return
    if not name.strip():
        raise ValueError("-c/--collection must be a non-empty name.")
    _store().check_collection_name(name, folder=backend == "edge")  # Edge keeps a collection in a folder of its name


@contextmanager
def removed_if_failed(path: str | None, open_store: Callable[[], Any]) -> Iterator[Any]:
    """The store ``open_store()`` returns, closed on leaving. When opening it creates the local folder ``path``,
    the folder is removed again if the command fails before a collection was made there, and so are the
    folders above it that the open created, while they are empty: a failed command leaves no empty store that
    a later one would take for the one it looks for. A folder that existed before is never removed."""
    created = [] if path is None or path == ":memory:" else _missing_folders(Path(path))
    opened = open_store()
    try:
        yield opened
    except BaseException:
        empty = bool(created) and not opened.collections()
        opened.close()
        if empty:
            shutil.rmtree(created[0])
            for folder in created[1:]:  # the parents made for it, innermost first, while nothing else is in them
                if any(folder.iterdir()):
                    break
                folder.rmdir()
        raise
    opened.close()


def _missing_folders(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, innermost first."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    return missing


def load_model(name: str, calibration: str | None, device: str | None = None):
    """A FairSentenceTransformer for ``name`` (offline MiniLM for its Hub id) with ``calibration`` text (``None``: the
    model's own, `ModelLoader`)."""
    from ..integrations.qdrant.encoding import ModelLoader

    return ModelLoader(name, calibration, device=device)()


def model_for_collection(args: argparse.Namespace, opened, *, documents: bool):
    """The model named by ``--model`` or, by default, the one stored with the collection; with its name.
    ``documents``: it encodes documents (``index``), calibrated, into a collection that may be new; else it encodes
    queries, plain, for a collection that must exist (refused before the model loads)."""
    spec = (_store().read_spec if documents else _store().existing_spec)(opened, args.collection)
    name = args.model or (spec.model if spec else MINILM_HUB_ID)
    if spec and name != spec.model and os.path.isdir(name) and os.path.isdir(spec.model) and os.path.samefile(name, spec.model):
        name = spec.model  # the folder a collection of an earlier release recorded as typed, relative
    calibration = "none"  # a query is encoded plain
    if documents:  # as asked, else as the collection was built, else the model's own
        calibration = args.calibration or (spec.calibration if spec else None)
    from ..model import set_max_length

    model = load_model(name, calibration, getattr(args, "device", None))
    if getattr(args, "max_length", None):
        set_max_length(model, args.max_length)
    return model, name


def _store():
    from ..integrations.qdrant import store

    return store
