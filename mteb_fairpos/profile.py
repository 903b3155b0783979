"""The attention profile of the pooling query (docs/method.md#s1-6): where a model's pooling token looks.

For every text and every chosen layer, the post-softmax attention row of the pooling query is
averaged over heads and summed per key *position group*: the first valid token, the content
tokens between the first and the last valid token cut into baskets of ``basket_size`` (1-indexed
positions ``2..B+1``, ``B+2..2B+1``, ...), and the last valid token. For cls pooling the first
token is the pooling token and the last one the final special token (``[SEP]``/``</s>``); for
last-token pooling the last token is the pooling token and the first one the attention sink;
for mean pooling the row is the average of every valid query row. The profile is then averaged
over texts, a text contributing 0 to baskets it does not reach, so every layer's masses sum to 1
(``counts`` says how many texts reach each basket).

The rows are read from the eager softmax through nnsight (the route of :mod:`mteb_fairpos.reference`),
so the numbers are the model's own attention probabilities, uncalibrated.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .calibration import basket_layout, first_valid, last_valid
from .config import POOLINGS, CalibrationConfig, LayerSpec, Pooling, require_positive
from .model import load_checkpoint, model_inputs
from .reference import eager_session, hf_model, resolve_pooling, softmax_op


@dataclass(frozen=True)
class AttentionProfile:
    """Attention mass of the pooling query per key group, per layer, averaged over heads and texts."""

    layers: tuple[int, ...]
    """0-based indices of the profiled layers (rows of the arrays)."""
    basket_size: int
    pooling: Pooling
    first: np.ndarray
    """(L,) mass on the first valid token."""
    baskets: np.ndarray
    """(L, M) mass on each content basket; a text shorter than basket m contributes 0 to it."""
    last: np.ndarray
    """(L,) mass on the last valid token."""
    counts: np.ndarray
    """(M,) number of texts with at least one token in each basket."""
    n_texts: int
    content_tokens: int = 0
    """Content tokens (between the first and the last token) of the longest text: where the last basket ends."""
    short_texts: int = 0
    """Texts with less content than one basket: calibration at this basket size leaves them unchanged."""

    @property
    def masses(self) -> np.ndarray:
        """(L, M + 2): first token, the baskets, last token, in position order."""
        return np.concatenate([self.first[:, None], self.baskets, self.last[:, None]], axis=1)

    @property
    def labels(self) -> list[str]:
        """Column names of :attr:`masses` (1-indexed token positions)."""
        b = self.basket_size
        role_first = {"cls": "pooling", "last": "sink", "mean": "first"}[self.pooling]
        role_last = {"cls": "final special", "last": "pooling", "mean": "last"}[self.pooling]
        end = self.content_tokens or self.baskets.shape[1] * b
        middle = [f"tokens {2 + m * b}-{1 + min((m + 1) * b, end)}" for m in range(self.baskets.shape[1])]
        return [f"token 1 ({role_first})", *middle, f"last token ({role_last})"]

    @property
    def baskets_reached(self) -> np.ndarray:
        """(L, M) basket masses averaged only over the texts that reach each basket (no zero padding)."""
        return self.baskets * self.n_texts / np.maximum(self.counts, 1)[None, :]

    def mean(self) -> np.ndarray:
        """(M + 2,) the profile averaged over the profiled layers."""
        return self.masses.mean(axis=0)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (JSON-serialisable)."""
        return {
            "layers": list(self.layers),
            "basket_size": self.basket_size,
            "pooling": self.pooling,
            "n_texts": self.n_texts,
            "content_tokens": self.content_tokens,
            "short_texts": self.short_texts,
            "labels": self.labels,
            "masses": self.masses.tolist(),
            "mean": self.mean().tolist(),
            "first": self.first.tolist(),
            "baskets": self.baskets.tolist(),
            "last": self.last.tolist(),
            "counts": self.counts.tolist(),
            "baskets_reached": self.baskets_reached.tolist(),
        }


