"""The truncation count's quick proof of a cut (mteb_fairpos.truncation) against what the encodings record: it never
claims a cut that did not happen, across tokenizer families, normalizers that compose characters, prompts, and
tokenizers that may drop letters (which it refuses)."""

from __future__ import annotations

import random
import unicodedata
import warnings
from pathlib import Path

import pytest

from mteb_fairpos import FairSentenceTransformer, TruncationWarning
from mteb_fairpos.truncation import _proven, _starts_a_character, cut_count, provable

WORDS = "the harbour master counted twelve boats before noon".split()
HANGUL = unicodedata.normalize("NFD", "가")  # two jamo, which NFC composes into one syllable
# what follows the words: nothing, words, characters some tokenizers drop or keep only as punctuation, and
# characters that normalizing composes onto the one before (decomposed Hangul, halfwidth and compatibility kana and
# jamo, a combining accent)
TAILS = ["", " boats", " noon 7", " .", " !?", " ", "\u200b", " \u0301", "_", " 北京", " é", " ß", " ab", " zz", " qq",
         " " + HANGUL, HANGUL, "\uff76\uff9e", " \u3131\u314f", "e\u0301", " " + HANGUL + " boats"]


def _full_rows(tokenizer, seed: int = 0, count: int = 400):
    """(prompt, text, encoding) of random texts that fill the limit, with and without a prompt. The limit is the
    median length of the texts, so about half of them are cut, and some fit it exactly."""
    rng = random.Random(seed)
    for prompt in ("", "query: "):
        texts = [" ".join(rng.choices(WORDS, k=rng.randint(3, 14))) + rng.choice(TAILS) for _ in range(count)]
        inputs = [prompt + text for text in texts]
        limit = sorted(len(ids) for ids in tokenizer(inputs)["input_ids"])[count // 2]
        batch = tokenizer(inputs, truncation=True, max_length=limit, padding=True)
        for text, encoding in zip(texts, batch.encodings):
            if sum(encoding.attention_mask) == limit:
                yield prompt, text, encoding


def _qwen_style():
    """Qwen2/Qwen3's tokenizer class (NFC, byte-level BPE without an unknown token) over the 256 byte pieces."""
    from tokenizers import pre_tokenizers
    from transformers import Qwen2Tokenizer

    vocab = {"<|endoftext|>": 0, **{piece: i + 1 for i, piece in enumerate(pre_tokenizers.ByteLevel.alphabet())}}
    return Qwen2Tokenizer(vocab=vocab, merges=[])


CHARSMAP = Path(__file__).parent.parent / "fixtures" / "tokenizers" / "deletes-z-blanks-q.charsmap"
"""A SentencePiece normalization table that deletes "z" and turns "q" into a space, as `sentencepiece` 0.2 compiles
it from the rule lines ``7A<TAB>`` and ``71<TAB>20`` (SentencePieceTrainer.train(..., normalization_rule_tsv=...);
the trained model's precompiled_charsmap)."""


def _family(name: str, minilm_dir: str, trained_tokenizer):
    from tokenizers import normalizers
    from transformers import AutoTokenizer

    if name.startswith("wordpiece"):
        tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
        if name != "wordpiece":  # a normalizer step of a kind that keeps letters, with a table that loses two
            backend = tokenizer.backend_tokenizer
            backend.normalizer = normalizers.Sequence([normalizers.Precompiled(CHARSMAP.read_bytes()), backend.normalizer])
        return tokenizer
    if name == "qwen":
        return _qwen_style()
    return trained_tokenizer(name, [" ".join(WORDS)])


@pytest.mark.parametrize("family", ["wordpiece", "bytelevel", "metaspace", "unigram", "wordlevel", "qwen",
                                    "wordpiece with a SentencePiece table that deletes z and blanks q"])
def test_a_proven_cut_is_one_that_truncation_made(family, minilm_dir, trained_tokenizer):
    """For tokenizers whose model has a token for every character, the proof never claims a cut the encoding's
    overflow lacks (composing normalizers included: NFC here for qwen, NFKC for unigram; a SentencePiece table that
    deletes a letter, or turns one into a space the pre-tokenizer drops, is seen through letter by letter), and it proves every cut row whose text goes on with words;
    the rest fall back to the overflow, so the count equals the overflow's."""
    tokenizer = _family(family, minilm_dir, trained_tokenizer)
    backend = tokenizer.backend_tokenizer
    assert provable(backend)
    rows, proven = list(_full_rows(tokenizer)), 0
    for prompt, text, encoding in rows:
        cut, claimed = bool(encoding.overflowing), _proven(encoding, text, prompt, backend)
        assert cut or not claimed, (prompt, text)
        assert claimed or not (cut and text.endswith(tuple(WORDS))), (prompt, text)  # words follow the cut
        proven += claimed
    cuts = [bool(encoding.overflowing) for _, _, encoding in rows]
    assert 0 < proven < sum(cuts) < len(rows)  # proven, unproven and whole rows all occurred
    texts = {prompt: [] for prompt, _, _ in rows}
    for prompt, text, encoding in rows:
        texts[prompt].append((text, encoding))
    assert sum(cut_count([e for _, e in pairs], range(len(pairs)), [t for t, _ in pairs], prompt, backend)
               for prompt, pairs in texts.items()) == sum(cuts)


def _dropping(name: str, minilm_dir: str, trained_tokenizer):
    """Tokenizers that may lose letters: their model lacks a token for some character, or a normalizer or
    pre-tokenizer step deletes letters in context."""
    from tokenizers import normalizers, pre_tokenizers
    from transformers import AutoTokenizer

    if name in ("metaspace BPE without an unknown token", "byte-level BPE without every byte"):
        return trained_tokenizer(name.split()[0].replace("byte-level", "bytelevel"), [" ".join(WORDS)], unknown=False)
    if name == "BPE with byte fallback but no byte pieces":
        tokenizer = trained_tokenizer("metaspace", [" ".join(WORDS)], unknown=False)
        tokenizer.backend_tokenizer.model.byte_fallback = True
        return tokenizer
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    backend = tokenizer.backend_tokenizer
    if name == "a normalizer that deletes 'ab'":
        backend.normalizer = normalizers.Sequence([normalizers.Replace("ab", ""), backend.normalizer])
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("ab", "removed"), backend.pre_tokenizer])
    return tokenizer


