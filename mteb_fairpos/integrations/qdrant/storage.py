"""Where input files, encoded files and manifests live: a local path or an object-storage URI.

A `Location` pairs a pyarrow filesystem with a path inside it, so every reader and writer works
the same on a local folder, ``s3://bucket/prefix`` or ``gs://bucket/prefix`` (pyarrow's own
filesystems), and on any other fsspec protocol (``memory://``, ``abfs://``, ...) through
pyarrow's fsspec handler. Credentials come from the filesystem's usual sources (for S3:
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_PROFILE``, ``AWS_ENDPOINT_URL`` for an
S3-compatible server); they are never part of a message. A failure of the storage (a missing
bucket, refused credentials, an unreachable endpoint) is one `StorageError` naming the URI.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.fs as pafs

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class StorageError(ValueError):
    """A location that cannot be used: a bad URI, a missing bucket, refused credentials; says which."""


@dataclass(frozen=True)
class Location:
    """A file or folder: a pyarrow filesystem, the path inside it, and the text the user gave."""

    filesystem: pafs.FileSystem
    path: str
    uri: str

    def __str__(self) -> str:
        return self.uri

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def child(self, name: str) -> Location:
        return Location(self.filesystem, f"{self.path.rstrip('/')}/{name}", f"{self.uri.rstrip('/')}/{name}")

    def sibling(self, name: str) -> Location:
        """The file ``name`` in the same folder."""
        return Location(self.filesystem, f"{self.path.rsplit('/', 1)[0]}/{name}", f"{self.uri.rsplit('/', 1)[0]}/{name}")

    def kind(self) -> pafs.FileType:
        """File, Directory or NotFound (a prefix holding objects counts as a folder on object storage)."""
        with self.failures("look up"):
            return self.filesystem.get_file_info(self.path).type

    def exists(self) -> bool:
        return self.kind() != pafs.FileType.NotFound

    def files(self) -> list[Location]:
        """The files directly inside this folder, sorted by name."""
        with self.failures("list"):
            found = self.filesystem.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return sorted((self.child(info.base_name) for info in found if info.type == pafs.FileType.File),
                      key=lambda loc: loc.name)

    def require_bucket(self) -> None:
        """Refuse, before any work, an object-storage location whose bucket does not exist."""
        if self.local or isinstance(self.filesystem, pafs.PyFileSystem):
            return
        bucket = self.path.split("/", 1)[0]
        with self.failures("look up"):
            missing = self.filesystem.get_file_info(bucket).type == pafs.FileType.NotFound
        if missing:
            raise StorageError(f"cannot use {self.uri}: bucket {bucket!r} does not exist (or is not visible with "
                               "these credentials); create it first.")

    @contextmanager
    def opened(self) -> Iterator[pa.NativeFile]:
        """The file for random access, as pyarrow's own reader (Parquet reads its footer first)."""
        with self.failures("read"):
            handle = self.filesystem.open_input_file(self.path)
        try:
            yield handle
        finally:
            handle.close()

    @contextmanager
    def reader(self, start: int = 0) -> Iterator[IO[bytes]]:
        """A buffered binary reader positioned at byte ``start`` (for reading lines)."""
        with self.opened() as handle:
            handle.seek(start)
            yield io.BufferedReader(handle, buffer_size=1 << 20)

    def read_bytes(self) -> bytes:
        with self.opened() as handle, self.failures("read"):
            return handle.read()

    def write_bytes(self, data: bytes | memoryview) -> None:
        """Write the whole file so that it appears under this name only complete.

        Locally: a temporary name in the same folder, renamed at the end (atomic). On object storage:
        one upload of the finished bytes (a file over pyarrow's upload part size goes as a multipart
        upload), which the store makes visible only once it completes (a killed writer leaves no
        object; a multipart upload it began stays invisible until a bucket lifecycle rule aborts it)."""
        if not self.local:
            with self.failures("write"), self.filesystem.open_output_stream(self.path) as out:
                out.write(data)
            return
        target = Path(self.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
        try:
            partial.write_bytes(data)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)

    def delete(self) -> None:
        with self.failures("delete"):
            if self.exists():
                self.filesystem.delete_file(self.path)

    @contextmanager
    def failures(self, action: str) -> Iterator[None]:
        """Turn a storage failure into one `StorageError` naming this location (never the credentials)."""
        try:
            yield
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise
        except OSError as err:
            raise StorageError(f"cannot {action} {self.uri}: {_reason(err)}") from None


