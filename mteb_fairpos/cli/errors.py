"""The one error path of every subcommand: an expected error becomes one line on stderr and an exit status.

Status 2: the input is wrong (an argument, a file, the data, a model or address that cannot be reached
as given); fixing the command line fixes it. Status 1: the run started and did not finish (a write
that kept failing, a model that broke mid-run); running it again may work. Anything else is a bug
and keeps its traceback. An argument argparse refuses leaves the same way, through `ArgumentParser`.
"""

from __future__ import annotations

import argparse
import sys

BAD_INPUT = 2
FAILED_RUN = 1

_FAILED_RUN = (("mteb_fairpos.integrations.qdrant.store", "UpsertFailedError"), ("mteb_fairpos.model", "CalibratedModelError"))
_BAD_INPUT = (("mteb_fairpos.integrations.qdrant.store", "QdrantIndexError"),
              ("mteb_fairpos.integrations.ray.runtime", "RayUnavailableError"))


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose refusal is one line too, ``PROG: error: MESSAGE (see PROG --help)``, status 2:
    the usage block it prints by default buries the one line that says what is wrong."""

    def error(self, message: str):  # type: ignore[override] - it exits, as argparse's does
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def exit_status(err: BaseException) -> int | None:
    """2 or 1 for the package's expected errors (and the standard ones bad input raises), else ``None``."""
    if isinstance(err, _loaded(_FAILED_RUN)):
        return FAILED_RUN
    if isinstance(err, (ValueError, TypeError, OSError, *_loaded(_BAD_INPUT))):
        return BAD_INPUT  # ValueError covers ConfigError, CorpusError, InputError, StorageError, DatasetSchemaError
    return None


def report(command: str, err: BaseException) -> int:
    """Print ``mteb-fairpos COMMAND: error: MESSAGE`` as one line on stderr; the exit status."""
    print(f"mteb-fairpos {command}: error: {one_line(err)}", file=sys.stderr)
    return exit_status(err) or FAILED_RUN


def one_line(err: BaseException, lines: int = 3) -> str:
    """The gist of an error on one line (a library's message can run to a dozen)."""
    kept = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
    return " ".join(kept[:lines]) + (" ..." if len(kept) > lines else "")


def _loaded(names: tuple[tuple[str, str], ...]) -> tuple[type[BaseException], ...]:
    """The named error classes whose modules this run imported: an error from a module never
    imported cannot be raised, and importing it here would cost the import it spared."""
    return tuple(getattr(sys.modules[module], name) for module, name in names if module in sys.modules)
