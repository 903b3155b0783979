"""`CalibrationConfig`: what to calibrate, validated once, with a stable text form.

The text form (``str(config)``, parsed back by :meth:`CalibrationConfig.parse`) names result
folders and model names, so two configs never write to the same place. Only settings that
differ from the defaults appear after the three always-present ones, e.g.
``b128_lhalf_a0.5`` or ``b512_li6.7.8_a1_pcls_sb0.1``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Literal, Union

import numpy as np

Pooling = Literal["cls", "last", "mean"]
POOLINGS: tuple[str, ...] = ("cls", "last", "mean")

SharePolicy = Union[Literal["original", "equal"], float]
"""How much attention an isolated token (BOS/EOS) keeps: see docs/method.md#s1-3 step 2."""

LayerSpec = Union[Literal["last_half", "last"], int, float, tuple[int, ...]]
"""Which layers are calibrated: see docs/method.md#s1-4 and :meth:`CalibrationConfig.resolve_layers`."""

_POLICY_TEXT = {"original": "orig", "equal": "eq"}
_TEXT_POLICY = {v: k for k, v in _POLICY_TEXT.items()}


def whole(value: object) -> bool:
    """Whether ``value`` is an integer (numpy's too), not a bool: what a count, a size or a seed must be."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def boolean(value: object) -> bool:
    """Whether ``value`` is a flag: ``True`` or ``False``, numpy's too (not 1, 0.0 or the text "false")."""
    return isinstance(value, (bool, np.bool_))


def require_positive(value: object, name: str) -> None:
    """Refuse ``value`` unless it is a positive integer, naming the argument ``name``."""
    if not whole(value) or value < 1:  # type: ignore[operator]
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


class ConfigError(ValueError):
    """An invalid calibration setting; the message says what is allowed."""


