"""Indexing overhead of mteb-fairpos' Qdrant writer against a plain qdrant-client upload.

Both sides write the *same* points (ids, named vectors, payloads) in the same batch size into
fresh collections of the same backend, in the same run; embedding happens once, before any
timer starts, so only the writing path is compared. The fairpos side runs its full write path
per chunk of documents, as the indexer does on an existing collection (existence /
content-hash lookup, payload and point construction, batched upserts through the retry
wrapper; the indexer skips the lookup in a collection it has just created, the benchmark
keeps it, so the number is the conservative one); the plain side is ``Store.write``
of the same points from ready-made ids and payload dicts and the model's float32 vectors (both
sides turn arrays into lists inside their timer). The two sides alternate chunk by chunk, so
load from other processes hits both alike; per repetition the ratio of the totals is taken:

    overhead = median over repetitions of (fairpos time / plain time) - 1     (target: < 10 %)

The plain side builds ``models.PointStruct(...)`` as qdrant-client users do, which validates
each point with pydantic; the fairpos writer builds its points with ``model_construct`` (they
are made from values it created itself), which is why it can come out slightly *faster* than
the plain upload. The on-disk backend defaults to /dev/shm: on a real disk the local mode's
per-point sqlite commit (fsync) dominates and varies by seconds between identical runs.

Usage::

    python benchmarks/bench_qdrant.py                       # in-memory and on-disk local mode
    python benchmarks/bench_qdrant.py --docs 2000 --late-chunks
    python benchmarks/bench_qdrant.py --url http://localhost:6333   # a real server
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from qdrant_client import models  # noqa: E402

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, minilm_path  # noqa: E402
from mteb_fairpos.integrations.qdrant import FairQdrantIndex, encode_documents, open_store, parse_documents  # noqa: E402
from mteb_fairpos.integrations.qdrant.points import document_points  # noqa: E402

WORDS = ("market city council river science football election weather school music health energy village "
         "museum railway harbour festival research budget court police theatre farm bridge storm library "
         "hospital airport forest mountain painting novel concert vaccine satellite ocean desert").split()


def synthetic_records(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        segments = []
        for _ in range(rng.randint(2, 5)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(8, 30))]
            segments.append({"text": " ".join(words).capitalize() + ".", "language": rng.choice(("en", "de", "fr"))})
        records.append({"id": f"doc-{i:06d}", "segments": segments})
    return records


def plain_points(index: FairQdrantIndex, encoded, spec) -> list[tuple[str, dict, dict]]:
    """The exact ids, vectors and payloads the fairpos writer produces, built outside the timer.

    Vectors are handed over as the float32 arrays a model returns (both sides convert them to
    lists inside their timer); ids and payload dicts are ready-made.
    """
    return [(p.id, dict(p.vectors), p.payload) for enc in encoded
            for p in document_points(enc, spec, index.collection, store_text=True)]


def run_fairpos(index: FairQdrantIndex, encoded, batch: int) -> float:
    gc.collect()
    start = time.perf_counter()
    report = index.write_encoded(encoded, upsert_batch_size=batch)
    elapsed = time.perf_counter() - start
    assert report.written == len(encoded), report.summary()
    return elapsed


def run_plain(target, collection: str, points: list[tuple[str, dict, dict]], batch: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for begin in range(0, len(points), batch):
        chunk = points[begin:begin + batch]
        target.write(collection, [models.PointStruct(id=i, vector={k: a.tolist() for k, a in v.items()}, payload=p)
                                  for i, v, p in chunk], batch_size=batch)
    return time.perf_counter() - start


def bench_backend(label: str, make_store, model, encoded, spec_kwargs: dict, batch: int, chunk: int,
                  repeats: int) -> float:
    """Total write time of each side per repetition; the sides alternate chunk by chunk (noise hits both)."""
    fair_totals, plain_totals = [], []
    n_points = 0
    for rep in range(repeats):
        target = make_store()
        try:
            index = FairQdrantIndex(model, f"bench_fairpos_{rep}", target)
            spec, _ = index.prepare(**spec_kwargs)
            target.create(f"bench_plain_{rep}", spec.vectors_config())
            fair = plain = 0.0
            for k, begin in enumerate(range(0, len(encoded), chunk)):
                part = encoded[begin:begin + chunk]
                points = plain_points(index, part, spec)
                if (k + rep) % 2 == 0:
                    fair += run_fairpos(index, part, batch)
                    plain += run_plain(target, f"bench_plain_{rep}", points, batch)
                else:
                    plain += run_plain(target, f"bench_plain_{rep}", points, batch)
                    fair += run_fairpos(index, part, batch)
            n_points = target.count(f"bench_plain_{rep}")
            assert n_points == target.count(f"bench_fairpos_{rep}")
            fair_totals.append(fair)
            plain_totals.append(plain)
        finally:
            target.close()
    fair, plain = statistics.median(fair_totals), statistics.median(plain_totals)
    ratios = sorted(f / p - 1 for f, p in zip(fair_totals, plain_totals))
    overhead = statistics.median(ratios)
    print(f"{label:<26} points {n_points:>6}  plain {plain:7.3f} s ({n_points / plain:6.0f} pts/s)  "
          f"fairpos {fair:7.3f} s ({n_points / fair:6.0f} pts/s)  overhead {100 * overhead:+6.1f} %  "
          f"(per repetition {', '.join(f'{100 * r:+.1f}' for r in ratios)} %)")
    return overhead


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500, help="number of synthetic documents (default 500)")
    parser.add_argument("--batch", type=int, default=256, help="points per upsert (default 256)")
    parser.add_argument("--chunk", type=int, default=32,
                        help="documents per write call, as the indexer's embedding batch (default 32)")
    parser.add_argument("--repeats", type=int, default=11, help="repetitions; the median ratio is reported (default 11)")
    parser.add_argument("--late-chunks", action="store_true", help="also write one late-chunk point per segment")
    parser.add_argument("--no-uncalibrated", action="store_true", help="only the calibrated vector")
    parser.add_argument("--backends", nargs="+", default=["memory", "disk"], choices=("memory", "disk"),
                        help="local-mode backends to measure (default: memory disk)")
    parser.add_argument("--disk-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the on-disk backend writes (default /dev/shm: sqlite without fsync noise, which "
                        "otherwise dominates and varies by seconds between identical runs; pass a real disk folder "
                        "to include it)")
    parser.add_argument("--url", default=None, help="also measure against this Qdrant server")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    model = FairSentenceTransformer(minilm_path(), CalibrationConfig(basket_size=16), device="cpu")
    docs, _ = parse_documents(synthetic_records(args.docs, args.seed))
    spec_kwargs = {"uncalibrated": not args.no_uncalibrated, "late_chunks": args.late_chunks}
    start = time.perf_counter()
    encoded = encode_documents(model, docs, uncalibrated_vectors=spec_kwargs["uncalibrated"],
                               late_chunks=args.late_chunks, batch_size=64)
    embed = time.perf_counter() - start
    print(f"qdrant-client local mode; {len(docs)} documents, {sum(len(d.segments) for d in docs)} segments, "
          f"vectors {'calibrated+uncalibrated' if spec_kwargs['uncalibrated'] else 'calibrated'}"
          f"{' + late chunks' if args.late_chunks else ''}; {args.chunk} documents per write call, {args.batch} points per upsert; {args.repeats} repetitions")
    print(f"embedding (excluded from the comparison): {embed:.1f} s")
    worst = 0.0
    for backend in args.backends:
        if backend == "memory":
            ratio = bench_backend("local :memory:", lambda: open_store(":memory:"), model, encoded, spec_kwargs, args.batch, args.chunk, args.repeats)
        else:
            with tempfile.TemporaryDirectory(prefix="bench-qdrant-", dir=args.disk_dir) as folder:
                counter = iter(range(10**6))
                ratio = bench_backend("local on-disk" if args.disk_dir is None else f"local on-disk ({args.disk_dir})", lambda: open_store(backend="local", path=os.path.join(folder, f"db{next(counter)}")),
                                      model, encoded, spec_kwargs, args.batch, args.chunk, args.repeats)
        worst = max(worst, ratio)
    if args.url:
        ratio = bench_backend("server", lambda: open_store(url=args.url, api_key=os.environ.get("QDRANT_API_KEY")),
                              model, encoded, spec_kwargs, args.batch, args.chunk, args.repeats)
        worst = max(worst, ratio)
    print(f"overhead (median over repetitions of fairpos time / plain time - 1), worst backend: "
          f"{100 * worst:+.1f} % (target < 10 %)")
    return 0 if worst < 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
