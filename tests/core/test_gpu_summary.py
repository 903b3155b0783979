"""``benchmarks/gpu/summarize.py`` on every GPU run committed in ``benchmarks/gpu/results/``: each folder's files, in the
format of the script version that wrote them, become a summary without an error (a later GPU session summarizes old
runs beside new ones), each calibration table naming the card and showing each case's end-to-end median of round ratios
recomputed from the rounds' seconds."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from pathlib import Path

import pytest

RESULTS = Path(__file__).parents[2] / "benchmarks" / "gpu" / "results"
sys.path.insert(0, str(RESULTS.parent))

from summarize import main  # noqa: E402


@pytest.mark.parametrize("run", sorted(p.name for p in RESULTS.iterdir() if p.is_dir()))
def test_every_committed_run_is_summarized(run, tmp_path):
    folder = shutil.copytree(RESULTS / run, tmp_path / run)
    (folder / "summary.md").unlink(missing_ok=True)
    assert main([str(folder)]) == 0
    summary = (folder / "summary.md").read_text()
    sections = {part.splitlines()[0]: part for part in summary.split("\n## ")[1:]}
    for path in folder.glob("calibration-*.json"):
        data = json.loads(path.read_text())
        section = next(text for title, text in sections.items() if title.endswith(f"({path.name})"))
        assert data["device"] in section  # the card is named beside its table
        for name, case in data["cases"].items():
            if "seconds" not in case:  # a case that failed
                continue
            seconds = case["seconds"]
            rounds = statistics.median(p / f for p, f in zip(seconds["plain"], seconds["fast"]))
            row = next(line for line in section.splitlines() if line.startswith(f"| {name} |"))
            assert f"| {rounds:.3f} |" in row, (name, row)
