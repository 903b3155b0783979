"""``mteb-fairpos compare RESULTS_DIR``: the leaderboard view of an mteb results folder.

Reads every ``<model>/<revision>/<Task>.json`` (and ``<revision>/experiments/<name>/<Task>.json``)
with mteb's own ``TaskResult`` parser and writes, to ``--out``:

* ``main_scores.md`` / ``main_scores.csv``: models x tasks, the task's main score (mean over its
  splits and subsets);
* ``profiles.md`` / ``profiles.csv``: the per-position profile and PSI of each task that reports one;
* ``profile_<task>.png``: one line per model, calibrated solid and uncalibrated twin dashed;
* ``psi_vs_score.png``: effectiveness (main score) against PSI for retrieval tasks, an arrow from
  each twin to its calibrated model.

Reading, pooling, tabulating and drawing are `mteb_fairpos.results` (its `schema` module is the
position convention task authors follow); this module parses the arguments and calls them. Missing results (a model without a
task the others have), partial results and foreign or corrupt files are listed, never skipped
silently.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results import collect
from ..results.reader import unmatched
from ..results.plots import write_plots
from ..results.tables import report, write_tables
from .options import add_output, nothing_matched, outside_results

DEFAULT_OUT = Path("fairpos-output") / "compare"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("compare", help="models x tasks table, per-position profiles and plots of an mteb results folder",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, metavar="RESULTS_DIR", help="mteb results folder (the --output-folder of `mteb run`)")
    add_output(parser, default=DEFAULT_OUT, what="where tables and plots go")
    parser.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    parser.add_argument("--models", nargs="+", default=None, help="only these model names")
    parser.add_argument("--no-plots", action="store_true", help="tables only")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    outside_results(args.out, [args.results])
    _register_plugin()
    found = collect(args.results, tasks=args.tasks, models=args.models)
    print(f"results: {found.root}   models: {len(found.models)}   tasks: {len(found.tasks)}   issues: {len(found.problems)}")
    if missing := unmatched(found.seen, args.tasks, args.models):
        print(f"note: no result here matches {missing}")
    print()
    print(report(found))
    if not found.scores:
        print(f"no readable mteb results found in {found.root}{nothing_matched(found.filtered)}; nothing written.")
        return 1
    written = write_tables(found, args.out) + ([] if args.no_plots else write_plots(found, args.out))
    print(f"written to {args.out}: " + ", ".join(path.name for path in written))
    print(f"a page to look at (sortable, filterable, with charts): mteb-fairpos leaderboard {args.results} -o {args.out / 'site'}")
    return 0


def _register_plugin() -> None:
    """Task metadata (types, expected splits) of the plugin's tasks needs them registered."""
    try:
        from ..mteb_plugin import register

        register()
    except Exception:  # noqa: BLE001 - comparison still works, completeness checks get weaker
        pass
