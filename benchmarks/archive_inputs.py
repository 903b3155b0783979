"""Inputs of the archive benchmark: a tiny random BERT saved as a sentence-transformers model, and
synthetic documents in the record format (2-4 segments, about 2.3 KB each).

The model is chosen so that encoding costs little and the rest of the pipeline (reading,
tokenizing, hashing, writing, the store) shows; it uses MiniLM's tokenizer, so tokenization
costs what it costs with a real model. About one document in forty is long enough to be
truncated, and ``invalid`` records with an unknown key are spread through the file, so the
per-document reporting of a run is exercised at every size.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = ("market city council river science football election weather school music health energy village "
         "museum railway harbour festival research budget court police theatre farm bridge storm library "
         "hospital airport forest mountain painting novel concert vaccine satellite ocean desert").split()


def save_tiny_model(folder: str | Path, max_seq_length: int = 512) -> str:
    """A randomly initialised 2-layer BERT (hidden size 32, mean pooling) with MiniLM's tokenizer."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mteb_fairpos import minilm_path

    folder = Path(folder)
    if (folder / "modules.json").is_file():
        return str(folder)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    raw = folder / "bert"
    BertModel(config).save_pretrained(raw)
    tokenizer.save_pretrained(raw)
    word = models.Transformer(str(raw), max_seq_length=max_seq_length)
    SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), "mean")],
                        device="cpu").save(str(folder))
    return str(folder)


def write_documents(path: str | Path, n: int, *, seed: int = 0, invalid_every: int = 0) -> Path:
    """``n`` documents of 2-4 segments, about 2.3 KB each; every ``invalid_every``-th line (if > 0)
    is an extra invalid record (an unknown key), so the file has ``n`` valid documents."""
    rng = random.Random(seed)
    path = Path(path)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            if invalid_every and i % invalid_every == invalid_every - 1:
                handle.write(json.dumps({"id": f"bad{i}", "segments": ["x"], "langauge": "en"}) + "\n")
            words = 1000 if rng.random() < 0.025 else rng.randint(230, 320)  # a few exceed 512 tokens
            parts = rng.randint(2, 4)
            segments = []
            for part in range(parts):
                count = words // parts
                text = " ".join(rng.choice(WORDS) for _ in range(count)).capitalize() + "."
                segments.append({"text": text, "language": rng.choice(["en", "de", "fr"]), "id": f"s{part}"})
            handle.write(json.dumps({"id": f"doc{i}", "segments": segments}) + "\n")
    return path
