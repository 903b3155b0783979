"""SQuAD-PosQ and FineWeb-PosQ: loading a local copy -> grouping -> retrieval -> metrics."""

from __future__ import annotations

import json
import shutil

import mteb
import pytest
from retrieval_check import FIXTURES, group_means, own_ndcg_at_10

from mteb_fairpos.tasks import TASKS
from mteb_fairpos.tasks._base import DATA_DIR_ENV, GROUPS, SKIPPED, DatasetSchemaError
from mteb_fairpos.tasks.posq import FINEWEB_GROUPS, SQUAD_GROUPS, FineWebPosQ, FineWebPosQTiny, SQuADPosQ, SQuADPosQTiny

SQUAD = FIXTURES / "squad_v2"
FINEWEB = FIXTURES / "fineweb_posq"


@pytest.fixture(scope="module")
def encoder(minilm):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(minilm)


def _split(task):
    return task.dataset["default"]["test"]


def _memberships(task):
    return _split(task)[GROUPS]


def test_tasks_are_listed():
    names = {t.metadata.name for t in TASKS}
    assert {"SQuADPosQ", "SQuADPosQTiny", "FineWebPosQ", "FineWebPosQTiny"} <= names
    assert SQuADPosQ.metadata.main_score == "harmonic_mean" and SQuADPosQ.metadata.dataset["path"] == "rajpurkar/squad_v2"
    assert FineWebPosQ.metadata.dataset["path"] == "NovaSearch/FineWeb-PosQ"


def test_squad_grouping_from_local_copy():
    task = SQuADPosQ(data_dir=SQUAD)
    task.load_data()
    split, groups = _split(task), _memberships(task)
    # 12 rows: 2 unanswerable dropped, 1 answer at 3129 is past the last bin [500, 3120]
    assert _split(task)[SKIPPED] == {"unanswerable": 2, "no_question": 0, "answer_start_outside_bins": 1, "duplicate_id": 0}
    assert set(split["queries"]["id"]) == {"sq-t0", "sq-t1", "sq-t2", "sq-t3", "sq-t4", "sq-t5", "sq-v0", "sq-v1", "sq-v2"}
    assert groups["sq-t0"] == ("0-100",)  # answer_start 0
    assert groups["sq-t2"] == ("100-200",)  # exactly 100: one group only (half-open bins)
    assert groups["sq-v1"] == ("100-200",)  # 120
    assert groups["sq-t1"] == ("200-300",)  # 212
    assert groups["sq-v0"] == ("500-3120",)  # exactly 500
    assert groups["sq-v2"] == ("500-3120",)  # exactly 3120: the closed end of the last bin
    # every distinct context once, unanswerable questions' contexts included
    assert len(split["corpus"]) == 8 and len(set(split["corpus"]["text"])) == 8
    text_of = dict(zip(split["corpus"]["id"], split["corpus"]["text"]))
    assert text_of[next(iter(split["relevant_docs"]["sq-t0"]))].startswith("Chlorophyll gives leaves")
    assert split["relevant_docs"]["sq-t0"] == split["relevant_docs"]["sq-t1"]  # same context, one passage


def test_squad_through_the_environment_variable(tmp_path, monkeypatch):
    (tmp_path / "rajpurkar").mkdir()
    shutil.copytree(SQUAD, tmp_path / "rajpurkar" / "squad_v2")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    task = SQuADPosQ()
    task.load_data()
    assert len(_split(task)["queries"]) == 9
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="rajpurkar/squad_v2"):
        SQuADPosQ().load_data()
    with pytest.raises(FileNotFoundError, match="not a folder"):
        SQuADPosQ(data_dir=tmp_path / "missing").load_data()


def test_squad_tiny_is_a_seeded_sample_over_the_full_corpus():
    assert SQuADPosQTiny.n_queries == 10_000
    first, second = SQuADPosQTiny(data_dir=SQUAD, n_queries=4), SQuADPosQTiny(data_dir=SQUAD, n_queries=4)
    first.load_data()
    second.load_data()
    assert len(_split(first)["queries"]) == 4
    assert _split(first)["queries"]["id"] == _split(second)["queries"]["id"]
    assert len(_split(first)["corpus"]) == 8
    with pytest.raises(ValueError, match="positive"):
        SQuADPosQTiny(n_queries=0)


