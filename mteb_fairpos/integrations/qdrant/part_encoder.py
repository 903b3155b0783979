"""Encoding one input range into one part file: the unit of work of every encode engine.

A `PartEncoder` holds one model (loaded once per worker) and the run's `EncodeOptions`; for
each input range it reads the records (`input.read_range`), embeds them with the code `index`
uses (sorted by length inside the range), builds the points with `points.document_points` and
writes them, then their completion record, with `parts.write_part`. The local engine runs one in this process, the Ray engine one per actor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sentence_transformers import SentenceTransformer

from . import parts as part_files
from . import store
from .encoding import UncalibratedCount, encode_documents
from .input import InputRange, read_range
from .points import collection_spec, document_points
from .storage import locate


@dataclass(frozen=True)
class EncodeOptions:
    """What every worker needs besides its parts (all picklable)."""

    collection: str
    output: str
    """The part folder: a local path or a URI."""
    spec: store.CollectionSpec
    store_text: bool = True
    batch_size: int = 32


class PartEncoder:
    """Encodes input ranges into part files; one per worker, holding the model.

    It counts the model's forward passes, so a re-run can show that finished parts cost nothing.
    """

    def __init__(self, loader: Callable[..., SentenceTransformer] | SentenceTransformer, options: EncodeOptions) -> None:
        self.model = loader if isinstance(loader, SentenceTransformer) else loader()
        self.options = options
        spec = options.spec
        mine = collection_spec(self.model, spec.model, uncalibrated=store.VECTOR_UNCALIBRATED in spec.vectors,
                               late_chunks=spec.late_chunks)
        if mine != spec:
            raise store.CollectionMismatchError(f"the worker's model gives {mine}, the run was planned for {spec}; "
                                                "every worker must load the same model and calibration.")
        self.forward_passes = 0
        self._hook = self.model.register_forward_hook(self._count)

    def _count(self, *_: Any) -> None:
        self.forward_passes += 1

    def close(self) -> None:
        """Take the counting hook off the model (a model passed in outlives the encoder)."""
        self._hook.remove()

    def encode(self, span: InputRange) -> dict[str, Any]:
        """Encode one range and write its part file; returns what it did (counts, forward passes, seconds)."""
        start = time.perf_counter()
        before = self.forward_passes
        options, spec = self.options, self.options.spec
        documents = read_range(span)
        with UncalibratedCount() as uncalibrated:
            encoded = encode_documents(self.model, documents, uncalibrated_vectors=spec.both_passes,
                                       late_chunks=spec.late_chunks, batch_size=options.batch_size)
        points = [point for enc in encoded
                  for point in document_points(enc, spec, options.collection, store_text=options.store_text)]
        info = part_files.write_part(locate(options.output).child(f"{span.name}{part_files.SUFFIX}"), points,
                                       spec=spec, collection=options.collection, store_text=options.store_text,
                                       source=span.source())
        return {"name": span.name, "documents": info.documents, "points": info.points,
                "forward_passes": self.forward_passes - before,
                "truncated": sum(1 for enc in encoded if enc.truncation is not None),
                "uncalibrated": uncalibrated.documents,
                "seconds": time.perf_counter() - start}
