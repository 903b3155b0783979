"""`FairSentenceTransformer`: a SentenceTransformer whose document embeddings are calibrated.

Saving keeps the calibration the sentence-transformers way: ``save()`` adds a `Calibration` step to
the pipeline (its settings in its own config file, listed in ``modules.json``) and a section to the
model card, and ``FairSentenceTransformer(path)`` reads it back exactly. A plain
``SentenceTransformer(path)`` refuses such a folder instead of silently dropping the calibration:
sentence-transformers itself will not import a step it does not ship unless ``trust_remote_code=True``,
and with it the step refuses, naming ``FairSentenceTransformer``. A step whose settings are missing or
damaged is refused naming its file: the model would otherwise come back plain.

One model copy serves both sides: ``encode_document`` runs inside the calibration plan,
``encode_query`` does not (docs/method.md#s1-4: documents only), and plain ``encode`` follows the
``calibrate_encode`` flag (``calibrate_queries`` turns the query side on too, an ablation).
Everything else is sentence-transformers' own ``encode``. The model pickles like any
SentenceTransformer, so it can travel to worker processes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Router, Transformer
from sentence_transformers.base.modules.module import Module
from sentence_transformers.sentence_transformer.modules import Pooling

from .attention import HOST_LAYOUT, CalibrationPlan, UnsupportedModelError, attach
from .config import CalibrationConfig, ConfigError, whole
from .devices import device_problem
from .segmented import TruncationWarning, model_pooling
from .truncation import cut_count, provable

logger = logging.getLogger(__name__)

__all__ = ["Calibration", "CalibratedModelError", "FairSentenceTransformer", "TruncationWarning", "UncalibratedWarning",
           "naming_the_model", "position_limit", "set_max_length"]

TRUNCATION = "fairpos_truncation"
"""The feature under which ``FairSentenceTransformer.preprocess`` hands its ``forward`` the count of the batch's
truncated inputs, as a call made once the batch's pass is launched (on a GPU the host counts while the device
computes); never a model input."""


def model_inputs(features: dict[str, Any]) -> dict[str, Any]:
    """``features`` without what ``FairSentenceTransformer.preprocess`` adds for its own ``forward``: what a plain
    model, or a model run another way, takes."""
    return {key: value for key, value in features.items() if key not in (HOST_LAYOUT, TRUNCATION)}


_UNSET: Any = object()
_LOADING: ContextVar[bool] = ContextVar("fairpos_loading", default=False)


@dataclass
class Tally:
    """What the passes of one ``encode`` call count for its warnings: inputs cut by truncation, documents left
    uncalibrated (content shorter than one basket) and documents calibrated."""

    truncated: int = 0
    uncalibrated: int = 0
    calibrated: int = 0


_TALLY: ContextVar[Tally | None] = ContextVar("fairpos_tally", default=None)
_DISABLED: ContextVar[frozenset[int]] = ContextVar("fairpos_disabled", default=frozenset())
"""The models (by ``id``) whose ``calibration_disabled`` block is open in this context: a thread or task's own."""


class CalibratedModelError(RuntimeError):
    """A saved calibrated model was loaded by a plain SentenceTransformer, which would drop the calibration."""


@contextlib.contextmanager
def naming_the_model(name: str) -> Iterator[None]:
    """Load the model ``name`` inside this block: a failure to load it names it, since the Hub's message
    (offline, not found) and transformers' (a folder without a model) do not say which model it was. The
    calibration's own refusals already say what is wrong and pass as they are. A path that does not exist is
    said to be one, where the Hub would refuse it as a malformed repository id."""
    if (os.path.isabs(name) or name.startswith((".", "~"))) and not os.path.exists(os.path.expanduser(name)):
        raise FileNotFoundError(f"cannot load the model {name!r}: no such folder.")
    try:
        yield
    except (ConfigError, UnsupportedModelError):
        raise
    except (OSError, ValueError) as err:
        if getattr(err, "names_the_model", False):  # named by a block inside this one
            raise
        named = (OSError if isinstance(err, OSError) else ValueError)(f"cannot load the model {name!r}: {err}")
        named.names_the_model = True
        raise named from err


