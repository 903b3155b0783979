"""The folders the reports write into: a file in the way is named before any work, not met by pathlib's
``FileExistsError`` after it."""

from __future__ import annotations

from pathlib import Path


def check_folder(out: str | Path) -> Path:
    """``out`` as a path, refused when it, or the nearest of its parents that exists, is a file."""
    out = Path(out)
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise NotADirectoryError(f"cannot write into {str(out)!r}: {str(existing)!r} is a file, not a folder.")
    return out


def made_folder(out: str | Path) -> Path:
    """``out`` checked (`check_folder`) and created with its parents."""
    out = check_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    return out