def test_settings_other_than_the_defaults_are_in_the_name_so_the_cache_keeps_the_results_apart(encoder, tmp_path):
    """A sample size changes every figure: mteb's result cache, which finds a result by its task's name, must not hand
    the sampled result back for the full task (or the other way), and the reader reads it as the task it varies."""
    from mteb_fairpos.results import collect

    assert (SQuADPosQTiny(n_queries=10_000).metadata.name, FineWebPosQ(per_group=3).metadata.name) == (
        "SQuADPosQTiny", "FineWebPosQ.per_group-3")
    cache = mteb.ResultCache(tmp_path)
    sampled = mteb.evaluate(encoder, SQuADPosQTiny(data_dir=SQUAD, n_queries=4), cache=cache, co2_tracker=False)
    full = mteb.evaluate(encoder, SQuADPosQTiny(data_dir=SQUAD), cache=cache, co2_tracker=False)
    (sampled,), (full,) = sampled.task_results, full.task_results
    assert (sampled.task_name, full.task_name) == ("SQuADPosQTiny.queries-4", "SQuADPosQTiny")
    queries = [result.scores["test"][0]["n_queries"] for result in (sampled, full)]
    assert queries[0] == 4 < queries[1]
    found = collect(tmp_path)
    read = {task: scores for (_, task), scores in found.scores.items()}
    assert set(read) == {"SQuADPosQTiny.queries-4", "SQuADPosQTiny"}
    assert read["SQuADPosQTiny.queries-4"].task_type == "Retrieval"  # the task it varies, not "unregistered"
    assert [issue.message for issue in found.issues if issue.kind == "unchecked"] == [
        "task SQuADPosQTiny.queries-4 runs SQuADPosQTiny with settings of its own; completeness not checked."]
    assert read["SQuADPosQTiny.queries-4"].status == read["SQuADPosQTiny"].status == "ok"


def test_squad_end_to_end_with_minilm(encoder, minilm, tmp_path):
    task = SQuADPosQ(data_dir=SQUAD)
    task.load_data()
    own = own_ndcg_at_10(minilm, _split(task))
    expected = group_means(own, _memberships(task), SQUAD_GROUPS)
    result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    scores = result.scores["test"][0]
    for group in SQUAD_GROUPS:
        assert scores[f"position_{group}"] == pytest.approx(expected[group], abs=1e-4)
    values = list(expected.values())
    assert scores["harmonic_mean"] == pytest.approx(len(values) / sum(1 / v for v in values), abs=1e-4)
    assert scores["psi"] == pytest.approx(1 - min(values) / max(values), abs=1e-4)
    assert scores["main_score"] == scores["harmonic_mean"]
    assert scores["ndcg_at_10"] == pytest.approx(sum(own.values()) / len(own), abs=1e-4)
    assert scores["position_counts"] == {"0-100": 1, "100-200": 2, "200-300": 2, "300-400": 1, "400-500": 1, "500-3120": 2}
    assert scores["skipped_queries"]["unanswerable"] == 2
    result.to_disk(tmp_path / "result.json")  # what `mteb-fairpos compare` reads
    saved = json.loads((tmp_path / "result.json").read_text())["scores"]["test"][0]
    assert saved["position_500-3120"] == pytest.approx(expected["500-3120"], abs=1e-4)
    assert saved["harmonic_mean"] == pytest.approx(scores["harmonic_mean"]) and "psi" in saved


def test_fineweb_grouping_two_tags_and_corpus_only_rows():
    task = FineWebPosQ(data_dir=FINEWEB)
    task.load_data()
    split, groups = _split(task), _memberships(task)
    assert len(split["queries"]) == 8
    assert len(split["corpus"]) == 4  # bees, volcano, bread + the corpus-only tea passage
    assert any("Camellia sinensis" in text for text in split["corpus"]["text"])
    two_tags = [q for q, g in groups.items() if len(g) == 2]
    assert len(two_tags) == 1 and groups[two_tags[0]] == ("middle", "end")
    counts = {g: sum(g in v for v in groups.values()) for g in FINEWEB_GROUPS}
    assert counts == {"begin": 3, "middle": 3, "end": 3}  # the two-tag question counts in both


def test_fineweb_end_to_end_with_minilm(encoder, minilm):
    task = FineWebPosQ(data_dir=FINEWEB)
    task.load_data()
    expected = group_means(own_ndcg_at_10(minilm, _split(task)), _memberships(task), FINEWEB_GROUPS)
    scores = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0].scores["test"][0]
    for group in FINEWEB_GROUPS:
        assert scores[f"position_{group}"] == pytest.approx(expected[group], abs=1e-4)
    assert scores["position_counts"] == {"begin": 3, "middle": 3, "end": 3}
    assert scores["n_queries"] == 8 and scores["main_score"] == scores["harmonic_mean"]


