"""The ``mteb-fairpos`` command: one module per subcommand, listed in ``SUBCOMMANDS``.

Each module exposes ``add_parser(subparsers) -> argparse.ArgumentParser`` and sets
``func=run`` on its parser; ``run(args) -> int`` is the exit status. Building the parser imports
nothing heavy (no torch, sentence-transformers, qdrant-client or mteb), so ``--help`` and argument
errors answer at once; each ``run`` imports what it needs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = [
    "demo",
    "probe",
    "index",
    "encode",
    "load",
    "copy",
    "search",
    "discoverability",
    "segments",
    "compare",
    "leaderboard",
    "sweep",
    "profile",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mteb-fairpos",
        description="Position-fair document embeddings: attention calibration, fairness probes, MTEB and Qdrant.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"mteb-fairpos {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, OSError) as err:  # OSError: a file, or a model the hub does not have
        print(f"mteb-fairpos {args.command}: error: {_first_lines(err)}", file=sys.stderr)
        return 2


def _first_lines(err: BaseException, lines: int = 3) -> str:
    """The gist of an error from a library (the hub's run to a dozen lines)."""
    text = str(err).strip() or type(err).__name__
    kept = text.splitlines()[:lines]
    return "\n".join(kept) + (" ..." if len(text.splitlines()) > lines else "")


if __name__ == "__main__":
    raise SystemExit(main())
