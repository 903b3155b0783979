"""The reference implementation of calibration (docs/method.md#s1-5): eager attention, softmax edited by nnsight.

This is the route the authors' library takes, kept as an *independent* oracle for the fast
backend in :mod:`mteb_fairpos.attention`: the model runs with transformers' ``"eager"`` attention,
and nnsight's ``.source`` reaches the ``softmax`` call inside each calibrated layer's eager
attention function and replaces its output. The new probabilities come from the shared row math
(:func:`~mteb_fairpos.calibration.basket_layout` and :func:`~mteb_fairpos.calibration.calibrate_rows`);
nothing of the fast path (its attention function, its query-row recomputation, its masks) is used.

It works on the model object you pass: the attention implementation is switched to eager for the
duration of the call and put back afterwards, and nnsight's per-module hooks are removed again, so
no second copy of the weights is ever loaded. It is slow and memory hungry (the eager ``L x L``
probabilities of every head are materialised), which is the point of the fast path.

nnsight is imported only when this module runs a model. Note that importing nnsight (0.8) mounts a
``.save`` method on every Python object for the rest of the process (its ``PYMOUNT`` setting); this
module itself only uses the function form ``nnsight.save(value)``.

Supported: transformers models whose attention modules call ``ALL_ATTENTION_FUNCTIONS`` and whose
eager attention function computes the probabilities with one ``softmax`` call (bert, xlm_roberta,
gte, qwen3, jina_embeddings_v3, ...). Anything else raises
:class:`~mteb_fairpos.attention.UnsupportedModelError`.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .attention import UnsupportedModelError
from .calibration import BasketLayout, basket_layout, calibrate_rows, first_valid, last_valid
from .config import CalibrationConfig, Pooling
from .model import model_inputs
from .segmented import document_prompt, model_pooling

ROW_TILE_ELEMENTS = 1 << 22
"""Bound on the probability elements calibrated at once when every row is calibrated (mean pooling)."""

# ---------------------------------------------------------------------------------- model access
def _is_sentence_transformer(model: Any) -> bool:
    from sentence_transformers import SentenceTransformer

    return isinstance(model, SentenceTransformer)


def hf_model(model: Any) -> nn.Module:
    """The transformers model inside ``model`` (a SentenceTransformer or a transformers model)."""
    from transformers import PreTrainedModel

    if _is_sentence_transformer(model):
        inner = getattr(model, "transformers_model", None)
        if inner is None:
            raise UnsupportedModelError(
                f"{type(model).__name__}: its first module holds no transformers model, so there is no attention to edit."
            )
        return inner
    if isinstance(model, PreTrainedModel):
        return model
    raise UnsupportedModelError(
        f"{type(model).__name__} is neither a SentenceTransformer nor a transformers PreTrainedModel; "
        "the reference implementation needs transformers' eager attention."
    )


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The attention modules of a transformers model, one per layer, in execution order.

    An attention module is one whose ``forward`` looks its attention function up in
    ``ALL_ATTENTION_FUNCTIONS`` (the transformers AttentionInterface); that call is what
    nnsight drills into.
    """
    architecture = type(model).__name__
    found = [module for module in model.modules() if _calls_attention_interface(type(module).forward)]
    if not found:
        raise UnsupportedModelError(
            f"{architecture}: no attention module calls transformers' ALL_ATTENTION_FUNCTIONS, so the eager softmax "
            "cannot be reached; the reference implementation supports AttentionInterface models only."
        )
    expected = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if expected is not None and len(found) != expected:
        raise UnsupportedModelError(
            f"{architecture}: found {len(found)} attention modules for {expected} layers; cannot tell which "
            "attention belongs to which layer."
        )
    return found


def _calls_attention_interface(forward: Any) -> bool:
    """Whether ``forward`` itself (under any decorators, such as transformers' ``deprecate_kwarg``)
    names ``ALL_ATTENTION_FUNCTIONS``."""
    code = getattr(inspect.unwrap(forward), "__code__", None)
    return "ALL_ATTENTION_FUNCTIONS" in getattr(code, "co_names", ())


@contextlib.contextmanager
def eager_session(model: nn.Module) -> Iterator[tuple[Any, list[Any]]]:
    """Run ``model`` with eager attention, wrapped by nnsight; undo both on exit.

    Yields the nnsight root envoy and the envoys of the attention modules (one per layer).
    On exit the previous attention implementation and training flag are restored and the
    forward controllers nnsight installed on the modules are removed (modules that another
    nnsight wrapper had already instrumented are left as they were).
    """
    from nnsight import NNsight
    from nnsight.intervention.source import STATE, Controller

    architecture = type(model).__name__
    attention = attention_modules(model)
    if not getattr(model, "_supports_attention_backend", False):
        raise UnsupportedModelError(
            f"{architecture} does not route attention through transformers' AttentionInterface; "
            "its attention implementation cannot be switched to eager and edited."
        )
    previous = model.config._attn_implementation
    was_training = model.training
    ours = [m for m in model.modules() if STATE not in m.__dict__]
    try:
        if previous != "eager":
            model.set_attn_implementation("eager")
        model.eval()
        with warnings.catch_warnings():  # "submodule named 'output'": nnsight renames it; we never use it
            warnings.simplefilter("ignore", UserWarning)
            envoy = NNsight(model)
        envoys = [envoy.interleaver.envoys[id(module)] for module in attention]
        yield envoy, envoys
    finally:
        for module in ours:
            module.__dict__.pop(STATE, None)
            if isinstance(module.__dict__.get("forward"), Controller):
                del module.__dict__["forward"]
        if model.config._attn_implementation != previous:
            model.set_attn_implementation(previous)
        model.train(was_training)


