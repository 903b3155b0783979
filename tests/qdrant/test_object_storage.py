"""Input, parts and manifest on object storage: a real S3-compatible server (moto's server mode)
that these tests start on 127.0.0.1 and stop themselves; nothing of ours is mocked. Credentials
reach pyarrow through the usual environment variables, as they would on a cluster."""

from __future__ import annotations

import json
import os
import socket

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.integrations.qdrant import InputError, read_documents, scan_input, store
from mteb_fairpos.integrations.qdrant.load import load_parts
from mteb_fairpos.integrations.qdrant.encode import MANIFEST, encode_to_parts
from mteb_fairpos.integrations.qdrant.encoding import ModelLoader
from mteb_fairpos.integrations.qdrant.input import read_range
from mteb_fairpos.integrations.qdrant.parts import DONE, part_files
from mteb_fairpos.integrations.qdrant.storage import StorageError
from mteb_fairpos.offline import MINILM_HUB_ID

moto_server = pytest.importorskip("moto.server", reason="needs moto's server mode (pip install 'moto[server]')")
boto3 = pytest.importorskip("boto3")

SECRET = "s3cr3t-never-printed"
WORDS = "council budget river mountain market bank election music film science comet frog forest".split()


@pytest.fixture(scope="module")
def server():
    """One moto S3 server for the module, on a free local port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    running.start()
    yield f"http://127.0.0.1:{port}"
    running.stop()


@pytest.fixture
def bucket(server, monkeypatch, request):
    """A fresh bucket; the credentials and endpoint in the environment, as a cluster job would have them."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    name = request.node.name.lower().replace("_", "-")[:50]
    client = boto3.client("s3")
    client.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def model(minilm_dir):
    return ModelLoader(MINILM_HUB_ID, "b8_lhalf_a0.5", device="cpu")()


def records(n: int, prefix: str = "d") -> list[dict]:
    rng = np.random.default_rng(7)
    return [{"id": f"{prefix}{i}", "segments": [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) + "."
                                                for _ in range(int(rng.integers(2, 4)))],
             **({"metadata": {"page": i}} if i % 3 == 0 else {})} for i in range(n)]


def jsonl(items: list[dict]) -> bytes:
    return "".join(json.dumps(item) + "\n" for item in items).encode()


def put(bucket: str, key: str, data: bytes) -> None:
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data)


def keys(bucket: str, prefix: str) -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(item["Key"] for item in listed)


def stored(opened) -> dict:
    points, _ = opened.scroll("pages", limit=10_000, vectors=True, payload=True)
    return {str(p.id): p for p in points}


# ---------------------------------------------------------------------------- the reader
def test_a_folder_on_s3_reads_as_the_same_folder_on_disk(bucket, tmp_path):
    items = records(9)
    put(bucket, "docs/a.jsonl", jsonl(items[:4]) + b"\n")
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(items[4:]), buffer, row_group_size=2)
    put(bucket, "docs/b.parquet", buffer.getvalue().to_pybytes())
    put(bucket, "docs/notes.txt", b"not an input")
    local = tmp_path / "docs"
    local.mkdir()
    (local / "a.jsonl").write_bytes(jsonl(items[:4]) + b"\n")
    pq.write_table(pa.Table.from_pylist(items[4:]), local / "b.parquet", row_group_size=2)

    remote, here = scan_input(f"s3://{bucket}/docs", range_size=3), scan_input(local, range_size=3)
    assert [(r.name, r.fingerprint, r.documents) for r in remote.ranges] == \
        [(r.name, r.fingerprint, r.documents) for r in here.ranges]
    assert remote.ranges[0].file == f"s3://{bucket}/docs/a.jsonl"
    assert [d for r in remote.ranges for d in read_range(r)] == [d for r in here.ranges for d in read_range(r)]
    assert read_documents(f"s3://{bucket}/docs/a.jsonl")[0] == read_documents(local / "a.jsonl")[0]


def test_bad_input_on_s3_names_the_file_and_line_and_ids_are_counted_once(bucket):
    put(bucket, "bad.jsonl", jsonl(records(2)) + b'{"id": "x", "segments": ["a"]\n')
    with pytest.raises(InputError, match=r"^bad\.jsonl line 3: malformed JSON"):
        scan_input(f"s3://{bucket}/bad.jsonl")
    put(bucket, "twice/a.jsonl", jsonl(records(3)))
    put(bucket, "twice/b.jsonl", jsonl(records(2)))
    with pytest.raises(InputError, match=r"2 document id\(s\) occur more than once \(2 extra record\(s\)\)"):
        scan_input(f"s3://{bucket}/twice")
    scan = scan_input(f"s3://{bucket}/twice", on_error="skip")
    assert scan.documents == 3 and scan.duplicates == {"d0": 2, "d1": 2}
    assert [p.where for p in scan.problems] == ["b.jsonl line 1", "b.jsonl line 2"]


