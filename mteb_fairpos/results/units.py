"""The per-unit sidecar: each unit's score beside a result file, for intervals and paired tests that
need the units themselves (docs/results.md#per-unit-scores, docs/method.md#s5).

``<Task>.units.parquet`` sits beside mteb's ``<Task>.json`` and holds one row per (unit, group):

* ``split``, ``subset``: the score entry the row belongs to;
* ``unit``: the unit's id (a query id; a query in two position groups has two rows);
* ``group``: its position group or label (null: in none);
* ``score``: float32, the unit's score (a query's nDCG@10);
* any further columns a task adds (PosIR's ``bucket``; clusters such as a probe's segment set and topic).

The Parquet schema's metadata (``mteb_fairpos.units``) records the format, the kind of task
(``retrieval``...), the task, the model and its revision, and per entry the digest of its rows. Each
score entry records the same digest under `DIGEST` (16 hex characters; mteb's result JSON holds no
per-unit list), so a reader can tell that the rows are those of the run that wrote the entry.

How the rows get there. mteb does not tell a task where its result goes, so a task hands its rows over
in memory (`hand_over`, keyed by task, split and subset, with their digest) and puts the digest in its
score entry; `install` wraps mteb's ``ResultCache.save_to_cache`` (the one path of both ``mteb run`` and
``mteb.evaluate(..., cache=...)``) so that, after mteb has written the result, the rows of every entry
it holds are written beside it: from what was handed over when the digests match, else kept from the
sidecar already there (subsets a resumed run did not redo; `carry_over` hands over the rows of a result
merged from elsewhere). A run without the wrapper (no cache, or the
plugin not registered) writes the result as before, without a sidecar; a failure to write the sidecar
is a warning, never a failed save.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

SUFFIX = ".units.parquet"
DIGEST = "units_digest"
"""Key of a score entry: the digest of its rows in the sidecar."""
FORMAT = 1
_METADATA = b"mteb_fairpos.units"
_REQUIRED = ("unit", "group", "score")

_pending: dict[tuple[str, str, str], tuple[str, str, pa.Table]] = {}
"""(task, split, subset) -> (digest, kind, rows) handed over and not yet written; a subset evaluated
again replaces its entry, so this holds at most one table per subset."""


class SidecarError(ValueError):
    """A sidecar file that cannot be read as one."""


def sidecar_path(result: Path) -> Path:
    """``<folder>/<Task>.units.parquet`` beside ``<folder>/<Task>.json``."""
    return result.with_name(result.stem + SUFFIX)


def rows(units: list[str], groups: list[str | None], scores: Any, **extra: list[Any]) -> pa.Table:
    """The rows of one score entry, scores as float32."""
    columns = {"unit": pa.array(units, pa.string()), "group": pa.array(groups, pa.string()),
               "score": pa.array(np.asarray(scores, dtype=np.float32))}
    columns.update({name: pa.array(values) for name, values in extra.items()})
    return pa.table(columns)


def digest(table: pa.Table) -> str:
    """16 hex characters of SHA-256 over the rows' unit, group and score, in order."""
    hasher = hashlib.sha256()
    for name in _REQUIRED:
        column = table.column(name).combine_chunks()
        hasher.update(name.encode())
        values = column.to_numpy(zero_copy_only=False)
        hasher.update(values.astype("<f4").tobytes() if name == "score" else "\x1f".join(map(str, values)).encode())
    return hasher.hexdigest()[:16]


def hand_over(task: str, split: str, subset: str, table: pa.Table, kind: str = "retrieval") -> str:
    """Keep ``table`` (an entry's `rows`) until mteb saves the result; returns the digest to record under `DIGEST`."""
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise ValueError(f"per-unit rows of {task} {split}/{subset} lack the column(s) {missing}.")
    found = digest(table)
    _pending[(task, split, subset)] = (found, kind, table)
    return found