def pooling_rows(probs: Tensor, valid: Tensor, pooling: Pooling) -> Tensor:
    """The pooling query's attention row (N, K), averaged over heads, from the eager softmax (N, H, K, K)."""
    n = probs.shape[0]
    batch = torch.arange(n, device=probs.device)
    if pooling == "mean":
        weights = valid.to(probs.dtype)
        rows = (probs * weights[:, None, :, None]).sum(dim=2) / weights.sum(dim=1).clamp(min=1)[:, None, None]
        return rows.mean(dim=1)
    index = first_valid(valid) if pooling == "cls" else last_valid(valid)
    return probs[batch, :, index, :].mean(dim=1)


def group_masses(rows: Tensor, valid: Tensor, basket_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """Split attention rows (N, K) into first-token, per-basket (N, M) and last-token masses."""
    n, k = rows.shape
    batch = torch.arange(n, device=rows.device)
    first, last = first_valid(valid), last_valid(valid)
    positions = torch.arange(k, device=rows.device)[None, :]
    content = valid & (positions > first[:, None]) & (positions < last[:, None])
    rank = content.long().cumsum(dim=1) - 1
    basket = torch.where(content, torch.div(rank, basket_size, rounding_mode="floor"), 0)
    n_baskets = int(torch.div(content.sum(dim=1).max() + basket_size - 1, basket_size, rounding_mode="floor")) if n else 0
    # one column more than the baskets: rows without content add their zeros at 0, which must exist
    masses = rows.new_zeros(n, n_baskets + 1).scatter_add_(1, basket, torch.where(content, rows, 0))[:, :n_baskets]
    first_mass = rows[batch, first]
    last_mass = torch.where(last != first, rows[batch, last], 0)  # a one-token text: counted once, as first
    return first_mass, masses, last_mass


@torch.no_grad()
def attention_profile(
    model: Any,
    texts: str | Iterable[str],
    basket_size: int = 128,
    layers: LayerSpec | None = None,
    *,
    pooling: Pooling | None = None,
    batch_size: int = 8,
    prompt: str | None = None,
) -> AttentionProfile:
    """The attention profile of the pooling query over ``texts`` (docs/method.md#s1-6).

    Args:
        model: a ``SentenceTransformer`` (or a model name/path, loaded with sentence-transformers).
        texts: the texts; longer ones are truncated at the model's maximum length as in ``encode``.
        basket_size: tokens per content basket (default 128, as in the paper).
        layers: which layers: ``None`` for all, else a layer set as in :class:`CalibrationConfig`
            (``"last_half"``, ``"last"``, ``N`` last layers, a fraction, explicit 0-based indices).
        pooling: the pooling query; default read from the model's Pooling module.
        batch_size: texts per forward pass.
        prompt: a prompt prepended to every text (default none).
    """
    from sentence_transformers import SentenceTransformer

    if isinstance(model, str):
        model = load_checkpoint(model, device="cpu")
    if not isinstance(model, SentenceTransformer):
        raise TypeError(f"attention_profile needs a SentenceTransformer or a model path, got {type(model).__name__}.")
    if not isinstance(texts, (str, Iterable)):  # a list, an array, a generator: as encode takes them
        raise TypeError(f"texts must be a text or a list of texts, got {type(texts).__name__}.")
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise ValueError("attention_profile needs at least one text.")
    if (bad := next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)) is not None:
        raise TypeError(f"texts must be strings; text {bad} is {type(texts[bad]).__name__}: {texts[bad]!r}.")
    require_positive(basket_size, "basket_size")
    require_positive(batch_size, "batch_size")
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)} or None (read from the model), got {pooling!r}.")
    resolved = resolve_pooling(model, None, pooling)
    inner = hf_model(model)

    from nnsight import save

    sums: dict[int, list[Tensor]] = {}
    counts = torch.zeros(0, dtype=torch.long)
    content = short = 0
    isolated = CalibrationConfig(basket_size=basket_size).isolated_tokens(resolved)
    with eager_session(inner) as (envoy, attention):
        chosen = tuple(range(len(attention))) if layers is None else CalibrationConfig(layers=layers).resolve_layers(len(attention))
        for start in range(0, len(texts), batch_size):
            features = model.preprocess(texts[start : start + batch_size], prompt=prompt)
            features = {k: v.to(model.device) if isinstance(v, Tensor) else v for k, v in model_inputs(features).items()}
            valid = features["attention_mask"].bool()
            content = max(content, int((valid.sum(dim=1) - 2).clamp(min=0).max()))
            short += int((~basket_layout(valid, resolved, basket_size, isolated).active).sum())
            rows: list[Tensor] = []
            with envoy.trace(features, fn=lambda batch: SentenceTransformer.forward(model, batch)):
                for index in chosen:
                    rows.append(save(pooling_rows(softmax_op(attention[index]).output.float(), valid, resolved)))
            for index, row in zip(chosen, rows):
                first, masses, last = group_masses(row.cpu(), valid.cpu(), basket_size)
                _accumulate(sums, index, first.sum(), masses.sum(dim=0), last.sum())
            reached = group_masses(torch.ones(valid.shape), valid.cpu(), basket_size)[1] > 0
            counts = _pad_add(counts, reached.sum(dim=0))

    width = counts.shape[0]
    first = np.array([float(sums[i][0]) for i in chosen]) / len(texts)
    last = np.array([float(sums[i][2]) for i in chosen]) / len(texts)
    baskets = np.stack([_pad_to(sums[i][1], width).numpy() for i in chosen]) / len(texts)
    return AttentionProfile(
        layers=chosen, basket_size=basket_size, pooling=resolved, first=first, baskets=baskets.astype(np.float64),
        last=last, counts=counts.numpy(), n_texts=len(texts), content_tokens=content, short_texts=short,
    )


