"""The fast calibrated attention backend (docs/method.md#s1-5), registered with transformers by name.

``attach(model, config, pooling)`` resolves a calibration against a transformers model and returns a
:class:`CalibrationPlan`. Inside ``plan.applied(mask)`` the model runs the ``"fairpos"`` attention
implementation; outside it, its own, so one loaded model serves both calibrated documents and
uncalibrated queries. In a calibrated pass, calibrated layers run, on CUDA, the one-pass Triton kernel of
:mod:`mteb_fairpos.triton_attention` wherever it computes the layer exactly (:func:`fused_kernel`), and
elsewhere this module's PyTorch path (the CPU's, and the reference):

* cls / last pooling: run fused SDPA for every row, then recompute only the pooling rows
  (one batched ``q . K^T`` for all heads, softmax, basket arithmetic, one product with ``V``) and
  write them over the SDPA output; the ``L x L`` matrix is never built;
* mean pooling: every valid row is calibrated. Calibration rescales each content basket of a
  row by one factor, and the calibrated (alpha = 1) mass of a row's non-empty baskets is the same
  for all of them (:func:`~mteb_fairpos.calibration.basket_targets`). So a calibrated row is

      out_i = (1 - a) (plain_i - sum_j A_ij v_j) + a t_i sum_{b non-empty} o_ib + sum_j A'_ij v_j

  with ``plain_i`` the fused attention output over all keys, ``o_ib`` the fused output over the keys
  of basket ``b`` alone, ``A_ij`` the original and ``A'_ij`` the calibrated probability of isolated
  token ``j``, and ``t_i`` the basket target. Fused kernels that also return each row's
  log-sum-exp (:mod:`mteb_fairpos.lse_kernels`) give every mass (``A_ib = exp(lse_ib - lse_i)``),
  so no probability matrix is built, and memory stays within a few outputs of the layer
  (:func:`grouped_mean_rows`). :func:`tiled_mean_rows` computes the rows in query tiles with an
  explicit softmax instead: the second reference, selected with :func:`mean_kernel`.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from transformers import AttentionInterface, PretrainedConfig, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_layers import GradientCheckpointingLayer

from . import triton_attention
from .calibration import (BasketLayout, HostLayout, basket_layout, basket_targets, calibrate_rows, content_members,
                          host_layout)
from .config import POOLINGS, CalibrationConfig, ConfigError, Pooling
from .lse_kernels import TILE_ELEMENTS, attention_with_lse

ATTENTION_NAME = "fairpos"
HOST_LAYOUT = "fairpos_host_layout"
"""The feature under which ``FairSentenceTransformer.preprocess`` hands its ``forward`` the batch's layout host values
(:meth:`CalibrationPlan.host_layout`), made from the mask before it goes to the device; never a model input."""


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
    kinds: tuple[str, ...] = field(repr=False, compare=False)
    """Per layer, the kind of mask its attention takes (`mask_kinds`): layers of one kind share one mask."""
    fitted: dict[tuple, int] = field(default_factory=dict, repr=False, compare=False)
    """Kind of mask -> the longest length at which the model's mask fitted the fused kernel (`_mask_fits`)."""
    refused: dict[tuple, int] = field(default_factory=dict, repr=False, compare=False)
    """Kind of mask -> the shortest length at which it did not (longer ones keep the PyTorch path unchecked)."""

    def host_layout(self, attention_mask: Tensor) -> HostLayout | None:
        """The host values of the layout of a batch with this (CPU) ``attention_mask``: made before the batch goes
        to the device and handed to :meth:`applied`, they spare the pass its read of the device (``None`` at
        strength 0)."""
        if attention_mask.device.type != "cpu":
            raise ValueError(f"host_layout takes the tokenizer's attention_mask on the CPU, not on {attention_mask.device}: "
                             "a pass reads the layout of a mask already on the device itself.")
        if self.config.strength == 0:
            return None
        return host_layout(attention_mask, self.config.basket_size, self.config.isolated_tokens(self.pooling))

    def _fits(self, host: HostLayout, attention_mask: Tensor) -> bool:
        """Whether ``host`` was made by this plan's :meth:`host_layout` for a mask of this shape: host values made for
        another batch, or by another plan (features of another model), are not used."""
        names = tuple(name for name, _ in self.config.isolated_tokens(self.pooling))
        made_for = (tuple(attention_mask.shape), self.config.basket_size, names)
        return (host.shape, host.basket_size, host.isolated) == made_for

    def _layout(self, attention_mask: Tensor) -> BasketLayout:
        return basket_layout(attention_mask, self.pooling, self.config.basket_size, self.config.isolated_tokens(self.pooling))

    @contextlib.contextmanager
    def applied(self, attention_mask: Tensor, host: HostLayout | None = None, inputs: tuple[str, ...] = ()
                ) -> Iterator[BasketLayout | None]:
        """Calibrate every forward pass run inside this block over a batch with ``attention_mask``;
        yields the batch's basket layout (``None`` at strength 0, which changes nothing). ``host``: its
        :meth:`host_layout`, where the caller made it before the mask went to the device (ignored unless made for
        a mask of this shape by a plan of the same basket size and isolated tokens); ``inputs``: the names of the
        model's inputs, part of the kind of mask a check is remembered for (`_mask_fits`).

        The model runs the calibrated backend only while such a block is open (in any thread: `_switched`); else it
        keeps its own attention implementation, so a wrapped model behaves as before (in worker processes too, which
        unpickle it without this package's backend: it is registered here, where it is used). What a block
        calibrates is its own context's (a context variable): threads sharing one model calibrate their own batches.
        """
        if self.config.strength == 0:  # alpha = 0 is the plain model, bit for bit
            yield None
            return
        layout = self._layout(attention_mask)
        if host is not None and self._fits(host, attention_mask):
            layout.given(host)
        state = _ForwardState(self, layout, inputs)
        register()
        with _switched(self.model):
            token = _ACTIVE.set(state)
            try:
                yield layout
            finally:
                _ACTIVE.reset(token)
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
    inputs: tuple[str, ...] = ()
    seen: set[int] = field(default_factory=set)
    shared: dict[tuple, Any] = field(default_factory=dict)
    """What the calibrated layers of this pass share (:func:`_layer_shared`, :func:`_pooled_row_shared`), by the
    model's mask, causality, dtype and length. One block runs one forward pass."""


