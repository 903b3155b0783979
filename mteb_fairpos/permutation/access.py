"""How the probe reaches a model: embeddings, token embeddings, tokenizer, maximum length.

Two routes:

* **direct**, whenever a ``SentenceTransformer`` is reachable (the model itself, or the
  ``.model`` of an mteb wrapper such as ``SentenceTransformerEncoderWrapper``): documents go
  through `mteb_fairpos.segmented.encode_segmented` with the document prompt the wrapper would
  use, and for mean-pooled models the same single forward pass also gives the late-chunking
  vectors (tau). Standalone segments are the reference for what each segment says, so
  they are embedded with the *plain* model: a :class:`~mteb_fairpos.FairSentenceTransformer`'s
  calibration is switched off for them (documents stay calibrated);
* **protocol**, for any other mteb encoder: ``model.encode`` with ``prompt_type=document`` for
  segments and documents; tau is then N/A (no token vectors), and the tokenizer is loaded from
  the model metadata's name.

Every call sorts its inputs by length (longest first) and restores the order afterwards.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..config import ConfigError
from ..segmented import (
    SegmentedEncoding,
    TokenLayout,
    TruncationWarning,
    calibration_mode,
    document_prompt,
    encode_segmented,
    find_sentence_transformer,
    model_pooling,
)

logger = logging.getLogger(__name__)


def _normalize(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


class ModelAccess:
    """Embeddings of segments and documents from one model (see the module docstring).

    Args:
        model: a ``SentenceTransformer`` (plain or fair), an mteb wrapper around one, or any
            mteb encoder.
        task_metadata / hf_split / hf_subset: passed to ``model.encode`` on the protocol route.
        encode_kwargs: mteb encode kwargs (``batch_size``, ``show_progress_bar``).
    """

    def __init__(self, model: Any, *, task_metadata: Any = None, hf_split: str = "test", hf_subset: str = "default",
                 encode_kwargs: dict[str, Any] | None = None) -> None:
        self.model = model
        self.task_metadata = task_metadata
        self.hf_split = hf_split
        self.hf_subset = hf_subset
        self.encode_kwargs = dict(encode_kwargs or {})
        self.batch_size = int(self.encode_kwargs.get("batch_size", 32))
        self.show_progress = bool(self.encode_kwargs.get("show_progress_bar", False))
        self.st = find_sentence_transformer(model)
        self.encoded_texts = 0
        """How many texts this object sent through the model (segments + documents)."""
        if self.st is not None:
            self.tokenizer = self.st.tokenizer
            self.max_length = int(self.st.max_seq_length or self.tokenizer.model_max_length)
            self.pooling = _pooling_of(self.st)
            self.prompt = self._document_prompt()
        else:
            self.tokenizer, self.max_length = _tokenizer_from_meta(model)
            self.pooling = None
            self.prompt = ""
        self.tau_status = self._tau_status()

    # ------------------------------------------------------------------ setup
    def _document_prompt(self) -> str:
        """The prompt text the document side uses (``''`` when none)."""
        st = self.st
        prompt_for = getattr(self.model, "prompt_for", None)  # mteb_fairpos' own FairEncoder
        if callable(prompt_for) and self.task_metadata is not None:
            from mteb.types import PromptType

            prompt = prompt_for(self.task_metadata, PromptType.document)
            if prompt is not None:
                return prompt
        prompts = getattr(self.model, "model_prompts", None)
        if prompts and self.task_metadata is not None:
            from mteb.models.abs_encoder import get_prompt_name
            from mteb.types import PromptType

            name = get_prompt_name(prompts, self.task_metadata, PromptType.document)
            if name and prompts.get(name) is not None:
                return prompts[name]
        return document_prompt(st)  # what encode_document picks by itself

    def _tau_status(self) -> str | None:
        if self.st is None:
            return "n/a: the model exposes no token embeddings (not a sentence-transformers model)"
        if self.pooling != "mean":
            return f"n/a: late chunking is defined for mean pooling only; this model pools with {self.pooling}"
        if not getattr(self.tokenizer, "is_fast", False):
            return "n/a: the tokenizer gives no character offsets (not a fast tokenizer)"
        return None

    @property
    def route(self) -> str:
        return "direct" if self.st is not None else "protocol"

    @property
    def special_tokens(self) -> int:
        return int(self.tokenizer.num_special_tokens_to_add(pair=False))

    @property
    def prompt_tokens(self) -> int:
        if not self.prompt:
            return 0
        return len(self.tokenizer(self.prompt, add_special_tokens=False)["input_ids"])

    # ------------------------------------------------------------------ encoding
    def encode_segments(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized standalone embeddings of ``texts`` (plain model on the direct route)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if self.st is not None:
            with calibration_mode(self.st, calibrated=False):
                return self._sorted(texts, self._st_encode)
        return self._sorted(texts, self._protocol_encode)

    def encode_documents(self, texts: Sequence[str], layouts: Sequence[TokenLayout] | None = None,
                         late_chunks: bool = False) -> SegmentedEncoding:
        """Normalized document embeddings; on the direct route with ``late_chunks`` (and the documents'
        ``layouts``) also each segment's late-chunking vector, from the same forward pass."""
        if not texts:
            return SegmentedEncoding(np.zeros((0, 0), dtype=np.float32), [])
        if self.st is None:
            return SegmentedEncoding(self._sorted(texts, self._protocol_encode), list(layouts or []))
        self.encoded_texts += len(texts)
        late = late_chunks and self.tau_status is None and layouts is not None
        encoded = encode_segmented(self.st, texts, late_chunks=late, layouts=layouts if late else None,
                                   prompt=self.prompt, batch_size=self.batch_size, show_progress=self.show_progress)
        encoded.vectors = _normalize(encoded.vectors)
        return encoded

    def _st_encode(self, batch: list[str]) -> np.ndarray:
        self.encoded_texts += len(batch)
        with warnings.catch_warnings():  # the probe reports truncated segments itself
            warnings.simplefilter("ignore", TruncationWarning)
            return self.st.encode_document(batch, prompt=self.prompt, batch_size=self.batch_size,
                                           show_progress_bar=self.show_progress)

    def _protocol_encode(self, batch: list[str]) -> np.ndarray:
        from datasets import Dataset
        from mteb.types import PromptType
        from torch.utils.data import DataLoader

        if self.task_metadata is None:
            raise ValueError("encoding through the mteb protocol needs the task metadata; run the probe through its mteb task.")
        self.encoded_texts += len(batch)
        loader = DataLoader(Dataset.from_dict({"text": list(batch)}), batch_size=self.batch_size)
        embeddings = self.model.encode(loader, task_metadata=self.task_metadata, hf_split=self.hf_split,
                                       hf_subset=self.hf_subset, prompt_type=PromptType.document, **self.encode_kwargs)
        return np.asarray(embeddings.cpu() if hasattr(embeddings, "cpu") else embeddings, dtype=np.float32)

    def _sorted(self, texts: Sequence[str], encode: Callable[[list[str]], Any]) -> np.ndarray:
        order = np.argsort([-len(t) for t in texts], kind="stable")
        embedded = np.asarray(encode([texts[int(i)] for i in order]), dtype=np.float32)
        result = np.empty_like(embedded)
        result[order] = embedded
        return _normalize(result)


def _pooling_of(st: Any) -> str | None:
    try:
        return model_pooling(st)
    except ConfigError:
        return None


def _tokenizer_from_meta(model: Any) -> tuple[Any, int]:
    meta = getattr(model, "mteb_model_meta", None)
    name = getattr(meta, "name", None)
    if not name:
        raise ValueError(
            "the permutation probe needs the model's tokenizer: pass a sentence-transformers model (or an mteb "
            "wrapper with .model), or a model whose mteb_model_meta names a Hugging Face tokenizer."
        )
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name, revision=getattr(meta, "revision", None))
    max_length = getattr(meta, "max_tokens", None) or tokenizer.model_max_length
    if not max_length or max_length > 1_000_000:
        raise ValueError(f"cannot tell the maximum input length of {name}; set max_tokens in its ModelMeta.")
    return tokenizer, int(max_length)