@dataclass(frozen=True, eq=False)
class CalibrationConfig:
    """Settings of inference-time attention calibration (docs/method.md#s1).

    Two configs are the same config when their text forms are: ``layers=1`` (the last layer) and ``layers=1.0``
    (every layer) are not, though ``1 == 1.0``.

    Args:
        basket_size: tokens per content basket (``B``); inputs with fewer content tokens
            than this are left uncalibrated.
        layers: ``"last_half"``, ``"last"``, an int ``N`` (the last N layers), a float in
            (0, 1] (that fraction of the last layers) or explicit 0-based indices.
        strength: ``alpha`` in [0, 1]; 0 is the plain model, 1 full calibration.
        pooling: ``"cls"``, ``"last"`` or ``"mean"``; ``None`` reads it from the
            sentence-transformers Pooling module.
        isolate_bos / isolate_eos: keep the first / last valid token out of the content
            baskets; ``None`` follows the pooling (docs/method.md#s1-1 table).
        bos_share / eos_share: share policy of an isolated token: ``"original"``,
            ``"equal"`` or a float in [0, 1).
    """

    basket_size: int = 128
    layers: LayerSpec = "last_half"
    strength: float = 0.5
    pooling: Pooling | None = None
    isolate_bos: bool | None = None
    isolate_eos: bool | None = None
    bos_share: SharePolicy = "original"
    eos_share: SharePolicy = "equal"

    def __post_init__(self) -> None:
        if isinstance(self.basket_size, bool) or not isinstance(self.basket_size, numbers.Integral) or \
                not 0 < self.basket_size < 2**62:  # torch holds positions in int64
            raise ConfigError(f"basket_size must be a positive integer (e.g. 128), got {self.basket_size!r}.")
        object.__setattr__(self, "basket_size", int(self.basket_size))  # numpy's integers too, stored as int
        if isinstance(self.strength, bool) or not isinstance(self.strength, numbers.Real):
            raise ConfigError(f"strength must be a number in [0, 1], got {self.strength!r}.")
        if not (0.0 <= float(self.strength) <= 1.0) or math.isnan(self.strength):
            raise ConfigError(f"strength must lie in [0, 1] (0 = plain model, 1 = full calibration), got {self.strength}.")
        object.__setattr__(self, "strength", float(self.strength) + 0.0)  # -0.0 is 0: one text form
        object.__setattr__(self, "layers", _check_layers(self.layers))
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS} or None (read from the model), got {self.pooling!r}.")
        for name in ("isolate_bos", "isolate_eos"):
            value = getattr(self, name)
            if value is not None and not boolean(value):  # 1 == True, 0.0 == False: not flags
                raise ConfigError(f"{name} must be True, False or None (follow the pooling), got {value!r}.")
            object.__setattr__(self, name, None if value is None else bool(value))
        for name in ("bos_share", "eos_share"):
            object.__setattr__(self, name, _check_policy(name, getattr(self, name)))
        fixed = [p for p in (self.bos_share, self.eos_share) if isinstance(p, float)]
        if sum(fixed) >= 1.0:
            raise ConfigError(
                f"bos_share + eos_share = {sum(fixed):g} leaves no attention mass for the content; "
                "fixed shares must sum to less than 1."
            )

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other) if isinstance(other, CalibrationConfig) else NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    # ------------------------------------------------------------------ layers
    def resolve_layers(self, num_layers: int) -> tuple[int, ...]:
        """The 0-based indices of the calibrated layers in a model with ``num_layers`` layers."""
        spec = self.layers
        if spec == "last_half":
            count = max(1, num_layers // 2)  # a one-layer model calibrates its layer, as the authors' library does
        elif spec == "last":
            count = 1
        elif isinstance(spec, int):
            if spec > num_layers:
                raise ConfigError(f"layers={spec} asks for the last {spec} layers, but the model has {num_layers}.")
            count = spec
        elif isinstance(spec, float):
            count = max(1, round(spec * num_layers))
        else:
            bad = [i for i in spec if i >= num_layers]
            if bad:
                raise ConfigError(
                    f"layer indices {bad} are outside the model, which has layers 0..{num_layers - 1}."
                )
            return tuple(sorted(spec))
        return tuple(range(num_layers - count, num_layers))

    # ------------------------------------------------------------------ isolation
    def isolated_tokens(self, pooling: Pooling) -> tuple[tuple[str, SharePolicy], ...]:
        """The isolated tokens ("bos"/"eos") for ``pooling`` with their share policies."""
        bos = self.isolate_bos if self.isolate_bos is not None else pooling in ("cls", "last")
        eos = self.isolate_eos if self.isolate_eos is not None else pooling == "last"
        chosen = []
        if bos:
            chosen.append(("bos", self.bos_share))
        if eos:
            chosen.append(("eos", self.eos_share))
        return tuple(chosen)

    # ------------------------------------------------------------------ text form
    def __str__(self) -> str:
        parts = [f"b{self.basket_size}", "l" + _layers_text(self.layers), f"a{_num(self.strength)}"]
        if self.pooling is not None:
            parts.append(f"p{self.pooling}")
        if self.isolate_bos is not None:
            parts.append(f"ib{int(self.isolate_bos)}")
        if self.isolate_eos is not None:
            parts.append(f"ie{int(self.isolate_eos)}")
        if self.bos_share != "original":
            parts.append("sb" + _policy_text(self.bos_share))
        if self.eos_share != "equal":
            parts.append("se" + _policy_text(self.eos_share))
        return "_".join(parts)

    @classmethod
    def parse(cls, text: str) -> CalibrationConfig:
        """Inverse of ``str(config)``; raises :class:`ConfigError` showing the valid form."""
        if not isinstance(text, str):
            raise ConfigError(f"a calibration config in text form is a string (e.g. b128_lhalf_a0.5), got "
                              f"{type(text).__name__} {text!r}.")
        kwargs: dict[str, object] = {}
        try:
            for token in text.strip().split("_"):
                key, value = _split_token(token)
                if key in kwargs:
                    raise ValueError(f"{key} given twice")
                kwargs[key] = _TOKEN_PARSERS[key](value)
            missing = [key for key in ("basket_size", "layers", "strength") if key not in kwargs]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
        except (ValueError, KeyError) as err:
            raise ConfigError(
                f"cannot parse calibration config {text!r} ({err}). Valid form: "
                "b<basket>_l<layers>_a<strength>[_p<cls|last|mean>][_ib<0|1>][_ie<0|1>][_sb<policy>][_se<policy>], "
                f"layers {LAYER_GRAMMAR} (no '_' inside the text form), policy one of orig | eq | <float>; "
                "example: b128_lhalf_a0.5"
            ) from None
        return cls(**kwargs)  # type: ignore[arg-type]

    def replace(self, **changes: object) -> CalibrationConfig:
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return CalibrationConfig(**values)  # type: ignore[arg-type]


def _check_layers(spec: object) -> LayerSpec:
    if isinstance(spec, str) and spec in ("last_half", "last"):
        return spec  # type: ignore[return-value]
    if isinstance(spec, bool):
        raise ConfigError(f"layers must not be a bool, got {spec!r}.")
    if isinstance(spec, numbers.Integral):
        if spec <= 0:
            raise ConfigError(f"layers={spec}: an int means 'the last N layers' and must be >= 1.")
        return int(spec)
    if isinstance(spec, numbers.Real):
        if not 0.0 < spec <= 1.0:
            raise ConfigError(f"layers={spec}: a float is a fraction of the last layers and must lie in (0, 1].")
        return float(spec)
    if (isinstance(spec, (list, tuple)) and spec
            and all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in spec)):
        if any(i < 0 for i in spec):
            raise ConfigError(f"layer indices must be 0-based and non-negative, got {list(spec)}.")
        if len(set(spec)) != len(spec):
            raise ConfigError(f"layer indices must not repeat, got {list(spec)}.")
        return tuple(sorted(int(i) for i in spec))
    raise ConfigError(
        f"layers must be 'last_half', 'last', an int N (last N layers), a float fraction in (0, 1] "
        f"or a non-empty list of 0-based indices; got {spec!r}."
    )


