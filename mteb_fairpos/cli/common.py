"""Options shared by the subcommands that embed text: the model and its calibration."""

from __future__ import annotations

import argparse

from ..config import LAYER_GRAMMAR, CalibrationConfig, parse_layers


def add_model_arguments(parser: argparse.ArgumentParser, *, max_length: int | None = None) -> None:
    """The model and calibration options shared by subcommands that embed text (``--max-length`` too)."""
    parser.add_argument("-m", "--model", default=None, help="sentence-transformers model name or path (default: offline all-MiniLM-L6-v2)")
    parser.add_argument("--calibration", default=None, metavar="TEXT",
                        help="a calibration config in text form, e.g. b128_lhalf_a0.5 (overrides the options below)")
    parser.add_argument("--basket-size", type=int, default=128, help="content tokens per basket (default 128)")
    parser.add_argument("--layers", default="last_half", help=f"calibrated layers: {LAYER_GRAMMAR}")
    parser.add_argument("--strength", type=float, default=0.5,
                        help="calibration strength alpha in [0, 1]: 0 is the plain model (default 0.5)")
    parser.add_argument("--device", default=None, help="torch device for the model (default: automatic)")
    parser.add_argument("--pooling", choices=["cls", "last", "mean"], default=None, help="default: read from the model")
    add_max_length(parser, default=max_length)


def calibration_from_args(args: argparse.Namespace) -> CalibrationConfig:
    if args.calibration:
        return CalibrationConfig.parse(args.calibration)
    return CalibrationConfig(basket_size=args.basket_size, layers=parse_layers(args.layers),
                             strength=args.strength, pooling=args.pooling)


def add_max_length(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    """``--max-length``: the model's maximum input length in tokens, the same option in every subcommand."""
    parser.add_argument("--max-length", "--max-seq-length", dest="max_length", type=_positive, default=default,
                        metavar="TOKENS", help="the model's maximum input length in tokens "
                        + (f"(default {default})" if default else "(default: the model's own)"))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of tokens, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of tokens, got {value}")
    return value


def add_engine_arguments(parser: argparse.ArgumentParser, *, ray_does: str, actor: str) -> None:
    """``--engine local|ray`` and the Ray pool's options, the same in every command that can fan out."""
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help=f"local: this process; ray: {ray_does} (pip install 'mteb-fairpos[ray]')")
    parser.add_argument("--address", default=None,
                        help="Ray cluster to join (host:port, ray://host:port or auto); default a local Ray runtime")
    parser.add_argument("--actors", type=int, default=1, help=f"{actor}s on Ray (default 1; one per GPU on a GPU cluster)")
    parser.add_argument("--gpus-per-actor", type=float, default=None,
                        help=f"GPUs per {actor} (default: 1 when the cluster has GPUs, else 0)")
