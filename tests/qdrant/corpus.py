"""Documents and point comparisons shared by the store tests (index, encode, load, Edge, Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CALIBRATION = "b8_lhalf_a0.5"
WORDS = ("council budget river mountain market bank election music film science comet frog forest school "
         "train harbour museum bridge harvest festival").split()
LANGUAGES = ("en", "de", "fr")

RECORDS = [
    {"id": "city", "language": "en", "segments": [
        {"text": "The city council approved a new budget for public parks, libraries and swimming pools.", "id": "c1"},
        {"text": "The regional football club won the championship after a dramatic penalty shootout.", "id": "c2"},
        {"text": "Der Wetterdienst warnt vor starkem Schneefall in den Alpen am kommenden Wochenende.", "language": "de"},
    ]},
    {"id": "science", "text": "Astronomers observed a distant comet passing close to the sun last night. "
                              "A new species of tree frog was discovered in the Amazon rainforest by biologists.",
     "segments": [{"start": 0, "end": 73, "language": "en", "id": "s1"}, {"start": 74, "end": 155, "language": "en"}]},
    {"id": "markets", "segments": [
        "Stock markets rallied on Monday as investors welcomed lower inflation figures.",
        "La banque centrale a maintenu ses taux d'intérêt inchangés pour le troisième mois.",
    ], "language": "fr"},
]
RECORDS[2]["segments"][0] = {"text": RECORDS[2]["segments"][0], "language": "en"}


def records(n: int, *, seed: int = 0, prefix: str = "d") -> list[dict]:
    """Multi-segment documents of 2-4 segments, with languages, both record forms, and metadata."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        segments = [{"text": " ".join(rng.choice(WORDS, size=int(rng.integers(4, 25)))).capitalize() + ".",
                     "language": str(rng.choice(LANGUAGES))} for _ in range(int(rng.integers(2, 5)))]
        record = {"id": f"{prefix}{i}", "segments": segments}
        if i % 5 == 0:
            record["metadata"] = {"page": i, "tags": ["a", None]}
        out.append(record)
    return out


def write_jsonl(path, items, blank_after=()):
    with open(path, "w", encoding="utf-8") as handle:
        for i, item in enumerate(items):
            handle.write(json.dumps(item) + "\n")
            if i in blank_after:
                handle.write("\n")
    return path


def points_of(opened, collection):
    points, _ = opened.scroll(collection, limit=10_000, vectors=True, payload=True)
    return {str(p.id): p for p in points}


def assert_same_points(expected: dict, actual: dict) -> None:
    assert expected.keys() == actual.keys()
    for pid, point in expected.items():
        assert actual[pid].payload == point.payload
        assert actual[pid].vector.keys() == point.vector.keys()
        for name, vector in point.vector.items():
            a, b = np.asarray(vector), np.asarray(actual[pid].vector[name])
            assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) >= 0.99999


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
