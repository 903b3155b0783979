"""The calibration math of docs/method.md#s1-1 to #s1-3, in the order the method states it.

Pure functions, shared by the fast attention path (:mod:`mteb_fairpos.attention`) and the
nnsight reference (:mod:`mteb_fairpos.reference`):

* :func:`basket_layout` (docs/method.md#s1-1 to #s1-2) reads a batch's padding mask once and says, for every
  key, which content basket it belongs to, which tokens are isolated and which query rows
  are calibrated;
* :func:`calibrate_rows` (docs/method.md#s1-3) rewrites rows of post-softmax attention probabilities.
  Its arithmetic needs only each row's basket masses and isolated-token probabilities:
  :func:`basket_targets` (steps 1-4) gives the calibrated mass of a basket, the same for every
  non-empty basket of a row, and step 5 scales every key of a basket by one factor.

Everything is vectorised over batch, heads and rows; left and right padding are handled
alike because positions are counted among *valid* tokens only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from .config import Pooling, SharePolicy


@dataclass(frozen=True)
class BasketLayout:
    """Where every key of a padded batch sits (docs/method.md#s1-2). Shapes use ``N`` = batch, ``K`` = keys."""

    basket: Tensor
    """(N, K) long: content basket of each key, -1 for isolated and padded keys."""
    n_baskets: Tensor
    """(N,) long: number of content baskets ``n_b`` (at least 1)."""
    isolated: Tensor
    """(N, n_iso) long: key index of each isolated token, in the order of ``shares``."""
    shares: tuple[SharePolicy, ...]
    """Share policy of each isolated token (docs/method.md#s1-3 step 2)."""
    active: Tensor
    """(N,) bool: sequences with at least one full basket of content; the rest stay uncalibrated."""
    query_rows: Tensor | None
    """(N,) long: the pooling row for cls/last pooling; ``None`` for mean (every valid row)."""
    key_valid: Tensor
    """(N, K) bool: the padding mask."""
    basket_size: int
    _host: dict = field(default_factory=dict, repr=False, compare=False)
    """The layout's host values and the constants its calibrated rows derive from it, made once."""

    def on_host(self, *flags: Tensor) -> tuple[HostLayout, list[bool]]:
        """What the calibrated layers need on the host (:class:`HostLayout`) and the truth of each 0-d bool
        ``flags``, in one device-to-host read: the host waits for the device once per batch, not once per layer.
        The layout's part is read once and kept; later calls that pass no flags read nothing."""
        if "layout" in self._host and not flags:
            return self._host["layout"], []
        content = self.basket >= 0
        mean = self.query_rows is None  # mean pooling's grouped path needs to know the padding (`attention.mean_rows`)
        runs = [contiguous(self.key_valid).long().view(1)] if mean and "layout" not in self._host else []
        summary = torch.cat([self.active.long(), first_valid(content), content.sum(1), *runs,
                             *(flag.long().view(1) for flag in flags)])
        values = summary.tolist()
        n = self.key_valid.shape[0]
        if "layout" not in self._host:
            self._host["layout"] = HostLayout(values[:n], values[n:2 * n], values[2 * n:3 * n], self.basket_size,
                                              contiguous=bool(values[3 * n]) if runs else None)
        return self._host["layout"], [bool(value) for value in values[3 * n + len(runs):]]

    def known(self) -> HostLayout | None:
        """The host values, where they are known without a read (given, or read already)."""
        return self._host.get("layout")

    def given(self, host: HostLayout) -> BasketLayout:
        """This layout with its host values already known (made from the same mask on the host, before it went to
        the device): :meth:`on_host` then reads nothing but flags."""
        self._host["layout"] = host
        return self

    def baskets_and_isolated(self, dtype: torch.dtype) -> Tensor:
        """(N, 1, 1, 1) ``n_b + n_iso`` in ``dtype`` (docs/method.md#s1-3 step 1), made once per dtype."""
        entry = ("n_total", dtype)
        if entry not in self._host:
            self._host[entry] = (self.n_baskets + self.isolated.shape[1]).to(dtype)[:, None, None, None]
        return self._host[entry]

    def row_mask(self, rows: Tensor | None = None) -> Tensor:
        """(N, R) bool: which of the query ``rows`` (default: all K rows) get calibrated."""
        if rows is None:
            rows = torch.arange(self.key_valid.shape[1], device=self.key_valid.device)
        if self.query_rows is None:
            mask = self.key_valid[:, rows]
        else:
            mask = rows[None, :] == self.query_rows[:, None]
        return mask & self.active[:, None]


@dataclass(frozen=True)
class HostLayout:
    """A batch's layout as Python values, read from the device once (:meth:`BasketLayout.on_host`)."""

    active: list[int]
    """Per sequence: 1 where it is calibrated."""
    content_start: list[int]
    """Per sequence: the position of its first content key (0 where it has none)."""
    n_content: list[int]
    """Per sequence: its content keys."""
    basket_size: int
    contiguous: bool | None = None
    """Every sequence's valid tokens are contiguous (padding on one side only), as the fused paths' key windows assume
    (:func:`contiguous`); ``None``: not known on the host (a cls/last layout read from the device: only the kernel's
    check reads it there)."""
    full: bool | None = None
    """A sequence fills the batch's whole length; ``None``: not known on the host."""
    shape: tuple[int, ...] | None = None
    """The (N, K) of the mask it was made from, where it was made on the host."""
    isolated: tuple[str, ...] | None = None
    """The isolated tokens it was made with (``"bos"``, ``"eos"``), where it was made on the host."""

    @property
    def any_active(self) -> bool:
        return any(self.active)

    @property
    def n_baskets(self) -> int:
        """The most content baskets of any sequence (at least 1)."""
        return max(1, max(-(-count // self.basket_size) for count in self.n_content))

    @property
    def first_basket(self) -> int:
        """Keys in the largest first basket (at least 1): the key slots of every basket's window."""
        return max(1, max(min(self.basket_size, count) for count in self.n_content))


def contiguous(valid: Tensor) -> Tensor:
    """0-d bool: every row of a (N, K) bool mask holds its valid tokens in one run (padding on one side only, as a
    tokenizer pads), so a sequence's baskets are ``basket_size`` keys each from its first content key."""
    positions = torch.arange(valid.shape[1], device=valid.device)
    start = first_valid(valid)[:, None]
    return valid.eq((positions >= start) & (positions < start + valid.sum(1, keepdim=True))).all()


def first_valid(valid: Tensor) -> Tensor:
    """(N,) index of the first valid token of each row of a (N, K) bool mask."""
    return valid.to(torch.int8).argmax(dim=1)


def last_valid(valid: Tensor) -> Tensor:
    """(N,) index of the last valid token of each row of a (N, K) bool mask."""
    return valid.shape[1] - 1 - valid.flip(1).to(torch.int8).argmax(dim=1)


def basket_layout(
    attention_mask: Tensor,
    pooling: Pooling,
    basket_size: int,
    isolated: Sequence[tuple[str, SharePolicy]],
) -> BasketLayout:
    """Cut every sequence's content tokens into baskets of ``basket_size`` (docs/method.md#s1-1 to #s1-2).

    ``attention_mask`` is the tokenizer's (N, K) padding mask (1 = valid), with padding on
    either side. ``isolated`` lists ``("bos" | "eos", policy)`` pairs, as produced by
    :meth:`CalibrationConfig.isolated_tokens`.
    """
    valid = attention_mask.bool()
    n, k = valid.shape
    ends = {"bos": first_valid(valid), "eos": last_valid(valid)}
    iso_index = torch.stack([ends[name] for name, _ in isolated], dim=1) if isolated else valid.new_zeros((n, 0), dtype=torch.long)

    content = valid.clone()
    content.scatter_(1, iso_index, False)
    rank = content.long().cumsum(dim=1) - 1  # position among content tokens
    basket = torch.where(content, torch.div(rank, basket_size, rounding_mode="floor"), -1)
    n_content = content.sum(dim=1)
    n_baskets = torch.div(n_content + basket_size - 1, basket_size, rounding_mode="floor").clamp(min=1)

    query_rows = {"cls": ends["bos"], "last": ends["eos"], "mean": None}[pooling]
    return BasketLayout(
        basket=basket,
        n_baskets=n_baskets,
        isolated=iso_index,
        shares=tuple(policy for _, policy in isolated),
        active=n_content >= basket_size,
        query_rows=query_rows,
        key_valid=valid,
        basket_size=basket_size,
    )


def host_layout(attention_mask: Tensor, basket_size: int, isolated: Sequence[tuple[str, SharePolicy]]) -> HostLayout:
    """What :meth:`BasketLayout.on_host` reads of :func:`basket_layout`'s layout of this CPU ``attention_mask``, with
    the mask's ``contiguous`` and ``full`` flags and its shape: made from the tokenizer's mask before the batch goes to
    the device, so that the pass reads nothing back.

    In numpy, not torch: torch's CPU operations run on its OpenMP threads, which then spin waiting for more work
    while the tokenizer's own threads cut the next batch, and that made tokenizing 128 documents of 512 tokens
    ~15 % slower on 2 cores (``benchmarks/bench_preprocess.py``); numpy's run on the calling thread alone.
    """
    valid = attention_mask.numpy() != 0
    n, k = valid.shape
    rows, positions = np.arange(n), np.arange(k)
    first, count = valid.argmax(1), valid.sum(1)  # as first_valid: 0 in a row without a valid token
    ends = {"bos": first, "eos": k - 1 - valid[:, ::-1].argmax(1)}
    content = valid.copy()
    for name, _ in isolated:
        content[rows, ends[name]] = False
    n_content = content.sum(1)
    contiguous = (valid == ((positions >= first[:, None]) & (positions < (first + count)[:, None]))).all()
    return HostLayout((n_content >= basket_size).astype(int).tolist(), content.argmax(1).tolist(), n_content.tolist(),
                      basket_size, contiguous=bool(contiguous), full=bool(valid.all(1).any()), shape=(n, k),
                      isolated=tuple(name for name, _ in isolated))


def content_members(layout: BasketLayout, dtype: torch.dtype) -> Tensor:
    """(N, 1, K, n_b) membership of every key in every content basket (0 for isolated and padded keys)."""
    baskets = torch.arange(layout.on_host()[0].n_baskets, device=layout.basket.device)
    return (layout.basket[:, None, :, None] == baskets).to(dtype)  # isolated and padded keys (-1) are in none


def calibrate_rows(probs: Tensor, layout: BasketLayout, strength: float, row_mask: Tensor) -> Tensor:
    """Calibrate rows of attention probabilities (docs/method.md#s1-3, steps 1-5).

    Args:
        probs: (N, H, R, K) softmax output; padded keys are 0.
        layout: the batch's :class:`BasketLayout`.
        strength: ``alpha`` in [0, 1].
        row_mask: (N, R) bool, the rows to calibrate (see :meth:`BasketLayout.row_mask`);
            other rows are returned unchanged.
    """
    members = content_members(layout, probs.dtype)
    iso_index = layout.isolated[:, None, None, :].expand(*probs.shape[:3], -1)
    original_iso = probs.gather(-1, iso_index)
    mass = probs @ members  # (N, H, R, n_b): A_b, the attention mass of each content basket
    target, iso_target = basket_targets((mass > 0).sum(-1, keepdim=True), original_iso, layout)
    # Step 5, blend: a key k of a non-empty basket b becomes (1 - a) p_k + a t p_k / A_b; proportions
    # inside a basket are kept. p_k / A_b is at most 1, where t / A_b overflows for a mass in fp32's
    # subnormal range (a logit gap of ~90 between baskets).
    key_mass = mass @ members.transpose(-1, -2)  # A_b of each key's basket, 0 outside content
    within = probs / torch.where(key_mass > 0, key_mass, 1)
    # Rows left alone keep p_k and their own isolated values, so they come out unchanged.
    rows = row_mask[:, None, :, None]
    exact = dict(dtype=torch.promote_types(probs.dtype, torch.float32), device=probs.device)  # float64 keeps 1 - a
    keep = torch.where(rows, torch.tensor(1 - strength, **exact), torch.tensor(1.0, **exact))
    gain = torch.where(rows, strength * target, 0.0)
    isolated = torch.where(rows, strength * iso_target + (1 - strength) * original_iso, original_iso)
    return within.mul_(gain).add_(probs * keep).scatter_(-1, iso_index, isolated)


def basket_targets(n_filled: Tensor, original_iso: Tensor, layout: BasketLayout) -> tuple[Tensor, Tensor]:
    """docs/method.md#s1-3 steps 1-4: the calibrated (alpha = 1) mass of each non-empty content basket, the same
    for all of them, and the calibrated probability of each isolated token.

    They depend only on how many content baskets of the row hold attention (``n_filled``,
    (N, H, R, 1)) and on the isolated tokens' original probabilities (``original_iso``,
    (N, H, R, n_iso)); that is what lets fused kernels compute a calibrated row from per-group
    outputs without the probability matrix.

    docs/method.md#s1-3 leaves one case open: isolated shares that add up to more than 1 (e.g. an
    "original" BOS holding 0.9 of the row plus an "equal" EOS share of 1/3). Content then gets
    nothing and step 4 scales the shares down to sum to 1, so the row stays a distribution.
    """
    dtype = original_iso.dtype
    n_total = layout.baskets_and_isolated(dtype)
    if n_filled.dim() != n_total.dim():  # rows given as (N, H, R) rather than (N, H, R, 1)
        n_total = n_total.view(-1, *(1,) * (n_filled.dim() - 1))

    # Step 1: c_k = a_k / A_b(k) / n_total, so the content part sums to (#non-empty baskets) / n_total.
    content_total = n_filled / n_total

    # Step 2: each isolated token's share under its policy.
    if all(policy == "original" for policy in layout.shares):
        shares = original_iso
    else:
        shares = torch.stack([_share(policy, original_iso[..., j], n_total.squeeze(-1))
                              for j, policy in enumerate(layout.shares)], dim=-1)
    share_total = shares.sum(-1, keepdim=True)

    # Step 3: unless every share is "equal", rescale content to exactly what the shares leave. (Constants are 0-d
    # tensors: a Python number becomes a tensor in every operation it enters.)
    if all(policy == "equal" for policy in layout.shares):
        rescale = torch.ones_like(content_total)
        total = content_total + share_total
    else:
        left = (_ONE - share_total).clamp_(min=0)  # shares above 1: content gets 0, step 4 rescales them
        rescale = left / torch.where(content_total == _ZERO, _ONE, content_total)
        total = torch.addcmul(share_total, content_total, rescale)

    # Step 4: normalise; the row total is known in closed form (content and shares are never negative).
    total = torch.where(total == _ZERO, _ONE, total)
    return rescale / (n_total * total), shares / total


_ZERO, _ONE = torch.zeros(()), torch.ones(())


def _share(policy: SharePolicy, original: Tensor, n_total: Tensor) -> Tensor:
    """An isolated token's share under ``policy``; none for a row that does not see it (a later token in a causal
    model), as an empty basket gets none: its original probability is 0 there. As for a basket, a probability that
    underflows to 0 counts as not seen here (a logit gap above ~87 in fp32, ~17 where a model's eager softmax runs in
    fp16), where the fused kernel, which has the scores, counts only what the row cannot see (docs/method.md#s1-5)."""
    if policy == "original":
        return original
    share = (1 / n_total).expand_as(original) if policy == "equal" else torch.full_like(original, float(policy))
    return torch.where(original > 0, share, 0)
