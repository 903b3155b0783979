"""Whether torch can run on a device here: asked before a model is loaded, since torch itself answers an unknown
or absent device with a traceback (an assertion, for CUDA on a CPU build)."""

from __future__ import annotations

from typing import Any


def device_problem(device: Any, *, here: bool = True) -> str | None:
    """Why torch cannot use ``device``, or ``None``. ``here=False`` (a device on another node: a Ray actor's) only
    checks that torch knows the kind."""
    import torch

    if isinstance(device, int) and not isinstance(device, bool) and here and not torch.accelerator.is_available():
        return "a bare index names an accelerator device, and torch sees none"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        return "unknown device; expected e.g. cpu, cuda, cuda:1 or mps"
    if not here:
        return None
    backend = getattr(torch, parsed.type, None)  # torch.cuda, torch.mps, torch.xpu, ...
    if hasattr(backend, "is_available") and not backend.is_available():
        return f"{parsed.type} was asked for but torch sees no {parsed.type.upper()} device"
    if parsed.index is not None and hasattr(backend, "device_count") and parsed.index >= backend.device_count():
        return f"torch sees {backend.device_count()} {parsed.type.upper()} device(s), numbered from 0"
    return None