def test_fineweb_tiny_takes_seeded_questions_per_tag():
    assert FineWebPosQTiny.per_group == 1_000
    task = FineWebPosQTiny(data_dir=FINEWEB, per_group=1)
    task.load_data()
    groups = _memberships(task)
    assert 2 <= len(groups) <= 3
    assert all(any(g in v for v in groups.values()) for g in FINEWEB_GROUPS)
    assert len(_split(task)["corpus"]) == 4


# ------------------------------------------------------------------ bad input
def test_missing_split_is_a_clear_error(tmp_path):
    copy = tmp_path / "squad"
    shutil.copytree(SQUAD, copy)
    (copy / "squad_v2" / "validation-00000-of-00001.parquet").unlink()
    (copy / "README.md").write_text((copy / "README.md").read_text().replace(
        "  - split: validation\n    path: squad_v2/validation-*\n", ""))
    with pytest.raises(DatasetSchemaError, match="validation"):
        SQuADPosQ(data_dir=copy).load_data()


def test_missing_column_is_a_clear_error(tmp_path):
    rows = [json.loads(line) for line in (FINEWEB / "train.jsonl").read_text().splitlines()]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps({k: v for k, v in r.items() if k != "span_class"}) for r in rows))
    with pytest.raises(DatasetSchemaError, match="span_class"):
        FineWebPosQ(data_dir=tmp_path).load_data()


def test_unknown_or_missing_tags_are_counted_skips(tmp_path):
    rows = [json.loads(line) for line in (FINEWEB / "train.jsonl").read_text().splitlines()]
    rows[0]["span_class"] = ["somewhere"]
    rows[1]["span_class"] = []
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    task = FineWebPosQ(data_dir=tmp_path)
    task.load_data()
    assert _split(task)[SKIPPED] == {"no_span_class": 1, "unknown_span_class": 1}
    assert len(_split(task)["queries"]) == 6


def test_no_question_in_any_row_is_a_clear_error(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "fineweb_posq" / "train.jsonl").read_text().splitlines()]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({**r, "question": None}) + "\n" for r in rows))
    with pytest.raises(DatasetSchemaError, match=f"FineWebPosQ: {tmp_path} yields no query to evaluate"):
        FineWebPosQ(data_dir=tmp_path).load_data()


