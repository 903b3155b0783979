"""The position-fairness leaderboard: one static page from mteb results folders.

``data`` lays the results out (rows, groups, deltas, pooled markers, provenance), ``figures`` picks
the charts, ``charts`` draws them as SVG and ``page`` writes ``index.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .data import Board, build
from .page import write


def publish(folders: Sequence[str | Path], site: str | Path, *, tasks: Sequence[str] | None = None,
            models: Sequence[str] | None = None) -> tuple[Board, Path]:
    """Read ``folders`` and write ``site/index.html``; the board and the page's path."""
    board = build(folders, site, tasks=tasks, models=models)
    return board, write(board, site)


__all__ = ["Board", "build", "publish", "write"]