def _check_policy(name: str, policy: object) -> SharePolicy:
    if policy in ("original", "equal"):
        return policy  # type: ignore[return-value]
    if isinstance(policy, numbers.Real) and not isinstance(policy, bool) and 0.0 <= float(policy) < 1.0:
        return float(policy) + 0.0  # -0.0 is 0
    raise ConfigError(f"{name} must be 'original', 'equal' or a float in [0, 1), got {policy!r}.")


def _num(value: float) -> str:
    """Shortest text that parses back to the same float ("0.5", "1", "0.001953125")."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _layers_text(spec: LayerSpec) -> str:
    if spec == "last_half":
        return "half"
    if spec == "last":
        return "last"
    if isinstance(spec, int):
        return f"n{spec}"
    if isinstance(spec, float):
        return f"f{_num(spec)}"
    return "i" + ".".join(str(i) for i in spec)


LAYER_GRAMMAR = (
    "last_half (or half), last, N or nN (the last N layers), a fraction such as 0.5 or f0.5, "
    "or 0-based indices such as 6,7,8 or i6.7.8"
)
"""The one text grammar of a layer set, read by `parse_layers` everywhere: CLI options and the
``l...`` part of a config's text form (which writes the second spelling of each)."""


def parse_layers(text: str) -> LayerSpec:
    """A layer set from its text (`LAYER_GRAMMAR`); the value is validated by `CalibrationConfig`."""
    value = str(text).strip()
    try:
        if value in ("half", "last_half"):
            return "last_half"
        if value == "last":
            return "last"
        if value[:1] in ("n", "f", "i"):
            body = value[1:]
            return int(body) if value[0] == "n" else float(body) if value[0] == "f" else tuple(int(i) for i in body.split("."))
        if "," in value:
            return tuple(int(i) for i in value.split(",") if i.strip())
        return float(value) if "." in value else int(value)
    except ValueError:
        raise ConfigError(f"unknown layer set {text!r}; write {LAYER_GRAMMAR}.") from None


def _policy_text(policy: SharePolicy) -> str:
    return _POLICY_TEXT[policy] if isinstance(policy, str) else _num(policy)


def _parse_policy(text: str) -> SharePolicy:
    return _TEXT_POLICY[text] if text in _TEXT_POLICY else float(text)


def _parse_flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(f"flag must be 0 or 1, got {text!r}")
    return text == "1"


_TOKEN_PARSERS = {
    "basket_size": int,
    "layers": parse_layers,
    "strength": float,
    "pooling": str,
    "isolate_bos": _parse_flag,
    "isolate_eos": _parse_flag,
    "bos_share": _parse_policy,
    "eos_share": _parse_policy,
}
_PREFIXES = (
    ("ib", "isolate_bos"),
    ("ie", "isolate_eos"),
    ("sb", "bos_share"),
    ("se", "eos_share"),
    ("b", "basket_size"),
    ("l", "layers"),
    ("a", "strength"),
    ("p", "pooling"),
)
def _split_token(token: str) -> tuple[str, str]:
    for prefix, key in _PREFIXES:
        if token.startswith(prefix) and len(token) > len(prefix):
            return key, token[len(prefix):]
    raise ValueError(f"unknown part {token!r}")
