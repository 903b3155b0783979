"""One corpus embedded once while the PosIR subsets that search it run one after the other."""

from __future__ import annotations

from typing import Any


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

    def wrap(self, model: Any, corpus_key: tuple[Any, ...]) -> Any:
        meta = getattr(model, "mteb_model_meta", None)
        key = (id(model), getattr(meta, "name", None), getattr(meta, "revision", None), *corpus_key)
        return CorpusCachingEncoder(model, self, key)


class CorpusCachingEncoder:
    """An mteb encoder that embeds a corpus through `CorpusCache` and everything else directly."""

    def __init__(self, model: Any, cache: CorpusCache, key: tuple[Any, ...]) -> None:
        self._model, self._cache, self._key = model, cache, key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encode(self, inputs: Any, *, prompt_type: Any = None, **kwargs: Any) -> Any:
        from mteb.types import PromptType

        if prompt_type != PromptType.document:
            return self._model.encode(inputs, prompt_type=prompt_type, **kwargs)
        if self._cache.key == self._key:
            self._cache.hits += 1
            return self._cache.embeddings
        self._cache.key, self._cache.embeddings = None, None  # free the previous corpus first
        embeddings = self._model.encode(inputs, prompt_type=prompt_type, **kwargs)
        self._cache.key, self._cache.embeddings = self._key, embeddings
        return embeddings

