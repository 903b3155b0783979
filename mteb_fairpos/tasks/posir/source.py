"""Where PosIR's files come from: a local copy or the Hugging Face hub, read one file at a time
and checked against the published schema before anything is embedded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ...hub import hub_access
from .._base import DatasetSchemaError, check_columns, without_hub_hint
from .dataset import COLUMN_KINDS, domain_of_folder


class PosIRSource:
    """Reads PosIR files from a local copy or the Hugging Face hub, one file at a time."""

    def __init__(self, hub_id: str, revision: str | None, local: Path | None) -> None:
        self.hub_id = hub_id
        self.revision = revision
        self.local = local

    def __str__(self) -> str:
        return str(self.local) if self.local is not None else f"hf://datasets/{self.hub_id}"

    def folders(self, language: str) -> dict[str, str]:
        """``{domain: folder}`` for the domain folders of ``language`` (empty if it has none)."""
        if self.local is not None:
            root = self.local / language
            names = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        else:
            from huggingface_hub import HfApi
            from huggingface_hub.errors import RemoteEntryNotFoundError
            from huggingface_hub.hf_api import RepoFolder

            with hub_access(f"the folder list of {self.hub_id}/{language}", without_hub_hint(self.hub_id)):
                try:
                    tree = HfApi().list_repo_tree(self.hub_id, path_in_repo=language, repo_type="dataset", revision=self.revision)
                    names = [item.path.rsplit("/", 1)[-1] for item in tree if isinstance(item, RepoFolder)]
                except RemoteEntryNotFoundError:  # the dataset has no folder for this language
                    names = []
        return {domain_of_folder(name): name for name in sorted(names)}

    def read(self, language: str, folder: str, name: str, columns: Sequence[str]) -> dict[str, list[Any]]:
        """The given columns of ``{language}/{folder}/{name}`` as Python lists."""
        import pyarrow as pa

        relative = f"{language}/{folder}/{name}"
        if self.local is not None:
            path = self.local / relative
        else:
            from huggingface_hub import hf_hub_download

            with hub_access(f"{relative} of {self.hub_id}", without_hub_hint(self.hub_id)):
                path = Path(hf_hub_download(self.hub_id, relative, repo_type="dataset", revision=self.revision))
        self.check_file(path, relative, columns)
        try:
            return pq.read_table(path, columns=list(columns)).to_pydict()
        except (OSError, pa.ArrowException) as err:  # an intact footer over damaged data pages
            raise DatasetSchemaError(f"PosIR file {relative} of {self}: its data cannot be read ({err}).") from None

    def check_file(self, path: Path, relative: str, columns: Sequence[str]) -> None:
        """The file exists and has ``columns``, each holding what it must (reads the footer only)."""
        if not path.is_file():
            raise DatasetSchemaError(f"PosIR: {path} is missing.")
        schema = self._schema(path, relative)
        check_columns(schema.names, columns, f"PosIR file {relative} of {self}")
        self.check_types(path, relative)

    def check_types(self, path: Path, relative: str) -> None:
        """A column of a present file that holds other than `COLUMN_KINDS` says is an error; cheap enough (the
        footer only) to run on every local file before anything is embedded."""
        if not path.is_file():
            return  # reported when the subset is read
        schema = self._schema(path, relative)
        for column, kind in COLUMN_KINDS.items():
            if column in schema.names and not _holds(schema.field(column).type, kind):
                raise DatasetSchemaError(
                    f"PosIR file {relative} of {self}: column {column!r} holds {schema.field(column).type}, "
                    f"not {kind}{'; the texts must be UTF-8 strings' if kind == 'strings' else ''}."
                )

    def _schema(self, path: Path, relative: str) -> Any:
        import pyarrow as pa

        try:
            return pq.read_schema(path)
        except (OSError, pa.ArrowException) as err:
            raise DatasetSchemaError(f"PosIR file {relative} of {self}: not a readable Parquet file ({err}).") from None


def _holds(kind: Any, what: str) -> bool:
    """Whether a column of Arrow type ``kind`` holds ``what`` (a `COLUMN_KINDS` value)."""
    import pyarrow as pa

    def number(of: Any) -> bool:
        return pa.types.is_integer(of) or pa.types.is_floating(of) or pa.types.is_decimal(of) or pa.types.is_null(of)

    if what == "strings":
        return pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if what == "lists of numbers":
        return (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)) and \
            number(kind.value_type)
    return number(kind)