def _pad_to(values: Tensor, width: int) -> Tensor:
    return torch.cat([values.double(), values.new_zeros(width - values.shape[0], dtype=torch.float64)])


def _pad_add(total: Tensor, extra: Tensor) -> Tensor:
    width = max(total.shape[0], extra.shape[0])
    return _pad_to(total, width).long() + _pad_to(extra, width).long()


def _accumulate(sums: dict[int, list[Tensor]], layer: int, first: Tensor, baskets: Tensor, last: Tensor) -> None:
    if layer not in sums:
        sums[layer] = [first.double(), baskets.double(), last.double()]
        return
    entry = sums[layer]
    width = max(entry[1].shape[0], baskets.shape[0])
    sums[layer] = [entry[0] + first.double(), _pad_to(entry[1], width) + _pad_to(baskets, width), entry[2] + last.double()]


def format_profile(profile: AttentionProfile) -> str:
    """A text table: one row per token group, one column per layer and their mean."""
    header = ["tokens".ljust(26)] + [f"{'L' + str(i + 1):>6}" for i in profile.layers] + ["  mean", " texts"]
    lines = ["  ".join(header)]
    masses, mean = profile.masses, profile.mean()
    reach = [profile.n_texts, *profile.counts.tolist(), profile.n_texts]
    for column, label in enumerate(profile.labels):
        cells = [label.ljust(26)] + [f"{masses[row, column]:6.4f}" for row in range(masses.shape[0])]
        cells += [f"{mean[column]:6.4f}", f"{reach[column]:6d}"]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def plot_profile(profile: AttentionProfile, path: str, title: str | None = None) -> str:
    """Write the profile as a PNG (one thin line per layer, the layer mean in bold); returns the path
    written (``.png`` is added to a path without a suffix, as matplotlib does)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    masses = profile.masses
    x = np.arange(masses.shape[1])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(x) + 3), 4.0))
    try:
        cmap = plt.get_cmap("viridis")
        for row, layer in enumerate(profile.layers):
            colour = cmap(row / max(1, len(profile.layers) - 1))
            ax.plot(x, masses[row], marker=".", linewidth=0.8, alpha=0.7, color=colour, label=f"layer {layer + 1}")
        ax.plot(x, profile.mean(), marker="o", linewidth=2.2, color="black", label="mean of layers")
        ax.set_xticks(x)
        ax.set_xticklabels(profile.labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("attention mass of the pooling query")
        ax.set_ylim(bottom=0)
        ax.set_title(title or f"attention profile ({profile.pooling} pooling, B={profile.basket_size}, {profile.n_texts} texts)")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = str(path) if os.path.splitext(str(path))[1] else f"{path}.png"
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path