_ACTIVE: ContextVar[_ForwardState | None] = ContextVar("fairpos_calibration", default=None)


@dataclass
class _Switch:
    """One model's calibrated passes running now, in any thread; the configs a switch sets, and the implementations
    they had before the passes running now began."""

    passes: int = 0
    configs: tuple[PretrainedConfig, ...] | None = None
    """Every config ``set_attn_implementation`` put on the backend at the model's first calibrated pass."""
    own: tuple[str | None, ...] = ()


_SWITCHES: weakref.WeakKeyDictionary[nn.Module, _Switch] = weakref.WeakKeyDictionary()
_SWITCHING = threading.Lock()


@contextlib.contextmanager
def _switched(model: nn.Module) -> Iterator[None]:
    """Run ``model`` on the calibrated backend while any calibrated pass runs on it: the first pass switches it, the
    last one switches it back, so a pass in another thread is never switched back under it (its later layers would
    run plain SDPA). A plain pass that overlaps a calibrated one in another thread runs the backend too, which without
    a calibrated pass of its own is SDPA: the same pass where the model's own implementation is SDPA; with another
    (eager, flash attention) its mask and its attention may come from different implementations
    (docs/calibration.md).

    The model's first calibrated pass switches through transformers' ``set_attn_implementation``, which checks the
    backend and walks every module (0.3-0.4 ms a pass, there and back, for 12 layers on this project's CPU: host time
    a GPU waits for in every batch; benchmarks/bench_host.py); later passes set the configs it switched, and give each back the implementation it had."""
    with _SWITCHING:
        switch = _SWITCHES.setdefault(model, _Switch())
        if switch.passes == 0:
            if switch.configs is None:
                configs = _configs(model)
                own = {id(config): config._attn_implementation for config in configs}
                model.set_attn_implementation(ATTENTION_NAME)
                switch.configs = tuple(config for config in configs if config._attn_implementation == ATTENTION_NAME)
                switch.own = tuple(own[id(config)] for config in switch.configs)
            else:
                switch.own = tuple(config._attn_implementation_internal for config in switch.configs)
                for config in switch.configs:
                    config._attn_implementation_internal = ATTENTION_NAME
        switch.passes += 1
    try:
        yield
    finally:
        with _SWITCHING:
            switch.passes -= 1
            if switch.passes == 0:  # as set by hand: set_attn_implementation would give one value to every config
                for config, own in zip(switch.configs, switch.own):
                    config._attn_implementation_internal = own


def _configs(model: nn.Module) -> list[PretrainedConfig]:
    """Every config of ``model`` that may name an attention implementation: its (sub)models' and their sub-configs,
    parents first."""
    found: dict[int, PretrainedConfig] = {}
    pending = [module.config for module in model.modules() if isinstance(module, PreTrainedModel)]
    while pending:
        config = pending.pop(0)
        if id(config) not in found:
            found[id(config)] = config
            pending.extend(sub for key in config.sub_configs if isinstance(sub := getattr(config, key, None), PretrainedConfig))
    return list(found.values())


def transformer_layers(model: nn.Module) -> list[nn.Module]:
    """The model's transformer blocks in order (transformers marks them as GradientCheckpointingLayer)."""
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def attach(model: PreTrainedModel, config: CalibrationConfig, pooling: Pooling) -> CalibrationPlan:
    """Resolve ``config`` for ``model``; the plan routes its attention through the calibrated backend
    during calibrated passes only (`CalibrationPlan.applied`)."""
    if not isinstance(config, CalibrationConfig):
        raise TypeError(f"config must be a CalibrationConfig (CalibrationConfig.parse(text) reads a text form), got "
                        f"{type(config).__name__}.")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}.")
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
    return CalibrationPlan(config, pooling, layers, layer_of, architecture, model, mask_kinds(model, blocks))


