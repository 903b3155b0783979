"""What the Ray engine lets through to standard error with ``--quiet``: the filter on file descriptor 2
that leaves out Ray core's note on actor constructor arguments. Runs without Ray: the filter is plain
descriptors and a process."""

from __future__ import annotations

import subprocess
import sys

from mteb_fairpos.integrations.ray.runtime import ACTOR_NOTE

NOTE = ("[2026-11-26 09:00:00,000 E 1 1] core_worker.cc:2310: Actor with class name: 'MapWorker(MapBatches(X))' "
        "and ID: 'ab' has constructor arguments in the object store and max_restarts > 0.")


def _run(inside: list[str], after: list[str] = ()) -> subprocess.CompletedProcess:
    """A Python process that runs ``inside`` in the filter's block, then ``after``."""
    script = "\n".join(["import os, sys", "from mteb_fairpos.integrations.ray.runtime import actor_note_dropped",
                        "with actor_note_dropped():", *(f"    {line}" for line in inside), *after])
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_every_other_line_written_to_the_descriptor_passes_in_order():
    """Lines written to descriptor 2 directly (as Ray's C++ core does) and through ``sys.stderr`` pass in
    order, the note alone is left out, and standard error is the process's own again after the block."""
    assert ACTOR_NOTE.search(NOTE.encode())
    done = _run(["os.write(2, b'native error line\\n')",
                 f"os.write(2, {NOTE!r}.encode() + b'\\n')",
                 "print('python error line', file=sys.stderr, flush=True)"],
                ["print('after the block', file=sys.stderr)"])
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["native error line", "python error line", "after the block"]


def test_what_a_crashing_process_wrote_last_still_comes_through():
    """A process that aborts inside the block (a failed check in Ray's core ends so) loses nothing it
    wrote: the filter is a process of its own and passes on what is left in the pipe."""
    done = _run(["os.write(2, b'Check failed: something in the core\\n')", "os.abort()"])
    assert done.returncode != 0
    assert "Check failed: something in the core" in done.stderr.splitlines()


def test_without_a_standard_error_descriptor_nothing_is_filtered():
    """With descriptor 2 closed the block runs as it is, instead of failing the encode."""
    done = subprocess.run(
        [sys.executable, "-c",
         "import os, sys\n"
         "os.close(2)\n"
         "from mteb_fairpos.integrations.ray.runtime import actor_note_dropped\n"
         "with actor_note_dropped():\n"
         "    print('ran')\n"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ran\n"