def load_checkpoint(path: str, **kwargs: Any) -> SentenceTransformer:
    """A checkpoint by name or path, as sentence-transformers loads it and named where it fails (`naming_the_model`);
    a folder `FairSentenceTransformer` saved comes back plain, its calibration set aside, where sentence-transformers
    would ask for ``trust_remote_code``. For the callers that apply a calibration of their own, or none."""
    path = os.path.expanduser(path)
    with naming_the_model(path):
        if _saved_by_us(path):
            return FairSentenceTransformer(path, None, **kwargs)
        return SentenceTransformer(path, **kwargs)


def _saved_by_us(path: str) -> bool:
    """Whether ``path`` is a folder whose pipeline lists this module's `Calibration` step."""
    modules = os.path.join(path, "modules.json")
    try:
        with open(modules, encoding="utf-8") as handle:
            return f"{__name__}.Calibration" in handle.read()
    except OSError:  # no such folder or file: a hub id, or not a model (sentence-transformers says which)
        return False


class UncalibratedWarning(UserWarning):
    """Some documents were left uncalibrated: their content is shorter than one basket.

    ``documents`` holds how many, so a long run can add them up and report the total once."""

    def __init__(self, message: str, documents: int = 0) -> None:
        super().__init__(message)
        self.documents = documents


class Calibration(Module):
    """The calibration of a saved `FairSentenceTransformer`: an identity step at the end of its pipeline
    whose config file holds the settings, so the folder itself says how it must be loaded."""

    config_keys: list[str] = ["calibration", "calibrate_encode", "calibrate_queries"]

    def __init__(self, calibration: str = "none", calibrate_encode: bool = False, calibrate_queries: bool = False) -> None:
        super().__init__()
        self.calibration = calibration
        self.calibrate_encode = calibrate_encode
        self.calibrate_queries = calibrate_queries

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.save_config(output_path)

    @classmethod
    def load(cls, model_name_or_path: str = "", subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs: Any) -> Calibration:
        where = os.path.join(model_name_or_path, subfolder, cls.config_file_name)
        try:
            config = cls.load_config(model_name_or_path=model_name_or_path, subfolder=subfolder, token=token,
                                     cache_folder=cache_folder, revision=revision, local_files_only=local_files_only)
        except ValueError as err:  # JSONDecodeError among them
            raise ConfigError(f"{where}: the calibration settings do not read ({err}).") from None
        module = cls(**_checked_settings(config, where))
        if not _LOADING.get():
            raise CalibratedModelError(
                f"{model_name_or_path} was saved with mteb-fairpos attention calibration {module.calibration!r}; a plain "
                "SentenceTransformer would drop it silently. Load it with "
                f"`from mteb_fairpos import FairSentenceTransformer; FairSentenceTransformer({model_name_or_path!r})`."
            )
        return module


