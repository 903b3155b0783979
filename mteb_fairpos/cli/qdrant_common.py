"""Shared pieces of the ``index``, ``search`` and ``discoverability`` subcommands: connection
arguments, the model a collection was built with, and one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..config import CalibrationConfig
from ..offline import MINILM_HUB_ID

DEFAULT_PATH = "qdrant-local"
"""Nothing heavy is imported at module level: building the CLI's parser (``--help``) must stay fast."""


def errors() -> tuple[type[BaseException], ...]:
    """The errors the Qdrant commands report as one line (``except qdrant_common.errors() as err``)."""
    from ..integrations.qdrant.store import QdrantIndexError

    return (QdrantIndexError, ValueError, TypeError, FileNotFoundError)


def add_connection_arguments(parser: argparse.ArgumentParser, *, collection_help: str | None = None) -> None:
    """``-c`` (required unless ``collection_help`` says what its default is) and where Qdrant is."""
    parser.add_argument("-c", "--collection", required=collection_help is None,
                        help=collection_help or "Qdrant collection name")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path", default=None,
                       help=f"folder of the embedded store (default: ./{DEFAULT_PATH}; ':memory:' keeps nothing)")
    where.add_argument("--url", default=None, help="Qdrant server or cluster URL, e.g. http://localhost:6333")
    parser.add_argument("--backend", choices=("edge", "local"), default=None,
                        help="embedded engine for --path: Qdrant Edge (default for a new folder) or qdrant-client's "
                        "local mode (default for a folder it already holds, and for ':memory:')")
    parser.add_argument("--api-key", default=None,
                        help="API key for --url (default: the QDRANT_API_KEY environment variable)")
    parser.add_argument("--timeout", type=float, default=10.0, help="server request timeout in seconds (default 10)")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings of a collection created on a server or cluster (ignored by the embedded engines)."""
    parser.add_argument("--shard-number", type=int, default=None, help="shards of a new collection (server)")
    parser.add_argument("--replication-factor", type=int, default=None, help="replicas of a new collection (server)")
    parser.add_argument("--write-consistency-factor", type=int, default=None,
                        help="write consistency of a new collection (server)")


def quiet_if(args: argparse.Namespace) -> None:
    """With ``--quiet``: no progress bars from the libraries either (model loading, Hub downloads)."""
    if getattr(args, "quiet", False):
        from huggingface_hub.utils import disable_progress_bars
        from transformers.utils.logging import disable_progress_bar

        disable_progress_bars()
        disable_progress_bar()


def print_report(report: Any, path: str | None) -> int:
    """Print a run's summary and, with ``--report PATH``, write its JSON form; the exit status 0."""
    print(report.summary())
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return 0


def connect_from(args: argparse.Namespace, *, existing: bool = False):
    """A client for the parsed connection arguments (probing a server before anything else).

    ``existing``: the command only reads, so a local folder that does not exist is an error
    (a mistyped ``--path`` must not leave an empty store behind).
    """
    if args.url is not None:
        api_key = args.api_key if args.api_key is not None else os.environ.get("QDRANT_API_KEY")
        return _store().connect(url=args.url, api_key=api_key, timeout=args.timeout)
    if args.api_key is not None:
        raise ValueError("--api-key applies to a server; give --url as well.")
    if args.backend == "edge" and args.path == ":memory:":
        raise ValueError("the Qdrant Edge backend stores its data in a folder; give --path FOLDER.")
    path = args.path or DEFAULT_PATH
    if existing and path != ":memory:" and not os.path.isdir(path):
        raise FileNotFoundError(f"no local Qdrant store at {path!r}; index into it first "
                                "(mteb-fairpos index ... --path) or give the folder you indexed into.")
    store = _store()
    if args.backend is None and path != ":memory:" and store.holds_local_mode(path) and not getattr(args, "quiet", False):
        print(f"note: {path} is a qdrant-client local-mode store, opened as it is; `mteb-fairpos copy {path} NEW "
              "-c COLLECTION` copies a collection into Qdrant Edge, the faster default.", file=sys.stderr)
    return store.connect(path, backend=args.backend)


def load_model(name: str, calibration: str | None, device: str | None = None):
    """A FairSentenceTransformer for ``name`` (offline MiniLM for its Hub id) with ``calibration`` text."""
    from ..integrations.qdrant.encoding import ModelLoader

    return ModelLoader(name, calibration or "none", device=device)()


def model_for_collection(args: argparse.Namespace, client, *, calibrated: bool):
    """The model named by ``--model`` or, by default, the one stored with the collection; with its name."""
    spec = _store().read_spec(client, args.collection)
    name = args.model or (spec.model if spec else MINILM_HUB_ID)
    calibration = None
    if calibrated:
        calibration = args.calibration or (spec.calibration if spec else str(CalibrationConfig()))
    model = load_model(name, calibration, getattr(args, "device", None))
    if getattr(args, "max_length", None):
        model.max_seq_length = args.max_length
    return model, name


def fail(command: str, err: BaseException) -> int:
    print(f"mteb-fairpos {command}: error: {err}", file=sys.stderr)
    return 2


def _store():
    from ..integrations.qdrant import store

    return store