def mask_kinds(model: nn.Module, blocks: list[nn.Module]) -> tuple[str, ...]:
    """The kind of mask each block's attention takes: what the block says (``attention_type``), else the model's
    ``layer_types`` where they name every block (not a vision tower's too), else the block itself (``layer 3``),
    so that no check is remembered for a layer whose mask another layer's check did not see."""
    types = getattr(model.config, "layer_types", None) or ()
    return tuple(getattr(block, "attention_type", None) or (types[i] if len(types) == len(blocks) else f"layer {i}")
                 for i, block in enumerate(blocks))


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

    def plain() -> tuple[Tensor, Any]:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )

    state = _ACTIVE.get()
    layer = state.plan.layer_of.get(module) if state is not None else None
    if layer is not None:
        state.seen.add(layer)
    if layer is None:
        return plain()
    for name in _UNSUPPORTED_ARGUMENTS:  # in every layer of a calibrated pass: SDPA refuses them too, advising eager
        if kwargs.get(name) is not None:
            raise UnsupportedModelError(
                f"{state.plan.architecture} passes `{name}` to its attention, which calibrated rows cannot honour "
                "(they compute their own softmax); calibration is not available for this architecture."
            )
    if layer not in state.plan.layers:
        return plain()
    if dropout:  # transformers passes the module's dropout in training mode only
        raise UnsupportedModelError(
            f"{state.plan.architecture} is in training mode (attention dropout {dropout}), which calibrated rows do not "
            "apply: calibrate in eval mode (model.eval(); encode() runs in it).")
    if triton_attention.records_gradients(query, key, value):
        raise UnsupportedModelError(
            f"{state.plan.architecture}: a calibrated pass records no gradients (its rows are written in place, by the "
            "kernel or into SDPA's output): run it under torch.no_grad() or torch.inference_mode(), as encode() does.")
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", False))
    layout = state.layout
    strength = state.plan.config.strength
    # the one-pass Triton kernel (docs/method.md#s1-5) where it computes this layer exactly, else the PyTorch path
    fused = _fused_layout(state, layer, query, key, value, attention_mask, causal)
    if fused is None and layout.query_rows is None:  # its check of the model's mask joins the pass's one host read
        _layer_shared(attention_mask, layout, causal, query.dtype, query.shape[2])
    if not layout.on_host()[0].any_active:
        return plain()
    if layout.query_rows is None:  # mean pooling: every valid row
        if fused is not None:
            return triton_attention.fused_calibrated_attention(query, key, value, fused, strength, causal, scaling
                                                               ).transpose(1, 2), None
        return mean_rows(query, key, value, attention_mask, causal, scaling, layout, strength), None
    output, _ = plain()  # (N, L, H, D); the pooling rows are written over it
    if fused is not None:  # in place, by the kernel
        triton_attention.fused_calibrated_attention(query, key, value, fused, strength, causal, scaling,
                                                    out=output.transpose(1, 2))
        return output, None
    return pooled_row(output, query, key, value, attention_mask, causal, scaling, layout, strength), None


_FUSED: ContextVar[bool | None] = ContextVar("fairpos_fused", default=None)


@contextlib.contextmanager
def fused_kernel(enabled: bool) -> Iterator[None]:
    """Use the fused Triton kernel in this block wherever it applies (``True``: on any device, the CPU through
    Triton's interpreter, as the tests do) or never (``False``). Outside such a block it is used on CUDA where
    :func:`kernel_by_default` says."""
    token = _FUSED.set(enabled)
    try:
        yield
    finally:
        _FUSED.reset(token)


def kernel_by_default(dtype: torch.dtype, pooled: bool, mean_path: str) -> bool:
    """Whether CUDA runs the fused kernel where no :func:`fused_kernel` block says otherwise: for the pooling rows
    always; for mean pooling on the grouped path (:func:`mean_kernel`) in half precision. In fp32 (no TF32, so no
    tensor cores) the kernel's mean rows ran 1.4-3x slower than the PyTorch path on an H200 (docs/gpu.md), its
    pooling rows 0.6x."""
    return pooled or (mean_path == "grouped" and dtype != torch.float32)


def _fused_layout(state: _ForwardState, layer: int, query: Tensor, key: Tensor, value: Tensor,
                  attention_mask: Tensor | None, causal: bool) -> triton_attention.FusedLayout | None:
    """The fused kernel's layout of this pass where the kernel computes this layer exactly, else ``None`` (the
    PyTorch path). Decided once per pass and mask: its check of the mask joins the pass's one host read of the
    layout, and the kernel must have reproduced the explicit computation on first use (``verified``)."""
    layout = state.layout
    wanted = _FUSED.get()
    if wanted is None:
        wanted = query.is_cuda and kernel_by_default(query.dtype, layout.query_rows is not None, _MEAN_KERNEL.get())
    if not wanted:
        return None
    entry = ("fused", id(attention_mask), causal, query.dtype, tuple(query.shape[1:]), tuple(key.shape[1:]))
    kind = (state.plan.kinds[layer], causal, state.inputs)
    if entry not in state.shared:
        fused, verdict = None, None
        if triton_attention.call_refusal(query, key, value, layout) is None:
            fits, verdict = _mask_fits(state, kind, causal, attention_mask)
            if fits and triton_attention.verified(query.device, query.dtype, query.shape[-1], layout.query_rows is not None,
                                                  causal, layout.shares):
                fused = triton_attention.fused_layout(layout)
        state.shared[entry] = (attention_mask, fused, verdict)  # the mask is held so that its id stays unique in the pass
    _, fused, verdict = state.shared[entry]
    _remember(state, kind, verdict)  # a layer of another kind given the same mask learns the same
    return fused


def _mask_fits(state: _ForwardState, kind: tuple, causal: bool, attention_mask: Tensor | None) -> tuple[bool, bool | None]:
    """Whether the fused kernel takes this pass's padding (one side only) and the model's mask
    (:func:`~mteb_fairpos.triton_attention.model_mask_fits`), and what the check found about this kind of mask
    (``True`` fits at this length, ``False`` does not, ``None`` not checked).

    What the host already knows is not read: the padding where the caller gave the layout's host values
    (:meth:`CalibrationPlan.host_layout`), and the model's mask where a check is remembered for its kind (the layer's
    mask kind, causality and the model's inputs). Such a check holds for every shorter length when a row of the checked
    batch filled its whole length: the masks transformers makes of one kind (padding, causal, bidirectional, sliding
    window, chunked) hide only more keys as rows grow. A kind refused at a length keeps the PyTorch path (exact) at
    every longer one unchecked. ``encode`` runs its longest batches first, so most passes read nothing; the others
    read once, with the layout."""
    layout, plan = state.layout, state.plan
    length = layout.key_valid.shape[1]
    if attention_mask is not None and length >= plan.refused.get(kind, length + 1):
        return False, None
    known = layout.known()
    contiguous = known.contiguous if known is not None else None
    checked = attention_mask is not None and length > plan.fitted.get(kind, 0)
    with_layout = known is None and layout.query_rows is None  # a mean layout's own read brings it
    flags = [] if contiguous is not None or with_layout else [triton_attention.padding_fits(layout)]
    if checked:
        flags.append(triton_attention.model_mask_fits(layout, causal, attention_mask))
        if known is None or known.full is None:
            flags.append(_full(layout))
    host, values = layout.on_host(*flags)  # one read with the layout, or none where all of it is known
    if contiguous is None:
        contiguous = host.contiguous if host.contiguous is not None else values.pop(0)
    if not checked:
        return contiguous, None
    fits, full = values[0], values[1] if len(values) > 1 else known.full
    verdict = False if not fits else (True if full else None)
    return contiguous and fits, verdict