# ---------------------------------------------------------------------------- encode and load
def test_encode_to_s3_and_load_from_s3_equal_the_local_folder_route(bucket, tmp_path, model):
    items = records(14)
    put(bucket, "in/docs.jsonl", jsonl(items))
    (tmp_path / "docs.jsonl").write_bytes(jsonl(items))
    local = encode_to_parts(tmp_path / "docs.jsonl", tmp_path / "parts", model, "pages", part_size=4,
                             show_progress=False)
    remote = encode_to_parts(f"s3://{bucket}/in", f"s3://{bucket}/parts", model, "pages", part_size=4,
                              show_progress=False)
    assert (remote.documents, remote.parts, remote.parts_encoded, remote.points) == \
        (local.documents, local.parts, local.parts_encoded, local.points) == (14, 4, 4, local.points)
    assert keys(bucket, "parts/") == sorted([f"parts/{MANIFEST}"] + [
        f"parts/{p.name}{suffix}" for p in part_files(tmp_path / "parts") for suffix in ("", DONE)])
    manifest = json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=f"parts/{MANIFEST}")["Body"].read())
    assert manifest["documents"] == 14 and manifest["points"] == local.points

    here, there = store.open_store(":memory:"), store.open_store(":memory:")
    load_parts(tmp_path / "parts", here, show_progress=False)
    report = load_parts(f"s3://{bucket}/parts", there, show_progress=False)
    assert (report.documents, report.points) == (14, local.points)
    expected, actual = stored(here), stored(there)
    assert expected.keys() == actual.keys() and len(expected) == local.points
    for pid, point in expected.items():
        assert actual[pid].payload == point.payload
        assert actual[pid].vector.keys() == point.vector.keys()
        for name, vector in point.vector.items():
            assert np.array_equal(np.asarray(vector), np.asarray(actual[pid].vector[name]))


def test_a_partial_s3_run_resumes_exactly(bucket, model):
    put(bucket, "in/docs.jsonl", jsonl(records(15)))
    output = f"s3://{bucket}/parts"
    first = encode_to_parts(f"s3://{bucket}/in", output, model, "pages", part_size=4, show_progress=False)
    assert (first.parts_encoded, first.parts_skipped) == (4, 0)
    s3 = boto3.client("s3")
    names = [key for key in keys(bucket, "parts/") if key.endswith(".parquet")]
    # a run killed between a part's upload and its record, and a record that disagrees with its file
    s3.delete_object(Bucket=bucket, Key=names[1] + DONE)
    s3.put_object(Bucket=bucket, Key=names[3] + DONE, Body=json.dumps({"rows": 1, "fingerprint": None}).encode())
    s3.delete_object(Bucket=bucket, Key=f"parts/{MANIFEST}")
    with pytest.raises(store.QdrantIndexError, match="has not finished"):
        load_parts(output, store.open_store(":memory:"), show_progress=False)
    resumed = encode_to_parts(f"s3://{bucket}/in", output, model, "pages", part_size=4, show_progress=False)
    assert (resumed.parts_encoded, resumed.parts_skipped) == (2, 2)
    assert 0 < resumed.forward_passes < first.forward_passes
    assert resumed.points == first.points and keys(bucket, "parts/") == sorted(
        [f"parts/{MANIFEST}"] + names + [n + DONE for n in names])
    client = store.open_store(":memory:")
    assert load_parts(output, client, show_progress=False).documents == 15
    assert client.count("pages") == first.points


