"""Encoding an input of any size into Parquet parts of points, in this process or on a Ray cluster.

The job: scan the input (`input.scan_input`: every record validated, duplicates counted, cut
into ranges), load the model once in the driver to know the collection spec and to refuse a
mismatched output folder before any work, encode every range whose part is not yet complete
with a `PartEncoder` (one per worker, the model loaded once per worker), then verify the
folder against the scan (every part present, ids counted) and write ``manifest.json`` last.
The local engine is the one-worker case of the Ray engine: both run the same `PartEncoder`.
Input and output may be local or on object storage (``s3://...``, see `storage`).

A killed run leaves whole parts and their completion records (see `parts`); the re-run skips
a part only if it is complete and recorded, so no finished part is encoded twice and no
half-recorded one is trusted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import pyarrow.fs as pafs

from sentence_transformers import SentenceTransformer

from ...config import require_positive, whole
from . import parts as part_files
from . import store
from .encoding import ModelLoader, UncalibratedCount, model_name
from .input import InputRange, InputScan, input_items, scan_input
from .listing import Listing, held, some
from .points import collection_spec, refuse_no_uncalibrated
from .records import OnError, Problem
from .part_encoder import EncodeOptions, PartEncoder
from .storage import Location, locate

Engine = Literal["local", "ray"]
MANIFEST = "manifest.json"


@dataclass
class EncodeReport:
    """What an encode run did."""

    output: str
    documents: int = 0
    parts: int = 0
    parts_encoded: int = 0
    parts_skipped: int = 0
    points: int = 0
    forward_passes: int = 0
    truncated: int = 0
    uncalibrated: int = 0
    invalid: Listing[Problem] = field(default_factory=Listing)
    duplicates: dict[str, int] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)
    engine: str = "local"
    seconds: float = 0.0

    def summary(self, report: str | None = None) -> str:
        """The run in a few lines (records left out: see :meth:`.listing.Listing.summary_lines`)."""
        lines = [f"{self.output}: {self.documents} document(s) in {self.parts} part(s) ({self.points} points); "
                 f"{self.parts_encoded} part(s) encoded, {self.parts_skipped} already complete and skipped; "
                 f"{self.forward_passes} forward pass(es) on {self.engine} [{self.seconds:.1f} s]"]
        if self.truncated:
            lines.append(f"{self.truncated} document(s) longer than the model's maximum were truncated "
                         "(their payloads say which segments lost tokens)")
        if self.uncalibrated:
            lines.append(UncalibratedCount.line(self.uncalibrated))
        if self.duplicates:
            lines.append(f"{len(self.duplicates)} id(s) occurred more than once; only the first copy of each was kept")
        if self.unread:
            lines.append(f"{len(self.unread)} file(s) of the input folder(s) not read (not JSONL or Parquet by their "
                         f"suffix): {some(self.unread)}")
        lines += self.invalid.summary_lines("record(s) left out", report)
        return "\n".join(lines)

    def to_dict(self, *, stream: bool = False) -> dict[str, Any]:
        """The report as JSON values (``stream``: the lists made as `listing.write_json` writes them)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["duplicates"] = dict(self.duplicates)
        data["invalid"] = self.invalid.as_json(Problem.to_json)
        data["seconds"] = round(self.seconds, 3)
        return held(data, stream)


