"""``mteb-fairpos sweep``: one model on some tasks over a grid of calibration configs.

The grid defaults to the retrieval paper's: basket size {128, 256, 512} x layer set
{last, last_half} x strength {0.5, 1.0}, plus the uncalibrated twin as the reference row. Every
grid point is an ordinary mteb evaluation of the model ``fair/<model>-<config text>``, written to
the mteb results folder (``--output-folder``), so an interrupted sweep resumes where it stopped
(mteb's cache skips what is there) and ``mteb-fairpos compare`` reads the same folder. The
checkpoint is loaded once and shared by all grid points. Subsets a task's data lacks (a partial
local copy) are named and skipped; a unit that fails is named in one line, the others' results
still land, and the exit status is 1. The work is planned by `mteb_fairpos.sweep`, the same for
``--engine local`` and ``--engine ray``.

Prints one trade-off table per task (the layout of the retrieval paper's Table 1): the
per-position scores, the main score and PSI of each config, with the change against the twin.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..config import LAYER_GRAMMAR, CalibrationConfig
from ..grid import PAPER_BASKETS, PAPER_LAYERS, PAPER_STRENGTHS, grid
from ..results import TaskScores, summarize
from ..sweep import OVERWRITE_STRATEGIES, SweepPoint, plan_sweep, read_results, run_sweep
from .options import (add_batch_size, add_device, add_engine_arguments, add_max_length, add_model, add_output, add_quiet,
                      distinct_configs, output_file, refuse_ignored)
from ..results.tables import format_score, write_csv

DEFAULT_MODEL = "fair/all-MiniLM-L6-v2"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("sweep", help="evaluate one model over a grid of calibration configs (resumable)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model(parser, note=f"here a plugin model, fair/<name>, so {DEFAULT_MODEL}", folders=False)
    parser.add_argument("-t", "--tasks", nargs="+", required=True, help="mteb task names")
    parser.add_argument("--baskets", nargs="+", type=int, default=None, metavar="B",
                        help=f"basket sizes of the grid (default: {' '.join(map(str, PAPER_BASKETS))})")
    parser.add_argument("--layers", nargs="+", default=None, metavar="SET",
                        help=f"layer sets of the grid, each {LAYER_GRAMMAR} (default: {' '.join(PAPER_LAYERS)})")
    parser.add_argument("--strengths", nargs="+", type=float, default=None, metavar="ALPHA",
                        help=f"strengths of the grid (default: {' '.join(map(str, PAPER_STRENGTHS))})")
    parser.add_argument("--configs", nargs="+", default=None, metavar="TEXT",
                        help="explicit configs in text form (e.g. b128_lhalf_a0.5) instead of the grid (not with "
                        "--baskets, --layers or --strengths)")
    parser.add_argument("--no-twin", action="store_true", help="leave out the uncalibrated reference")
    add_output(parser, default=Path("results"), what="mteb results folder", dest="output_folder", aliases=("--output-folder", "--out"))
    parser.add_argument("--overwrite-strategy", choices=OVERWRITE_STRATEGIES, default="only-missing",
                        help="mteb's: run what a result lacks (only-missing, default), redo everything (always), or run "
                        "only what has no result file yet (never)")
    add_batch_size(parser, default=None, unit="texts through the model")
    add_device(parser)
    add_max_length(parser)  # a different length is an mteb experiment: its own results folder
    parser.add_argument("--csv", type=output_file, default=None, help="also write the table as CSV here")
    add_engine_arguments(parser, ray_does="one Ray task per (config, task, subset) on a pool of workers, each loading "
                         "the checkpoint once, merged into the same results folder (shared storage on a cluster)",
                         actor="worker")
    add_quiet(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..mteb_models import LoadedWeights, base_model
    from ..mteb_plugin import register

    register()
    import mteb
    from mteb.cache import ResultCache

    if args.engine == "local":  # as encode refuses them: in this process they would be ignored
        refuse_ignored([flag for flag, value in (("--address", args.address), ("--gpus-per-actor", args.gpus_per_actor),
                                                 ("--actors", None if args.actors == 1 else args.actors)) if value is not None],
                       "the Ray engine", "add --engine ray")
    if args.configs:
        refuse_ignored([flag for flag in ("--baskets", "--layers", "--strengths") if getattr(args, flag[2:]) is not None],
                       "the grid, which --configs replaces", "give one or the other")
    configs = distinct_configs(args.configs, "--configs", uncalibrated=False) if args.configs else grid(
        args.baskets or PAPER_BASKETS, args.layers or PAPER_LAYERS, args.strengths or PAPER_STRENGTHS)
    args.model = args.model or DEFAULT_MODEL
    try:  # an unknown model or task is bad input, reported before any work
        base_model(args.model)
    except KeyError as err:  # a lookup's miss, not a bug: it leaves through the error path as bad input
        raise ValueError(err.args[0] if err.args else str(err)) from None
    try:
        tasks = mteb.get_tasks(tasks=args.tasks)
    except KeyError as err:  # mteb's message starts with its exception's name; ours names the option
        message = str(err.args[0] if err.args else err).removeprefix("KeyError: ")
        raise ValueError(f"-t/--tasks: {message}") from None
    points = [SweepPoint(args.model, config, args.device, args.max_length)
              for config in ([] if args.no_twin else [None]) + configs]
    if args.engine == "ray":  # an unreachable cluster is reported before any task's data is read
        from ..integrations.ray import runtime

        args.address = runtime.checked_address(args.address)
    cache = ResultCache(args.output_folder)
    encode_kwargs: dict[str, Any] = {"batch_size": args.batch_size} if args.batch_size else {}
    plan = plan_sweep(points, tasks, cache, args.overwrite_strategy)
    for task, subsets in plan.absent.items():
        print(f"{task}: the data lacks {len(subsets)} of its subsets, not evaluated: {', '.join(subsets)}", flush=True)

    def announce(number: int, point: SweepPoint, has_work: bool) -> None:
        print(f"[{number}/{len(points)}] {point.meta().name}: {'running' if has_work else 'cached'}", flush=True)

    failures = list(plan.failures)
    if args.engine == "ray":
        from ..integrations.ray.sweep import run_on_ray

        _, failed = run_on_ray(plan, args.output_folder, actors=args.actors, gpus_per_actor=args.gpus_per_actor,
                               address=args.address, batch_size=args.batch_size, show_progress=not args.quiet)
        failures += failed
        for number, point in enumerate(points, start=1):
            name = point.meta().name
            status = "incomplete" if any(f.model == name for f in failed) else "evaluated" if plan.pending(point) else "cached"
            print(f"[{number}/{len(points)}] {name}: {status}")
    else:
        failures += run_sweep(plan, cache, weights=LoadedWeights(), encode_kwargs=encode_kwargs,
                              show_progress=not args.quiet, on_point=announce)
    rows = [_row(point.calibration, point.meta(), summarize(result)) for point, result in read_results(plan, cache)]
    print()
    print(tradeoff_tables(rows))
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        labels = list(dict.fromkeys(label for row in rows for label in row["profile"]))
        flat = [{**{k: v for k, v in row.items() if k != "profile"}, **{f"position_{k}": v for k, v in row["profile"].items()}}
                for row in rows]
        write_csv(flat, args.csv, ["task", "model", "config", "revision", "basket", "layers", "strength", "main_score", "delta_main",
                                    "psi", "delta_psi", *[f"position_{label}" for label in labels]])
        print(f"\nwritten to {args.csv}")
    for failure in failures:
        print(f"mteb-fairpos sweep: failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _row(config: CalibrationConfig | None, meta, scores: TaskScores) -> dict[str, Any]:
    return {
        "task": scores.task,
        "model": meta.name,
        "config": str(config) if config else "off",
        "revision": meta.revision,
        "basket": config.basket_size if config else None,
        "layers": _layers(config.layers) if config else None,
        "strength": config.strength if config else 0.0,
        "main_score": scores.main_score,
        "psi": scores.psi,
        "profile": dict(scores.profile),
        "status": scores.status,
    }


def _layers(spec) -> str:
    return spec if isinstance(spec, str) else str(spec)


def tradeoff_tables(rows: list[dict[str, Any]]) -> str:
    """One Markdown table per task; deltas against the uncalibrated row when there is one."""
    parts = []
    for task in dict.fromkeys(row["task"] for row in rows):
        task_rows = [row for row in rows if row["task"] == task]
        reference = next((row for row in task_rows if row["basket"] is None), None)
        labels = list(dict.fromkeys(label for row in task_rows for label in row["profile"]))
        header = ["config", "B", "layers", "alpha", *labels, "main", "Δmain", "PSI", "ΔPSI"]
        lines = [f"### {task}", "", "| " + " | ".join(header) + " |", "|---|---:|---|---:|" + "---:|" * (len(labels) + 4)]
        for row in task_rows:
            for key, ref_key in (("delta_main", "main_score"), ("delta_psi", "psi")):
                row[key] = (row[ref_key] - reference[ref_key]
                            if reference is not None and row is not reference and row[ref_key] is not None
                            and reference[ref_key] is not None else None)
            name = "uncalibrated" if row["basket"] is None else row["config"]
            cells = [name, "—" if row["basket"] is None else str(row["basket"]), row["layers"] or "—", f"{row['strength']:g}",
                     *[format_score(row["profile"].get(label)) for label in labels],
                     format_score(row["main_score"]) + (" (partial)" if row["status"] == "partial" else ""),
                     _signed(row["delta_main"]), format_score(row["psi"]), _signed(row["delta_psi"])]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.4f}"

