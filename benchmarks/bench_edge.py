"""The two embedded backends, qdrant-client's local mode and Qdrant Edge, at 1k, 10k and 100k points.

Each (backend, size) runs in its own process on a fresh folder with the same points: 384-d
float32 vectors (MiniLM's size) with a payload shaped like a document point's (id, layout of
three segments), written through `store.open_store(...)` in writes of 256 points, as the index
writes them. Printed: upsert time, points per second, Edge's index build after the writes
(its optimizer: HNSW and payload indexes; local mode has none), median latency of 200 single queries
(with and without a position filter), the time to reopen the store and answer one query, and the
folder's size on disk. Targets for the embedded default (Edge): query <= 5 ms, position-filtered
query <= 50 ms, reopen <= 2 s. A case that has not
finished within ``--budget`` seconds is reported as such, and larger sizes of that backend are
left out.

Usage::

    python benchmarks/bench_edge.py                     # 1k, 10k, 100k; 240 s per case
    python benchmarks/bench_edge.py --sizes 1000 5000 --budget 600
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DIMENSION = 384


def run_case(backend: str, size: int, folder: str) -> dict:
    """Write ``size`` points into a new store at ``folder`` and time it (runs in a child process)."""
    import numpy as np
    from qdrant_client import models

    from mteb_fairpos.integrations.qdrant import store
    from mteb_fairpos.integrations.qdrant.search import position_filter

    rng = np.random.default_rng(0)
    opened = store.open_store(folder, backend=backend)
    opened.create("bench", {"calibrated": models.VectorParams(size=DIMENSION, distance=models.Distance.COSINE)},
                  metadata={"bench": True})
    start = time.perf_counter()
    for begin in range(0, size, 256):
        vectors = rng.standard_normal((min(256, size - begin), DIMENSION)).astype(np.float32)
        points = [models.PointStruct(id=store.point_id("bench", f"doc{begin + i}"), vector={"calibrated": v.tolist()},
                                     payload={"kind": "document", "doc_id": f"doc{begin + i}", "n_segments": 3,
                                              "segments": [{"position": p, "language": "en", "coverage": "full"}
                                                           for p in (1, 2, 3)]})
                  for i, v in enumerate(vectors)]
        opened.write("bench", points)
    upsert = time.perf_counter() - start
    start = time.perf_counter()
    opened.build_indexes("bench")  # Edge indexes only when asked (the writers ask after their writes)
    build = time.perf_counter() - start
    queries = rng.standard_normal((200, DIMENSION)).astype(np.float32)
    latencies = {}
    for label, flt in (("plain", None), ("position filter", position_filter(2, None))):
        times = []
        for q in queries:
            began = time.perf_counter()
            opened.query("bench", q.tolist(), using="calibrated", limit=10, filter=flt)
            times.append(time.perf_counter() - began)
        latencies[label] = statistics.median(times) * 1000
    opened.close()
    start = time.perf_counter()  # reopening: until the first query is answered
    opened = store.open_store(folder, backend=backend)
    opened.query("bench", queries[0].tolist(), using="calibrated", limit=10)
    reopen = time.perf_counter() - start
    opened.close()
    disk = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(folder) for name in names)
    return {"upsert_s": upsert, "build_s": build, "reopen_s": reopen, "points_per_s": size / upsert, "query_ms": latencies, "disk_mb": disk / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--backends", nargs="+", default=["local", "edge"], choices=["local", "edge"])
    parser.add_argument("--budget", type=float, default=240.0, help="seconds per case before it is given up")
    parser.add_argument("--case", nargs=3, metavar=("BACKEND", "SIZE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:  # the child process
        print(json.dumps(run_case(args.case[0], int(args.case[1]), args.case[2])))
        return
    rows = []
    for backend in args.backends:
        for size in args.sizes:
            with tempfile.TemporaryDirectory(prefix=f"bench-{backend}-") as folder:
                try:
                    done = subprocess.run([sys.executable, __file__, "--case", backend, str(size), folder],
                                          capture_output=True, text=True, timeout=args.budget, check=True)
                except subprocess.TimeoutExpired:
                    rows.append((backend, size, None))
                    break  # a larger size of this backend would not finish either
                rows.append((backend, size, json.loads(done.stdout.strip().splitlines()[-1])))
    print(f"{DIMENSION}-d points, upserts of 256, 200 queries of top-10; {os.cpu_count()} CPU cores\n")
    print("| backend | points | upsert s | points/s | index build s | query ms (median) | with position filter | "
          "reopen s | disk MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for backend, size, result in rows:
        if result is None:
            print(f"| {backend} | {size:,} | > {args.budget:.0f} (not finished) | | | | | | |")
            continue
        print(f"| {backend} | {size:,} | {result['upsert_s']:.2f} | {result['points_per_s']:.0f} | {result['build_s']:.2f} | "
              f"{result['query_ms']['plain']:.2f} | {result['query_ms']['position filter']:.2f} | "
              f"{result['reopen_s']:.2f} | {result['disk_mb']:.1f} |")


if __name__ == "__main__":
    main()
