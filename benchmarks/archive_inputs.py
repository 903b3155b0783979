"""Inputs of the archive benchmark: the tests' tiny random BERT (`corpus.save_tiny_model`), and
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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "qdrant"))
from corpus import save_tiny_model  # noqa: E402,F401 - the tests' tiny model, shared

WORDS = ("market city council river science football election weather school music health energy village "
         "museum railway harbour festival research budget court police theatre farm bridge storm library "
         "hospital airport forest mountain painting novel concert vaccine satellite ocean desert").split()


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
