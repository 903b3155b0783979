"""The fast calibrated attention backend (SPEC 1.5), registered with transformers by name.

``attach(model, config, pooling)`` switches a transformers model to the ``"fairpos"`` attention
implementation and returns a :class:`CalibrationPlan`. Outside ``plan.applied(mask)`` the
backend *is* plain SDPA, so one loaded model serves both calibrated documents and
uncalibrated queries. Inside it, calibrated layers:

* cls / last pooling: run fused SDPA for every row, then recompute only the pooling row
  (one ``q . K^T`` per head, softmax, basket arithmetic, one product with ``V``) and write it
  over the SDPA output; the ``L x L`` matrix is never built;
* mean pooling: compute every row in query tiles, so memory stays bounded by the tile.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_layers import GradientCheckpointingLayer

from .calibration import BasketLayout, basket_layout, calibrate_rows
from .config import CalibrationConfig, ConfigError, Pooling

ATTENTION_NAME = "fairpos"
TILE_ELEMENTS = 1 << 22
"""Upper bound on the score elements of one query tile in the mean-pooling path (16 MiB in fp32)."""


class UnsupportedModelError(TypeError):
    """The model's attention does not go through transformers' ``AttentionInterface``, or asks
    for an attention feature the calibrated rows cannot honour."""


_UNSUPPORTED_ARGUMENTS = ("softcap", "position_bias", "s_aux")
"""Attention arguments that change the softmax itself (logit soft-capping, additive position
bias, attention sinks); the calibrated rows compute their own softmax and would ignore them."""


@dataclass(frozen=True)
class CalibrationPlan:
    """A config resolved against one model: which attention modules sit in calibrated layers."""

    config: CalibrationConfig
    pooling: Pooling
    layers: tuple[int, ...]
    layer_of: dict[nn.Module, int] = field(repr=False)
    architecture: str
    model: nn.Module = field(repr=False, compare=False)

    @contextlib.contextmanager
    def applied(self, attention_mask: Tensor) -> Iterator[BasketLayout | None]:
        """Calibrate every forward pass run inside this block over a batch with ``attention_mask``;
        yields the batch's basket layout (``None`` at strength 0, which changes nothing).

        The model runs the calibrated backend only inside the block; outside it keeps its own
        attention implementation, so a wrapped model behaves as before (in worker processes too,
        which unpickle it without this package's backend: it is registered here, where it is used).
        """
        if self.config.strength == 0:  # alpha = 0 is the plain model, bit for bit
            yield None
            return
        layout = basket_layout(attention_mask, self.pooling, self.config.basket_size, self.config.isolated_tokens(self.pooling))
        state = _ForwardState(self, layout)
        register()
        previous = self.model.config._attn_implementation
        if previous != ATTENTION_NAME:
            self.model.set_attn_implementation(ATTENTION_NAME)
        token = _ACTIVE.set(state)
        try:
            yield layout
        finally:
            _ACTIVE.reset(token)
            if previous != ATTENTION_NAME:
                self.model.set_attn_implementation(previous)
        if not state.seen:
            raise UnsupportedModelError(
                f"{self.architecture}: the forward pass never reached the '{ATTENTION_NAME}' attention backend, "
                "so nothing was calibrated. The model computes attention outside transformers' AttentionInterface "
                "(e.g. custom remote code); load the native transformers architecture instead."
            )


@dataclass
class _ForwardState:
    plan: CalibrationPlan
    layout: BasketLayout
    seen: set[int] = field(default_factory=set)


_ACTIVE: ContextVar[_ForwardState | None] = ContextVar("fairpos_calibration", default=None)


def transformer_layers(model: nn.Module) -> list[nn.Module]:
    """The model's transformer blocks in order (transformers marks them as GradientCheckpointingLayer)."""
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def attach(model: PreTrainedModel, config: CalibrationConfig, pooling: Pooling) -> CalibrationPlan:
    """Resolve ``config`` for ``model``; the plan routes its attention through the calibrated backend
    during calibrated passes only (`CalibrationPlan.applied`)."""
    architecture = type(model).__name__
    if not isinstance(model, PreTrainedModel) or not getattr(model, "_supports_attention_backend", False):
        raise UnsupportedModelError(
            f"{architecture} does not route attention through transformers' AttentionInterface, so it cannot be "
            "calibrated. Supported: models whose transformers class sets `_supports_attention_backend` "
            "(bert, xlm_roberta, gte, qwen3, jina_embeddings_v3, ...)."
        )
    blocks = transformer_layers(model)
    if not blocks:
        raise UnsupportedModelError(f"{architecture}: found no transformer layers to calibrate.")
    try:
        layers = config.resolve_layers(len(blocks))
    except ConfigError as err:
        raise ConfigError(f"{architecture}: {err}") from None
    layer_of = {module: i for i, block in enumerate(blocks) for module in block.modules()}
    own = model.config._attn_implementation
    if own not in ("sdpa", ATTENTION_NAME, None):
        warnings.warn(
            f"{architecture} runs with attn_implementation={own!r}; its calibrated passes use the "
            f"'{ATTENTION_NAME}' backend (SDPA with calibrated rows) instead, every other pass keeps {own!r}.",
            stacklevel=3,
        )
    return CalibrationPlan(config, pooling, layers, layer_of, architecture, model)


def register() -> None:
    """Register the backend and its mask format (the SDPA one) with transformers; idempotent."""
    AttentionInterface.register(ATTENTION_NAME, calibrated_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)


def calibrated_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[Tensor, None]:
    """transformers attention function: SDPA, with calibrated rows in calibrated layers."""
    state = _ACTIVE.get()
    layer = state.plan.layer_of.get(module) if state is not None else None
    if layer is not None:
        state.seen.add(layer)
    if layer is None or layer not in state.plan.layers or not bool(state.layout.active.any()):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    for name in _UNSUPPORTED_ARGUMENTS:
        if kwargs.get(name) is not None:
            raise UnsupportedModelError(
                f"{state.plan.architecture} passes `{name}` to its attention, which calibrated rows cannot honour "
                "(they compute their own softmax); calibration is not available for this architecture."
            )
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", False))
    layout = state.layout
    strength = state.plan.config.strength

    if layout.query_rows is None:  # mean pooling: every valid row, tile by tile
        output = torch.empty(query.shape[0], query.shape[2], query.shape[1], value.shape[-1], dtype=value.dtype, device=value.device)
        tile = max(1, TILE_ELEMENTS // (query.shape[0] * query.shape[1] * key.shape[2]))
        for start in range(0, query.shape[2], tile):
            rows = torch.arange(start, min(start + tile, query.shape[2]), device=query.device)
            output[:, rows] = _rows_output(query[:, :, rows], rows, key, value, attention_mask, causal, scaling, layout, strength)
        return output, None

    output, _ = sdpa_attention_forward(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
    )
    rows = layout.query_rows
    batch = torch.arange(query.shape[0], device=query.device)
    pooled_query = query[batch, :, rows].unsqueeze(2)  # (N, H, 1, D)
    pooled = _rows_output(pooled_query, rows[:, None], key, value, attention_mask, causal, scaling, layout, strength)
    output[batch, rows] = pooled[:, 0]
    return output, None


def _rows_output(
    query: Tensor,
    rows: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    causal: bool,
    scaling: float,
    layout: BasketLayout,
    strength: float,
) -> Tensor:
    """Calibrated attention output (N, R, H, D) of R query rows at positions ``rows`` ((R,) or (N, R))."""
    n, h, r, d = query.shape
    kv_heads = key.shape[1]
    grouped = query.reshape(n, kv_heads, (h // kv_heads) * r, d)  # GQA without repeating K and V
    scores = (grouped @ key.transpose(-1, -2)).view(n, h, r, -1) * scaling
    scores = scores + _row_bias(attention_mask, rows, key.shape[2], causal, layout, scores.dtype)
    probs = torch.softmax(scores, dim=-1)
    row_positions = rows if rows.dim() == 1 else None
    row_mask = layout.row_mask(row_positions) if row_positions is not None else layout.active[:, None].expand(n, r)
    probs = calibrate_rows(probs, layout, strength, row_mask).to(value.dtype)
    out = (probs.view(n, kv_heads, -1, probs.shape[-1]) @ value).view(n, h, r, -1)
    return out.transpose(1, 2)


def _row_bias(
    attention_mask: Tensor | None, rows: Tensor, num_keys: int, causal: bool, layout: BasketLayout, dtype: torch.dtype
) -> Tensor:
    """Additive (N or 1, 1, R, K) mask for the selected query rows, from the model's own mask when it has one."""
    minimum = torch.finfo(dtype).min
    n = layout.key_valid.shape[0]
    if attention_mask is not None:
        index = rows if rows.dim() == 2 else rows[None, :].expand(n, -1)
        mask = attention_mask.expand(n, -1, -1, -1)
        picked = mask[torch.arange(n, device=rows.device)[:, None], 0, index].unsqueeze(1)  # (N, 1, R, K)
        if picked.dtype == torch.bool:
            return torch.where(picked, 0.0, minimum).to(dtype)
        return picked.to(dtype)
    allowed = layout.key_valid[:, None, None, :num_keys]
    if causal:
        keys = torch.arange(num_keys, device=rows.device)
        row_pos = rows if rows.dim() == 2 else rows[None, :]
        allowed = allowed & (keys[None, None, None, :] <= row_pos[:, None, :, None])
    return torch.where(allowed, 0.0, minimum).to(dtype)