def softmax_op(attention_envoy: Any) -> Any:
    """Inside a trace: the nnsight operation of the softmax in this layer's eager attention function.

    Drills from the attention module's ``forward`` into the call of the attention function
    (the last ``attention_interface_<n>`` operation: ``_0`` is the lookup's assignment) and
    from there to its only ``softmax`` call.
    """
    calls = [name for name in attention_envoy.source.names if name.startswith("attention_interface_")]
    if not calls:
        raise UnsupportedModelError(
            f"{type(attention_envoy._module).__name__}.forward has no `attention_interface(...)` call to drill into."
        )
    inner = getattr(attention_envoy.source, max(calls, key=lambda n: int(n.rsplit("_", 1)[1]))).source
    softmaxes = [name for name in inner.names if name.rsplit("_", 1)[0].endswith("softmax")]
    if len(softmaxes) != 1:
        raise UnsupportedModelError(
            f"{type(attention_envoy._module).__name__}: the eager attention function has {len(softmaxes)} softmax "
            f"calls ({', '.join(softmaxes) or 'none'}); expected exactly one."
        )
    return getattr(inner, softmaxes[0])


# ---------------------------------------------------------------------------------- the edit
def calibrate_softmax(probs: Tensor, layout: BasketLayout, strength: float) -> Tensor:
    """The eager softmax output ``probs`` (N, H, K, K) with its pooling rows calibrated.

    cls/last pooling: only the one pooling row of each sequence is taken out, calibrated and
    written back. mean pooling: every valid row, in tiles of query rows to bound memory.
    The rows are rewritten in place (the eager function only multiplies the tensor with ``V``
    afterwards), which spares a copy of the ``N x H x K x K`` probabilities.
    """
    n, h, r, k = probs.shape
    if layout.query_rows is not None:
        batch = torch.arange(n, device=probs.device)
        rows = layout.query_rows
        picked = probs[batch, :, rows, :].unsqueeze(2)  # (N, H, 1, K), a copy
        probs[batch, :, rows, :] = calibrate_rows(picked, layout, strength, layout.active[:, None])[:, :, 0]
        return probs
    tile = max(1, ROW_TILE_ELEMENTS // max(1, n * h * k))
    for start in range(0, r, tile):
        rows = torch.arange(start, min(start + tile, r), device=probs.device)
        probs[:, :, start : start + len(rows)] = calibrate_rows(probs[:, :, rows], layout, strength, layout.row_mask(rows))
    return probs


# ---------------------------------------------------------------------------------- pooling
def pool(hidden: Tensor, attention_mask: Tensor, pooling: Pooling) -> Tensor:
    """Pool final hidden states (N, K, D) over the valid tokens: first, last or mean."""
    valid = attention_mask.bool()
    batch = torch.arange(hidden.shape[0], device=hidden.device)
    if pooling == "cls":
        return hidden[batch, first_valid(valid)]
    if pooling == "last":
        return hidden[batch, last_valid(valid)]
    weights = valid.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def resolve_pooling(model: Any, config: CalibrationConfig | None, pooling: Pooling | None) -> Pooling:
    """The pooling that decides the calibrated rows: argument, then config, then the ST Pooling module."""
    chosen = pooling or (config.pooling if config is not None else None)
    if chosen is not None:
        return chosen
    if _is_sentence_transformer(model):
        return model_pooling(model)
    raise ValueError("a transformers model has no Pooling module: pass pooling='cls', 'last' or 'mean'.")


# ---------------------------------------------------------------------------------- inputs
@dataclass
class _Batch:
    features: dict[str, Any]
    run: Any  # callable(features) -> model output


def _batches(model: Any, inputs: Any, batch_size: int, prompt: str | None, task: str | None) -> Iterator[_Batch]:
    """Turn texts or one tokenized batch into (features, runner) pairs."""
    if _is_sentence_transformer(model):
        from sentence_transformers import SentenceTransformer

        def run(features: dict[str, Any]) -> Any:
            # The plain SentenceTransformer forward: never the calibrated one of FairSentenceTransformer.
            features = model_inputs(features)
            return SentenceTransformer.forward(model, features, **({"task": task} if task else {}))

        if isinstance(inputs, Mapping):
            yield _Batch(_to_device(dict(inputs), model.device), run)
            return
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        extra = {"task": task} if task else {}
        for start in range(0, len(texts), batch_size):
            features = model.preprocess(texts[start : start + batch_size], prompt=prompt, **extra)
            yield _Batch(_to_device(features, model.device), run)
        return

    if not isinstance(inputs, Mapping):
        raise TypeError(
            "with a transformers model pass a tokenized batch (a mapping with input_ids and attention_mask); "
            "pass a SentenceTransformer to encode texts."
        )

    def run_hf(features: dict[str, Any]) -> Any:
        return model(**features)

    yield _Batch(_to_device(dict(inputs), next(model.parameters()).device), run_hf)


def _to_device(features: dict[str, Any], device: Any) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in features.items()}