def carry_over(result: Path) -> None:
    """Hand over again the rows of the sidecar beside ``result``: for a result that is merged into another
    folder (the Ray sweep merges each unit's result), so that the merged result's save writes them too."""
    earlier = _earlier(sidecar_path(result))
    for (split, subset), table in (earlier.tables.items() if earlier else ()):
        _pending[(earlier.task, split, subset)] = (earlier.digests.get(_entry(split, subset), ""), earlier.kind, table)


# ------------------------------------------------------------------------------------------- writing
def install() -> None:
    """Wrap ``ResultCache.save_to_cache`` so that every save also writes the sidecar (idempotent)."""
    from mteb.cache import ResultCache

    original = ResultCache.save_to_cache
    if getattr(original, "_writes_units", False):
        return

    @functools.wraps(original)
    def save_to_cache(self, task_result, model_name, model_revision=None, **kwargs):
        original(self, task_result, model_name, model_revision, **kwargs)
        try:
            name, revision = _model(model_name, model_revision)
            path = self.get_task_result_path(task_name=task_result.task_name, model_name=model_name, model_revision=model_revision)
            write_beside(path, task_result.task_name, task_result.scores, name, revision)
        except Exception as err:  # noqa: BLE001 - the result is saved; only its sidecar is lost
            warnings.warn(f"mteb-fairpos: the per-unit scores of {task_result.task_name} could not be saved: "
                          f"{type(err).__name__}: {err}", RuntimeWarning, stacklevel=2)

    save_to_cache._writes_units = True  # type: ignore[attr-defined]
    ResultCache.save_to_cache = save_to_cache


def _model(model_name: Any, model_revision: str | None) -> tuple[str, str]:
    if isinstance(model_name, str):
        return model_name, str(model_revision or "")
    return str(model_name.name), str(model_name.revision or "")


def write_beside(result: Path, task: str, scores: dict[str, list[dict[str, Any]]], model: str, revision: str) -> Path | None:
    """Write the sidecar of the result at ``result`` (its ``scores``: split -> entries); ``None`` when no entry
    records a digest (a stale sidecar is then removed)."""
    path = sidecar_path(result)
    wanted = {(split, str(entry.get("hf_subset", "default"))): entry[DIGEST]
              for split, entries in scores.items() for entry in entries if isinstance(entry.get(DIGEST), str)}
    if not wanted:
        path.unlink(missing_ok=True)
        return None
    earlier = _earlier(path)
    parts, digests, kinds = [], {}, set()
    for (split, subset), expected in wanted.items():
        handed = _pending.get((task, split, subset))
        if handed is not None and handed[0] == expected:
            _, kind, table = _pending.pop((task, split, subset))
        elif earlier is not None and earlier.digests.get(_entry(split, subset)) == expected:
            kind, table = earlier.kind, earlier.tables[(split, subset)]
        else:
            logger.warning("%s %s/%s: its per-unit scores are not at hand; the sidecar leaves it out.", task, split, subset)
            continue
        kinds.add(kind)
        digests[_entry(split, subset)] = expected
        labels = {"split": pa.array([split] * table.num_rows, pa.string()), "subset": pa.array([subset] * table.num_rows, pa.string())}
        parts.append(pa.table({**labels, **{name: table.column(name) for name in table.column_names}}))
    if not parts:
        path.unlink(missing_ok=True)
        return None
    table = pa.concat_tables(parts, promote_options="default")
    meta = {"format": FORMAT, "kind": sorted(kinds)[0], "task": task, "model": model, "revision": revision, "digests": digests}
    table = table.replace_schema_metadata({_METADATA: json.dumps(meta).encode()})
    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial, compression="zstd")
    os.replace(partial, path)
    return path


def _earlier(path: Path) -> Sidecar | None:
    try:
        return read(path) if path.is_file() else None
    except SidecarError as err:
        logger.warning("%s", err)
        return None


