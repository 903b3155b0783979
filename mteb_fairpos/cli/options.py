"""Every option more than one subcommand takes, defined once: the same flags, help and default everywhere.

Nothing heavy is imported here: building the CLI's parser (``--help``) must stay fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..config import LAYER_GRAMMAR, CalibrationConfig, parse_layers

DEFAULT_STORE = "qdrant-local"


def add_model(parser: argparse.ArgumentParser, *, note: str = "") -> None:
    """``-m/--model``, default ``None``: all-MiniLM-L6-v2 (the offline copy where the command embeds from scratch).

    ``note`` says where a command reads ``None`` otherwise (a collection's stored model, a plugin name).
    """
    parser.add_argument("-m", "--model", default=None,
                        help="sentence-transformers model name or path (default: all-MiniLM-L6-v2" + (f"; {note}" if note else "") + ")")


def add_device(parser: argparse.ArgumentParser, *, note: str = "") -> None:
    """``--device``, default ``None``: the torch device sentence-transformers picks (cuda when available)."""
    parser.add_argument("--device", default=None,
                        help="torch device for the model (default: automatic, cuda when available" + (f"; {note}" if note else "") + ")")


def add_batch_size(parser: argparse.ArgumentParser, *, default: int | None, unit: str) -> None:
    """``--batch-size``: how much goes into one step. Its default depends on ``unit`` (texts through the
    model are not points written to Qdrant), so each command names both."""
    shown = f"default {default}" if default is not None else "default: mteb's"
    parser.add_argument("--batch-size", type=positive_int, default=default, help=f"{unit} per batch ({shown})")


def add_output(parser: argparse.ArgumentParser, *, default: str | Path | None, what: str, dest: str = "out",
               aliases: tuple[str, ...] = ("--out",), kind: type = Path) -> None:
    """``-o/--output`` (earlier spellings in ``aliases`` still work); ``default=None`` makes it required."""
    required = default is None
    parser.add_argument("-o", "--output", *aliases, dest=dest, type=kind, default=default, required=required,
                        help=what + ("" if required else f" (default: {default})"))


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bars, the libraries' included (``cli.main`` silences them)."""
    parser.add_argument("--quiet", action="store_true", help="no progress bars (model loading and downloads included)")


def add_max_length(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    """``--max-length``: the model's maximum input length in tokens, the same option in every subcommand."""
    parser.add_argument("--max-length", "--max-seq-length", dest="max_length", type=_positive, default=default,
                        metavar="TOKENS", help="the model's maximum input length in tokens "
                        + (f"(default {default})" if default else "(default: the model's own)"))


def add_calibration_arguments(parser: argparse.ArgumentParser) -> None:
    """One calibration config, as text or as its parts (``segments``)."""
    parser.add_argument("--calibration", default=None, metavar="TEXT",
                        help="a calibration config in text form, e.g. b128_lhalf_a0.5 (overrides the options below)")
    parser.add_argument("--basket-size", type=int, default=128, help="content tokens per basket (default 128)")
    parser.add_argument("--layers", default="last_half", help=f"calibrated layers: {LAYER_GRAMMAR}")
    parser.add_argument("--strength", type=float, default=0.5,
                        help="calibration strength alpha in [0, 1]: 0 is the plain model (default 0.5)")
    parser.add_argument("--pooling", choices=["cls", "last", "mean"], default=None, help="default: read from the model")


def calibration_from_args(args: argparse.Namespace) -> CalibrationConfig:
    if args.calibration:
        return CalibrationConfig.parse(args.calibration)
    return CalibrationConfig(basket_size=args.basket_size, layers=parse_layers(args.layers),
                             strength=args.strength, pooling=args.pooling)


def add_engine_arguments(parser: argparse.ArgumentParser, *, ray_does: str, actor: str) -> None:
    """``--engine local|ray`` and the Ray pool's options, the same in every command that can fan out."""
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help=f"local: this process; ray: {ray_does} (pip install 'mteb-fairpos[ray]')")
    parser.add_argument("--address", default=None,
                        help="Ray cluster to join (host:port, ray://host:port or auto); default a local Ray runtime")
    parser.add_argument("--actors", type=positive_int, default=1, help=f"{actor}s on Ray (default 1; one per GPU on a GPU cluster)")
    parser.add_argument("--gpus-per-actor", type=float, default=None,
                        help=f"GPUs per {actor} (default: 1 when the cluster has GPUs, else 0)")


def add_connection_arguments(parser: argparse.ArgumentParser, *, collection_help: str | None = None) -> None:
    """``-c`` (required unless ``collection_help`` says what its default is) and where Qdrant is."""
    parser.add_argument("-c", "--collection", required=collection_help is None,
                        help=collection_help or "Qdrant collection name")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path", default=None,
                       help=f"folder of the embedded store (default: ./{DEFAULT_STORE}; ':memory:' keeps nothing)")
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


def _positive_of(what: str) -> Callable[[str], int]:
    """An argparse type: a positive integer, refused with a message that says what it counts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


_positive = _positive_of("a positive number of tokens")
positive_int = _positive_of("a positive integer")
"""A count that must be at least 1 (batch sizes, parts, actors, streams)."""
