"""``mteb-fairpos profile``: where the pooling token's attention goes, per layer (docs/method.md#s1-6).

Prints the attention mass of the pooling query on the first token, on each basket of content
tokens and on the last token, per layer (averaged over heads and texts), and writes the profile
as a PNG. A healthy model spreads its mass; the papers found an L-shaped, front-loaded profile.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..offline import minilm_path
from ..config import LAYER_GRAMMAR, parse_layers
from ..segment_report import read_segments
from .options import add_batch_size, add_device, add_max_length, add_model, add_output, output_file


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("profile", help="attention mass of the pooling token per key basket and layer",
                                   description=__doc__)
    parser.add_argument("--text", action="append", default=[], metavar="TEXT", help="a text to profile (repeatable)")
    parser.add_argument("--file", type=Path, help="texts as a JSON list or JSONL lines (strings or objects with 'text')")
    add_model(parser)
    parser.add_argument("--basket-size", type=int, default=128, help="tokens per content basket (default 128)")
    parser.add_argument("--layers", default="all", help=f"layers to profile: all, or {LAYER_GRAMMAR}")
    parser.add_argument("--pooling", choices=["cls", "last", "mean"], default=None, help="default: read from the model")
    add_batch_size(parser, default=8, unit="texts through the model (attentions kept: a small batch)")
    add_device(parser)
    add_max_length(parser)
    add_output(parser, default=Path("attention_profile.png"), what="figure to write (PNG; any format matplotlib "
               "writes, by suffix)", dest="output", aliases=(), kind=_figure_file)
    parser.add_argument("--json", type=output_file, default=None, help="also write the profile as JSON here")
    parser.set_defaults(func=run)
    return parser


def _figure_file(text: str) -> Path:
    """An argparse type: a file `output_file` accepts, in a format matplotlib writes (checked before the run, which
    would be lost at the end); no suffix means PNG, as `plot_profile` adds it."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = output_file(text)
    suffix = path.suffix.lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise argparse.ArgumentTypeError(f"cannot write a figure as {path.suffix!r}; give one of "
                                         f"{', '.join('.' + f for f in sorted(formats))}")
    return path if suffix else path.with_name(path.name + ".png")


def run(args: argparse.Namespace) -> int:
    from ..model import load_checkpoint, set_max_length
    from ..profile import attention_profile, format_profile, plot_profile

    if args.json is not None and args.json.resolve() == args.output.resolve():
        raise ValueError(f"-o and --json both name {str(args.json)!r}: the JSON would overwrite the figure; give two files.")
    texts = list(args.text) + (read_segments(args.file) if args.file else [])
    if not texts:
        raise ValueError(f"--file {str(args.file)!r} holds no text." if args.file else
                         "give at least one --text or a --file of texts.")
    if any(not t.strip() for t in texts):
        raise ValueError("texts must not be empty.")
    if args.basket_size <= 0:
        raise ValueError(f"--basket-size must be a positive integer, got {args.basket_size}.")
    layers = None if args.layers == "all" else parse_layers(args.layers)
    path = args.model or minilm_path()
    model = load_checkpoint(path, device=args.device)
    if args.max_length:
        set_max_length(model, args.max_length)
    profile = attention_profile(model, texts, basket_size=args.basket_size, layers=layers,
                                pooling=args.pooling, batch_size=args.batch_size)
    name = args.model or "all-MiniLM-L6-v2 (offline)"
    print(f"model: {name}   pooling: {profile.pooling}   basket size: {profile.basket_size}   texts: {profile.n_texts}")
    print("attention mass of the pooling query (averaged over heads and texts; L<n> = layer n, 1-based):")
    print(format_profile(profile))
    if profile.short_texts:
        print(f"note: {profile.short_texts} of {profile.n_texts} text(s) have less content than one basket "
              f"({profile.basket_size} tokens): calibration with this basket size leaves them unchanged.")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    written = plot_profile(profile, str(args.output),
                           title=f"{Path(name).name}: pooling-query attention ({profile.pooling}, B={profile.basket_size})")
    print(f"wrote {written}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(profile.to_dict(), indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
