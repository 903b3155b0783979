"""Which PosIR subsets a task runs and what it prepends to queries, from task arguments or the
environment (so plain ``mteb run`` can choose too)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from .dataset import PAPER_QUERY_INSTRUCTION, POSIR_DOMAINS, domain_of_folder


def selection(names: str | Iterable[str] | None, env: str | None) -> list[str] | None:
    """The names asked for (one name may be given as a plain string), else those of ``env``."""
    if names is not None:
        chosen = [names] if isinstance(names, str) else list(names)
    elif env and os.environ.get(env, "").strip():
        chosen = [n.strip() for n in os.environ[env].split(",") if n.strip()]
    else:
        return None
    if not chosen:
        raise ValueError("an empty selection selects nothing; pass None to keep everything.")
    return chosen


def resolve_languages(task: str, known: Sequence[str], languages: list[str]) -> list[str]:
    """The declared languages (``known``) that ``languages`` name, with or without the script."""
    chosen: list[str] = []
    for lang in languages:
        matches = [k for k in known if k == lang or k.split("-")[0] == lang]
        if not matches:
            raise ValueError(f"{task}: unknown language {lang!r}; known: {list(known)}.")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def resolve_domains(task: str, domains: list[str] | None) -> list[str] | None:
    """The domains ``domains`` name (with or without the folder prefix); ``None`` keeps all."""
    if domains is None:
        return None
    names = [domain_of_folder(d) for d in domains]
    unknown = [d for d in names if d not in POSIR_DOMAINS]
    if unknown:
        raise ValueError(f"{task}: unknown domain(s) {unknown}; known: {list(POSIR_DOMAINS)}.")
    return names


def instruction_text(value: bool | str) -> str:
    """The query instruction a task option asks for: ``True`` the paper's, ``False`` none."""
    if value is True:
        return PAPER_QUERY_INSTRUCTION
    if value is False:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"query_instruction must be True, False or a string, got {type(value).__name__}.")
    return value