def locate(target: str | Path | Location) -> Location:
    """The `Location` of a local path or a URI (``s3://``, ``gs://``, ``file://``, or an fsspec protocol)."""
    if isinstance(target, Location):
        return target
    if not isinstance(target, (str, os.PathLike)):  # str(None) would be a folder 'None', a list a file "['a']"
        raise TypeError(f"expected a path or a URI (s3://bucket/...), got {type(target).__name__} {target!r}.")
    if not str(target).strip():  # the current folder, among whatever it holds
        raise ValueError("the path is empty; give a file, a folder or a URI.")
    text = str(target)
    scheme = _SCHEME.match(text)
    if scheme is None or scheme.group(1).lower() == "file":
        path = text[len("file://"):] if scheme else text
        return Location(pafs.LocalFileSystem(), str(Path(path).expanduser().absolute()), text)
    protocol = scheme.group(1).lower()
    if protocol in ("s3", "gs", "gcs", "hdfs", "viewfs"):
        rest = text[scheme.end():]
        if not rest.split("/", 1)[0]:
            raise StorageError(f"{text!r}: the URI names no bucket; write {protocol}://BUCKET/PATH.")
        uri = _with_option(text, "allow_delayed_open", "true") if protocol == "s3" else text
        if protocol in ("gs", "gcs"):  # pyarrow retries an unreachable GCS for 15 minutes by default; s3 gives up in seconds
            uri = _with_option(uri, "retry_limit_seconds", str(GCS_RETRY_SECONDS))
        try:  # delayed open: a small object is one PUT, and nothing is visible before it is complete
            filesystem, path = pafs.FileSystem.from_uri(uri)
        except (OSError, ValueError) as err:
            raise StorageError(f"{text!r}: not a usable {protocol}:// location ({_reason(err)}).") from None
        return Location(filesystem, path.rstrip("/"), text.rstrip("/"))
    import fsspec

    try:  # the host and options the URI holds go to the filesystem (ftp:// needs its host)
        filesystem, path = fsspec.core.url_to_fs(text)
    except OSError as err:  # the filesystem connects as it is made (ftp://)
        raise StorageError(f"{text!r}: cannot reach it ({_reason(err)}).") from None
    except (ImportError, ValueError, TypeError) as err:
        raise StorageError(f"{text!r}: no filesystem for {protocol}:// ({_reason(err)}); give a local path, "
                           "s3://, gs://, or an fsspec protocol whose package is installed.") from None
    handler = pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    return Location(handler, path.rstrip("/"), text.rstrip("/"))


GCS_RETRY_SECONDS = 15
"""How long a gs:// location is retried before it is reported unreachable (unless its URI sets retry_limit_seconds)."""


def _with_option(uri: str, name: str, value: str) -> str:
    """``uri`` with the query option ``name``, unless it sets one itself."""
    if f"{name}=" in uri.partition("?")[2]:
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}{name}={value}"


def _reason(err: BaseException) -> str:
    """The first line of a storage error, with a hint where the cause is credentials or a bucket."""
    text = str(err).splitlines()[0][:240] if str(err) else type(err).__name__
    lowered = text.lower()
    if "access_denied" in lowered or "access denied" in lowered or "forbidden" in lowered or "credentials" in lowered:
        return (f"{text} -- access was refused: set credentials the usual way (for S3: AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; AWS_ENDPOINT_URL for an S3-compatible server)")
    if "no_such_bucket" in lowered or "nosuchbucket" in lowered or "bucket" in lowered and "not" in lowered:
        return f"{text} -- the bucket does not exist (or is not visible with these credentials)"
    return text
