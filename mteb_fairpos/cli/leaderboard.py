"""``mteb-fairpos leaderboard RESULTS... -o SITE/``: the position-fairness leaderboard as one static page.

Reads one or more mteb results folders (what ``mteb run``, ``probe``, ``sweep`` and the Ray sweep
write, and results of earlier releases) and writes ``SITE/index.html``: an overview table (each
calibrated model next to its uncalibrated twin, main score and PSI per task with the change against
the twin, sortable and filterable), per-task profile and trade-off charts, the issues found, and where
every number came from. Styles, script and charts are inside the page: it opens from ``file://`` and
any static host, and fetches nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import add_output, nothing_matched, outside_results

DEFAULT_SITE = Path("fairpos-output") / "leaderboard"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("leaderboard", help="a static position-fairness leaderboard page from mteb results folders",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS", help="mteb results folders")
    add_output(parser, default=DEFAULT_SITE, what="folder for index.html")
    parser.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    parser.add_argument("--models", nargs="+", default=None, help="only these model names")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..leaderboard import publish
    from ..mteb_plugin import register

    outside_results(args.out, args.results)
    register()  # the plugin's task metadata: types, languages, expected splits, PosIR's pooling
    board, page = publish(args.results, args.out, tasks=args.tasks, models=args.models)
    print(f"models: {len(board.rows)}   tasks: {len(board.tasks)}   issues: {len(board.problems)}")
    if board.unmatched:
        print(f"note: no result matches {board.unmatched}")
    if not board.rows:
        print(f"no readable mteb results found{nothing_matched(board.filtered)}; the page lists the issues: {page}")
        return 1
    print(f"leaderboard: {page}")
    return 0
