"""``mteb-fairpos demo``: ``probe`` on the bundled man-page corpus with its defaults, offline.

Real multilingual technical text (164 Linux manual pages and Debian's translations, see
``mteb_fairpos/data/manpages_corpus.NOTICE.md``), the offline all-MiniLM-L6-v2 at 512 tokens,
uncalibrated against the default config and a strong one, as the ``PermutationFairnessManpagesDemo``
task (its three subsets), so the run completes the task it records. Everything ``probe`` takes except
``--corpus`` works here too.
"""

from __future__ import annotations

import argparse

from .probe import DEMO_CALIBRATIONS, add_probe_options, run


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo", help="offline permutation fairness probe on the bundled man-page corpus, uncalibrated vs calibrated",
        description=__doc__,
    )
    add_probe_options(parser, calibrations=DEMO_CALIBRATIONS, output="fairpos-demo")
    parser.set_defaults(func=run)
    return parser
