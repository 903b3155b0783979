"""The distributed encode on Ray Data: input ranges -> a pool of model actors -> part files.

Each row of the dataset is one input range; ``map_batches`` hands ranges to a pool of
`PartEncoder` actors (the model loaded once per actor, one GPU each where the cluster has
GPUs), which read their range of the input (a local path or object storage), encode it sorted
by length and write one Parquet part and its completion record. Ray Data restarts a killed
actor and retries its range; a part counts only once it is complete and recorded, so a retried
range is never half-written or duplicated.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ...config import require_positive
from ..qdrant.input import InputRange
from ..qdrant.part_encoder import EncodeOptions, PartEncoder
from .runtime import actor_note_dropped, gpus_for_actors, require_ray

RESULT_KEYS = ("name", "documents", "points", "forward_passes", "truncated", "uncalibrated", "seconds")


class PartEncoderActor:
    """A Ray Data callable class: one per actor, wrapping one `PartEncoder` (and so one model)."""

    def __init__(self, loader: Callable[..., Any], options: EncodeOptions, threads: int | None) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.encoder = PartEncoder(loader, options)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        results = [self.encoder.encode(_range(text)) for text in batch["range"]]
        return {key: [r[key] for r in results] for key in RESULT_KEYS}


def encode_ranges(todo: list[InputRange], loader: Callable[..., Any], options: EncodeOptions, *, actors: int = 1,
                  gpus_per_actor: float | None = None, cpus_per_actor: float | None = None,
                  show_progress: bool = True) -> list[dict[str, Any]]:
    """Encode ``todo`` on the running Ray runtime; returns one result per range (see `PartEncoder.encode`)."""
    if not todo:
        return []
    require_positive(actors, "actors")
    ray = require_ray()
    from ray.data import ActorPoolStrategy, DataContext

    actors = min(actors, len(todo))  # an actor without a range would only load the model
    resources = ray.cluster_resources()
    gpus_per_actor = gpus_for_actors(gpus_per_actor)
    if cpus_per_actor is None:  # CPU actors share the cores (no more than one node has); GPU actors take one each
        largest_node = max((n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")), default=1)
        share = min(resources.get("CPU", 1) // actors, largest_node)
        cpus_per_actor = 1.0 if gpus_per_actor else max(1.0, float(int(share)))
    if not show_progress:  # Ray Data logs its plan and its finish at INFO, and that its bars are off as a warning
        logging.getLogger("ray.data").setLevel(logging.ERROR)
    context = DataContext.get_current()
    context.enable_progress_bars = show_progress
    context.print_on_execution_start = show_progress
    dataset = ray.data.from_items([{"range": json.dumps(asdict(span))} for span in todo],
                                  override_num_blocks=len(todo))
    encoded = dataset.map_batches(
        PartEncoderActor,
        fn_constructor_args=(loader, options, None if gpus_per_actor else int(cpus_per_actor)),
        batch_size=1,
        compute=ActorPoolStrategy(size=actors),
        num_gpus=gpus_per_actor or None,
        num_cpus=cpus_per_actor,
    )
    with contextlib.nullcontext() if show_progress else actor_note_dropped():  # quiet: Ray core's note on the pool
        return list(encoded.iter_rows())


def _range(text: str) -> InputRange:
    fields = json.loads(text)
    fields["skip"] = tuple(fields["skip"])
    return InputRange(**fields)