def _text_prompt(model: Any, prompt: str | None, prompt_name: str | None, document: bool) -> str | None:
    """The prompt ``encode_document`` (document=True) or ``encode`` would prepend."""
    if prompt is not None:
        return prompt
    if prompt_name is None and document:
        return document_prompt(model) or None
    prompts = getattr(model, "prompts", None) or {}
    prompt_name = prompt_name or getattr(model, "default_prompt_name", None)
    return prompts.get(prompt_name) if prompt_name else None


# ---------------------------------------------------------------------------------- entry point
@torch.no_grad()
def reference_embeddings(
    model: Any,
    inputs: str | Sequence[str] | Mapping[str, Tensor],
    config: CalibrationConfig | None = CalibrationConfig(),
    pooling: Pooling | None = None,
    *,
    batch_size: int = 32,
    document: bool = True,
    prompt: str | None = None,
    prompt_name: str | None = None,
) -> Tensor:
    """Calibrated embeddings computed the slow, obvious way (eager attention edited by nnsight).

    Args:
        model: a ``SentenceTransformer`` (also a ``FairSentenceTransformer``; its fast path is not
            used) or a transformers ``PreTrainedModel``.
        inputs: texts (SentenceTransformer only) or one tokenized batch (a mapping with
            ``input_ids`` and ``attention_mask``, padded on either side).
        config: the calibration; ``None`` runs the plain eager model (no edit).
        pooling: the pooling that decides the calibrated rows; default ``config.pooling``, then the
            model's sentence-transformers Pooling module. For a transformers model it also pools
            the final hidden states (first valid token, last valid token or masked mean).
        batch_size: texts per forward pass.
        document: mirror ``encode_document`` (its prompt and ``task="document"``); ``False``
            mirrors plain ``encode``.
        prompt / prompt_name: as in sentence-transformers' ``encode``.

    Returns:
        (N, D) float tensor on the CPU: a SentenceTransformer's ``sentence_embedding`` (after all of
        its modules, so normalised only if the model has a Normalize module), or the pooled final
        hidden states of a transformers model (not normalised).
    """
    inner = hf_model(model)
    resolved = resolve_pooling(model, config, pooling)
    strength = config.strength if config is not None else 0.0
    isolated = config.isolated_tokens(resolved) if config is not None else ()
    basket = config.basket_size if config is not None else 1
    is_st = _is_sentence_transformer(model)
    text_prompt = _text_prompt(model, prompt, prompt_name, document) if is_st else None
    task = "document" if (document and is_st) else None

    order = None
    if is_st and not isinstance(inputs, Mapping):
        # The batches sentence-transformers' encode forms (longest first), so that padding, which
        # moves absolute positions under left padding, is the same as on the fast path.
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        order = np.argsort([-_input_length(model, text) for text in inputs])
        inputs = [inputs[i] for i in order]

    from nnsight import save  # the function form: it works whether or not nnsight mounted `.save` on objects

    outputs: list[Tensor] = []
    with eager_session(inner) as (envoy, layers):
        calibrated = config.resolve_layers(len(layers)) if config is not None else ()
        for batch in _batches(model, inputs, batch_size, text_prompt, task):
            mask = batch.features["attention_mask"]
            layout = basket_layout(mask, resolved, basket, isolated)
            with envoy.trace(batch.features, fn=batch.run) as tracer:
                for index in calibrated:
                    op = softmax_op(layers[index])
                    op.output = calibrate_softmax(op.output, layout, strength)
                result = save(tracer.result)
            if is_st:
                outputs.append(result["sentence_embedding"].float().cpu())
            else:
                hidden = result.last_hidden_state if hasattr(result, "last_hidden_state") else result[0]
                outputs.append(pool(hidden, mask.to(hidden.device), resolved).float().cpu())
    embeddings = torch.cat(outputs) if outputs else torch.empty(0)
    if order is not None:
        embeddings = embeddings[torch.as_tensor(np.argsort(order))]
    return embeddings


def _input_length(model: Any, text: str) -> int:
    measure = getattr(model, "_input_length", None)
    return int(measure(text)) if measure is not None else len(text)
