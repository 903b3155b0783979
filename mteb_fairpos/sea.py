"""Segment Embed Average (SEA, docs/method.md#s3-5): a position-agnostic baseline.

A document is split into chunks, each chunk is embedded on its own by the base model, and the
document vector is the mean of its chunk vectors (as the base model returns them; a model that
normalises its outputs gives the mean of unit vectors). Queries are embedded unchanged.

Chunking uses the maintained library ``chonkie`` (the retrieval paper's choice):

* ``"semantic"`` (default): ``chonkie.SemanticChunker`` splits where the meaning of consecutive
  sentences shifts, judged with the *base model's own* sentence-transformers embeddings, so no
  further model is downloaded; chunks are capped at the base model's maximum length.
* ``"sentence"``: ``chonkie.SentenceChunker`` packs whole sentences into chunks of at most the
  base model's maximum length, counted with its tokenizer.
* ``"regex"``: a deterministic fallback without chonkie: sentences split at ``. ! ?`` (and their
  CJK forms) or line breaks, packed greedily up to the same budget.

Without chonkie installed, or without a sentence-transformers model to judge semantic shifts,
the chunker falls back (``semantic`` -> ``sentence`` -> ``regex``) and says so once in a warning.

``sea_model_meta(base)`` builds the mteb ``ModelMeta`` named ``sea/<base name>``. ``SEA_MODELS``
holds one per entry of the plugin's base-model table (`mteb_fairpos.mteb_models.BASE_MODELS`),
named ``sea/<upstream name>`` (``sea/BAAI/bge-m3``) and built on the uncalibrated twin
``fair-off/<model>``: the same checkpoints, the offline all-MiniLM-L6-v2 weights at 512 tokens and
the same refusal of remote code as ``fair/*``, so SEA and the plain model compare on equal terms.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import numpy as np

from .config import require_positive, whole
from .mteb_models import BASE_MODELS, fair_model_meta
from .segmented import find_sentence_transformer

logger = logging.getLogger(__name__)

METHODS = ("semantic", "sentence", "regex")
DEFAULT_MAX_TOKENS = 512
SEA_BASE_MODELS: tuple[str, ...] = tuple(base.upstream for base in BASE_MODELS)
"""The upstream names the registered ``sea/*`` models carry, one per base-model table entry."""

_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")


class ChunkingFallbackWarning(UserWarning):
    """The requested chunking method was unavailable; a simpler one is used."""


# --------------------------------------------------------------------------- chunking
def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: breaks after ``. ! ?`` plus whitespace, after ``。！？``, at line breaks."""
    return [s for s in (part.strip() for part in _SENTENCE_BREAK.split(text)) if s]


def pack(pieces: Sequence[str], budget: int, length: Callable[[str], int]) -> list[str]:
    """Join consecutive ``pieces`` with spaces into chunks whose summed ``length`` stays within
    ``budget``; a single piece longer than the budget becomes a chunk of its own."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for piece in pieces:
        size = length(piece)
        if current and used + size > budget:
            chunks.append(" ".join(current))
            current, used = [], 0
        current.append(piece)
        used += size
    if current:
        chunks.append(" ".join(current))
    return chunks


class Chunker:
    """Splits a document into chunks (see the module docstring for the methods).

    Args:
        method: ``"semantic"``, ``"sentence"`` or ``"regex"``.
        max_tokens: the largest chunk, in tokens of ``tokenizer`` (characters / 4 without one).
        tokenizer: a Hugging Face tokenizer to count tokens with.
        embedding_model: a ``SentenceTransformer`` whose embeddings decide semantic boundaries.
        threshold: semantic-similarity threshold of the semantic chunker (chonkie's default 0.8).
    """

    def __init__(
        self,
        method: str = "semantic",
        *,
        max_tokens: int | None = None,
        tokenizer: Any = None,
        embedding_model: Any = None,
        threshold: float = 0.8,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown chunking method {method!r}; choose one of {METHODS}.")
        if max_tokens is not None:
            require_positive(max_tokens, "max_tokens")
        self.max_tokens = max_tokens or DEFAULT_MAX_TOKENS
        self.tokenizer = tokenizer
        self.requested = method
        self.method, self._impl = self._build(method, embedding_model, threshold)

    def _build(self, method: str, embedding_model: Any, threshold: float) -> tuple[str, Any]:
        if method in ("semantic", "sentence"):
            try:
                import chonkie
            except ImportError:
                self._warn(f"chonkie is not installed; chunking with the regex sentence splitter instead of {method!r}.")
                return "regex", None
            if method == "semantic":
                if embedding_model is None:
                    self._warn("semantic chunking needs a sentence-transformers model; using sentence chunking.")
                else:
                    embeddings = chonkie.SentenceTransformerEmbeddings(embedding_model)
                    return "semantic", chonkie.SemanticChunker(
                        embedding_model=embeddings, chunk_size=self.max_tokens, threshold=threshold
                    )
            return "sentence", chonkie.SentenceChunker(
                tokenizer=self.tokenizer if self.tokenizer is not None else "character",
                chunk_size=self.max_tokens if self.tokenizer is not None else 4 * self.max_tokens,
            )
        return "regex", None

    @staticmethod
    def _warn(message: str) -> None:
        warnings.warn(message, ChunkingFallbackWarning, stacklevel=4)
        logger.warning(message)

    def _length(self, text: str) -> int:
        if self.tokenizer is None:
            return max(1, len(text) // 4)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def __call__(self, text: str) -> list[str]:
        """The chunks of ``text``, never empty: a blank document is one (blank) chunk."""
        if not isinstance(text, str):
            raise TypeError(f"expected a document string, got {type(text).__name__}.")
        if not text.strip():
            return [text]
        if self._impl is None:
            chunks = pack(split_sentences(text), self.max_tokens, self._length)
        else:
            chunks = [c.text.strip() for c in self._impl.chunk(text)]
        chunks = [c for c in chunks if c]
        return chunks or [text]


# --------------------------------------------------------------------------- the encoder
def _as_numpy(array: Any) -> np.ndarray:
    if hasattr(array, "detach"):
        array = array.detach().cpu().float().numpy()
    return np.asarray(array, dtype=np.float32)


class SegmentEmbedAverage:
    """An mteb encoder: documents are the mean of their chunk embeddings, queries unchanged.

    Args:
        base: an mteb encoder (e.g. ``mteb.get_model(...)`` or mteb's
            ``SentenceTransformerEncoderWrapper``) that embeds the chunks and the queries.
        method, max_tokens, threshold: chunking settings (`Chunker`); ``max_tokens`` defaults to
            the base model's maximum sequence length minus its two special tokens.
        chunker: a ready callable ``str -> list[str]`` instead of the settings above.
    """

    def __init__(
        self,
        base: Any,
        *,
        method: str = "semantic",
        max_tokens: int | None = None,
        threshold: float = 0.8,
        chunker: Callable[[str], list[str]] | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        if isinstance(base, SentenceTransformer):  # as mteb wraps one: chunks and queries go through mteb's encode
            from mteb.models import SentenceTransformerEncoderWrapper

            base = SentenceTransformerEncoderWrapper(base)
        if isinstance(base, (str, bytes)) or not callable(getattr(base, "encode", None)):  # a str has its encode too
            raise TypeError(f"base must be an mteb encoder (mteb.get_model(...)) or a SentenceTransformer; got "
                            f"{type(base).__name__}.")
        self.base = base
        if chunker is None:
            st = find_sentence_transformer(base)
            room = max(int(st.max_seq_length) - _special_tokens(st), 1) if st is not None and st.max_seq_length else None
            if max_tokens is None:
                max_tokens = room
            elif room is not None and whole(max_tokens) and max_tokens > room:
                raise ValueError(f"max_tokens={max_tokens}: the base model embeds at most {room} tokens beside its "
                                 "special tokens, so longer chunks would be cut; give at most that.")
            chunker = Chunker(
                method,
                max_tokens=max_tokens,
                tokenizer=getattr(st, "tokenizer", None),
                embedding_model=st,
                threshold=threshold,
            )
        self.chunker = chunker
        meta = getattr(base, "mteb_model_meta", None)
        if meta is not None:  # replaced by the sea/ ModelMeta when loaded through mteb
            if not str(meta.name).startswith("sea/"):
                meta = meta.model_copy(update={"name": f"sea/{meta.name or 'unknown'}", "adapted_from": meta.name})
            self.mteb_model_meta = meta

    def chunk_documents(self, texts: Iterable[str]) -> tuple[list[str], np.ndarray]:
        """All chunks of ``texts`` in order, and for each chunk the index of its document."""
        chunks: list[str] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            pieces = self.chunker(text)
            if not isinstance(pieces, (list, tuple)) or not pieces or not all(isinstance(p, str) for p in pieces):
                raise ValueError(f"the chunker gave document {i} {_shown(pieces)}; a chunker returns a non-empty list "
                                 "of strings (a blank document is one blank chunk).")
            chunks.extend(pieces)
            owners.extend([i] * len(pieces))
        return chunks, np.asarray(owners, dtype=np.int64)

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        from mteb.types import PromptType

        if prompt_type != PromptType.document:
            return self.base.encode(inputs, task_metadata=task_metadata, hf_split=hf_split,
                                    hf_subset=hf_subset, prompt_type=prompt_type, **kwargs)
        texts = [text for batch in inputs for text in batch["text"]]
        if not texts:
            return self.base.encode(inputs, task_metadata=task_metadata, hf_split=hf_split,
                                    hf_subset=hf_subset, prompt_type=prompt_type, **kwargs)
        chunks, owners = self.chunk_documents(texts)
        from datasets import Dataset
        from torch.utils.data import DataLoader

        loader = DataLoader(Dataset.from_dict({"text": chunks}), batch_size=getattr(inputs, "batch_size", None) or 32)
        vectors = _as_numpy(self.base.encode(loader, task_metadata=task_metadata, hf_split=hf_split,
                                             hf_subset=hf_subset, prompt_type=prompt_type, **kwargs))
        return average_by_owner(vectors, owners, len(texts))

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        return self.base.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        return self.base.similarity_pairwise(embeddings1, embeddings2)


def _special_tokens(st: Any) -> int:
    """The tokens the model's tokenizer adds to every input (two where it cannot say)."""
    count = getattr(getattr(st, "tokenizer", None), "num_special_tokens_to_add", None)
    return count(pair=False) if callable(count) else 2


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def average_by_owner(vectors: np.ndarray, owners: np.ndarray, n: int) -> np.ndarray:
    """Row ``i`` of the result is the mean of the rows of ``vectors`` whose owner is ``i``."""
    if len(vectors) != len(owners):
        raise ValueError(f"{len(vectors)} chunk vectors for {len(owners)} chunks.")
    sums = np.zeros((n, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, owners, vectors)
    counts = np.bincount(owners, minlength=n)
    if (counts == 0).any():
        raise ValueError(f"{int((counts == 0).sum())} document(s) produced no chunk.")
    return (sums / counts[:, None]).astype(np.float32)


# --------------------------------------------------------------------------- mteb models
def load_sea(model_name: str, revision: str | None = None, *, base_meta: Any, method: str = "semantic",
             max_tokens: int | None = None, threshold: float = 0.8, **kwargs: Any) -> SegmentEmbedAverage:
    """mteb loader of ``sea/<base>``: load the base model through its own ModelMeta, then wrap it."""
    base = base_meta.load_model(**kwargs)
    return SegmentEmbedAverage(base, method=method, max_tokens=max_tokens, threshold=threshold)


def sea_model_meta(base: Any, *, method: str = "semantic", max_tokens: int | None = None,
                   threshold: float = 0.8, name: str | None = None) -> Any:
    """The mteb ``ModelMeta`` of ``sea/<name>`` for a base ModelMeta or registered model name.

    ``name`` (default the base's name) is what follows ``sea/`` and what it is adapted from.
    """
    import mteb

    if method not in METHODS:
        raise ValueError(f"unknown chunking method {method!r}; choose one of {METHODS}.")
    base_meta = mteb.get_model_meta(base) if isinstance(base, str) else base
    if base_meta.name is None:
        raise ValueError("the base ModelMeta has no name.")
    name = name or base_meta.name
    return base_meta.model_copy(
        update={
            "name": f"sea/{name}",
            "loader": partial(load_sea, base_meta=base_meta),
            "loader_kwargs": {"method": method, "max_tokens": max_tokens, "threshold": threshold},
            "adapted_from": name,
            "superseded_by": None,
        }
    )


def sea_models(bases: Iterable[Any] | None = None, **settings: Any) -> list[Any]:
    """``sea/<name>`` ModelMetas for each base (ModelMeta or registered name); by default one per
    entry of the base-model table, on its uncalibrated twin."""
    if bases is None:
        return [sea_model_meta(fair_model_meta(base.key, None), name=base.upstream, **settings) for base in BASE_MODELS]
    return [sea_model_meta(base, **settings) for base in bases]


SEA_MODELS: list[Any] = sea_models()
"""``sea/<model>`` for the base-model table (`SEA_BASE_MODELS` are their names), ready to register."""
