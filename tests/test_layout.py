"""The package's shape: no import circle (lazy and type-checking imports included), one home per concept."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mteb_fairpos"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every mteb_fairpos module ``name`` imports anywhere in its file (``from . import x`` imports x)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        elif isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
    return {t for t in targets if t in modules and t != name}


def test_the_import_graph_has_no_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != 1, "import circle: " + " -> ".join(path[path.index(nxt):] + [node, nxt])
            if nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_document_prompt_and_pooling_rules_have_one_home():
    """Only mteb_fairpos.segmented spells out sentence-transformers' document prompt names."""
    spelled = [p.name for p in PACKAGE.rglob("*.py") if '"passage", "corpus"' in p.read_text(encoding="utf-8")]
    assert spelled == ["segmented.py"]
    pooling_maps = [p.name for p in PACKAGE.rglob("*.py") if '"lasttoken": "last"' in p.read_text(encoding="utf-8")]
    assert pooling_maps == ["segmented.py"]


def _files_with(text: str) -> list[str]:
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if text in p.read_text(encoding="utf-8"))


def test_pooling_type_and_late_chunk_rule_have_one_home():
    """`Pooling` is defined in config.py alone; the mean-pooling rule of late chunks is checked and
    worded in segmented.py alone (its callers call `require_mean_pooling`)."""
    assert _files_with("Pooling = Literal[") == ["config.py"]
    assert _files_with("mean-pooled models only") == ["segmented.py"]
    assert _files_with("def require_mean_pooling(") == ["segmented.py"]


def _span_records(path: Path) -> int:
    """How many ``(x, x + len(...))`` tuples a file builds: the mark of recording a segment's span
    while joining segments into one text."""
    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            first, second = node.elts
            if (isinstance(second, ast.BinOp) and isinstance(second.op, ast.Add)
                    and ast.dump(second.left) == ast.dump(first)
                    and isinstance(second.right, ast.Call) and getattr(second.right.func, "id", None) == "len"):
                count += 1
    return count


def test_joining_segments_has_one_home():
    """Segments are joined, and their character spans recorded, by `spans.join_segments` alone."""
    joiners = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _span_records(p))
    assert joiners == ["spans.py"]


def _spelled_keys(tree: ast.AST) -> set[str]:
    """The string literals a file uses as score keys: dict display keys, subscripts, ``.get``/``.pop``/
    ``.setdefault`` arguments, and the literal start of f-string keys."""
    found: set[str] = set()

    def take(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            found.add(str(node.values[0].value))

    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                take(key)
        elif isinstance(node, ast.Subscript):
            take(node.slice)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args):
            take(node.args[0])
    return found


def test_only_the_schema_spells_count_and_setting_keys():
    """Writers fill `Counts` and `Settings`, readers `load` them: no module but results/schema.py writes or
    reads ``num_documents``, ``n_queries``, ``n_queries_<bucket>``, ``corpus_fingerprint`` ... by hand."""
    from mteb_fairpos.results.schema import Counts, Settings, stored_keys

    shared = {"corpus", "seed", "segment_mode"}  # also names of the probe task's arguments and of mteb's split data
    keys = (set(stored_keys(Counts)) | set(stored_keys(Settings))) - shared
    spelled = {}
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).as_posix()
        if name != "results/schema.py":
            literals = _spelled_keys(ast.parse(path.read_text(encoding="utf-8")))
            hits = {key for key in keys if key in literals}
            if hits:
                spelled[name] = sorted(hits)
    assert spelled == {}


def test_the_mteb_encoder_leaves_prompts_and_routing_to_mteb():
    """`FairEncoder` is mteb's sentence-transformers wrapper and `FairInstructEncoder` mteb's instruction
    wrapper; mteb_models.py neither picks prompts nor routes sides itself."""
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    from mteb_fairpos.mteb_models import FairEncoder, FairInstructEncoder

    assert issubclass(FairEncoder, SentenceTransformerEncoderWrapper)
    assert issubclass(FairInstructEncoder, (FairEncoder, InstructSentenceTransformerModel))
    prompt_choice = {name for name, value in vars(AbsEncoder).items()
                     if callable(value) and ("prompt" in name or "instruction" in name)}
    for cls in (FairEncoder, FairInstructEncoder):
        assert not prompt_choice & set(vars(cls)), f"{cls.__name__} redefines mteb's prompt choice"
    tree = ast.parse((PACKAGE / "mteb_models.py").read_text(encoding="utf-8"))
    called = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not {"encode_query", "encode_document"} & called  # mteb's wrapper routes queries and documents
    assert "get_prompt_name" not in imported  # mteb's wrapper picks the prompt


STORE_IMPLEMENTATIONS = {"integrations/qdrant/clients.py"}
"""The stores on qdrant-client (local mode, a server); Qdrant Edge's store uses qdrant_edge."""


def test_only_the_store_implementations_hold_a_qdrant_client():
    """Callers hold a `Store` (backends.py); a `QdrantClient` is made, wrapped and called in clients.py alone."""
    holders = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = node.names if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            if any(alias.name == "QdrantClient" or alias.name.endswith(".QdrantClient") for alias in names) or (
                    isinstance(node, ast.Attribute) and node.attr == "QdrantClient"):
                holders.add(str(path.relative_to(PACKAGE)))
    assert holders == STORE_IMPLEMENTATIONS