def test_a_non_utf8_byte_names_the_file_and_line(tmp_path):
    lines = (FIXTURES / "fineweb_posq" / "train.jsonl").read_bytes().splitlines()
    lines[3] = lines[3].replace(b"the", b"th\xff", 1)
    (tmp_path / "train.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    column = lines[3].index(b"\xff") + 1
    with pytest.raises(DatasetSchemaError, match=rf"train.jsonl line 4, column {column} is not valid UTF-8"):
        FineWebPosQ(data_dir=tmp_path).load_data()


def _squad_copy(tmp_path, change):
    """A copy of the SQuAD fixture whose train rows went through ``change`` (a function of the row list)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "squad"
    shutil.copytree(SQUAD, copy)
    train = copy / "squad_v2" / "train-00000-of-00001.parquet"
    rows = pq.read_table(train).to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(train)), train)
    return copy


def test_an_answerable_row_without_a_question_is_a_counted_skip(tmp_path):
    """A null or blank question was kept as a query, and mteb failed on it deep in its data loader."""
    before = SQuADPosQ(data_dir=SQUAD)
    before.load_data()
    answerable = [i for i, r in enumerate(_train_rows()) if r["answers"]["answer_start"]][:2]

    def blank(rows):
        rows[answerable[0]]["question"] = None
        rows[answerable[1]]["question"] = "   "

    task = SQuADPosQ(data_dir=_squad_copy(tmp_path, blank))
    task.load_data()
    assert _split(task)[SKIPPED]["no_question"] == 2
    assert len(_split(task)["queries"]) == len(_split(before)["queries"]) - 2
    assert all(text.strip() for text in _split(task)["queries"]["text"])


def _train_rows():
    import pyarrow.parquet as pq

    return pq.read_table(SQUAD / "squad_v2" / "train-00000-of-00001.parquet").to_pylist()


def test_a_passage_without_text_names_its_row(tmp_path):
    """Every passage is embedded: a missing one failed in sorting the corpus ('<' not supported), naming nothing."""
    def no_context(rows):
        rows[6]["context"] = None

    with pytest.raises(DatasetSchemaError, match=r"split 'train' of .*, row 6 \(id '[^']+'\) has no context text"):
        SQuADPosQ(data_dir=_squad_copy(tmp_path, no_context)).load_data()
    rows = [json.loads(line) for line in (FINEWEB / "train.jsonl").read_text().splitlines()]
    rows[2]["content"] = 12345
    fineweb = tmp_path / "fineweb"
    fineweb.mkdir()
    (fineweb / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetSchemaError, match=rf"FineWebPosQ: row 2 of {fineweb} has no content text \(it holds 12345\)"):
        FineWebPosQ(data_dir=fineweb).load_data()


def test_a_question_with_an_unknown_tag_beside_a_known_one_is_counted(tmp_path):
    """It was placed in its known tag's group alone, the other tag dropped without a count."""
    rows = [json.loads(line) for line in (FINEWEB / "train.jsonl").read_text().splitlines()]
    rows[0]["span_class"] = ["beginning", "ending"]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = FineWebPosQ(data_dir=tmp_path)
    task.load_data()
    assert _split(task)[SKIPPED] == {"no_span_class": 0, "unknown_span_class": 1}
    assert len(_split(task)["queries"]) == 7


@pytest.mark.parametrize("damage, named", [
    (lambda text: text[:-40], r"train.jsonl line 9 is not JSON"),
    (lambda text: "", r"train.jsonl is empty"),
], ids=["a line cut short", "an empty file"])
def test_a_damaged_json_lines_file_is_named(tmp_path, damage, named):
    """datasets' DatasetGenerationError or a bare StopIteration, naming no file, was all a user saw."""
    (tmp_path / "train.jsonl").write_text(damage((FINEWEB / "train.jsonl").read_text()))
    with pytest.raises(DatasetSchemaError, match=rf"FineWebPosQ: {tmp_path}/{named}"):
        FineWebPosQ(data_dir=tmp_path).load_data()


def test_an_empty_parquet_shard_is_named(tmp_path):
    copy = tmp_path / "squad"
    shutil.copytree(SQUAD, copy)
    (copy / "squad_v2" / "train-00000-of-00001.parquet").write_bytes(b"")
    with pytest.raises(DatasetSchemaError, match=r"SQuADPosQ: .*squad_v2/train-00000-of-00001.parquet is empty"):
        SQuADPosQ(data_dir=copy).load_data()


@pytest.mark.parametrize("task_cls, option", [(SQuADPosQ, "n_queries"), (FineWebPosQ, "per_group")])
@pytest.mark.parametrize("value", ["4", 2.5, True, 0])
def test_a_sample_size_must_be_a_positive_integer(task_cls, option, value):
    """'4' and 2.5 failed inside loading (TypeError), and True ran one query under the name '.queries-True'."""
    with pytest.raises(ValueError, match=rf"{option} must be a positive integer, got {value!r}"):
        task_cls(data_dir=SQUAD if task_cls is SQuADPosQ else FINEWEB, **{option: value})


def test_a_local_copy_is_read_as_it_is_now_not_as_datasets_cached_another(tmp_path):
    """datasets keys its cache of a local folder by the folder's name, not its contents: a second copy named
    alike (or an edited one) was served the first one's rows."""
    first = SQuADPosQ(data_dir=_squad_copy(tmp_path / "a", lambda rows: None))
    first.load_data()
    answerable = next(i for i, r in enumerate(_train_rows()) if r["answers"]["answer_start"])

    def reword(rows):
        rows[answerable]["question"] = "Which question was asked of the second copy?"

    second = SQuADPosQ(data_dir=_squad_copy(tmp_path / "b", reword))
    second.load_data()
    assert "Which question was asked of the second copy?" in list(_split(second)["queries"]["text"])
    assert "Which question was asked of the second copy?" not in list(_split(first)["queries"]["text"])
    for name in ("train-00000-of-00001.parquet", "validation-00000-of-00001.parquet"):  # the first copy, edited
        (tmp_path / "a" / "squad" / "squad_v2" / name).write_bytes((tmp_path / "b" / "squad" / "squad_v2" / name).read_bytes())
    edited = SQuADPosQ(data_dir=tmp_path / "a" / "squad")
    edited.load_data()
    assert "Which question was asked of the second copy?" in list(_split(edited)["queries"]["text"])