def _remember(state: _ForwardState, kind: tuple, verdict: bool | None) -> None:
    length, plan = state.layout.key_valid.shape[1], state.plan
    if verdict is True:
        plan.fitted[kind] = max(plan.fitted.get(kind, 0), length)
    elif verdict is False:
        plan.refused[kind] = min(plan.refused.get(kind, length), length)


def _full(layout: BasketLayout) -> Tensor:
    """0-d bool: a row of the batch fills its whole length."""
    return layout.key_valid.all(1).any()


def mean_rows(query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None, causal: bool, scaling: float,
              layout: BasketLayout, strength: float) -> Tensor:
    """Every calibrated row for mean pooling, (N, L, H, D), by the path :func:`mean_kernel` selects; the tiled path
    where a sequence's valid tokens have gaps (a mask no tokenizer makes), whose baskets the grouped path's key
    windows cannot hold."""
    path = _MEAN_KERNEL.get() if layout.on_host()[0].contiguous else "tiled"
    return MEAN_KERNELS[path](query, key, value, attention_mask, causal, scaling, layout, strength)


def pooled_row(output: Tensor, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None, causal: bool,
               scaling: float, layout: BasketLayout, strength: float) -> Tensor:
    """SDPA's ``output`` (N, L, H, D) with each sequence's pooling row replaced by its calibrated row.

    One ``q . K^T`` for the pooling rows of all heads (grouped-query heads folded into the rows, so K and V
    are not repeated), one softmax, the basket masses through the pass's membership matrix, and one
    product with V of the rows scaled basket by basket; batched matrix products over (sequence, key head),
    no host read, and a fixed number of operations whatever the number of baskets (docs/method.md#s1-5)."""
    n, h, _, d = query.shape
    kv_heads = key.shape[1]
    exact = torch.promote_types(query.dtype, torch.float32)
    shared = _pooled_row_shared(attention_mask, layout, causal, exact, key, h, strength)
    picked = _in(query.gather(2, shared.pick), exact).view(n * kv_heads, h // kv_heads, d)
    scores = torch.baddbmm(shared.bias, picked, _in(key, exact).flatten(0, 1).transpose(1, 2), alpha=scaling)
    probs = torch.softmax(scores, dim=-1).view(n, h, -1)  # (N, H, K)
    weights = _calibrated_weights(probs, layout, shared)
    out = torch.bmm(weights.view(n * kv_heads, h // kv_heads, -1), _in(value, exact).flatten(0, 1))
    return output.scatter_(1, shared.put, _in(out.view(n, 1, h, d), output.dtype))


def _in(tensor: Tensor, dtype: torch.dtype) -> Tensor:
    """``tensor`` in ``dtype``, with no operation where it already is."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _calibrated_weights(probs: Tensor, layout: BasketLayout, shared: _PooledShared) -> Tensor:
    """docs/method.md#s1-3 for one row per sequence and head, (N, H, K), as
    :func:`~mteb_fairpos.calibration.calibrate_rows` computes it, in fewer operations: a key of a non-empty basket
    becomes ``(1 - a) p + a t p / A_b``, an isolated token its blend; rows of sequences that are not calibrated
    (strength 0 there) come out unchanged."""
    mass = torch.bmm(probs, shared.members)  # (N, H, n_b): A_b
    n_filled = mass.sign().sum(-1, keepdim=True)  # masses are never negative: the baskets that hold attention
    target, iso_target = basket_targets(n_filled, probs.gather(-1, shared.isolated), layout)
    within = probs.div(torch.bmm(mass, shared.members_t)).nan_to_num_(0.0, 0.0)  # p / A_b (at most 1), 0 outside content
    return torch.addcmul(probs * shared.keep, within, shared.alpha * target).scatter_add_(
        -1, shared.isolated, shared.alpha * iso_target)


def tiled_mean_rows(query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None, causal: bool,
                    scaling: float, layout: BasketLayout, strength: float) -> Tensor:
    """Every row with an explicit softmax, query tile by query tile (memory bounded by the tile)."""
    output = torch.empty(query.shape[0], query.shape[2], query.shape[1], value.shape[-1], dtype=value.dtype, device=value.device)
    tile = max(1, TILE_ELEMENTS // (query.shape[0] * query.shape[1] * key.shape[2]))
    for start in range(0, query.shape[2], tile):
        rows = torch.arange(start, min(start + tile, query.shape[2]), device=query.device)
        output[:, rows] = _rows_output(query[:, :, rows], rows, key, value, attention_mask, causal, scaling, layout, strength)
    return output


def grouped_mean_rows(query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None, causal: bool,
                      scaling: float, layout: BasketLayout, strength: float) -> Tensor:
    """Every row from fused attention over key groups (see the module docstring); returns (N, L, H, D).

    One fused pass per content basket (at most ``basket_size`` keys, a view of K and V where every
    sequence's content starts at the same position) gives ``o_ib`` and its log-sum-exp; the
    isolated tokens are one key each. A calibrated row weighs every ``o_ib`` by a factor that needs
    the masses of all the row's baskets, known only after the last one. Up to ``HELD_BASKETS``
    baskets (512 tokens in baskets of 128) the outputs are kept and combined once, one pass each.
    Beyond, two running sums (:func:`_running_sums`) keep memory at two outputs whatever the
    length, at two passes per basket.
    """
    n, h, length, _ = query.shape
    if key.shape[2] != length:
        raise UnsupportedModelError(
            f"calibrated mean pooling needs keys for exactly the query positions ({key.shape[2]} keys, {length} "
            "queries): a key/value cache or cross-attention cannot be calibrated.")
    shared = _layer_shared(attention_mask, layout, causal, query.dtype, length)
    query = query.contiguous()  # once per layer, not once per basket: the kernel is slower on strided queries

    iso = layout.isolated  # (N, n_iso)
    v_iso = _gather_keys(value, iso).float()
    iso_scores = _grouped_matmul(query, _gather_keys(key, iso).transpose(-1, -2)).float() * scaling
    iso_scores = iso_scores.masked_fill(~shared.iso_allowed, float("-inf"))
    if shared.iso_additive is not None:
        iso_scores = iso_scores + shared.iso_additive

    def basket_attention(b: int) -> tuple[Tensor, Tensor]:
        """o_ib and lse_ib, -inf where a row sees no key of the basket (the kernel gives 0 there)."""
        window = shared.windows[b]
        bias, hidden = shared.key_masks[b] if shared.key_only else _basket_mask(
            attention_mask, layout, causal, window, length, False, shared.additive, query.dtype)
        out_b, lse_b = attention_with_lse(query, window.keys(key), window.keys(value), bias, scaling)
        return out_b, lse_b if hidden is None else lse_b.masked_fill(hidden, float("-inf"))

    n_baskets = len(shared.windows)
    lses = torch.empty(n_baskets, n, h, length, device=query.device)  # (n_b, N, H, L), filled basket by basket
    attended = (basket_attention(b) for b in range(n_baskets))
    hold_all = n_baskets <= HELD_BASKETS
    if hold_all:
        held = []
        for b, (out_b, lse_b) in enumerate(attended):
            held.append(out_b)
            lses[b] = lse_b
        del query  # the contiguous copy, before the output is allocated: the layer's peak stays below plain's
    else:
        weighted, summed, ref = _running_sums(attended, lses, check_on_host=not query.is_cuda)

    # docs/method.md#s1-3 counts the baskets that hold attention. One whose mass underflows to 0 is empty, as in
    # the explicit softmax.
    lse = torch.logsumexp(lses, 0)  # over every key of the row
    if iso.shape[1]:  # (a log-sum-exp over no keys costs more than one over four baskets)
        lse = torch.logaddexp(lse, torch.logsumexp(iso_scores, dim=-1))
    sees_any = lse > float("-inf")
    seen = None if hold_all else lses > float("-inf")  # before lses turns into masses
    masses = lses.sub_(lse).exp_().nan_to_num_(nan=0.0)  # A_ib; 0 for a row that sees nothing (NaN)
    filled = masses > 0
    a_iso = _softmax_or_zero(iso_scores, lse)  # original probability of each isolated token
    target, iso_target = basket_targets(filled.sum(0, dtype=torch.float32)[..., None], a_iso, layout)
    rows = shared.row_mask[:, None, :, None] & sees_any[..., None]  # calibrated; other rows stay plain
    iso_weights = torch.where(rows, strength * iso_target + (1 - strength) * a_iso, a_iso)
    # written straight in the (N, L, H, D) layout the model reshapes next, so that is a view, not a copy
    out = torch.empty(n, length, h, value.shape[-1], dtype=torch.float32, device=value.device).transpose(1, 2)

    if hold_all:  # w_ib = (1 - a) A_ib + a t_i, for the non-empty baskets of calibrated rows
        weights = torch.where(rows[None, ..., 0], (1 - strength) * masses + strength * target[..., 0] * filled, masses)
        torch.mul(held[0], weights[0, ..., None], out=out)
        for out_b, weight in zip(held[1:], weights[1:]):
            out.addcmul_(out_b, weight[..., None])
        del held
    else:  # calibrated: (1 - a) plain content + a t summed; such rows are rare (logit gaps over ~100), so the
        # output of a basket that underflowed is recomputed and taken back out of the sum
        underflow = seen.logical_and_(filled.logical_not_())
        empty = set(underflow.flatten(1).any(1).nonzero().flatten().tolist())
        for b in sorted(empty):
            summed -= torch.where(underflow[b][..., None], basket_attention(b)[0].float(), 0.0)
        to_plain = torch.where(sees_any, torch.exp(ref - lse), 0.0)[..., None]  # weighted * to_plain = plain content
        weighted_coef = torch.where(rows, (1 - strength) * to_plain, to_plain)
        summed_coef = torch.where(rows, strength * target, 0.0)
        torch.mul(weighted, weighted_coef, out=out).addcmul_(summed, summed_coef)
        del weighted, summed
    v_iso = v_iso.repeat_interleave(h // v_iso.shape[1], dim=1)  # (N, H, n_iso, D): a few values per head
    for j in range(iso.shape[1]):  # one isolated token at a time: no (N, H, L, D) temporary
        out.addcmul_(v_iso[:, :, j : j + 1], iso_weights[..., j : j + 1])
    return out.transpose(1, 2).to(value.dtype)


HELD_BASKETS = 4
"""Up to this many baskets, :func:`grouped_mean_rows` keeps every basket's output until it combines
them. That is at most four outputs of the layer in the model's dtype: no more than the feed-forward
block holds anyway (an intermediate four times the hidden size, plus its activation)."""


def _running_sums(attended: Iterator[tuple[Tensor, Tensor]], lses: Tensor, *, check_on_host: bool = True
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """Two fp32 sums over the baskets' (o_b, lse_b), filling ``lses``: ``summed`` = sum_b o_b and
    ``weighted`` = sum_b exp(lse_b - ref) o_b, the plain content output up to one factor per row; also ``ref``.

    ``ref`` (each row's frame) is the first basket's log-sum-exp and moves only when a later basket
    outweighs it by more than e^RESCALE_GAP, so the frame almost never has to be rescaled (flash
    attention rescales at every key block). Nothing made for one basket outlives its iteration but
    its log-sum-exp, in ``lses``: small tensors left between the per-basket outputs would keep the C
    allocator from reusing their memory (at 8,192 tokens, 1.5 GB of RSS instead of 0.1).

    ``check_on_host``: skip the rescaling where no frame moved, which the host reads from the device (free on
    a CPU). Without it (on a GPU) every basket rescales, by exactly 1 where the frame stays: the same sums, and
    no wait for the device per basket.
    """
    ref = torch.full(lses.shape[1:], _NO_FRAME, device=lses.device)
    weighted = summed = None
    for b, (out_b, lse_b) in enumerate(attended):
        out_b = out_b.float()
        lses[b] = lse_b
        moved = lse_b > ref + RESCALE_GAP
        if not check_on_host or bool(moved.any()):
            new_ref = torch.where(moved, lse_b, ref)
            if summed is not None and (not check_on_host or bool((moved & (ref > _NO_FRAME)).any())):  # rows holding a sum
                factor = torch.exp(ref - new_ref)[..., None]  # 1 where the frame stays
                weighted = summed * factor if weighted is None else weighted.mul_(factor)
            ref.copy_(new_ref)
        weight = torch.exp(lse_b - ref)[..., None]
        if summed is None:  # the first basket: its weight is 1 where a row sees it, and its output 0 elsewhere
            summed = out_b
        else:  # from the second on, both sums; the weighted one starts here, with no zero-filled buffer
            weighted = torch.addcmul(summed, out_b, weight) if weighted is None else weighted.addcmul_(out_b, weight)
            summed.add_(out_b)
        del out_b, lse_b  # before the next basket's output is allocated
    return (summed.clone() if weighted is None else weighted), summed, ref


RESCALE_GAP = 20.0
"""How far (in log space) a basket's log-sum-exp may exceed a row's frame before the row's
weighted sum is rescaled: terms stay below e^20 times a value, far from fp32 overflow."""
_NO_FRAME = -1e30
"""The frame of a row that has seen no basket yet: finite, so exp(lse - frame) needs no NaN guard."""


@dataclass(frozen=True)
class _Window:
    """One content basket's key slots, the same in every layer of a forward pass."""

    index: Tensor  # (N, S) key positions
    present: Tensor  # (N, S) bool: the slot holds a key of this basket
    span: tuple[int, int] | None  # the positions [start, stop) where they are the same for every sequence
    full: bool = False  # every slot of every sequence holds a key of this basket

    def keys(self, tensor: Tensor) -> Tensor:
        """This basket's slots of K or V, (N, H_kv, K, D) -> (N, H_kv, S, D): a view where the span is shared."""
        return tensor[:, :, self.span[0]:self.span[1]] if self.span is not None else _gather_keys(tensor, self.index)


def _basket_windows(layout: BasketLayout, keys: int) -> list[_Window]:
    """The key slots of each content basket in turn, from the layout's host values (no host read). Content is
    contiguous, so basket ``b`` spans ``basket_size`` positions from its sequence's first content key;
    where that start is the same for the whole batch (right padding, equal lengths) the keys are a view,
    else they are gathered.

    A short last basket's window is widened to a multiple of ``KEY_BLOCK`` keys (never beyond a full
    basket) over neighbouring keys, which ``present`` leaves out and the kernel masks: the CPU
    kernel runs 126 keys 1.2-1.7x slower than 128 (the last basket of a 512-token document with
    two isolated tokens), and the mask costs ~5 %."""
    device = layout.basket.device
    host, _ = layout.on_host()
    size = host.first_basket  # keys per basket (the basket size, or fewer)
    aligned = len(set(host.content_start)) == 1
    windows = []
    for b in range(host.n_baskets):
        if aligned:
            start = host.content_start[0] + b * size
            stop = min(start + size, keys)
            width = -(-(stop - start) // KEY_BLOCK) * KEY_BLOCK
            if stop - start < width <= min(size, keys):  # widen, backwards where the keys end
                stop = min(start + width, keys)
                start = stop - width
            index = torch.arange(start, stop, device=device).expand(layout.basket.shape[0], -1)
            full = all(first + b * size == start and first + min((b + 1) * size, count) == stop
                       for first, count in zip(host.content_start, host.n_content))
            windows.append(_Window(index, layout.basket[:, start:stop] == b, (start, stop), full))
        else:
            first = torch.tensor(host.content_start, device=device)
            position = first[:, None] + b * size + torch.arange(size, device=device)[None, :]  # (N, size)
            index = position.clamp(max=keys - 1)
            full = all((b + 1) * size <= count and first + (b + 1) * size <= keys
                       for first, count in zip(host.content_start, host.n_content))
            windows.append(_Window(index, (layout.basket.gather(1, index) == b) & (position < keys), None, full))
    return windows


@dataclass(frozen=True)
class _LayerShared:
    """What the mean-pooling rows of every calibrated layer of one forward pass have in common: the
    baskets' key windows, their masks where the model's mask hides padded keys only, the isolated
    tokens' mask and the calibrated rows. Made in the first calibrated layer and reused by the
    others, which then skip that mask arithmetic and the host reads of its checks (each a device
    synchronisation). Per-row masks (causal, additive) are as large as the rows and are made per layer."""

    mask: Tensor | None  # the model's mask this was made for (held, so its id stays unique during the pass)
    key_only: bool
    additive: bool
    windows: list[_Window]
    key_masks: list[tuple[Tensor | None, Tensor | None]]  # per window where key_only (else empty): see _basket_mask
    iso_allowed: Tensor  # (N, 1, L|1, n_iso)
    iso_additive: Tensor | None  # the model's additive mask at the isolated tokens, fp32
    row_mask: Tensor  # (N, L): calibrated rows


def _layer_shared(attention_mask: Tensor | None, layout: BasketLayout, causal: bool, dtype: torch.dtype,
                  length: int) -> _LayerShared:
    """The pass's :class:`_LayerShared` for this mask, made on first use (outside a pass: made afresh)."""
    state = _ACTIVE.get()
    memo = state.shared if state is not None and state.layout is layout else {}
    entry = (id(attention_mask), causal, dtype, length)
    if entry not in memo:
        key_only = _key_only(attention_mask, layout, causal)
        if isinstance(key_only, Tensor):
            key_only = layout.on_host(key_only)[1][0]
        additive = not key_only and attention_mask is not None and attention_mask.dtype != torch.bool
        iso = layout.isolated
        windows = _basket_windows(layout, length)
        key_masks = [_basket_mask(attention_mask, layout, causal, w, length, key_only, additive, dtype)
                     for w in windows] if key_only else []
        memo[entry] = _LayerShared(
            attention_mask, key_only, additive, windows, key_masks,
            _allowed(attention_mask, layout, causal, iso, torch.ones_like(iso, dtype=torch.bool), length, key_only),
            _gather_columns(attention_mask, iso, length).float() if additive else None,
            layout.row_mask())
    return memo[entry]


def _basket_mask(attention_mask: Tensor | None, layout: BasketLayout, causal: bool, window: _Window, length: int,
                 key_only: bool, additive: bool, dtype: torch.dtype) -> tuple[Tensor | None, Tensor | None]:
    """One basket's additive mask in ``dtype`` (``None`` where every row sees all its keys: the kernel runs
    faster without one) and the rows that see none of its keys (``None`` where there are none)."""
    allowed = _allowed(attention_mask, layout, causal, window.index, window.present, length, key_only)
    sees_all = key_only and window.full  # (N, 1, L|1, S); per-row masks are always applied (no host read)
    bias = None
    if additive or not sees_all:
        bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))
    if additive:
        bias = bias + _gather_columns(attention_mask, window.index, length).to(dtype)
    return bias, None if sees_all else ~allowed.any(-1)


KEY_BLOCK = 16
"""Key groups are padded to a multiple of this many keys (see :func:`_basket_windows`)."""


def _softmax_or_zero(scores: Tensor, lse: Tensor) -> Tensor:
    """exp(scores - lse), with 0 where a row sees no key at all (instead of NaN)."""
    return torch.where(torch.isfinite(lse)[..., None], torch.exp(scores - lse[..., None]), 0.0)


MEAN_KERNELS = {"grouped": grouped_mean_rows, "tiled": tiled_mean_rows}
"""The mean-pooling paths by name: ``grouped`` (fused kernels, the default) and ``tiled``."""
_MEAN_KERNEL: ContextVar[str] = ContextVar("fairpos_mean_kernel", default="grouped")


@contextlib.contextmanager
def mean_kernel(name: str) -> Iterator[None]:
    """Run the mean-pooling rows of calibrated passes in this block with the named path (benchmarks, tests)."""
    if name not in MEAN_KERNELS:
        raise ValueError(f"unknown mean-pooling kernel {name!r}; known: {sorted(MEAN_KERNELS)}.")
    token = _MEAN_KERNEL.set(name)
    try:
        yield
    finally:
        _MEAN_KERNEL.reset(token)


def _grouped_matmul(left: Tensor, right: Tensor) -> Tensor:
    """(N, H, L, X) @ (N, H_kv, X, Y) -> (N, H, L, Y), grouped-query heads without repeating the right side."""
    n, h, length, x = left.shape
    kv_heads = right.shape[1]
    return (left.reshape(n, kv_heads, (h // kv_heads) * length, x) @ right).reshape(n, h, length, -1)


def _gather_keys(tensor: Tensor, index: Tensor) -> Tensor:
    """(N, H_kv, K, D) gathered at (N, S) key positions -> (N, H_kv, S, D)."""
    n, kv_heads, _, d = tensor.shape
    return tensor.gather(2, index[:, None, :, None].expand(n, kv_heads, index.shape[1], d))


def _key_only(attention_mask: Tensor | None, layout: BasketLayout, causal: bool) -> bool | Tensor:
    """Whether the model's mask only hides padded keys (the same for every row), so per-basket masks
    need no row dimension; checked against the mask itself, never assumed (a 0-d bool tensor where the
    check needs the mask's values, for the caller to read with the layout's other host values)."""
    if causal:
        return False
    if attention_mask is None:
        return True
    if attention_mask.dtype != torch.bool:
        return False
    padding = layout.key_valid[:, None, None, :]
    return (attention_mask == padding).all()


def _gather_columns(attention_mask: Tensor, index: Tensor, length: int) -> Tensor:
    """The model's mask at key positions ``index`` ((N, S)) for every row: (N, 1|H, L, S)."""
    mask = attention_mask.expand(index.shape[0], -1, length, -1)
    return mask.gather(3, index[:, None, None, :].expand(-1, mask.shape[1], length, -1))


def _allowed(attention_mask: Tensor | None, layout: BasketLayout, causal: bool, index: Tensor, present: Tensor,
             length: int, key_only: bool) -> Tensor:
    """Bool (N, 1, L, S), or (N, 1, 1, S) for key-only masks: which rows may attend to the keys at
    ``index`` ((N, S)); ``present`` marks the slots that hold a key of the group."""
    valid = present & layout.key_valid.gather(1, index)
    if key_only:
        return valid[:, None, None, :]
    if attention_mask is not None:
        picked = _gather_columns(attention_mask, index, length)
        allowed = picked if picked.dtype == torch.bool else picked > torch.finfo(picked.dtype).min / 2
        return allowed & present[:, None, None, :]
    rows = torch.arange(length, device=index.device)[None, None, :, None]
    return valid[:, None, None, :] & (index[:, None, None, :] <= rows)


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
    """Calibrated attention output (N, R, H, D) of R query rows at positions ``rows`` ((R,)), with an explicit
    softmax: the tiled path's rows."""
    n, h, r, d = query.shape
    kv_heads = key.shape[1]
    grouped = query.reshape(n, kv_heads, (h // kv_heads) * r, d)  # GQA without repeating K and V
    # scores, softmax, calibration and the product with V in fp32 at least, whatever the model's dtype
    exact = torch.promote_types(query.dtype, torch.float32)
    bias = _row_bias(attention_mask, rows, key.shape[2], causal, layout, exact)
    scores = (grouped.to(exact) @ key.to(exact).transpose(-1, -2)).view(n, h, r, -1) * scaling
    probs = torch.softmax(scores + bias, dim=-1) * _sees_any(bias, attention_mask)[..., None]  # as SDPA
    probs = calibrate_rows(probs, layout, strength, layout.row_mask(rows))
    out = (probs.view(n, kv_heads, -1, probs.shape[-1]) @ value.to(exact)).view(n, h, r, -1)
    return out.transpose(1, 2).to(value.dtype)


@dataclass(frozen=True)
class _PooledShared:
    """What the pooling rows of every calibrated layer of a pass have in common (:func:`_pooled_row_shared`)."""

    mask: Tensor | None  # the model's mask this was made for (held, so its id stays unique during the pass)
    pick: Tensor  # (N, H, 1, D) the pooling row of each sequence, to gather from the queries
    put: Tensor  # (N, 1, H, D) the same, to scatter into the output
    bias: Tensor  # (N * H_kv, 1, K) additive mask of the pooling row, repeated over the key heads
    members: Tensor  # (N, K, n_b) basket membership, in the scores' dtype
    members_t: Tensor  # (N, n_b, K) its transpose, contiguous
    isolated: Tensor  # (N, H, n_iso) the isolated tokens, for every head
    alpha: Tensor  # (N, 1, 1) the strength for calibrated sequences, 0 for the others and where the row sees no key
    keep: Tensor  # (N, 1, 1) 1 - alpha, 0 where the row sees no key


def _pooled_row_shared(attention_mask: Tensor | None, layout: BasketLayout, causal: bool, dtype: torch.dtype,
                       key: Tensor, heads: int, strength: float) -> _PooledShared:
    """The pass's :class:`_PooledShared` for this mask, made in the first calibrated layer and reused
    (outside a pass: made afresh)."""
    state = _ACTIVE.get()
    memo = state.shared if state is not None and state.layout is layout else {}
    n, kv_heads, keys, d = key.shape
    entry = ("pooled row", id(attention_mask), causal, dtype, keys, kv_heads, heads, d, strength)
    if entry not in memo:
        rows = layout.query_rows
        bias = _row_bias(attention_mask, rows[:, None], keys, causal, layout, dtype)  # (N, 1, 1, K)
        members = content_members(layout, dtype)[:, 0]
        alpha = layout.active.to(dtype).view(n, 1, 1) * strength
        # a row a boolean mask hides every key from is 0, as SDPA gives it (the softmax of the bias is uniform)
        sees = _sees_any(bias, attention_mask).to(dtype).view(n, 1, 1)
        memo[entry] = _PooledShared(
            attention_mask, rows.view(n, 1, 1, 1).expand(n, heads, 1, d), rows.view(n, 1, 1, 1).expand(n, 1, heads, d),
            bias.expand(n, kv_heads, 1, keys).reshape(n * kv_heads, 1, keys), members, members.transpose(1, 2).contiguous(),
            layout.isolated[:, None, :].expand(n, heads, -1), alpha * sees, (1 - alpha) * sees)
    return memo[entry]


def _sees_any(bias: Tensor, attention_mask: Tensor | None) -> Tensor:
    """Per row of a :func:`_row_bias` (.., R, K), ``(.., R)`` bool: whether SDPA gives the row any output. A boolean
    mask that hides every key of a row makes it 0; an additive one leaves the softmax of the bias (uniform)."""
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        return torch.ones(bias.shape[:-1], dtype=torch.bool, device=bias.device)
    return (bias > torch.finfo(bias.dtype).min / 2).any(-1)


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
            return torch.zeros(picked.shape, dtype=dtype, device=picked.device).masked_fill_(~picked, minimum)
        return picked.to(dtype)
    allowed = layout.key_valid[:, None, None, :num_keys]
    if causal:
        keys = torch.arange(num_keys, device=rows.device)
        row_pos = rows if rows.dim() == 2 else rows[None, :]
        allowed = allowed & (keys[None, None, None, :] <= row_pos[:, None, :, None])
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, minimum)
