"""How many inputs of a tokenized batch truncation cut off, for the truncation warning, in microseconds each.

A fast tokenizer's encoding records a cut in its ``overflowing`` rows, but the ``tokenizers`` binding copies them
whole, padded to the batch's width: 75-95 µs per cut document at 2,048 tokens, host time that a GPU waiting for the
next batch pays. Only rows that fill the limit can have been cut, and for most of those the text proves the cut
faster: a letter or digit after the last kept token's characters becomes a token of its own, so tokens were cut,
wherever

- the model has a token for every character (:func:`provable`): WordPiece, Unigram and WordLevel, which emit an
  unknown token or refuse the text; BPE with its unknown token, or with all 256 byte pieces;
- the normalizer and the pre-tokenizer are made of steps that neither delete nor merge letters (:data:`KEEPING`);
- the letter starts a character of its own after normalizing: composition (NFC, NFKC) joins a combining mark or a
  Hangul vowel or final jamo to the character before it, which the offsets then cover.

Every other full row asks its encoding: texts that go on with punctuation or whitespace only, other tokenizers, and
inputs that were not tokenized as the prompt followed by the text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

__all__ = ["cut_count", "provable"]

_LETTER = re.compile(r"[^\W_]")  # a letter or a digit (what str.isalnum accepts)
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")

KEEPING = {
    "normalizer": {"BertNormalizer", "ByteLevel", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "Nmt", "Precompiled",
                   "Prepend", "Strip", "StripAccents"},
    "pre_tokenizer": {"BertPreTokenizer", "ByteLevel", "Digits", "FixedLength", "Metaspace", "Punctuation",
                      "UnicodeScripts", "Whitespace", "WhitespaceSplit"},
}
"""The normalizer and pre-tokenizer steps that keep every letter and digit, by their ``type``. A ``Replace``, a
``Split`` that removes what it matches and a ``CharDelimiterSplit`` keep them where their pattern holds none."""


def cut_count(encodings: Sequence[Any], rows: Sequence[int], texts: Sequence[Any] | None, prompt: str,
              backend: Any | None) -> int:
    """How many of ``rows`` (the rows that fill the limit) truncation cut off. ``texts``: the inputs, each tokenized
    as ``prompt`` followed by it (``None`` where not); ``backend``: the ``tokenizers.Tokenizer`` that made
    ``encodings`` where :func:`provable` holds for it, else ``None`` (every row then reads its overflow)."""
    proving = texts is not None and backend is not None
    return sum(proving and _proven(encodings[row], texts[row], prompt, backend) or bool(encodings[row].overflowing)
               for row in rows)


def provable(backend: Any) -> bool:
    """Whether a letter or digit past the kept tokens always becomes a token for this ``tokenizers.Tokenizer``:
    its model has a token for every character, and its normalizer and pre-tokenizer keep letters. Reads the
    vocabulary for a few hundred pieces at most."""
    from tokenizers import models, pre_tokenizers

    if not all(_keeps(step, kind) for kind in KEEPING for step in _steps(getattr(backend, kind))):
        return False
    model = backend.model
    if isinstance(model, (models.WordPiece, models.Unigram, models.WordLevel)):
        return True
    if not isinstance(model, models.BPE):
        return False
    if model.unk_token is not None and backend.token_to_id(model.unk_token) is not None:
        return True
    if model.byte_fallback and all(backend.token_to_id(f"<0x{byte:02X}>") is not None for byte in range(256)):
        return True
    return (any(step["type"] == "ByteLevel" for step in _steps(backend.pre_tokenizer))
            and all(backend.token_to_id(piece) is not None for piece in pre_tokenizers.ByteLevel.alphabet()))


def _steps(component: Any) -> list[dict]:
    """A normalizer's or pre-tokenizer's steps as their saved JSON (a ``Sequence`` flattened; none for ``None``;
    one of type ``custom`` where it holds a Python step)."""
    if component is None:
        return []
    try:
        state = component.__getstate__()
    except Exception:  # a custom (Python) step cannot be saved, and is not known to keep letters
        return [{"type": "custom"}]
    found, pending = [], [json.loads(state)]
    while pending:
        step = pending.pop()
        inner = step.get("normalizers", step.get("pretokenizers")) if step["type"] == "Sequence" else None
        pending.extend(inner or [])
        if inner is None:
            found.append(step)
    return found


def _keeps(step: dict, kind: str) -> bool:
    """Whether one normalizer or pre-tokenizer step keeps every letter and digit (:data:`KEEPING`)."""
    if kind == "normalizer" and step["type"] == "Replace":
        return _letter_free(step.get("pattern", {})) or bool(_LETTER.search(step.get("content", "")))
    if kind == "pre_tokenizer" and step["type"] == "Split":
        return step.get("behavior") != "Removed" or not step.get("invert") and _letter_free(step.get("pattern", {}))
    if kind == "pre_tokenizer" and step["type"] == "CharDelimiterSplit":
        return not str(step.get("delimiter", "x")).isalnum()
    return step["type"] in KEEPING[kind]


def _letter_free(pattern: dict) -> bool:
    """Whether a ``String`` or ``Regex`` pattern surely matches no letter or digit: no letter or digit in its source
    once counted repetitions are set aside (``\\w``, ``\\S`` and ``\\p{L}`` hold one), and no ``.`` or ``[^``."""
    if "String" in pattern:
        return not _LETTER.search(pattern["String"])
    source = _QUANTIFIER.sub("", pattern.get("Regex", "x"))
    return not _LETTER.search(source) and "." not in source and "[^" not in source


def _proven(encoding: Any, text: Any, prompt: str, backend: Any) -> bool:
    """Whether ``text`` proves that truncation cut tokens off ``encoding``'s row (module docstring). ``False``
    proves nothing."""
    if not isinstance(text, str) or encoding.n_sequences != 1:
        return False
    last = len(encoding) - 1
    while last >= 0 and encoding.token_to_sequence(last) is None:  # the closing special tokens
        last -= 1
    chars = encoding.token_to_chars(last) if last >= 0 else None
    if chars is None or chars[1] < len(prompt):
        return False
    letter = next((found.group() for found in _LETTER.finditer(text, chars[1] - len(prompt))
                   if _starts_a_character(found.group())), None)
    if letter is None:
        return False
    # steps of the kinds KEEPING names keep letters, but a SentencePiece table (Precompiled) is data: it may map this
    # one to nothing, or to a space that the pre-tokenizer then drops
    kept = backend.normalizer.normalize_str(letter) if backend.normalizer else letter
    if backend.pre_tokenizer and kept:
        kept = "".join(piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(kept))
    return bool(kept)


def _starts_a_character(letter: str) -> bool:
    """Whether no normalization joins ``letter`` to the character before it: the first character of its
    compatibility decomposition is no combining mark and no Hangul vowel or final jamo (the only letters that
    canonical composition joins onto a preceding character; ``test_truncation.py`` checks this against Unicode)."""
    first = unicodedata.normalize("NFKD", letter)[0]
    return unicodedata.combining(first) == 0 and not ("\u1160" <= first <= "\u11ff" or "\ud7b0" <= first <= "\ud7ff")
