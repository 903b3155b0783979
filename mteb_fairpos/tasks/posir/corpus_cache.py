"""One corpus embedded once while the PosIR subsets that search it run one after the other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mteb.models.abs_encoder import AbsEncoder
from mteb.types import PromptType

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models.models_protocols import EncoderProtocol
    from mteb.types import Array, BatchedInput


class CorpusCache:
    """The embeddings of the last corpus a task embedded, reused while the same corpus comes back.

    Cross-lingual subsets of one domain share the domain's English corpus and run one after the
    other (the metadata lists them domain by domain), so holding one corpus suffices. The key
    names the model object and its mteb name and revision (the calibration config is part of the
    name), the dataset source and revision, and the corpus file.
    """

    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None
        self.embeddings: Any = None
        self.hits = 0

    def wrap(self, model: EncoderProtocol, corpus_key: tuple[Any, ...]) -> CorpusCachingEncoder:
        meta = model.mteb_model_meta
        key = (id(model), getattr(meta, "name", None), getattr(meta, "revision", None), *corpus_key)
        return CorpusCachingEncoder(model, self, key)


class CorpusCachingEncoder(AbsEncoder):
    """An mteb encoder that embeds a corpus through `CorpusCache` and queries by the model it wraps.

    It is what mteb's retrieval sees for one subset: ``encode``, ``similarity``,
    ``similarity_pairwise`` and ``mteb_model_meta`` are the wrapped model's (mteb scores and names
    results by them); nothing else is forwarded.
    """

    def __init__(self, model: EncoderProtocol, cache: CorpusCache, key: tuple[Any, ...]) -> None:
        self.model = model
        self.mteb_model_meta = model.mteb_model_meta
        self.cache = cache
        self.key = key

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata, hf_split: str,
               hf_subset: str, prompt_type: PromptType | None = None, **kwargs: Any) -> Array:
        def embed() -> Array:
            return self.model.encode(inputs, task_metadata=task_metadata, hf_split=hf_split, hf_subset=hf_subset,
                                     prompt_type=prompt_type, **kwargs)

        if prompt_type != PromptType.document:
            return embed()
        if self.cache.key == self.key:
            self.cache.hits += 1
            return self.cache.embeddings
        self.cache.key, self.cache.embeddings = None, None  # free the previous corpus first
        embeddings = embed()
        self.cache.key, self.cache.embeddings = self.key, embeddings
        return embeddings

    def similarity(self, embeddings1: Array, embeddings2: Array) -> Array:
        return self.model.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Array, embeddings2: Array) -> Array:
        return self.model.similarity_pairwise(embeddings1, embeddings2)