def encode_to_parts(
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
    part_size: int = 1000,
    uncalibrated: bool = True,
    late_chunks: bool = False,
    store_text: bool = True,
    max_length: int | None = None,
    format: str | None = None,
    on_error: OnError = "raise",
    show_progress: bool = True,
) -> EncodeReport:
    """Encode documents (JSONL/Parquet files or folders) into Parquet parts of points under ``output``.

    Args:
        model: a Hub id or path (loaded with ``calibration``; by default a folder saved with a calibration keeps
            its own, any other model gets ``b128_lhalf_a0.5``), a loaded
            model (Ray actors get a pickled copy), or a picklable zero-argument callable returning
            the model (e.g. a :class:`ModelLoader`: each actor loads it itself).
        collection: the collection the point ids are made for (the ids the single-process
            ``index`` gives the same documents in that collection).
        engine: ``"local"`` (this process) or ``"ray"`` (a Ray Data actor pool; ``address``
            joins an existing cluster, default a local Ray runtime).
        actors / gpus_per_actor: the Ray actor pool (default: one GPU per actor where GPUs exist).
        output: a local folder or a URI (``s3://bucket/prefix``); credentials from the environment.
        part_size: documents per input range and part: the unit of work, of output files and of resumption.
        format: ``"jsonl"`` or ``"parquet"`` for every input file (default: each file's suffix).
    """
    start = time.perf_counter()
    inputs = input_items(inputs)  # read once: a generator would be spent by the first look
    # the point ids are made for the name and the parts may go into an Edge store: a name it refuses would waste the run
    store.check_collection_name(collection, folder=True)
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', got {engine!r}.")
    if not isinstance(model, str):  # a loaded model, or a callable that loads one, is used as it is
        if not callable(model) and not isinstance(model, SentenceTransformer):
            raise TypeError(f"model must be a Hub id or path, a loaded SentenceTransformer or a callable returning "
                            f"one, got {type(model).__name__}.")
        if given := [name for name, value in (("calibration", calibration), ("max_length", max_length)) if value is not None]:
            raise ValueError(f"{' and '.join(given)} apply to a model loaded from its name or path; this model is used "
                             "as it is (set them on it, or give its name).")
    if max_length is not None and (not whole(max_length) or max_length < 1):  # 0 was read as 'not given'
        raise ValueError(f"max_length must be None (the model's own) or a positive integer, got {max_length!r}.")
    for name, count in (("actors", actors), ("batch_size", batch_size), ("part_size", part_size)):
        require_positive(count, name)  # here, not in a Ray actor after the model loaded (2.5 parts made one part)
    if engine == "local" and (actors != 1 or gpus_per_actor is not None or address is not None):
        raise ValueError("actors, GPUs per actor and a Ray address apply to the Ray engine; "
                         "add --engine ray (engine='ray'), or leave them out.")
    if engine == "ray":  # an unreachable cluster is reported before the input is read or a model loaded
        from ..ray import runtime

        runtime.check_resources(gpus_per_actor)
        address = runtime.checked_address(address)
    target = locate(output)  # a bad URI or a missing bucket is refused before the input is read
    target.require_bucket()
    _refuse_output_in_input(target, inputs)
    _refuse_foreign(target)
    scan = scan_input(inputs, range_size=part_size, on_error=on_error, format=format)
    if not scan.ranges:
        raise store.QdrantIndexError(
            f"nothing to encode: all {len(scan.problems)} record(s) of the input were left out (first: {scan.problems[0]})."
            if scan.problems else "nothing to encode: the input holds no record.")
    loader = ModelLoader(model, calibration, max_length) if isinstance(model, str) else model
    if isinstance(loader, SentenceTransformer):  # a loaded model: Ray actors get a pickled copy
        driver_model = loader
    elif engine == "ray" and isinstance(loader, ModelLoader):  # the driver only reads the spec: no GPU for it
        driver_model = loader(device="cpu")
    else:
        driver_model = loader()
    refuse_no_uncalibrated(driver_model, uncalibrated)
    spec = collection_spec(driver_model, model_name(driver_model), uncalibrated=uncalibrated, late_chunks=late_chunks,
                           store_text=store_text)
    done = _completed_parts(target, scan, spec, collection, store_text)
    todo = [r for r in scan.ranges if r.name not in done]
    options = EncodeOptions(collection=collection, output=target.path if target.local else target.uri, spec=spec,
                            store_text=store_text, batch_size=batch_size)
    if engine == "ray":  # joined before the manifest goes: a cluster that cannot be joined leaves the folder as it was
        from ..ray import pipeline, runtime

        del driver_model
        runtime.init(address)
        gpus_per_actor = runtime.gpus_for_actors(gpus_per_actor)  # a request the cluster cannot meet is refused here
        runtime.require_actor_gpus(getattr(loader, "device", None), gpus_per_actor)
    if target.local:
        Path(target.path).mkdir(parents=True, exist_ok=True)
    target.child(MANIFEST).delete()  # a folder with a manifest is a complete one
    if engine == "local":
        results = _run_local(PartEncoder(driver_model, options), todo, show_progress)
    else:
        results = pipeline.encode_ranges(todo, loader, options, actors=actors, gpus_per_actor=gpus_per_actor,
                                         show_progress=show_progress)
    report = EncodeReport(output=str(output), documents=scan.documents, parts=len(scan.ranges),
                          parts_encoded=len(results), parts_skipped=len(scan.ranges) - len(todo),
                          forward_passes=sum(r["forward_passes"] for r in results),
                          truncated=sum(r["truncated"] for r in results),
                          uncalibrated=sum(r["uncalibrated"] for r in results), invalid=scan.problems,
                          duplicates=dict(scan.duplicates), unread=scan.unread, engine=engine)
    report.points = _verify_and_write_manifest(target, scan, spec, collection, store_text)
    report.seconds = time.perf_counter() - start
    return report


