"""The scale-out route against the single-process one, on the same documents in the same run.

1. Encode throughput: the Ray Data pipeline (1 and 2 model actors) against the local engine,
   which runs the same `PartEncoder` in this process (the single-process case of the pipeline),
   and against `FairQdrantIndex.index_file` into an in-memory collection (encode + write), whose
   windows hold as many documents as the parts (the unit both embed, sorted by length).
   Each Ray run starts its own actor pool and loads the model in every actor, as a real job
   does; the Ray runtime itself is started once, before the timers (reported separately).
2. Bulk load: `load_parts` into a fresh collection against a plain ``Store.write``
   (qdrant-client's ``upload_points``, or Edge's upsert) of the same points, read from the same
   parts beforehand, so only the writing is compared; timed alone and with the creation of the
   same collection (vectors, payload indexes) that the load does too; in local mode in memory
   and in Qdrant Edge (where both end by building the indexes). A third side, the bare load, is
   the least any loader of these files does: create the collection, read each part, decode its
   payloads, turn its vectors into lists and write them, with no check and no read-back; it
   bounds what `load_parts` can reach against the plain write.
   Target: load >= 0.8 of the plain upload; `index_file` >= 0.95 of the local engine.

The modes alternate within each repetition (machine noise hits all alike); printed are the
medians and min-max of documents per second and the ratios of the medians:

    ray overhead at 1 actor = 1 - (ray 1 actor / local engine)      (target: < 15 %)

Usage::

    python benchmarks/bench_scale.py                  # 600 documents, 3 repetitions
    python benchmarks/bench_scale.py --docs 2000 --repeats 5
    python benchmarks/bench_scale.py --no-ray          # index vs encode and the loads only
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from mteb_fairpos.integrations.qdrant import FairQdrantIndex, store  # noqa: E402
from mteb_fairpos.integrations.qdrant.load import load_parts  # noqa: E402
from mteb_fairpos.integrations.qdrant.encode import encode_to_parts  # noqa: E402
from mteb_fairpos.integrations.qdrant.encoding import ModelLoader  # noqa: E402
from mteb_fairpos.integrations.qdrant.parts import read_points, part_files  # noqa: E402
from mteb_fairpos.offline import MINILM_HUB_ID  # noqa: E402

WORDS = ("market city council river science football election weather school music health energy village "
         "museum railway harbour festival research budget court police theatre farm bridge storm library "
         "hospital airport forest mountain painting novel concert vaccine satellite ocean desert").split()


def write_input(path: str, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            segments = [{"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 60))).capitalize() + ".",
                         "language": rng.choice(["en", "de", "fr"])} for _ in range(rng.randint(2, 5))]
            handle.write(json.dumps({"id": f"doc{i}", "segments": segments}) + "\n")


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def print_loads(parts: str, work: str, repeats: int) -> None:
    """`load_parts` against a plain write of the same points already in memory, per embedded store:
    the write alone (the collection made beforehand, untimed) and the write with the collection's
    creation (vectors and payload indexes, which the load does too) in its time."""
    points = [p.to_point() for f in part_files(parts) for p in read_points(f)]
    gc.freeze()  # the baseline's points (a list per vector) would otherwise be traversed by every full collection
    stores = {"local mode, in memory": lambda n: store.open_store(":memory:"),
              "Qdrant Edge (the embedded default)": lambda n: store.open_store(os.path.join(work, f"edge-{n}"))}
    times: dict[tuple[str, str], list[float]] = {}
    for repeat in range(repeats):
        for name, open_one in stores.items():
            target = open_one(f"load-{repeat}")
            times.setdefault((name, "load"), []).append(timed(lambda: load_parts(parts, target, show_progress=False)))
            spec = store.read_spec(target, "bench")
            target.close()
            plain = open_one(f"plain-{repeat}")
            create = timed(lambda: store.create_collection(plain, "bench", spec))  # the same vectors, payload indexes

            def upload() -> None:  # the same end state as the load: points written, indexes built
                plain.write("bench", points, batch_size=256)
                plain.build_indexes("bench")

            write = timed(upload)
            times.setdefault((name, "write"), []).append(write)
            times.setdefault((name, "create"), []).append(create + write)
            plain.close()
            bare = open_one(f"bare-{repeat}")
            times.setdefault((name, "bare"), []).append(timed(lambda: bare_load(parts, bare, spec)))
            bare.close()

    def rate(values: list[float]) -> tuple[float, float, float]:
        rates = [len(points) / v for v in values]
        return statistics.median(rates), min(rates), max(rates)

    print(f"\n| load of {len(points)} points | points/s median | min-max | vs plain write (target >= 0.8) "
          "| vs create + plain write | vs bare load |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in stores:
        load, write, create, bare = (rate(times[name, side]) for side in ("load", "write", "create", "bare"))
        print(f"| {name}: load_parts (checks, read Parquet, create, write, read back) | {load[0]:.0f} | "
              f"{load[1]:.0f}-{load[2]:.0f} | {load[0] / write[0]:.2f} | {load[0] / create[0]:.2f} | "
              f"{load[0] / bare[0]:.2f} |")
        print(f"| {name}: bare load (create, read Parquet, write; no checks) | {bare[0]:.0f} | "
              f"{bare[1]:.0f}-{bare[2]:.0f} | {bare[0] / write[0]:.2f} | {bare[0] / create[0]:.2f} | 1.00 |")
        print(f"| {name}: plain write of ready points | {write[0]:.0f} | {write[1]:.0f}-{write[2]:.0f} | 1.00 | | |")
        print(f"| {name}: create the collection + plain write | {create[0]:.0f} | {create[1]:.0f}-{create[2]:.0f} | "
              "| 1.00 | |")


def bare_load(parts: str, target: store.Store, spec: store.CollectionSpec) -> None:
    """The least a loader of these parts does, through the same `Store`: create the collection,
    then per part read the file, decode the payloads, make the vectors lists and write; build the
    indexes. No agreement or row checks, no duplicate check, no read-back."""
    import pyarrow.parquet as pq
    from qdrant_client import models

    store.create_collection(target, "bench", spec)
    for path in part_files(parts):
        with path.opened() as handle:
            table = pq.read_table(handle)
        payloads = [json.loads(text) for text in table["payload"].to_pylist()]
        vectors = {}
        for name in spec.vectors:
            column = table[name].combine_chunks()
            rows = column.values.to_numpy(zero_copy_only=False).reshape(-1, spec.dimension).tolist()
            vectors[name] = [row if valid else None for row, valid in zip(rows, column.is_valid().to_pylist())]
        points = [models.PointStruct.model_construct(
            id=pid, vector={name: rows[i] for name, rows in vectors.items() if rows[i] is not None}, payload=payloads[i])
            for i, pid in enumerate(table["id"].to_pylist())]
        target.write("bench", points, batch_size=256)
    target.build_indexes("bench")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--part-size", type=int, default=100)
    parser.add_argument("--calibration", default="b128_lhalf_a0.5")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray routes (index vs encode and the load only)")
    parser.add_argument("--parts", help="time only the load, of this finished encode folder (e.g. a larger one)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-scale-")
    if args.parts:
        print_loads(args.parts, work, args.repeats)
        shutil.rmtree(work, ignore_errors=True)
        return

    import ray

    from mteb_fairpos.integrations.ray import runtime

    source = os.path.join(work, "docs.jsonl")
    write_input(source, args.docs)
    loader = ModelLoader(MINILM_HUB_ID, args.calibration)
    model = loader()
    cpus = os.cpu_count() or 1
    ray_start = 0.0 if args.no_ray else timed(lambda: runtime.init(num_cpus=cpus))

    def encode(engine: str, actors: int) -> None:
        out = os.path.join(work, f"out-{engine}-{actors}")
        shutil.rmtree(out, ignore_errors=True)
        encode_to_parts(source, out, loader if engine == "ray" else model, "bench", engine=engine, actors=actors,
                         part_size=args.part_size, show_progress=False)

    def index_file() -> None:
        with FairQdrantIndex(model, "bench", model_name=MINILM_HUB_ID) as index:
            index.index_file(source, window=args.part_size, show_progress=False)  # a window is a part's worth

    modes = {"local engine (this process)": lambda: encode("local", 1),
             "index_file (encode + write)": index_file}
    if not args.no_ray:
        modes.update({"ray, 1 actor": lambda: encode("ray", 1), "ray, 2 actors": lambda: encode("ray", 2)})
    times: dict[str, list[float]] = {name: [] for name in modes}
    encode("local", 1)  # warm-up: file cache, torch kernels
    for _ in range(args.repeats):
        for name, action in modes.items():
            times[name].append(timed(action))

    if not args.no_ray:
        ray.shutdown()
    print_loads(os.path.join(work, "out-local-1"), work, args.repeats)
    shutil.rmtree(work, ignore_errors=True)

    def rate(values: list[float], n: int) -> tuple[float, float, float]:
        rates = [n / v for v in values]
        return statistics.median(rates), min(rates), max(rates)

    print(f"{args.docs} documents of 2-5 segments, {args.calibration}, {cpus} CPU cores, "
          f"{args.repeats} repetitions; Ray runtime start (once): {ray_start:.1f} s\n")
    print("| route | docs/s median | min-max | vs local engine |")
    print("|---|---:|---:|---:|")
    base = rate(times["local engine (this process)"], args.docs)[0]
    for name, values in times.items():
        median, low, high = rate(values, args.docs)
        print(f"| {name} | {median:.1f} | {low:.1f}-{high:.1f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
