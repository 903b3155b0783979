"""Where PosIR's files come from: a local copy or the Hugging Face hub, read one file at a time
and checked against the published schema before anything is embedded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ...hub import hub_access
from .._base import DatasetSchemaError, check_columns, without_hub_hint
from .dataset import TEXT_COLUMNS, domain_of_folder


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
        relative = f"{language}/{folder}/{name}"
        if self.local is not None:
            path = self.local / relative
        else:
            from huggingface_hub import hf_hub_download

            with hub_access(f"{relative} of {self.hub_id}", without_hub_hint(self.hub_id)):
                path = Path(hf_hub_download(self.hub_id, relative, repo_type="dataset", revision=self.revision))
        self.check_file(path, relative, columns)
        return pq.read_table(path, columns=list(columns)).to_pydict()

    def check_file(self, path: Path, relative: str, columns: Sequence[str]) -> None:
        """The file exists and has ``columns``, its text columns as strings (reads the footer only)."""
        if not path.is_file():
            raise DatasetSchemaError(f"PosIR: {path} is missing.")
        schema = self._schema(path, relative)
        check_columns(schema.names, columns, f"PosIR file {relative} of {self}")
        self.check_text_types(path, relative)

    def check_text_types(self, path: Path, relative: str) -> None:
        """A text column (`TEXT_COLUMNS`) of a present file that holds no strings is an error;
        cheap enough (the footer only) to run on every local file before anything is embedded."""
        import pyarrow as pa

        if not path.is_file():
            return  # reported when the subset is read
        schema = self._schema(path, relative)
        for column in TEXT_COLUMNS:
            if column in schema.names and not (pa.types.is_string(schema.field(column).type)
                                               or pa.types.is_large_string(schema.field(column).type)):
                raise DatasetSchemaError(
                    f"PosIR file {relative} of {self}: column {column!r} holds {schema.field(column).type}, "
                    "not strings; the texts must be UTF-8 strings."
                )

    def _schema(self, path: Path, relative: str) -> Any:
        import pyarrow as pa

        try:
            return pq.read_schema(path)
        except (OSError, pa.ArrowException) as err:
            raise DatasetSchemaError(f"PosIR file {relative} of {self}: not a readable Parquet file ({err}).") from None

