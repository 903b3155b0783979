"""`mteb-fairpos encode --engine ray` as a user runs it: the command in a process of its own, with
its own local Ray runtime, and everything it prints. Slow (Ray and its actors start in each run),
so marked ``slow``: CI runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("ray", reason='the Ray engine is an extra: pip install "mteb-fairpos[ray]"')

from mteb_fairpos.integrations.qdrant.encoding import UncalibratedCount  # noqa: E402

from corpus import CALIBRATION, records, write_jsonl  # noqa: E402

pytestmark = pytest.mark.slow

SUMMARY = re.compile(r"^\S+: 9 document\(s\) in 3 part\(s\) \(9 points\); 3 part\(s\) encoded, 0 already complete "
                     r"and skipped; \d+ forward pass\(es\) on ray \[\d+\.\d s\]$")
ACTOR_NOTE = re.compile(r"core_worker\.cc:\d+: Actor with class name: .* has constructor arguments in the object store")
"""Ray's core prints this once per process, when it starts the first Ray Data actor (Ray Data puts the
actors' constructor arguments in the object store itself). Without ``--quiet`` it shows; with it, the
command drops exactly this line from standard error."""


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
    assert any(ACTOR_NOTE.search(line) for line in shown.stderr.splitlines())  # what --quiet left out


def test_the_actor_note_filter_passes_every_other_line_written_to_the_descriptor():
    """The filter sits on file descriptor 2 (Ray's core writes there from C++): lines written to the
    descriptor directly and through ``sys.stderr`` pass in order, the note alone is left out, and
    standard error is the terminal's again after the block."""
    note = ("[2026-11-26 09:00:00,000 E 1 1] core_worker.cc:2310: Actor with class name: 'MapWorker(MapBatches(X))' "
            "and ID: 'ab' has constructor arguments in the object store and max_restarts > 0.")
    script = (
        "import os, sys\n"
        "from mteb_fairpos.integrations.ray.runtime import actor_note_dropped\n"
        "with actor_note_dropped():\n"
        "    os.write(2, b'native error line\\n')\n"
        f"    os.write(2, {note!r}.encode() + b'\\n')\n"
        "    print('python error line', file=sys.stderr, flush=True)\n"
        "print('after the block', file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["native error line", "python error line", "after the block"]
    assert ACTOR_NOTE.search(note)
