"""The ``mteb-fairpos`` command: one module per subcommand, listed in ``SUBCOMMANDS``.

Each module exposes ``add_parser(subparsers) -> argparse.ArgumentParser`` and sets
``func=run`` on its parser; ``run(args) -> int`` is the exit status. Building the parser imports
nothing heavy (no torch, sentence-transformers, qdrant-client or mteb), so ``--help`` and argument
errors answer at once; each ``run`` imports what it needs. Options several subcommands take are
defined once in `options`; an expected error reaches ``main`` and leaves through `errors`, as one line
(argparse's refusals too: the parsers are `errors.ArgumentParser`).
"""

from __future__ import annotations

import argparse
import importlib
import warnings

from . import errors, options

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
    parser = errors.ArgumentParser(
        prog="mteb-fairpos",
        description="Position-fair document embeddings: attention calibration, fairness probes, MTEB and Qdrant.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"mteb-fairpos {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=errors.ArgumentParser)
    for name in SUBCOMMANDS:
        command = importlib.import_module(f"{__name__}.{name}").add_parser(subparsers)
        command.set_defaults(parser=command)  # so that an unknown argument is refused by the command it follows
    return parser


def main(argv: list[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    shown = warnings.formatwarning  # a warning is one line, as an error is (not Python's file:line and source)
    warnings.formatwarning = lambda message, *_, **__: f"mteb-fairpos {args.command}: warning: {message}\n"
    try:
        options.check_device(args)  # once for every subcommand that takes it, before any model is loaded
        if getattr(args, "quiet", False):
            _silence_progress_bars()
        return int(args.func(args) or 0)
    except Exception as err:  # noqa: BLE001 - expected errors become one line, the rest keep their traceback
        if errors.exit_status(err) is None:
            raise
        return errors.report(args.command, err)
    finally:
        warnings.formatwarning = shown


def _silence_progress_bars() -> None:
    """``--quiet`` means no progress bars from the libraries either (model loading, Hub downloads, datasets' own)."""
    import datasets
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils.logging import disable_progress_bar

    disable_progress_bars()
    disable_progress_bar()
    datasets.disable_progress_bars()


if __name__ == "__main__":
    raise SystemExit(main())