@pytest.mark.parametrize("name", ["metaspace BPE without an unknown token", "byte-level BPE without every byte",
                                  "BPE with byte fallback but no byte pieces", "a normalizer that deletes 'ab'",
                                  "a pre-tokenizer that removes 'ab'"])
def test_tokenizers_that_may_lose_letters_are_never_proven(name, minilm_dir, trained_tokenizer):
    """For each, a letter past the kept tokens would claim a cut on some text that fits (the reason for the
    refusal), so `provable` refuses it and the count reads every overflow."""
    tokenizer = _dropping(name, minilm_dir, trained_tokenizer)
    backend = tokenizer.backend_tokenizer
    assert not provable(backend)
    wrong = [text for prompt, text, encoding in _full_rows(tokenizer)
             if _proven(encoding, text, prompt, backend) and not encoding.overflowing]
    assert wrong, "no text shows why this tokenizer is refused"


def test_letters_that_composition_joins_on_are_never_taken_as_proof():
    """Every letter or digit whose decomposition starts with a character that canonical composition joins onto a
    preceding one (combining marks, Hangul vowel and final jamo; enumerated from Unicode's own tables) is refused
    as proof; plain starters (Latin, CJK, a syllable) are accepted."""
    seconds = {jamo for point in range(0xAC00, 0xD7A4) for jamo in unicodedata.normalize("NFD", chr(point))[1:]}
    for point in range(0x110000):  # Hangul syllables compose by rule, everything else by the decomposition table
        parts = unicodedata.decomposition(chr(point)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            first, second = (chr(int(part, 16)) for part in parts)
            if unicodedata.normalize("NFC", first + second) == chr(point):  # a primary composite
                seconds.add(second)
    joining = [chr(point) for point in range(0x110000)
               if chr(point).isalnum() and unicodedata.normalize("NFKD", chr(point))[0] in seconds]
    assert joining and not any(_starts_a_character(letter) for letter in joining)
    assert {"\u1161", "\u314f", "\uff9e"} <= set(joining)  # a vowel jamo, its compatibility form, the halfwidth mark
    assert all(_starts_a_character(letter) for letter in "aé北가7ßﬁ")


def test_a_text_that_fits_in_decomposed_hangul_is_not_counted(minilm_dir):
    """Through the model, with Qwen's tokenizer class: a text exactly at the limit that ends in a decomposed
    syllable (NFC joins its second jamo onto the first, whose offsets cover only the first) is whole."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_dir, device="cpu")
    model[0].processor = _qwen_style()
    model.max_seq_length = 16
    fair = FairSentenceTransformer(model, None)
    fits, cut = "abcdefghijklm" + HANGUL, "abcdefghijklmn" + HANGUL  # 13 bytes and the syllable's 3: 16 tokens
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fair.encode([fits, cut])
    assert [str(w.message)[:45] for w in caught if issubclass(w.category, TruncationWarning)] == [
        "1 input(s) exceeded the model's maximum of 16"]


def test_a_routers_documents_are_counted_with_their_own_tokenizer(minilm_dir, trained_tokenizer):
    """A router's routes tokenize apart: the model's ``tokenizer`` is the first route's (the queries' here), which
    could prove what the documents' tokenizer drops, so a router's rows read their overflow."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.router import Router

    documents = trained_tokenizer("metaspace", [" ".join(WORDS)], unknown=False)  # drops letters it never saw
    queries, route = SentenceTransformer(minilm_dir, device="cpu"), SentenceTransformer(minilm_dir, device="cpu")
    route[0].processor = documents
    router = Router.for_query_document(query_modules=[queries[0], queries[1]], document_modules=[route[0], route[1]])
    model = SentenceTransformer(modules=[router], device="cpu")
    model.max_seq_length = 12
    fair = FairSentenceTransformer(model, None)
    fits = next(text for n in range(1, 20) if len(documents(text := " ".join(["boats"] * n) + " zzz")["input_ids"]) == 12)
    assert provable(fair.tokenizer.backend_tokenizer)  # the queries' tokenizer would prove a cut past "boats"
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        fair.encode_document([fits])


def test_a_custom_step_is_refused_and_the_count_still_exact(minilm_dir):
    """A tokenizer with a Python pre-tokenizer (which cannot be saved, so its steps cannot be read) is not proven
    and reads every overflow: the counts stay those of the encodings."""
    from sentence_transformers import SentenceTransformer
    from tokenizers import pre_tokenizers

    class Whole:
        def pre_tokenize(self, text):
            text.split(lambda index, piece: piece.split(" ", "removed"))

    model = SentenceTransformer(minilm_dir, device="cpu")
    model.tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.PreTokenizer.custom(Whole())
    model.max_seq_length = 16
    fair = FairSentenceTransformer(model, None)
    assert not provable(fair.tokenizer.backend_tokenizer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fair.encode(["a " * 14, "a " * 15, "a " * 30])
    assert [str(w.message)[:45] for w in caught if issubclass(w.category, TruncationWarning)] == [
        "2 input(s) exceeded the model's maximum of 16"]
