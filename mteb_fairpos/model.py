"""`FairSentenceTransformer`: a SentenceTransformer whose document embeddings are calibrated.

One model copy serves both sides: ``encode_document`` runs inside the calibration plan,
``encode_query`` does not (SPEC 1.4: documents only), and plain ``encode`` follows the
``calibrate_encode`` flag (``calibrate_queries`` turns the query side on too, an ablation).
Everything else is sentence-transformers' own ``encode``. The model pickles like any
SentenceTransformer, so it can travel to worker processes.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from .attention import CalibrationPlan, attach
from .config import CalibrationConfig, ConfigError
from .segmented import TruncationWarning, model_pooling

logger = logging.getLogger(__name__)

__all__ = ["FairSentenceTransformer", "TruncationWarning"]


class FairSentenceTransformer(SentenceTransformer):
    """A SentenceTransformer with inference-time attention calibration of its documents.

    Args:
        model: a model name or path (loaded by sentence-transformers) or a loaded
            ``SentenceTransformer``, whose modules are reused (no second copy of the weights).
        calibration: the settings; ``None`` (or strength 0) gives exactly the plain model.
        calibrate_encode: whether plain ``encode()`` calibrates (``encode_document`` always does).
        calibrate_queries: whether ``encode_query`` calibrates too (an ablation; the papers do not).
        **kwargs: passed to ``SentenceTransformer`` when ``model`` is a name or path.
    """

    def __init__(
        self,
        model: str | SentenceTransformer,
        calibration: CalibrationConfig | None = CalibrationConfig(),
        *,
        calibrate_encode: bool = False,
        calibrate_queries: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(model, SentenceTransformer):
            if kwargs:
                raise TypeError(f"loading options {sorted(kwargs)} cannot apply to an already loaded model.")
            super().__init__(modules=list(model), device=str(model.device), prompts=model.prompts,
                             default_prompt_name=model.default_prompt_name)
        else:
            super().__init__(model, **kwargs)
        self.calibration = calibration
        self.calibrate_encode = calibrate_encode
        self.calibrate_queries = calibrate_queries
        self.plan: CalibrationPlan | None = None
        if calibration is not None:
            pooling = calibration.pooling or model_pooling(self)
            if self.transformers_model is None:
                raise ConfigError("calibration needs a transformers model as the first module.")
            self.plan = attach(self.transformers_model, calibration, pooling)
        self._truncated = 0

    # ------------------------------------------------------------------ forward
    def forward(self, input: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        task = kwargs.get("task")
        calibrate = self.plan is not None and (
            task == "document" or (task is None and self.calibrate_encode) or (task == "query" and self.calibrate_queries)
        )
        if not calibrate:
            return super().forward(input, **kwargs)
        with self.plan.applied(input["attention_mask"]):
            return super().forward(input, **kwargs)

    @contextlib.contextmanager
    def calibration_disabled(self) -> Iterator[None]:
        """Inside the block ``encode_document`` runs uncalibrated, with the same prompts and routing."""
        plan, self.plan = self.plan, None
        try:
            yield
        finally:
            self.plan = plan

    # ------------------------------------------------------------------ input checks
    def encode(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """sentence-transformers' ``encode`` with input checks and a truncation report."""
        _check_texts(inputs)
        if isinstance(inputs, (list, tuple)) and not inputs:
            empty = torch.empty(0, self.get_embedding_dimension())
            return empty if kwargs.get("convert_to_tensor") else empty.numpy()
        self._truncated = 0
        try:
            return super().encode(inputs, *args, **kwargs)
        finally:
            if self._truncated:
                warnings.warn(
                    f"{self._truncated} input(s) exceeded the model's maximum of {self.max_seq_length} tokens "
                    "and were truncated; their embeddings cover only the first tokens.",
                    TruncationWarning,
                    stacklevel=3,
                )

    def preprocess(self, inputs: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        features = super().preprocess(inputs, *args, **kwargs)
        mask = features.get("attention_mask")
        limit = self.max_seq_length
        if mask is not None and limit and mask.shape[1] >= limit:
            full = (mask.sum(dim=1) >= limit).nonzero().flatten().tolist()
            if full:
                texts = [inputs[i] for i in full]
                lengths = self.tokenizer(texts, truncation=False, verbose=False)["input_ids"]
                prompt = kwargs.get("prompt") or ""
                extra = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else 0
                self._truncated += sum(len(ids) + extra > limit for ids in lengths)
        return features


def _check_texts(inputs: Any) -> None:
    if isinstance(inputs, str):
        return
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"expected a string or a list of strings, got {type(inputs).__name__}.")
    for i, item in enumerate(inputs):
        if not isinstance(item, str):
            raise TypeError(f"expected a list of strings, but item {i} is {type(item).__name__}: {item!r:.60}.")