def _refuse_output_in_input(output: Location, inputs: str | Path | Sequence[str | Path]) -> None:
    """Parts written into an input folder would be read as input by the next run (a folder's files
    are read one level deep, so a subfolder is fine)."""
    for item in map(locate, input_items(inputs)):
        same = type(item.filesystem) is type(output.filesystem) and output.path.rstrip("/") == item.path.rstrip("/")
        if same and item.kind() == pafs.FileType.Directory:
            raise ValueError(f"the output folder {str(output)!r} is the input folder: the next run would read its "
                             "parts as input. Write the parts to another folder (a subfolder is fine).")


def _refuse_foreign(output: Location) -> None:
    """A folder of other files and no parts is no part folder (a mistyped ``-o``): the parts would be written among
    them. A folder of an earlier run (parts, their records, its manifest) is resumed; hidden files are no data."""
    if output.kind() != pafs.FileType.Directory:
        return
    names = [f.name for f in output.files() if not f.name.startswith(".")]
    if names and not any(name.endswith(part_files.SUFFIX) for name in names):
        raise store.QdrantIndexError(f"output {str(output)!r} holds other files ({some(names)}) and no parts; give a new or "
                                     "empty folder for the parts (a subfolder is fine).")


def _run_local(encoder: PartEncoder, todo: list[InputRange], show_progress: bool) -> list[dict[str, Any]]:
    from tqdm.auto import tqdm

    results = []
    try:
        with tqdm(total=sum(s.documents for s in todo), desc="encoding parts", unit="doc",
                  disable=not show_progress) as bar:
            for span in todo:
                results.append(encoder.encode(span))
                bar.update(span.documents)
    finally:
        encoder.close()
    return results


def _completed_parts(output: Location, scan: InputScan, spec: store.CollectionSpec, collection: str,
                      store_text: bool) -> set[str]:
    """Names of the ranges whose part in ``output`` is complete and recorded; refuses a folder of another run."""
    kind = output.kind()
    if kind == pafs.FileType.NotFound:
        return set()
    if kind != pafs.FileType.Directory:
        raise NotADirectoryError(f"output {str(output)!r} is a file; give a folder for the parts.")
    planned = {r.name: r for r in scan.ranges}
    done = set()
    foreign = []
    for path in part_files.part_files(output):
        info = part_files.read_info(path)  # a damaged or foreign file is refused by name
        if (info.spec, info.collection, info.spec.store_text) != (spec, collection, store_text):
            raise store.CollectionMismatchError(
                f"{path} holds points of another run (model {info.spec.model!r}, calibration {info.spec.calibration!r}, "
                f"vectors {list(info.spec.vectors)}, at most {info.spec.max_tokens} tokens, collection {info.collection!r}, "
                f"text stored: {info.spec.store_text}); this run encodes {spec.model!r}, {spec.calibration!r}, "
                f"{list(spec.vectors)}, at most {spec.max_tokens} tokens, for {collection!r}, text stored: {store_text}. "
                "Use a new output folder.")
        span = planned.get(info.stem)
        if span is None:
            foreign.append(path.name)
        elif (info.source.get("fingerprint") == span.fingerprint and info.documents == span.documents
              and part_files.is_complete(info)):
            done.add(span.name)
    if foreign:
        raise store.QdrantIndexError(
            f"{output} holds {len(foreign)} part(s) that are not part of this input ({', '.join(foreign[:5])}"
            f"{', ...' if len(foreign) > 5 else ''}); a load would add their points too. Use a new output folder "
            "or delete them.")
    return done


def _verify_and_write_manifest(output: Location, scan: InputScan, spec: store.CollectionSpec, collection: str,
                               store_text: bool) -> int:
    """Check every range's part is complete, recorded and counts its documents; then write the manifest (last)."""
    entries = []
    for span in scan.ranges:
        info = part_files.read_info(output.child(f"{span.name}{part_files.SUFFIX}"))
        ids = part_files.read_doc_ids(info.path)
        if (info.source.get("fingerprint") != span.fingerprint or len(ids) != span.documents
                or len(set(ids)) != len(ids) or not part_files.is_complete(info)):
            raise store.QdrantIndexError(f"{info.path}: holds {len(ids)} document(s) and is "
                                         f"{'' if part_files.is_complete(info) else 'not '}recorded complete, the "
                                         f"input range has {span.documents}; delete the file and re-run.")
        entries.append({"file": info.path.name, "documents": info.documents, "points": info.points,
                        "source": info.source})
    manifest = {"collection": collection, "spec": spec.metadata()[store.METADATA_KEY], "store_text": store_text,
                "documents": scan.documents, "points": sum(e["points"] for e in entries),
                "shards": entries}  # the manifest keeps its first key: folders of earlier releases load
    output.child(MANIFEST).write_bytes((json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    return manifest["points"]