def test_a_part_uploaded_in_several_parts_loads_exactly(bucket, tmp_path, model):
    """A part file larger than pyarrow's upload part (10 MiB) goes to S3 as a multipart upload
    (its ETag says in how many parts) and loads point for point as the same part from disk.
    The documents carry about 2 MB of text each, stored in their payloads; embedding reads only
    the model's first tokens, so the test stays quick."""
    rng = np.random.default_rng(11)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
    items = [{"id": f"big{i}", "segments": [" ".join("".join(word) for word in rng.choice(alphabet, size=(120_000, 8)))
                                            for _ in range(2)]} for i in range(12)]
    (tmp_path / "docs.jsonl").write_bytes(jsonl(items))
    local = encode_to_parts(tmp_path / "docs.jsonl", tmp_path / "parts", model, "pages", show_progress=False)
    remote = encode_to_parts(tmp_path / "docs.jsonl", f"s3://{bucket}/parts", model, "pages", show_progress=False)
    assert (remote.parts, remote.points) == (local.parts, local.points) == (1, 12)
    [part] = part_files(tmp_path / "parts")
    head = boto3.client("s3").head_object(Bucket=bucket, Key=f"parts/{part.name}")
    assert head["ContentLength"] > 20 * 2**20 and int(head["ETag"].strip('"').rsplit("-", 1)[1]) >= 2

    here, there = store.open_store(":memory:"), store.open_store(":memory:")
    load_parts(tmp_path / "parts", here, show_progress=False)
    report = load_parts(f"s3://{bucket}/parts", there, show_progress=False)
    assert (report.documents, report.points) == (12, 12)
    expected, actual = stored(here), stored(there)
    assert expected.keys() == actual.keys() and len(expected) == 12
    for pid, point in expected.items():
        assert actual[pid].payload == point.payload and len(point.payload["text"]) > 10**6
        for name, vector in point.vector.items():
            assert np.array_equal(np.asarray(vector), np.asarray(actual[pid].vector[name]))


# ---------------------------------------------------------------------------- clear errors
def test_bad_uri_missing_bucket_and_missing_credentials_are_one_clear_error(bucket, tmp_path, monkeypatch, capsys):
    put(bucket, "in/docs.jsonl", jsonl(records(2)))
    with pytest.raises(StorageError, match="names no bucket"):
        scan_input("s3:///docs.jsonl")
    with pytest.raises(StorageError, match="no filesystem for nosuch://"):
        scan_input("nosuch://bucket/docs.jsonl")
    # the URI's host reaches the filesystem (fsspec's FTPFileSystem needs it: a TypeError naming no option, and a
    # traceback from its __del__); nothing listens on port 9 here
    with pytest.raises(StorageError, match=r"'ftp://127.0.0.1:9/docs.jsonl': cannot reach it \(.*refused"):
        scan_input("ftp://127.0.0.1:9/docs.jsonl")
    assert "Traceback" not in capsys.readouterr().err

    def run(*argv: str) -> tuple[int, str]:
        code = main(["encode", *argv, "-c", "pages", "--quiet"])
        out = capsys.readouterr()
        return code, out.out + out.err

    code, text = run(f"s3://{bucket}-missing/in", "-o", str(tmp_path / "out"))
    assert code != 0 and "does not exist" in text and "Traceback" not in text
    code, text = run(f"s3://{bucket}/in", "-o", f"s3://{bucket}-missing/out")
    assert code != 0 and f"bucket '{bucket}-missing' does not exist" in text and len(text.strip().splitlines()) == 1
    code = main(["load", f"s3://{bucket}/nothing-here", "-c", "pages", "--path", ":memory:", "--quiet"])
    text = capsys.readouterr().err
    assert code != 0 and f"part folder 's3://{bucket}/nothing-here' does not exist" in text
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, text = run(f"s3://{bucket}/in", "-o", str(tmp_path / "out"))
    assert code != 0 and "Traceback" not in text
    assert f"s3://{bucket}/in" in text and "AWS_ACCESS_KEY_ID" in text and "refused" in text
    assert len(text.strip().splitlines()) == 1 and SECRET not in text
    assert not os.path.exists(tmp_path / "out")


def test_an_unreachable_gcs_location_is_retried_for_seconds_not_minutes():
    """pyarrow retries GCS for 15 minutes by default: an unreachable gs:// input or output hung the command. Read
    through the filesystem's own settings (what it pickles with); no bucket is reached here."""
    from datetime import timedelta

    from mteb_fairpos.integrations.qdrant.storage import GCS_RETRY_SECONDS, locate

    def retried(uri):
        return locate(uri).filesystem.__reduce__()[1][0]["retry_time_limit"]

    assert retried("gs://bucket/in/docs.jsonl") == timedelta(seconds=GCS_RETRY_SECONDS)
    assert retried("gs://bucket/in/docs.jsonl?retry_limit_seconds=4") == timedelta(seconds=4)  # the URI's own wins
    assert locate("gs://bucket/in/docs.jsonl").path == "bucket/in/docs.jsonl"
