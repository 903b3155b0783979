"""`mteb-fairpos encode --engine ray` as a user runs it: the command in a process of its own, with
its own local Ray runtime, and everything it prints. Slow (Ray and its actors start in each run),
so marked ``slow``: CI runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

from mteb_fairpos.integrations.qdrant.encoding import UncalibratedCount  # noqa: E402
from mteb_fairpos.integrations.ray.runtime import ACTOR_NOTE  # noqa: E402

from corpus import CALIBRATION, records, write_jsonl  # noqa: E402

pytestmark = pytest.mark.slow

SUMMARY = re.compile(r"^\S+: 9 document\(s\) in 3 part\(s\) \(9 points\); 3 part\(s\) encoded, 0 already complete "
                     r"and skipped; \d+ forward pass\(es\) on ray \[\d+\.\d s\]$")
def encode(tmp_path, name: str, *flags: str) -> subprocess.CompletedProcess:
    command = shutil.which("mteb-fairpos")
    assert command, "the mteb-fairpos command is not installed (pip install -e .)"
    return subprocess.run(
        [command, "encode", str(tmp_path / "docs.jsonl"), "-o", str(tmp_path / name), "-c", "pages", "--calibration",
         CALIBRATION, "--part-size", "3", "--engine", "ray", *flags],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_quiet_ray_encode_prints_the_summary_and_the_uncalibrated_count_once(tmp_path):
    short = [{"id": f"s{i}", "segments": [{"text": "Hi."}, {"text": "Yo."}]} for i in range(3)]  # < one basket of 8
    write_jsonl(tmp_path / "docs.jsonl", records(6) + short)

    quiet = encode(tmp_path, "quiet", "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    lines = quiet.stdout.splitlines()
    assert len(lines) == 2 and SUMMARY.match(lines[0]), quiet.stdout
    assert lines[1] == UncalibratedCount.line(3)
    assert quiet.stderr == ""

    shown = encode(tmp_path, "shown")
    assert shown.returncode == 0, shown.stderr
    assert any(SUMMARY.match(line) for line in shown.stdout.splitlines())
    assert UncalibratedCount.line(3) in shown.stdout.splitlines()
    assert "Running Dataset" in shown.stderr  # Ray Data's progress (logged, as stderr is no terminal here)
    # what --quiet leaves out: Ray core's note on Ray Data's actor pool
    assert any(ACTOR_NOTE.search(line.encode()) for line in shown.stderr.splitlines())