class FairSentenceTransformer(SentenceTransformer):
    """A SentenceTransformer with inference-time attention calibration of its documents.

    Args:
        model: a model name or path (loaded by sentence-transformers) or a loaded
            ``SentenceTransformer``, whose modules and settings (prompts, similarity function, truncation
            dimension) are reused (no second copy of the weights); a loaded ``FairSentenceTransformer`` also
            passes on its calibration and flags where none are given.
        calibration: the settings, or their text form (``"b128_lhalf_a0.5"``); ``None`` (``"none"``, or strength 0)
            gives exactly the plain model.
        calibrate_encode: whether plain ``encode()`` calibrates (``encode_document`` always does).
        calibrate_queries: whether ``encode_query`` calibrates too (an ablation; the papers do not).
        **kwargs: passed to ``SentenceTransformer`` when ``model`` is a name or path.
    """

    # sentence-transformers resolves these modules.json types without importing by name (its
    # trust_remote_code gate is for code a model folder brings, not for this package's own step)
    _module_classes = {f"{__name__}.Calibration": Calibration}

    def __init__(
        self,
        model: str | SentenceTransformer,
        calibration: CalibrationConfig | str | None = _UNSET,
        *,
        calibrate_encode: bool | None = None,
        calibrate_queries: bool | None = None,
        **kwargs: Any,
    ) -> None:
        for flag, value in (("calibrate_encode", calibrate_encode), ("calibrate_queries", calibrate_queries)):
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{flag} must be True, False or None (the saved or default setting), got {value!r}.")
        _check_options(kwargs)
        if isinstance(model, SentenceTransformer):
            if kwargs:
                raise TypeError(f"loading options {sorted(kwargs)} cannot apply to an already loaded model.")
            super().__init__(modules=[m for m in model if not isinstance(m, Calibration)], device=str(model.device),
                             prompts=model.prompts, default_prompt_name=model.default_prompt_name,
                             similarity_fn_name=model.similarity_fn_name, truncate_dim=model.truncate_dim)
            if isinstance(model, FairSentenceTransformer):  # rewrapped: its own settings, unless given here
                calibration = model.calibration if calibration is _UNSET else calibration
                calibrate_encode = model.calibrate_encode if calibrate_encode is None else calibrate_encode
                calibrate_queries = model.calibrate_queries if calibrate_queries is None else calibrate_queries
        elif isinstance(model, (str, os.PathLike)):
            if not os.fspath(model).strip():  # sentence-transformers would build an empty model and fail inside it
                raise ValueError("the model name or path is empty.")
            token = _LOADING.set(True)
            try:
                with naming_the_model(os.fspath(model)):
                    super().__init__(model, **kwargs)
            finally:
                _LOADING.reset(token)
        else:
            raise TypeError(f"model must be a model name or path, or a loaded SentenceTransformer; got {type(model).__name__}.")
        saved = self._take_saved_calibration()
        if calibration is _UNSET:  # a saved model comes back with its own calibration, else the default
            calibration = _saved_config(saved) if saved is not None else CalibrationConfig()
        elif isinstance(calibration, str):
            calibration = None if calibration.strip().lower() in ("none", "off") else CalibrationConfig.parse(calibration)
        elif calibration is not None and not isinstance(calibration, CalibrationConfig):
            raise TypeError(f"calibration must be a CalibrationConfig, its text form (e.g. 'b128_lhalf_a0.5') or None; "
                            f"got {type(calibration).__name__}.")
        self.calibration = calibration
        self.calibrate_encode = bool(calibrate_encode if calibrate_encode is not None else saved and saved.calibrate_encode)
        self.calibrate_queries = bool(calibrate_queries if calibrate_queries is not None else saved and saved.calibrate_queries)
        self._plan: CalibrationPlan | None = None
        if calibration is not None:
            pooling = calibration.pooling or model_pooling(self)
            if self.transformers_model is None:
                raise ConfigError("calibration needs a transformers model as the first module.")
            encoders = {id(module.model) for module in self.modules() if isinstance(module, Transformer)}
            if len(encoders) > 1:
                raise UnsupportedModelError(
                    f"this model holds {len(encoders)} transformers models (e.g. a Router with its own query and "
                    "document encoders); calibration attaches to one model and cannot tell which one encodes the "
                    "documents.")
            self._plan = attach(self.transformers_model, calibration, pooling)

    @property
    def plan(self) -> CalibrationPlan | None:
        """The calibration resolved against the model; ``None`` for the plain model, and inside
        ``calibration_disabled`` (in the thread or task that opened it)."""
        return None if id(self) in _DISABLED.get() else self._plan

    def __getstate__(self) -> dict[str, Any]:
        """Pickled inside ``calibration_disabled`` (worker processes started there), the model is the plain one."""
        state = super().__getstate__()
        return {**state, "_plan": self.plan}

    def _take_saved_calibration(self) -> Calibration | None:
        """Remove the saved `Calibration` step from the pipeline (it is re-added on save) and return it."""
        found = [key for key, module in self._modules.items() if isinstance(module, Calibration)]
        return self._modules.pop(found[-1]) if found else None

    def __repr__(self) -> str:
        state = str(self.calibration) if self.plan is not None else "none"
        sides = ["documents"] + (["queries"] if self.calibrate_queries else []) + (["encode()"] if self.calibrate_encode else [])
        head, _, rest = super().__repr__().partition("\n")
        return f"{head}\n  (calibration): {state} on {', '.join(sides)}\n{rest}"

    # ------------------------------------------------------------------ persistence
    def save(self, path: str, *args: Any, **kwargs: Any) -> None:
        """sentence-transformers' ``save``, plus the calibration (a `Calibration` step and a model card section)."""
        key = str(len(self._modules))
        # the model's calibration, also inside ``calibration_disabled`` (a switch for this thread's passes, not a setting)
        self._modules[key] = Calibration(str(self.calibration) if self.calibration is not None else "none",
                                         self.calibrate_encode, self.calibrate_queries)
        try:
            super().save(path, *args, **kwargs)
        finally:
            self._modules.pop(key)
        card = os.path.join(path, "README.md")
        if os.path.isfile(card):
            with open(card, "a", encoding="utf-8") as handle:
                handle.write(_card_section(path, self))

    def _get_model_config(self) -> dict[str, Any]:
        config = super()._get_model_config()
        config["requirements"] = {**(config.get("requirements") or {}), "mteb-fairpos": {
            "specifier": ">=0.1", "reason": "the model carries an inference-time attention calibration"}}
        return config

    # ------------------------------------------------------------------ forward
    def forward(self, input: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        host = input.pop(HOST_LAYOUT, None)  # never model inputs
        truncated = input.pop(TRUNCATION, None)
        tally = _TALLY.get()  # this context's encode call's, if any: threads sharing the model count apart
        if not self._calibrates(kwargs.get("task")):
            output = super().forward(input, **kwargs)
        else:
            if self.plan.config.strength > 0:  # at strength 0 the pass is the plain model's
                self._refuse_what_calibration_cannot_honour(input)
            inputs = tuple(sorted(name for name, value in input.items() if isinstance(value, torch.Tensor)))
            with self.plan.applied(input["attention_mask"], host=host, inputs=inputs) as layout:
                output = super().forward(input, **kwargs)
            if layout is not None and tally is not None:  # the layout's host values: from preprocess, else read once
                calibrated = sum(layout.on_host()[0].active)
                tally.uncalibrated += len(layout.active) - calibrated
                tally.calibrated += calibrated
        if truncated is not None and tally is not None:  # the pass is launched: the host counts while a GPU computes it
            tally.truncated += truncated()
        return output

    def _refuse_what_calibration_cannot_honour(self, features: dict[str, Any]) -> None:
        """A batch without its padding mask, and a cls Pooling module that leaves a given prompt out (it then pools
        the first token after the prompt, not the row calibration rewrites)."""
        if "attention_mask" not in features:
            packed = ": sentence-transformers packed it into one sequence for flash attention (its unpad_inputs). Set " \
                     "`model[0].unpad_inputs = False` (attention stays flash attention in every uncalibrated pass), " \
                     "or load the model with attn_implementation='sdpa'."
            raise UnsupportedModelError("a calibrated pass needs the batch padded, with its attention_mask, and this "
                                        "batch came without one" + (packed if "cu_seq_lens_q" in features else "."))
        prompt = features.get("prompt_length")  # an int; a tensor in training
        if self.plan.pooling == "cls" and prompt is not None and bool(torch.as_tensor(prompt).any()) and any(
                isinstance(module, Pooling) and module.pooling_mode == "cls" and not module.include_prompt
                for module in self):
            raise UnsupportedModelError(
                "this model's Pooling module (cls, include_prompt=False) pools the first token after the prompt, but "
                "calibration rewrites the row it pools for cls, the first token's: encode the documents without a "
                "prompt, or set include_prompt=True on the Pooling module.")

    def _calibrates(self, task: str | None) -> bool:
        """Whether a pass for ``task`` (``encode_document``'s ``document``, ``encode_query``'s ``query``, ``encode``'s
        ``None``) is calibrated."""
        return self.plan is not None and (
            task == "document" or (task is None and self.calibrate_encode) or (task == "query" and self.calibrate_queries))

    @contextlib.contextmanager
    def calibration_disabled(self) -> Iterator[None]:
        """Inside the block ``encode_document`` runs uncalibrated, with the same prompts and routing; in this thread
        (or task) only, so other threads sharing the model go on calibrating."""
        token = _DISABLED.set(_DISABLED.get() | {id(self)})
        try:
            yield
        finally:
            _DISABLED.reset(token)

    @contextlib.contextmanager
    def tallying(self) -> Iterator[Tally]:
        """Count what the passes run inside the block (in this thread or task) report: ``encode`` opens one per call,
        for its truncation and uncalibrated-documents warnings."""
        tally = Tally()
        token = _TALLY.set(tally)
        try:
            yield tally
        finally:
            _TALLY.reset(token)

    # ------------------------------------------------------------------ input checks
    def encode(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """sentence-transformers' ``encode`` with input checks and a truncation report."""
        if isinstance(inputs, np.ndarray):  # as plain sentence-transformers accepts
            inputs = inputs.tolist()
        _check_texts(inputs)
        batch_size = kwargs.get("batch_size")
        if batch_size is not None and not whole(batch_size):  # 1.5 failed in tqdm; 0 sentence-transformers refuses
            raise TypeError(f"batch_size must be a positive integer, got {batch_size!r}.")
        _check_options(kwargs)
        self._check_route(kwargs.get("task"))
        self._check_pool(kwargs.get("pool"))
        limit = _call_limit(kwargs)
        if limit is not None:  # what the tokenizer will cut at in this call, checked as max_seq_length is
            check_max_length(self, limit, option="max_length")
        if isinstance(inputs, (list, tuple)) and not inputs:  # sentence-transformers checks the arguments
            return self._no_rows(super().encode(inputs, *args, **kwargs), kwargs)
        output = kwargs.get("output_value", "sentence_embedding")
        with self.tallying() as tally:
            try:
                return super().encode(inputs, *args, **kwargs)
            except KeyError as err:  # sentence-transformers looks the name up in the model's output
                if output is None or err.args != (output,):
                    raise
                raise ValueError(f"the model's output holds no {output!r}; output_value is 'sentence_embedding', "
                                 "'token_embeddings' or None (all of them).") from None
            finally:
                self._warn(tally, limit or self.max_seq_length)

    def _check_route(self, task: Any) -> None:
        """Without a Router, a ``task`` other than ``document`` or ``query`` is a typo that would run plain."""
        if task not in (None, "document", "query") and not any(isinstance(module, Router) for module in self):
            raise ValueError(f"task must be 'document', 'query' or None (this model has no Router), got {task!r}.")

    def start_multi_process_pool(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """sentence-transformers' pool, marked with whether its workers calibrate: they hold the model as it was
        when the pool started, inside or outside ``calibration_disabled``."""
        pool = super().start_multi_process_pool(*args, **kwargs)
        pool[_POOL_CALIBRATES] = self.plan is not None
        return pool

    def _check_pool(self, pool: Any) -> None:
        """A pool started on the other side of ``calibration_disabled`` would embed as it did then."""
        started = pool.get(_POOL_CALIBRATES) if isinstance(pool, dict) else None
        if started is None or started == (self.plan is not None):
            return
        raise ValueError("this pool was started outside calibration_disabled() and its workers calibrate; start a pool "
                         "inside the block for this call." if started else
                         "this pool was started inside calibration_disabled() and its workers do not calibrate; start "
                         "a pool outside the block for this call.")

    def _no_rows(self, empty: Any, kwargs: dict[str, Any]) -> Any:
        """No input: the ``(0, width)`` matrix a call with inputs would stack its rows into (its width after
        ``truncate_dim`` and ``precision``), where sentence-transformers gives a flat empty array that cannot join
        another batch's; outputs per input (token embeddings, lists) stay as it gives them."""
        if not isinstance(empty, (np.ndarray, torch.Tensor)):
            return empty
        cut = kwargs.get("truncate_dim") or self.truncate_dim  # the call's wins over the model's, as in encode
        with self.truncate_embeddings(None):
            width = self.get_embedding_dimension()
        if cut:
            width = min(width, cut)
        precision = kwargs.get("precision", "float32")
        if precision in ("binary", "ubinary"):
            width = -(-width // 8)  # eight dimensions a byte
        dtype = {"float32": "float32", "int8": "int8", "binary": "int8", "uint8": "uint8", "ubinary": "uint8"}[precision]
        if isinstance(empty, torch.Tensor):
            return torch.empty(0, width, dtype=getattr(torch, dtype), device=empty.device)
        return np.empty((0, width), dtype=dtype)

    def _warn(self, tally: Tally, limit: int) -> None:
        """The warnings of one ``encode`` call: how many inputs were truncated (at ``limit`` tokens), how many
        documents left uncalibrated."""
        if tally.truncated:
            warnings.warn(
                f"{tally.truncated} input(s) exceeded {'the model' if limit == self.max_seq_length else 'this call'}'s "
                f"maximum of {limit} tokens "
                "and were truncated; their embeddings cover only the first tokens.",
                TruncationWarning,
                stacklevel=_caller_level(),
            )
        short, calibrated = tally.uncalibrated, tally.calibrated
        if short:
            warnings.warn(
                UncalibratedWarning(
                    f"{short} of {short + calibrated} document(s) were left uncalibrated: their content is shorter "
                    f"than one basket ({self.calibration.basket_size} tokens), so calibration does not change them.",
                    short),
                stacklevel=_caller_level(),
            )

    def preprocess(self, inputs: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        features = super().preprocess(inputs, *args, **kwargs)
        mask = features.get("attention_mask")
        if mask is not None and mask.device.type == "cpu" and self._calibrates(kwargs.get("task")):
            features[HOST_LAYOUT] = self.plan.host_layout(mask)  # here, before the batch goes to the device
        limit = _call_limit(kwargs) or self.max_seq_length
        if mask is not None and limit and mask.shape[1] >= limit:  # a row may have been cut: counted in forward
            features[TRUNCATION] = functools.partial(
                self._truncated_count, inputs, getattr(features, "encodings", None), mask, limit, kwargs.get("prompt"),
                features.get("modality", "text") == "text")
        return features

    def _provable_backend(self) -> Any | None:
        """The ``tokenizers.Tokenizer`` that made this model's encodings, where the text can prove a cut for it
        (`truncation.provable`: some 50 µs per batch); else ``None``. A router's routes tokenize apart."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None) if isinstance(self[0], Transformer) else None
        return backend if backend is not None and provable(backend) else None

    def _truncated_count(self, inputs: Any, encodings: list | None, mask: torch.Tensor, limit: int,
                         prompt: str | None, text: bool) -> int:
        """How many of a batch's inputs tokenization cut off at ``limit`` tokens (for the truncation warning). Only
        rows that fill the limit can have been cut; ``text``: each input was tokenized as the prompt followed by it."""
        full = np.flatnonzero(mask.numpy().sum(1) >= limit).tolist()  # numpy: see calibration.host_layout
        if not full:
            return 0
        if encodings:  # a fast tokenizer keeps what truncation cut off: no second pass over the texts
            return cut_count(encodings, full, inputs if text else None, prompt or "", self._provable_backend())
        lengths = self.tokenizer([inputs[i] for i in full], truncation=False, verbose=False)["input_ids"]
        extra = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else 0
        return sum(len(ids) + extra > limit for ids in lengths)


def position_limit(model: SentenceTransformer) -> int | None:
    """The most tokens ``model`` can embed: the rows of its learned position table, less those a RoBERTa-style model
    keeps before its first position; ``None`` where positions come without a table (rotary, relative)."""
    inner = model.transformers_model
    table = next((module for name, module in inner.named_modules() if name.endswith("position_embeddings")
                  and isinstance(module, torch.nn.Embedding)), None) if inner is not None else None
    if table is None:
        return None
    return table.num_embeddings - (table.padding_idx + 1 if table.padding_idx is not None else 0)


_POOL_CALIBRATES = "mteb_fairpos_calibrates"
"""The key that marks a pool started by `FairSentenceTransformer` with whether its workers calibrate."""


def _call_limit(kwargs: dict[str, Any]) -> int | None:
    """The tokens one call cuts its texts at, where it sets its own (sentence-transformers' ``max_length`` or
    ``processing_kwargs`` for text); ``None``: the model's ``max_seq_length``."""
    processing = kwargs.get("processing_kwargs") or {}
    text = (processing.get("text") or {}).get("max_length")
    common = (processing.get("common") or {}).get("max_length")
    return next((given for given in (text, common, kwargs.get("max_length")) if given is not None), None)


def set_max_length(model: SentenceTransformer, tokens: int, option: str = "--max-length") -> None:
    """Cut ``model``'s inputs at ``tokens`` tokens, checked by `check_max_length`."""
    check_max_length(model, tokens, option)
    model.max_seq_length = tokens


def check_max_length(model: SentenceTransformer, tokens: Any, option: str) -> None:
    """Refuse to cut inputs at more tokens than ``model`` has positions for (torch would fail deep inside the model,
    on the first input that long), or at too few to hold one token beside the special tokens the tokenizer adds (the
    model would read no text, or the tokenizer would not cut at all)."""
    if not whole(tokens):
        raise ValueError(f"{option} must be a whole number of tokens, got {tokens!r}.")
    limit = position_limit(model)
    if limit is not None and tokens > limit:
        raise ValueError(f"{option} {tokens}: this model embeds at most {limit} tokens (its position table); give "
                         f"{limit} or fewer.")
    tokenizer = getattr(model, "tokenizer", None)
    special = tokenizer.num_special_tokens_to_add(pair=False) if hasattr(tokenizer, "num_special_tokens_to_add") else 0
    if tokens <= special:
        raise ValueError(f"{option} {tokens}: the tokenizer adds {special} special token(s) to every input, so the model "
                         f"would read no text; give at least {special + 1}.")


def _checked_settings(config: Any, where: str) -> dict[str, Any]:
    """The saved step's settings, checked: without them the model would come back plain, unseen."""
    if not isinstance(config, dict) or "calibration" not in config:
        raise ConfigError(f"{where}: no calibration settings (the file is missing, or has no 'calibration' key); "
                          "save the model again with FairSentenceTransformer.save.")
    text = config["calibration"]
    if not isinstance(text, str):
        raise ConfigError(f"{where}: 'calibration' must be a config's text form or 'none', got {text!r}.")
    if text != "none":
        try:
            CalibrationConfig.parse(text)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
    for flag in ("calibrate_encode", "calibrate_queries"):
        if not isinstance(config.get(flag, False), bool):
            raise ConfigError(f"{where}: {flag!r} must be true or false, got {config[flag]!r}.")
    return {key: value for key, value in config.items() if key in Calibration.config_keys}


def _saved_config(saved: Calibration) -> CalibrationConfig | None:
    return None if saved.calibration == "none" else CalibrationConfig.parse(saved.calibration)


def _card_section(path: str, model: FairSentenceTransformer) -> str:
    state = f"`{model.calibration}`" if model.calibration is not None else "none (the plain model)"
    return (
        "\n\n## Attention calibration (mteb-fairpos)\n\n"
        f"This model's documents are embedded with inference-time attention calibration {state} "
        "(basket size, layers, strength; see mteb-fairpos). Load it with\n\n"
        "```python\nfrom mteb_fairpos import FairSentenceTransformer\n\n"
        f"model = FairSentenceTransformer({os.path.basename(os.path.normpath(path))!r})\n```\n\n"
        "A plain `SentenceTransformer` refuses this folder rather than drop the calibration.\n"
    )


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this package,
    sentence-transformers and torch: the user's own call."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in (
            "mteb_fairpos", "sentence_transformers", "torch", "contextlib"):
        frame, level = frame.f_back, level + 1
    return level


def _check_options(options: dict[str, Any]) -> None:
    """Refuse a ``truncate_dim`` that would cut every vector to nothing (0) or from its end (-3: ``[:-3]``), and a
    device torch cannot reach (CUDA on a CPU build failed on an assertion deep in torch)."""
    cut = options.get("truncate_dim")
    if cut is not None and (not whole(cut) or cut < 1):
        raise ValueError(f"truncate_dim must be a positive integer (the dimensions kept), or None; got {cut!r}.")
    device = options.get("device")
    for one in device if isinstance(device, (list, tuple)) else () if device is None else (device,):  # a list: a pool
        if problem := device_problem(one):
            raise ValueError(f"device {one!r}: {problem}.")


def _check_texts(inputs: Any) -> None:
    if isinstance(inputs, str):
        return
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"expected a string or a list of strings, got {type(inputs).__name__}.")
    for i, item in enumerate(inputs):
        if not isinstance(item, str):
            raise TypeError(f"expected a list of strings, but item {i} is {type(item).__name__}: {item!r:.60}.")
