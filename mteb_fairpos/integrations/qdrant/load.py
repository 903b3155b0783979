"""Loading Parquet parts of points into a store: Qdrant Edge, qdrant-client's local mode, or a server or cluster.

Before the first write: every part file is read back and its rows counted (a foreign or truncated
file, one whose rows disagree with its metadata or the manifest, a file the manifest does not list
and a part it lists that is missing are named and refused, or skipped with ``on_bad="skip"``, when
the report says how much of the manifest was loaded), the parts must agree on model, calibration,
vectors and collection, document ids must be unique across parts (duplicates are counted),
and the collection is created or checked. The points then go through :class:`.writer.Writer`, the
writer ``index`` uses too: bulk-load settings (HNSW deferred where the backend has the setting,
restored even on failure), writes with retries, each part's segment points before
its document points, and a read-back after each part, so every number in the report counts
points read from the files and found in the store, never what a file's metadata claims. Ids are
deterministic: a failed or killed load is finished by running it again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from . import parts as part_files
from . import store
from .listing import Listing, held
from .backends import Store
from .clients import as_store
from .encode import MANIFEST
from .storage import Location, locate
from .writer import Writer

logger = logging.getLogger(__name__)
OnBad = Literal["raise", "skip"]


@dataclass
class LoadReport:
    """What a load did."""

    collection: str
    parts: int = 0
    documents: int = 0
    points: int = 0
    created_collection: bool = False
    deferred_indexing: bool = False
    stale_points_deleted: int = 0
    """Segment points of documents the collection held with more segments than the parts now give them."""
    bad_parts: Listing[str] = field(default_factory=Listing)
    #: the run's totals from its manifest (None for a --partial load): a load that skipped parts says what it left out
    manifest_documents: int | None = None
    manifest_points: int | None = None
    seconds: float = 0.0

    def summary(self, report: str | None = None) -> str:
        """The load in a few lines (skipped parts: see :meth:`.listing.Listing.summary_lines`)."""
        lines = [f"collection {self.collection!r}: {self.documents} document(s), {self.points} point(s) loaded from "
                 f"{self.parts} part(s)" + (", collection created" if self.created_collection else "")
                 + (", HNSW deferred during the load" if self.deferred_indexing else "") + f" [{self.seconds:.1f} s]"]
        if self.manifest_documents is not None and self.manifest_points is not None and (
                self.documents < self.manifest_documents or self.points < self.manifest_points):
            lines.append(f"incomplete: {self.documents} of the manifest's {self.manifest_documents} document(s) and "
                         f"{self.points} of its {self.manifest_points} point(s) loaded; "
                         f"{self.manifest_documents - self.documents} document(s), "
                         f"{self.manifest_points - self.points} point(s) in skipped part(s)")
        if self.stale_points_deleted:
            lines.append(f"{self.stale_points_deleted} stale segment point(s) of changed documents deleted")
        lines += self.bad_parts.summary_lines("part file(s) skipped", report)
        return "\n".join(lines)

    def to_dict(self, *, stream: bool = False) -> dict[str, Any]:
        """The report as JSON values (``stream``: the lists made as `listing.write_json` writes them)."""
        return held({"collection": self.collection, "parts": self.parts, "documents": self.documents, "points": self.points,
                "manifest_documents": self.manifest_documents, "manifest_points": self.manifest_points,
                "created_collection": self.created_collection, "deferred_indexing": self.deferred_indexing,
                "stale_points_deleted": self.stale_points_deleted, "bad_parts": self.bad_parts.as_json(str),
                "seconds": round(self.seconds, 3)}, stream)


def load_parts(
    folder: str | Path,
    target: Store,
    collection: str | None = None,
    *,
    on_bad: OnBad = "raise",
    partial: bool = False,
    batch_size: int = 256,
    parallel: int = 1,
    max_retries: int = 3,
    backoff: float = 0.5,
    defer_indexing: bool | None = None,
    shard_number: int | None = None,
    replication_factor: int | None = None,
    write_consistency_factor: int | None = None,
    on_disk_payload: bool | None = None,
    show_progress: bool = True,
) -> LoadReport:
    """Load the parts under ``folder`` (written by ``encode_to_parts``) into ``collection`` of ``target``.

    Args:
        collection: default: the collection the parts' ids were made for; another name is refused
            (point ids depend on it: re-encode for that collection).
        on_bad: a foreign or damaged part file, a file the manifest does not list or a part it lists
            that is missing stops the load before any write (``"raise"``) or is skipped and reported
            (``"skip"``; the report then says how much of the manifest was loaded).
        partial: load a folder whose encode has not finished (no ``manifest.json``): the parts that
            are there, not held to a manifest's list.
        parallel: upload streams (``upload_points`` processes; a server only, see
            :attr:`.backends.Capabilities.concurrent_writers`).
        max_retries / backoff: a transient failure (connection, timeout, 429, 5xx) is retried up to
            ``max_retries`` times with exponential backoff from ``backoff`` seconds (re-sending the
            part's phase: ids are idempotent); a client error (4xx) stops the load at once.
        defer_indexing: set HNSW ``m=0`` for the load and restore it after (default: for a
            collection this load creates, where the backend has HNSW settings).
        shard_number / replication_factor / write_consistency_factor / on_disk_payload: for a new collection.
    """
    start = time.perf_counter()
    if on_bad not in ("raise", "skip"):
        raise ValueError(f"on_bad must be 'raise' or 'skip', got {on_bad!r}.")
    target = as_store(target)  # a Store, or the user's own QdrantClient, as FairQdrantIndex takes them
    folder = locate(folder)  # a local folder or a URI such as s3://bucket/prefix
    files = part_files.part_files(folder)
    manifest = _read_manifest(folder, partial)
    parts, bad = _read_parts(folder, files, on_bad, manifest, partial)
    spec, name = _agreed_settings(parts, collection, folder)
    _check_unique(parts)
    report = LoadReport(name, parts=len(parts), bad_parts=Listing(str(err) for err in bad))
    if manifest is not None and not partial:
        report.manifest_documents, report.manifest_points = int(manifest["documents"]), int(manifest["points"])
    writer, report.created_collection = Writer.open(
        target, name, spec, batch_size=batch_size, parallel=parallel, retries=max_retries, backoff=backoff,
        cluster={"shard_number": shard_number, "replication_factor": replication_factor,
                 "write_consistency_factor": write_consistency_factor, "on_disk_payload": on_disk_payload})
    from tqdm.auto import tqdm

    progress = tqdm(total=sum(part.info.points for part in parts), desc=f"loading into {name}", unit="point",
                    disable=not show_progress)
    try:
        with writer.bulk(report.created_collection if defer_indexing is None else defer_indexing) as deferred:
            report.deferred_indexing = deferred
            for part in parts:
                points = [p.to_point() for p in part_files.read_points(part.path)]
                points.sort(key=lambda p: p.payload["kind"] == store.KIND_DOCUMENT)  # segments before documents
                written = writer.write(points, stale=_stale(writer, points, report.created_collection),
                                       what=part.path.name, resume=f"{report.documents} document(s) of earlier parts "
                                                                   "were loaded. Run the same load again")
                report.documents += written.documents
                report.points += written.points
                report.stale_points_deleted += written.stale
                progress.update(len(points))
    finally:
        progress.close()
    report.seconds = time.perf_counter() - start
    return report


# ---------------------------------------------------------------------------- internals
def _stale(writer: Writer, points: list, created: bool) -> list[str]:
    """Segment point ids that documents of ``points`` have in the collection beyond their new segments (a document
    that now has fewer), as ``index`` deletes them; none in a collection this load created."""
    if created or not writer.spec.late_chunks:
        return []
    by_document: dict[str, list] = {}
    for point in points:
        by_document.setdefault(point.payload["doc_id"], []).append(point)
    previous = writer.stored(list(by_document))
    return [pid for doc_id, own in by_document.items() for pid in writer.stale(doc_id, previous.get(doc_id), own)]


@dataclass(frozen=True)
class _Part:
    """A part file whose rows agree with its metadata, and a digest of each of its document ids (8 bytes a
    document, so checking a million documents' ids holds 8 MB, not their strings)."""

    info: part_files.PartInfo
    doc_keys: np.ndarray

    @property
    def path(self) -> Location:
        return self.info.path


def _read_manifest(folder: Location, partial: bool) -> dict[str, Any] | None:
    path = folder.child(MANIFEST)
    if not path.exists():
        if partial:
            return None
        raise store.QdrantIndexError(
            f"{folder} has no {MANIFEST}: its encode has not finished (or was killed). Re-run the same encode to "
            "complete it, or pass --partial to load the parts that are there.")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise store.QdrantIndexError(f"{path}: not a readable manifest ({err}); re-run the encode.") from None
    wrong = _manifest_fault(manifest)
    if wrong:
        raise store.QdrantIndexError(f"{path}: not a manifest of `mteb-fairpos encode` ({wrong}); re-run the encode.")
    return manifest


def _manifest_fault(manifest: Any) -> str | None:
    """What in a parsed manifest is not the shape `encode` writes (the fields a load reads, and totals that are
    its shards' sums), or None."""
    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, not an object"
    for key in ("documents", "points"):
        if not count(manifest.get(key)):
            return f"{key!r} is {manifest.get(key)!r}, not a count"
    if not isinstance(manifest.get("shards"), list):
        return f"'shards' is {manifest.get('shards')!r}, not a list"
    for k, entry in enumerate(manifest["shards"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            return f"shards[{k}] names no file"
        for key in ("documents", "points"):
            if not count(entry.get(key)):
                return f"shards[{k}].{key} is {entry.get(key)!r}, not a count"
    for key in ("documents", "points"):
        total = sum(entry[key] for entry in manifest["shards"])
        if total != manifest[key]:
            return f"{key!r} is {manifest[key]}, but its shards hold {total}"
    return None


def _read_parts(folder: Location, files: list[Location], on_bad: OnBad, manifest: dict[str, Any] | None,
                partial: bool) -> tuple[list[_Part], list[part_files.PartError]]:
    """The loadable parts and the reasons against the others. Without ``partial`` a manifest is the
    run's list of parts: one folder holds one run, so a file it does not list is not loadable and
    a part it lists that is missing counts as a bad part (both named, like a damaged one)."""
    if not files:
        raise part_files.PartError(f"{folder} holds no part files (*.parquet); run `mteb-fairpos encode` into it first.")
    listed = {entry["file"]: entry for entry in (manifest or {}).get("shards", [])}
    held = manifest is not None and not partial
    parts, bad = [], []
    for path in files:
        try:
            info = part_files.read_info(path)
            if held and path.name not in listed:
                raise part_files.PartError(f"{path}: not in the folder's {MANIFEST} (a part of another run?); one "
                                             "folder holds one run: move it out.")
            parts.append(_read_rows(info, listed.get(path.name)))
        except part_files.PartError as err:
            bad.append(err)
    missing = sorted(set(listed) - {path.name for path in files}) if held else []
    bad.extend(part_files.PartError(f"{folder.child(name)}: listed in the {MANIFEST} but missing; re-run the encode.")
               for name in missing)
    if bad and on_bad == "raise":
        raise part_files.PartError(f"{len(bad)} of {len(files) + len(missing)} file(s) in {folder} are not loadable "
                                     "parts" + (f" ({len(missing)} listed in the manifest but missing)" if missing else "")
                                     + "; nothing was written:\n  " + "\n  ".join(map(str, bad))
                                     + "\nFix or remove them as each line says, or skip them (--skip-bad).")
    if not parts:
        raise part_files.PartError(f"no loadable part in {folder}:\n  " + "\n  ".join(map(str, bad)))
    return parts, bad


def _read_rows(info: part_files.PartInfo, listed: dict[str, Any] | None) -> _Part:
    """Count the part's rows; refuse it if they disagree with its metadata or with the manifest's entry."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        with info.path.opened() as handle:
            table = pq.read_table(handle, columns=["doc_id", "position"])
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for damaged or foreign columns
        raise part_files.PartError(f"{info.path}: its rows cannot be read ({str(err).splitlines()[0][:160]}); "
                                     "delete it and re-run the encode.") from None
    doc_ids = table.filter(pc.equal(table["position"], 0))["doc_id"].to_pylist()
    rows = (len(doc_ids), table.num_rows)
    for source, claimed in (("its metadata", (info.documents, info.points)),
                            ("the manifest", None if listed is None else (listed["documents"], listed["points"]))):
        if claimed is not None and tuple(claimed) != rows:
            raise part_files.PartError(
                f"{info.path}: {source} says {claimed[0]} document(s) in {claimed[1]} point(s), but its rows hold "
                f"{rows[0]} in {rows[1]} (a truncated or rewritten part); delete it and re-run the encode.")
    return _Part(info, _digests(doc_ids))


def _digests(doc_ids: list[str]) -> np.ndarray:
    """64-bit digests of document ids (uint64): equal ids give equal digests; distinct ids share one with a
    chance of about n^2 / 2^65 (3e-8 for a million), which :func:`_check_unique` settles on the ids themselves."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little")
                        for doc_id in doc_ids), dtype=np.uint64, count=len(doc_ids))


def _agreed_settings(parts: list[_Part], collection: str | None, folder: Location) -> tuple[store.CollectionSpec, str]:
    first = parts[0].info
    for info in (part.info for part in parts[1:]):
        if (info.spec, info.collection, info.spec.store_text) != (first.spec, first.collection, first.spec.store_text):
            raise store.CollectionMismatchError(
                f"{info.path.name} and {first.path.name} in {folder} were encoded with different settings "
                f"({info.spec.model!r}/{info.spec.calibration!r}/{list(info.spec.vectors)} for {info.collection!r}, "
                f"text stored: {info.spec.store_text} vs {first.spec.model!r}/{first.spec.calibration!r}/"
                f"{list(first.spec.vectors)} for {first.collection!r}, text stored: {first.spec.store_text}); one folder "
                "holds one run. Nothing was written.")
    if collection is not None and collection != first.collection:
        raise store.CollectionMismatchError(
            f"the parts in {folder} were encoded for collection {first.collection!r}: their point ids are made for that "
            f"name. Load them into {first.collection!r}, or encode again with --collection {collection}.")
    return first.spec, first.collection


def _check_unique(parts: list[_Part]) -> None:
    """Refuse document ids that occur in more than one part: found on their digests, then counted and named from
    the ids of the parts whose digests repeat (read again; with no duplicate, no part is)."""
    keys, counts = np.unique(np.concatenate([part.doc_keys for part in parts]), return_counts=True)
    repeated = keys[counts > 1]
    if not len(repeated):
        return
    seen: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    for part in parts:
        suspect = np.isin(part.doc_keys, repeated)
        if not suspect.any():
            continue
        for doc_id in itertools.compress(part_files.read_doc_ids(part.path), suspect.tolist()):
            seen[doc_id] += 1
            if seen[doc_id] <= 3:
                where.setdefault(doc_id, []).append(part.path.name)
    duplicates = {doc_id: n for doc_id, n in seen.items() if n > 1}
    if duplicates:
        shown = "; ".join(f"{d!r} x{n} ({', '.join(where[d])})" for d, n in sorted(duplicates.items())[:5])
        raise store.QdrantIndexError(
            f"{len(duplicates)} document id(s) occur in more than one part ({sum(duplicates.values())} copies): {shown}. "
            "Their points would overwrite each other; nothing was written. Load one run's folder at a time.")