def _entry(split: str, subset: str) -> str:
    return f"{split}/{subset}"


# ------------------------------------------------------------------------------------------- reading
@dataclass
class Sidecar:
    """One sidecar file: its rows per (split, subset) and what it records about itself."""

    path: Path
    kind: str
    task: str
    model: str
    revision: str
    digests: dict[str, str]
    tables: dict[tuple[str, str], pa.Table] = field(default_factory=dict)

    def problems(self, task: str, entries: dict[tuple[str, str], Any], model: str | None = None,
                 revision: str | None = None) -> list[str]:
        """Why these rows are not those of the result (``entries``: (split, subset) -> the digest its entry
        records, ``None`` where it records none): another task or model, an entry without rows, rows without
        an entry or without a digest to check them by, or rows changed since."""
        found = []
        if self.task != task:
            found.append(f"records task {self.task!r}, not {task!r}")
        if model is not None and (self.model, self.revision) != (model, revision or self.revision):
            found.append(f"records model {self.model} [{self.revision}], not {model} [{revision}]")
        for (split, subset), expected in sorted(entries.items()):
            table = self.tables.get((split, subset))
            if not isinstance(expected, str):
                if expected is not None:
                    found.append(f"cannot be checked against {split}/{subset}: its entry's {DIGEST} is not text ({type(expected).__name__})")
                elif table is not None:
                    found.append(f"has rows for {split}/{subset}, whose entry records no {DIGEST} to check them by")
                continue
            if table is None:
                found.append(f"has no rows for {split}/{subset}")
            elif self.digests.get(_entry(split, subset)) != expected or digest(table) != expected:
                found.append(f"rows of {split}/{subset} do not match the result's digest (written by another run?)")
        extra = sorted(set(self.tables) - set(entries))
        if extra:
            found.append(f"has rows for {len(extra)} entr{'y' if len(extra) == 1 else 'ies'} the result lacks ({_entry(*extra[0])} ...)")
        return found


def read(path: Path) -> Sidecar:
    """Read a sidecar; `SidecarError` naming the file when it is not one."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise SidecarError(f"{path}: not a readable Parquet file ({err}).") from None
    raw = (table.schema.metadata or {}).get(_METADATA)
    try:
        meta = json.loads(raw) if raw else None
    except json.JSONDecodeError:
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SidecarError(f"{path}: no {_METADATA.decode()} metadata of format {FORMAT}; not a sidecar of this package.")
    fields = {"kind": str, "task": str, "model": str, "revision": str, "digests": dict}
    wrong = [name for name, kind in fields.items() if name in meta and not isinstance(meta[name], kind)]
    if not wrong and not all(isinstance(v, str) for v in meta.get("digests", {}).values()):
        wrong = ["digests"]
    if wrong:
        raise SidecarError(f"{path}: its {_METADATA.decode()} metadata has {', '.join(wrong)} of the wrong type "
                           "(text; digests: entry -> text).")
    missing = [c for c in ("split", "subset", *_REQUIRED) if c not in table.column_names]
    if missing:
        raise SidecarError(f"{path}: lacks the column(s) {missing}.")
    tables = {}
    splits, subsets = table.column("split").to_numpy(zero_copy_only=False), table.column("subset").to_numpy(zero_copy_only=False)
    order = sorted(set(zip(splits.tolist(), subsets.tolist())))
    body = table.drop_columns(["split", "subset"]).replace_schema_metadata(None)
    for split, subset in order:
        chosen = np.flatnonzero((splits == split) & (subsets == subset))
        part = body.take(pa.array(chosen))
        tables[(split, subset)] = part.drop_columns([c for c in part.column_names if part.column(c).null_count == part.num_rows and c not in _REQUIRED])
    return Sidecar(path, str(meta.get("kind", "")), str(meta.get("task", "")), str(meta.get("model", "")),
                   str(meta.get("revision", "")), dict(meta.get("digests") or {}), tables)
