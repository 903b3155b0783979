"""Encoded points at rest: Parquet parts between a distributed encode and a bulk load.

A part holds the points of one input range, one row per point: ``id``, ``doc_id``,
``position`` (0 for the document point), ``kind``, the ``payload`` as JSON text (so every
payload round-trips exactly, whatever its nesting) and one float32 column per named vector.
The file's metadata records the collection spec (model, calibration, dimension, vectors), the
collection the ids were made for, and where its records came from with a fingerprint of their
bytes. Parts live in a local folder or under an object-storage URI (see `storage`).

A part is complete when it is fully written *and recorded*: its bytes appear under its name
only whole (a local rename, or one object upload), and then a small record ``NAME.parquet.done``
is written with its row count. A rename is not atomic on object storage, and a killed run may
stop between the two writes, so a re-run trusts a part only if its record exists and the file's
row count (from its Parquet footer) equals the recorded one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from . import store
from .points import PointRecord
from .storage import Location, StorageError, locate

PART_FORMAT = 1
METADATA_KEY = b"mteb_fairpos_shard"  # the format keeps its first names: parts of earlier releases load
SUFFIX = ".parquet"
DONE = ".done"


class PartError(store.QdrantIndexError):
    """A part file that is not a readable mteb-fairpos part (foreign, truncated, or of another run)."""


@dataclass(frozen=True)
class PartInfo:
    """What a part file says about itself (read from its metadata, without its rows)."""

    path: Location
    spec: store.CollectionSpec
    collection: str
    source: dict[str, Any]
    documents: int
    points: int

    @property
    def stem(self) -> str:
        return PurePosixPath(self.path.name).stem


def write_part(path: str | Path | Location, points: Sequence[PointRecord], *, spec: store.CollectionSpec,
                collection: str, store_text: bool, source: dict[str, Any]) -> PartInfo:
    """Write ``points`` as one part (whole or not at all), then its completion record."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = locate(path)
    columns: dict[str, Any] = {
        "id": pa.array([p.id for p in points], pa.string()),
        "doc_id": pa.array([p.payload["doc_id"] for p in points], pa.string()),
        "position": pa.array([0 if p.is_document else p.payload["position"] for p in points], pa.int32()),
        "kind": pa.array([p.payload["kind"] for p in points], pa.string()),
        "payload": pa.array([json.dumps(p.payload, ensure_ascii=False) for p in points], pa.string()),
    }
    for name in spec.vectors:  # a segment point holds only late-chunk vectors: the others are null
        present = [p.vectors.get(name) for p in points]
        dense = np.zeros((len(points), spec.dimension), np.float32)
        for row, vector in enumerate(present):
            if vector is not None:
                dense[row] = vector
        missing = np.array([vector is None for vector in present], dtype=bool)
        columns[name] = pa.FixedSizeListArray.from_arrays(pa.array(dense.reshape(-1)), spec.dimension,
                                                          mask=pa.array(missing) if missing.any() else None)
    documents = sum(1 for p in points if p.is_document)
    about = {"format": PART_FORMAT, "spec": spec.metadata()[store.METADATA_KEY], "collection": collection,
             "store_text": store_text, "source": source, "documents": documents, "points": len(points)}
    table = pa.table(columns).replace_schema_metadata({METADATA_KEY: json.dumps(about).encode("utf-8")})
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    path.write_bytes(buffer.getvalue())
    done_record(path).write_bytes(json.dumps({"rows": len(points), "fingerprint": source.get("fingerprint")}).encode())
    return _info(path, about)


def done_record(path: str | Path | Location) -> Location:
    """Where the completion record of the part at ``path`` lives (beside it)."""
    path = locate(path)
    return path.sibling(path.name + DONE)


def is_complete(info: PartInfo) -> bool:
    """Whether the part was fully written and recorded: its record exists and matches its row count."""
    import pyarrow.parquet as pq

    record = done_record(info.path)
    if record.kind() != pafs.FileType.File:
        return False
    try:
        recorded = json.loads(record.read_bytes())
        rows = int(recorded["rows"])
    except (ValueError, KeyError, TypeError):
        return False
    with info.path.opened() as handle:
        footer = pq.ParquetFile(handle).metadata.num_rows
    return rows == footer == info.points and recorded.get("fingerprint") == info.source.get("fingerprint")


def read_info(path: str | Path | Location) -> PartInfo:
    """The part's metadata; :class:`PartError` naming the file if it is unreadable or not a part."""
    import pyarrow.parquet as pq

    path = locate(path)
    try:
        with path.opened() as handle:
            schema = pq.read_schema(handle)
    except (FileNotFoundError, StorageError):
        raise
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise PartError(f"{path}: not a readable Parquet file ({str(err).splitlines()[0][:160]}); "
                         "a truncated or damaged part: delete it and re-run the encode.") from None
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise PartError(f"{path}: a Parquet file without mteb-fairpos part metadata (a foreign file in the part folder?).")
    about = json.loads(raw)
    if about.get("format") != PART_FORMAT:
        raise PartError(f"{path}: part format {about.get('format')!r}, this version reads format {PART_FORMAT}.")
    return _info(path, about)


def read_points(path: str | Path | Location) -> Iterator[PointRecord]:
    """The part's points, in the order they were written (segment points before their document point)."""
    import pyarrow.parquet as pq

    info = read_info(path)
    with info.path.opened() as handle:
        yield from _points(pq.ParquetFile(handle), info)


def _points(parquet: Any, info: PartInfo) -> Iterator[PointRecord]:
    for batch in parquet.iter_batches():
        ids = batch.column("id").to_pylist()
        payloads = batch.column("payload").to_pylist()
        vectors = {}
        for name in info.spec.vectors:
            column = batch.column(name)
            dense = column.values.to_numpy(zero_copy_only=False).reshape(-1, info.spec.dimension)
            vectors[name] = (dense, column.is_valid().to_numpy(zero_copy_only=False))
        for row, (pid, payload) in enumerate(zip(ids, payloads)):
            named = {name: dense[row] for name, (dense, valid) in vectors.items() if valid[row]}
            yield PointRecord(pid, named, json.loads(payload))


def read_doc_ids(path: str | Path | Location) -> list[str]:
    """The document ids of a part's document points (for duplicate checks across parts)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with locate(path).opened() as handle:
        table = pq.read_table(handle, columns=["doc_id", "position"])
    return table.filter(pc.equal(table["position"], 0))["doc_id"].to_pylist()


def part_files(folder: str | Path | Location) -> list[Location]:
    """The Parquet files of a part folder, sorted by name (temporary files of a killed run left out)."""
    folder = locate(folder)
    kind = folder.kind()
    if kind == pafs.FileType.File:
        raise NotADirectoryError(f"{str(folder)!r} is a file; give the part folder `mteb-fairpos encode` wrote.")
    if kind != pafs.FileType.Directory:
        raise FileNotFoundError(f"part folder {str(folder)!r} does not exist; run `mteb-fairpos encode` into it first.")
    return [p for p in folder.files() if p.name.endswith(SUFFIX) and not p.name.startswith(".")]


def _info(path: Location, about: dict[str, Any]) -> PartInfo:
    spec = store.CollectionSpec.from_metadata({store.METADATA_KEY: about["spec"]})
    assert spec is not None
    spec = replace(spec, store_text=bool(about["store_text"]))  # a part of an earlier release has it beside the spec only
    return PartInfo(path=path, spec=spec, collection=str(about["collection"]),
                     source=dict(about["source"]), documents=int(about["documents"]), points=int(about["points"]))
