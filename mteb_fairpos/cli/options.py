"""Every option more than one subcommand takes, defined once: the same flags, help and default everywhere.

Nothing heavy is imported here: building the CLI's parser (``--help``) must stay fast.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..config import LAYER_GRAMMAR, CalibrationConfig, parse_layers
from ..resampling import MAX_RESAMPLES

DEFAULT_STORE = "qdrant-local"


def add_model(parser: argparse.ArgumentParser, *, note: str = "", folders: bool = True) -> None:
    """``-m/--model``, default ``None``: all-MiniLM-L6-v2 (the offline copy where the command embeds from scratch).

    ``note`` says where a command reads ``None`` otherwise (a collection's stored model, a plugin name);
    ``folders``: a model folder is taken as its absolute path (`model_reference`), not for a plugin name.
    """
    parser.add_argument("-m", "--model", type=model_reference if folders else str, default=None,
                        help="sentence-transformers model name or path (default: all-MiniLM-L6-v2" + (f"; {note}" if note else "") + ")")


def model_reference(text: str) -> str:
    """An argparse type: a model folder as its absolute path, a Hub id as given. A collection and its parts record
    the model they were built with, and a relative path would name another folder, or a Hub id, from elsewhere."""
    return os.path.abspath(text) if os.path.isdir(text) else text


def add_device(parser: argparse.ArgumentParser, *, note: str = "") -> None:
    """``--device``, default ``None``: the torch device sentence-transformers picks (cuda when available)."""
    parser.add_argument("--device", default=None,
                        help="torch device for the model (default: automatic, cuda when available" + (f"; {note}" if note else "") + ")")


def refuse_ignored(flags: Sequence[str], applies: str, fix: str) -> None:
    """Refuse options given where they would be ignored: ``flags`` apply to ``applies``; ``fix`` says what to do."""
    if flags:
        raise ValueError(f"{'/'.join(flags)} {'applies' if len(flags) == 1 else 'apply'} to {applies}; {fix}.")


def check_device(args: argparse.Namespace) -> None:
    """Refuse a ``--device`` torch does not know or, for work in this process, one this machine lacks, before
    any model is loaded (torch would stop the run with a traceback). With ``--engine ray`` the device is
    each actor's, on its own node. torch is imported only when the option is given."""
    device = getattr(args, "device", None)
    if device is None:
        return
    from ..devices import device_problem

    problem = device_problem(device, here=getattr(args, "engine", "local") != "ray")
    if problem:
        raise ValueError(f"--device {device}: {problem}.")


def add_report(parser: argparse.ArgumentParser, *, what: str) -> None:
    """``--report PATH``: the JSON form of ``what`` (the run's, the load's), the path checked before the run."""
    parser.add_argument("--report", type=output_file, default=None,
                        help=f"write {what} report as JSON to this file")


def add_batch_size(parser: argparse.ArgumentParser, *, default: int | None, unit: str) -> None:
    """``--batch-size``: how much goes into one step. Its default depends on ``unit`` (texts through the
    model are not points written to Qdrant), so each command names both."""
    shown = f"default {default}" if default is not None else "default: mteb's"
    parser.add_argument("--batch-size", type=positive_int, default=default, help=f"{unit} per batch ({shown})")


def add_format(parser: argparse.ArgumentParser) -> None:
    """``--format``: the input's format where its suffix does not say."""
    parser.add_argument("--format", choices=("jsonl", "parquet"), default=None,
                        help="input format (default: from each file's suffix)")


def add_quiet(parser: argparse.ArgumentParser, *, also: str = "") -> None:
    """``--quiet``: no progress bars, the libraries' included (``cli.main`` silences them); ``also`` says what
    else the command leaves out."""
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars (model loading and downloads included" + (f"; {also}" if also else "") + ")")


def add_max_length(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    """``--max-length``: the model's maximum input length in tokens, the same option in every subcommand."""
    parser.add_argument("--max-length", "--max-seq-length", dest="max_length", type=_positive, default=default,
                        metavar="TOKENS", help="the model's maximum input length in tokens "
                        + (f"(default {default})" if default else "(default: the model's own)"))


def add_calibration_arguments(parser: argparse.ArgumentParser) -> None:
    """One calibration config, as text or as its parts (``segments``)."""
    parser.add_argument("--calibration", default=None, metavar="TEXT",
                        help="a calibration config in text form, e.g. b128_lhalf_a0.5 (instead of the options below)")
    parser.add_argument("--basket-size", type=int, default=None, help="content tokens per basket (default 128)")
    parser.add_argument("--layers", default=None, help=f"calibrated layers: {LAYER_GRAMMAR} (default last_half)")
    parser.add_argument("--strength", type=float, default=None,
                        help="calibration strength alpha in [0, 1]: 0 is the plain model (default 0.5)")
    parser.add_argument("--pooling", choices=["cls", "last", "mean"], default=None, help="default: read from the model")


_PARTS = (("--basket-size", "basket_size"), ("--layers", "layers"), ("--strength", "strength"), ("--pooling", "pooling"))
"""`add_calibration_arguments`' options for the parts of a config: (flag, attribute)."""


def calibration_from_args(args: argparse.Namespace) -> CalibrationConfig:
    """The config of ``--calibration``, or of its parts (each defaulting to `CalibrationConfig`'s); both is refused,
    as the text would override the parts unseen."""
    if args.calibration:
        refuse_ignored([flag for flag, name in _PARTS if getattr(args, name) is not None],
                       "a config built from parts, which --calibration replaces", "give one or the other")
        return CalibrationConfig.parse(args.calibration)
    default = CalibrationConfig()
    return CalibrationConfig(basket_size=default.basket_size if args.basket_size is None else args.basket_size,
                             layers=default.layers if args.layers is None else parse_layers(args.layers),
                             strength=default.strength if args.strength is None else args.strength, pooling=args.pooling)


def distinct_configs(texts: Sequence[str], option: str, *, uncalibrated: bool) -> list[CalibrationConfig | None]:
    """The configs a list option names, in its order (``none``/``off``: uncalibrated, where ``uncalibrated``
    allows it). Two texts of one config are refused naming both: the run would score it twice or drop one unseen."""
    configs: dict[CalibrationConfig | None, str] = {}
    for text in texts:
        if text.strip().lower() in ("none", "off"):
            if not uncalibrated:
                raise ValueError(f"{option}: {text!r} is not a calibration config here (the uncalibrated twin is "
                                 "part of the run, or left out with --no-twin)")
            config = None
        else:
            config = CalibrationConfig.parse(text)
        if config in configs:
            same = "" if text == configs[config] else f" (the same config as {configs[config]!r})"
            raise ValueError(f"{option}: {text!r} is given twice{same}; give each config once")
        configs[config] = text
    return list(configs)


def add_engine_arguments(parser: argparse.ArgumentParser, *, ray_does: str, actor: str) -> None:
    """``--engine local|ray`` and the Ray pool's options, the same in every command that can fan out."""
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help=f"local: this process; ray: {ray_does} (pip install 'mteb-fairpos[ray]')")
    parser.add_argument("--address", default=None,
                        help="Ray cluster to join (host:port, ray://host:port or auto); default a local Ray runtime")
    parser.add_argument("--actors", type=positive_int, default=1, help=f"{actor}s on Ray (default 1; one per GPU on a GPU cluster)")
    parser.add_argument("--gpus-per-actor", type=_number_of("a non-negative number of GPUs", float, zero=True),
                        default=None,
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
    parser.add_argument("--timeout", type=_seconds, default=None, help="server request timeout in seconds (default 10)")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings of a collection created on a server or cluster (ignored by the embedded engines)."""
    parser.add_argument("--shard-number", type=positive_int, default=None, help="shards of a new collection (server)")
    parser.add_argument("--replication-factor", type=positive_int, default=None, help="replicas of a new collection (server)")
    parser.add_argument("--write-consistency-factor", type=positive_int, default=None,
                        help="write consistency of a new collection (server)")


def _number_of(what: str, cast: Callable[[str], float] = int, *, zero: bool = False,
               most: int = 2**63 - 1) -> Callable[[str], float]:
    """An argparse type: a finite number above zero (``zero``: at least zero) and, for a count, at most ``most`` (the
    engines hold counts and positions in 64 bits), refused with a message that says what it counts."""

    def parse(text: str) -> float:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        if cast is int and value > most:
            raise argparse.ArgumentTypeError(f"expected {what} of at most {most:,}, got {value}")
        return value

    return parse


_positive = _number_of("a positive number of tokens")
positive_int = _number_of("a positive integer")
"""A count that must be at least 1 (batch sizes, parts, actors, streams)."""
resamples = _number_of("a positive number of resamples", most=MAX_RESAMPLES)
"""Bootstrap resamples, bounded as `Resampling` bounds them: refused before any model loads."""
non_negative_int = _number_of("a non-negative integer", zero=True)
"""A count that may be 0 (retries)."""
_seconds = _number_of("a positive number of seconds", float)


_SEED = f"a seed, an integer from 0 to {2**32 - 1}"
_seed = _number_of(_SEED, zero=True)


def seed(text: str) -> int:
    """An argparse type: a seed numpy's generators take, an integer from 0 to 2**32 - 1."""
    value = _seed(text)
    if value >= 2**32:
        raise argparse.ArgumentTypeError(f"expected {_SEED}, got {value}")
    return value


def output_file(text: str) -> Path:
    """An argparse type: a file the command writes when its work is done, checked before the work starts
    (a path that cannot be written must not cost the run)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give the path of a file")
    _check_writable_from(text, path.parent)
    return path


def output_folder(text: str) -> Path:
    """An argparse type: a folder the command writes into, checked before the work starts as `output_file`
    is; nothing is created until the command writes."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file; give the path of a folder")
    _check_writable_from(text, path)
    return path


@contextmanager
def removed_if_left_empty(folder: Path) -> Iterator[None]:
    """Run the command's work; if it fails and leaves ``folder`` empty where it did not exist before (mteb's
    result cache creates it when the run starts), remove it: a failed run leaves no trace."""
    created = not os.path.lexists(folder)
    try:
        yield
    except BaseException:
        if created and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise


def output_location(text: str) -> str:
    """An argparse type: a folder given as a local path, checked as `output_folder` checks it, or a URI
    (``s3://bucket/prefix``), kept as given: its bucket is checked when the command opens it."""
    if "://" not in text:
        output_folder(str(Path(text).expanduser()))
    return text


def _check_writable_from(text: str, start: Path) -> None:
    """Refuse ``text`` unless the nearest existing one of ``start`` and its parents, the folder a writer
    creates the rest from, is a folder this process may write in."""
    folder = next(p for p in (start, *start.parents) if p.exists())
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no permission to write in {str(folder)!r}")


def add_output(parser: argparse.ArgumentParser, *, default: str | Path | None, what: str, dest: str = "out",
               aliases: tuple[str, ...] = ("--out",), kind: Callable[[str], Any] = output_folder) -> None:
    """``-o/--output`` (earlier spellings in ``aliases`` still work); ``default=None`` makes it required.

    ``kind`` checks the path before the work (a folder by default); argparse checks the default too, as
    it is given as text."""
    required = default is None
    parser.add_argument("-o", "--output", *aliases, dest=dest, type=kind, required=required,
                        default=None if required else str(default), help=what + ("" if required else f" (default: {default})"))


def outside_results(out: Path, results: Sequence[Path]) -> None:
    """Refuse an output folder inside a results folder it reads: what it writes there would be read back as
    foreign results next time. (The results folder is where the results are read from: a run's ``results``
    subfolder where it has one.)"""
    from ..results.reader import results_root

    where = out.resolve()
    for given in results:
        root = results_root(given).resolve()
        if where == root or root in where.parents:
            raise ValueError(f"-o/--output {str(out)!r} is inside the results folder {str(root)!r}: what it writes would "
                             "be read as results next time; give a folder outside it.")


def nothing_matched(filtered: int) -> str:
    """Why a results folder gave nothing, where ``--tasks``/``--models`` left out the ``filtered`` files it holds."""
    return f" for the --tasks and --models given (they leave out all {filtered} result file(s) there)" if filtered else ""
