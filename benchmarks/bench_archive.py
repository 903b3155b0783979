"""An archive as it grows: `index`, and `encode` + `load`, into Qdrant Edge at 10k, 100k (and 1M) documents.

Synthetic documents in the record format (2-4 segments, about 2.3 KB; see archive_inputs.py)
and a tiny random BERT, so that encoding costs little and the rest of the pipeline shows. Each
size and route runs as the command a user runs, in a fresh subprocess whose memory is sampled
from ``/proc/PID/status`` twice a second, against the documents done so far (read from the
command's progress bar; the curve is written beside its log as ``log-*.memory.csv``). Printed per run:

- documents per second and seconds per 10,000 documents (linear if the second is flat across sizes);
- peak total RSS and peak anonymous RSS, and anonymous RSS once 10,000 and once 100,000
  documents were done: their difference over 90,000 is the growth per document
  (target: at most 1 KB per document between 10,000 and 100,000, for both routes);
- the store's size on disk, the time to reopen it and answer one query, and the median latency of
  100 queries, plain and filtered by position.

``--resume`` kills one `index` run of the largest size with SIGKILL once half its documents are
done, re-runs it, and prints the resumed run's time against a fresh run's (measured above).

Usage::

    python benchmarks/bench_archive.py --work /tmp/archive                # 10k and 100k
    python benchmarks/bench_archive.py --work /tmp/archive --sizes 10000 --routes index
    python benchmarks/bench_archive.py --work /tmp/archive --sizes 1000000 --routes index   # the million
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from archive_inputs import save_tiny_model, write_documents  # noqa: E402

CLI = [sys.executable, "-c", "from mteb_fairpos.cli import main; raise SystemExit(main())"]
PROGRESS = re.compile(r"(\d+)/(\d+) \[")
MARKS = (10_000, 100_000, 1_000_000)


class Sampled:
    """A command run as a subprocess, its memory sampled against the documents its progress bar reports."""

    def __init__(self, command: list[str], log: Path, kill_at: int | None = None) -> None:
        self.samples: list[tuple[float, int, int, int]] = []  # seconds, documents done, RSS kB, anonymous kB
        self.done = 0
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TQDM_MININTERVAL="1")
        self.start = time.perf_counter()
        self.memory_log = open(log.with_suffix(".memory.csv"), "w", encoding="utf-8")  # noqa: SIM115
        self.memory_log.write("seconds,documents,rss_kb,anon_kb\n")
        with open(log, "w", encoding="utf-8") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, env=env)
            reader = threading.Thread(target=self._progress, daemon=True)
            reader.start()
            while self.process.poll() is None:
                self._sample()
                if kill_at is not None and self.done >= kill_at:
                    self.process.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.5)
            self.process.wait()
            reader.join(5)
        self.memory_log.close()
        self.seconds = time.perf_counter() - self.start
        self.returncode = self.process.returncode

    def _progress(self) -> None:
        chunk = b""
        while True:
            data = self.process.stderr.read1(4096)
            if not data:
                return
            chunk = (chunk + data)[-400:]
            found = PROGRESS.findall(chunk.decode("utf-8", "replace"))
            if found:
                self.done = int(found[-1][0])

    def _sample(self) -> None:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if "RssAnon" in fields:
            sample = (round(time.perf_counter() - self.start, 1), self.done, int(fields["VmRSS"].split()[0]),
                      int(fields["RssAnon"].split()[0]))
            self.samples.append(sample)
            self.memory_log.write(",".join(map(str, sample)) + "\n")  # a run stopped early keeps its curve
            self.memory_log.flush()

    def anonymous_at(self, documents: int) -> float | None:
        """Anonymous RSS (MB) at the first sample with ``documents`` done."""
        for _, done, _, anon in self.samples:
            if done >= documents:
                return anon / 1024
        return None

    def figures(self, documents: int) -> dict:
        marks = {f"anon_mb_at_{m}": self.anonymous_at(m) for m in MARKS if m <= documents}
        return {"seconds": round(self.seconds, 1), "docs_per_s": round(documents / self.seconds, 1),
                "s_per_10k": round(self.seconds * 10_000 / documents, 1),
                "peak_rss_mb": round(max(s[2] for s in self.samples) / 1024, 1),
                "peak_anon_mb": round(max(s[3] for s in self.samples) / 1024, 1),
                **{k: None if v is None else round(v, 1) for k, v in marks.items()}}


def store_figures(folder: Path) -> dict:
    """Size on disk, reopen time (until the first query is answered), median plain and position-filtered latency."""
    import numpy as np

    from mteb_fairpos.integrations.qdrant import store
    from mteb_fairpos.integrations.qdrant.search import position_filter

    disk = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    opened = store.open_store(str(folder))
    spec = store.read_spec(opened, "pages")
    queries = rng.standard_normal((100, spec.dimension)).astype(np.float32).tolist()
    opened.query("pages", queries[0], using=spec.vectors[0], limit=10)
    reopen = time.perf_counter() - start
    latency = {}
    for label, flt in (("plain", None), ("position", position_filter(2, None))):
        times = []
        for q in queries:
            began = time.perf_counter()
            opened.query("pages", q, using=spec.vectors[0], limit=10, filter=flt)
            times.append(time.perf_counter() - began)
        latency[label] = round(statistics.median(times) * 1000, 2)
    count = opened.count("pages")
    opened.close()
    return {"disk_mb": round(disk / 2**20, 1), "reopen_s": round(reopen, 2), "query_ms": latency["plain"],
            "filtered_query_ms": latency["position"], "points": count}


def run_size(work: Path, model: str, size: int, routes: list[str]) -> dict:
    data = work / f"docs-{size}.jsonl"
    if not data.exists():
        write_documents(data, size, invalid_every=1000)
    results = {}
    for route in routes:
        target = work / f"store-{route}-{size}"
        shutil.rmtree(target, ignore_errors=True)
        if route == "index":
            run = Sampled(CLI + ["index", str(data), "-c", "pages", "--path", str(target), "-m", model,
                                 "--skip-invalid", "--report", str(work / f"report-index-{size}.json")],
                          work / f"log-index-{size}.txt")
            figures = run.figures(size)
        else:
            parts = work / f"parts-{size}"
            shutil.rmtree(parts, ignore_errors=True)
            encode = Sampled(CLI + ["encode", str(data), "-o", str(parts), "-c", "pages", "-m", model,
                                    "--skip-invalid", "--report", str(work / f"report-encode-{size}.json")],
                             work / f"log-encode-{size}.txt")
            load = Sampled(CLI + ["load", str(parts), "-c", "pages", "--path", str(target),
                                  "--report", str(work / f"report-load-{size}.json")], work / f"log-load-{size}.txt")
            figures = {"encode": encode.figures(size), "load": {k: v for k, v in load.figures(size).items()
                                                                  if not k.startswith("anon_mb_at")},
                       "seconds": round(encode.seconds + load.seconds, 1)}
            figures["s_per_10k"] = round(figures["seconds"] * 10_000 / size, 1)
            shutil.rmtree(parts, ignore_errors=True)
            run = encode
        if run.returncode != 0:
            figures["failed"] = run.returncode
        else:
            figures.update(store_figures(target))
        results[route] = figures
        print(json.dumps({"size": size, "route": route, **figures}), flush=True)
        if route != "index":
            shutil.rmtree(target, ignore_errors=True)
    return results


def resume(work: Path, model: str, size: int, fresh_seconds: float) -> dict:
    """Kill `index` halfway (SIGKILL), run it again; the resumed run's time against a fresh run's."""
    data, target = work / f"docs-{size}.jsonl", work / f"store-resume-{size}"
    shutil.rmtree(target, ignore_errors=True)
    command = CLI + ["index", str(data), "-c", "pages", "--path", str(target), "-m", model, "--skip-invalid"]
    killed = Sampled(command, work / "log-killed.txt", kill_at=size // 2)
    again = Sampled(command + ["--report", str(work / "report-resumed.json")], work / "log-resumed.txt")
    report = json.loads((work / "report-resumed.json").read_text())
    figures = {"killed_after_s": round(killed.seconds, 1), "killed_at_docs": killed.done,
               "resumed_s": round(again.seconds, 1), "fresh_s": round(fresh_seconds, 1),
               "resumed_over_fresh": round(again.seconds / fresh_seconds, 3),
               "skipped": report["unchanged"], "written": report["written"], **store_figures(target)}
    print(json.dumps({"resume": size, **figures}), flush=True)
    shutil.rmtree(target, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder for the inputs, stores and logs")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--routes", nargs="+", choices=("index", "encode+load"), default=["index", "encode+load"])
    parser.add_argument("--resume", action="store_true", help="kill and resume `index` once at the largest size")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    model = save_tiny_model(args.work / "tiny-model")
    results = {size: run_size(args.work, model, size, args.routes) for size in args.sizes}
    for route in args.routes:
        first, last = min(args.sizes), max(args.sizes)
        low = results[first][route] if route == "index" else results[first][route]["encode"]
        high = results[last][route] if route == "index" else results[last][route]["encode"]
        if first != last:
            ratio = results[last][route]["s_per_10k"] / results[first][route]["s_per_10k"]
            print(f"{route}: seconds per 10,000 documents at {last:,} / at {first:,} = {ratio:.2f} (1.00: linear)")
        if first != last and low.get("anon_mb_at_10000") and high.get(f"anon_mb_at_{last}"):
            growth = (high[f"anon_mb_at_{last}"] - low["anon_mb_at_10000"]) * 1024 / (last - 10_000)
            print(f"{route}: anonymous RSS growth {growth:.2f} KB per document between 10,000 and {last:,} "
                  "(target <= 1 KB)")
    if args.resume and "index" in args.routes:
        resume(args.work, model, max(args.sizes), results[max(args.sizes)]["index"]["seconds"])


if __name__ == "__main__":
    main()
