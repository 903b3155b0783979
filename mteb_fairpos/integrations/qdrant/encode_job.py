"""Encoding an input of any size into Parquet shards of points, in this process or on a Ray cluster.

The job: plan the input (`plan.plan_input`: every record validated, duplicates counted), load
the model once in the driver to know the collection spec and to refuse a mismatched output
folder before any work, encode every shard not yet complete with a `ShardEncoder` (one per
worker, the model loaded once per worker), then verify the folder against the plan (every
shard present, ids counted) and write ``manifest.json`` last. The local engine is the
one-worker case of the Ray engine: both run the same `ShardEncoder` on the same shards.

A killed run leaves whole shards (each written atomically); the re-run skips them, so no
finished shard is encoded twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from sentence_transformers import SentenceTransformer

from . import shards as shard_files
from . import store
from .encoding import ModelLoader, UncalibratedCount, model_name
from .plan import InputPlan, InputShard, plan_input
from .points import collection_spec
from .records import OnError, Problem
from .shard_encoder import EncodeOptions, ShardEncoder

Engine = Literal["local", "ray"]
MANIFEST = "manifest.json"


@dataclass
class EncodeReport:
    """What an encode run did."""

    output: str
    documents: int = 0
    shards: int = 0
    shards_encoded: int = 0
    shards_skipped: int = 0
    points: int = 0
    forward_passes: int = 0
    truncated: int = 0
    uncalibrated: int = 0
    invalid: list[Problem] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)
    engine: str = "local"
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [f"{self.output}: {self.documents} document(s) in {self.shards} shard(s) ({self.points} points); "
                 f"{self.shards_encoded} shard(s) encoded, {self.shards_skipped} already complete and skipped; "
                 f"{self.forward_passes} forward pass(es) on {self.engine} [{self.seconds:.1f} s]"]
        if self.truncated:
            lines.append(f"{self.truncated} document(s) longer than the model's maximum were truncated "
                         "(their payloads say which segments lost tokens)")
        if self.uncalibrated:
            lines.append(UncalibratedCount.line(self.uncalibrated))
        if self.duplicates:
            lines.append(f"{len(self.duplicates)} id(s) occurred more than once; only the first copy of each was kept")
        if self.invalid:
            lines.append(f"{len(self.invalid)} record(s) left out:")
            lines.extend(f"  {p}" for p in self.invalid[:20])
            if len(self.invalid) > 20:
                lines.append(f"  ... and {len(self.invalid) - 20} more")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["invalid"] = [{"where": p.where, "doc_id": p.doc_id, "reason": p.reason} for p in self.invalid]
        data["seconds"] = round(self.seconds, 3)
        return data


def encode_to_shards(
    inputs: str | Path | Sequence[str | Path],
    output: str | Path,
    model: str | SentenceTransformer | Callable[..., SentenceTransformer],
    collection: str,
    *,
    calibration: str | None = None,
    engine: Engine = "local",
    actors: int = 1,
    gpus_per_actor: float | None = None,
    address: str | None = None,
    batch_size: int = 32,
    shard_size: int = 1000,
    uncalibrated: bool = True,
    late_chunks: bool = False,
    store_text: bool = True,
    max_length: int | None = None,
    on_error: OnError = "raise",
    show_progress: bool = True,
) -> EncodeReport:
    """Encode documents (JSONL/Parquet files or folders) into Parquet shards of points under ``output``.

    Args:
        model: a Hub id or path (loaded with ``calibration``, default ``b128_lhalf_a0.5``), a loaded
            model (Ray actors get a pickled copy), or a picklable zero-argument callable returning
            the model (e.g. a :class:`ModelLoader`: each actor loads it itself).
        collection: the collection the point ids are made for (the ids the single-process
            ``index`` gives the same documents in that collection).
        engine: ``"local"`` (this process) or ``"ray"`` (a Ray Data actor pool; ``address``
            joins an existing cluster, default a local Ray runtime).
        actors / gpus_per_actor: the Ray actor pool (default: one GPU per actor where GPUs exist).
        shard_size: documents per shard: the unit of work, of output files and of resumption.
    """
    start = time.perf_counter()
    if not isinstance(collection, str) or not collection.strip():
        raise ValueError(f"collection must be a non-empty name, got {collection!r}.")
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', got {engine!r}.")
    if actors < 1:
        raise ValueError(f"actors must be >= 1, got {actors}.")
    if engine == "local" and (actors != 1 or gpus_per_actor is not None or address is not None):
        raise ValueError("actors, GPUs per actor and a Ray address apply to the Ray engine; "
                         "add --engine ray (engine='ray'), or leave them out.")
    if engine == "ray":  # an unreachable cluster is reported before the input is read or a model loaded
        from ..ray import runtime

        runtime.check_address(address)
    plan = plan_input(inputs, shard_size=shard_size, on_error=on_error)
    if not plan.shards:
        raise store.QdrantIndexError(
            f"nothing to encode: all {len(plan.problems)} record(s) of the input were left out (first: {plan.problems[0]})."
            if plan.problems else "nothing to encode: the input holds no record.")
    loader = ModelLoader(model, calibration or ModelLoader.calibration, max_length) if isinstance(model, str) else model
    if isinstance(loader, SentenceTransformer):  # a loaded model: Ray actors get a pickled copy
        driver_model = loader
    elif engine == "ray" and isinstance(loader, ModelLoader):  # the driver only reads the spec: no GPU for it
        driver_model = loader(device="cpu")
    else:
        driver_model = loader()
    spec = collection_spec(driver_model, model_name(driver_model), uncalibrated=uncalibrated, late_chunks=late_chunks)
    output = Path(output)
    done = _completed_shards(output, plan, spec, collection, store_text)
    todo = [s for s in plan.shards if s.name not in done]
    options = EncodeOptions(collection=collection, output=str(output), spec=spec, store_text=store_text,
                            batch_size=batch_size)
    output.mkdir(parents=True, exist_ok=True)
    (output / MANIFEST).unlink(missing_ok=True)  # a folder with a manifest is a complete one
    if engine == "local":
        results = _run_local(ShardEncoder(driver_model, options), todo, show_progress)
    else:
        from ..ray import pipeline, runtime

        del driver_model
        runtime.init(address)
        results = pipeline.encode_shards(todo, loader, options, actors=actors, gpus_per_actor=gpus_per_actor,
                                         show_progress=show_progress)
    report = EncodeReport(output=str(output), documents=plan.documents, shards=len(plan.shards),
                          shards_encoded=len(results), shards_skipped=len(plan.shards) - len(todo),
                          forward_passes=sum(r["forward_passes"] for r in results),
                          truncated=sum(r["truncated"] for r in results),
                          uncalibrated=sum(r["uncalibrated"] for r in results), invalid=list(plan.problems),
                          duplicates=dict(plan.duplicates), engine=engine)
    report.points = _verify_and_write_manifest(output, plan, spec, collection, store_text)
    report.seconds = time.perf_counter() - start
    return report


def _run_local(encoder: ShardEncoder, todo: list[InputShard], show_progress: bool) -> list[dict[str, Any]]:
    from tqdm.auto import tqdm

    results = []
    try:
        with tqdm(total=sum(s.documents for s in todo), desc="encoding shards", unit="doc",
                  disable=not show_progress) as bar:
            for shard in todo:
                results.append(encoder.encode(shard))
                bar.update(shard.documents)
    finally:
        encoder.close()
    return results


def _completed_shards(output: Path, plan: InputPlan, spec: store.CollectionSpec, collection: str,
                      store_text: bool) -> set[str]:
    """Names of the plan's shards already complete in ``output``; refuses a folder of another run."""
    if not output.exists():
        return set()
    if not output.is_dir():
        raise NotADirectoryError(f"output {str(output)!r} is a file; give a folder for the shards.")
    planned = {s.name: s for s in plan.shards}
    done = set()
    foreign = []
    for path in shard_files.shard_files(output):
        info = shard_files.read_info(path)  # a damaged or foreign file is refused by name
        if (info.spec, info.collection, info.store_text) != (spec, collection, store_text):
            raise store.CollectionMismatchError(
                f"{path} holds points of another run (model {info.spec.model!r}, calibration {info.spec.calibration!r}, "
                f"vectors {list(info.spec.vectors)}, collection {info.collection!r}); this run encodes "
                f"{spec.model!r}, {spec.calibration!r}, {list(spec.vectors)} for {collection!r}. Use a new output folder.")
        shard = planned.get(path.stem)
        if shard is None:
            foreign.append(path.name)
        elif info.source.get("fingerprint") == shard.fingerprint and info.documents == shard.documents:
            done.add(shard.name)
    if foreign:
        raise store.QdrantIndexError(
            f"{output} holds {len(foreign)} shard(s) that are not part of this input ({', '.join(foreign[:5])}"
            f"{', ...' if len(foreign) > 5 else ''}); a load would add their points too. Use a new output folder "
            "or delete them.")
    return done


def _verify_and_write_manifest(output: Path, plan: InputPlan, spec: store.CollectionSpec, collection: str,
                               store_text: bool) -> int:
    """Check every planned shard is complete and counts its documents; then write the manifest (last)."""
    entries = []
    for shard in plan.shards:
        info = shard_files.read_info(output / f"{shard.name}{shard_files.SUFFIX}")
        ids = shard_files.read_doc_ids(info.path)
        if info.source.get("fingerprint") != shard.fingerprint or len(ids) != shard.documents or len(set(ids)) != len(ids):
            raise store.QdrantIndexError(f"{info.path}: holds {len(ids)} document(s), the input shard has "
                                         f"{shard.documents}; delete the file and re-run.")
        entries.append({"file": info.path.name, "documents": info.documents, "points": info.points,
                        "source": info.source})
    manifest = {"collection": collection, "spec": spec.metadata()[store.METADATA_KEY], "store_text": store_text,
                "documents": plan.documents, "points": sum(e["points"] for e in entries), "shards": entries}
    partial = output / f".{MANIFEST}.partial"
    partial.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    partial.replace(output / MANIFEST)
    return manifest["points"]
