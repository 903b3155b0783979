"""One clear error when the Hugging Face hub cannot serve a dataset a task asked for.

Offline machines, an unreachable hub, an unknown or gated repository all surface deep inside
``datasets`` or ``huggingface_hub`` with their own exception types; `hub_access` turns them into
a `HubUnavailableError` that names the dataset and says how to run without the hub.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class HubUnavailableError(ConnectionError):
    """The Hugging Face hub could not serve a dataset (offline, unreachable, unknown or gated)."""


def _hub_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    errors: tuple[type[BaseException], ...] = (ConnectionError, HfHubHTTPError, LocalEntryNotFoundError)
    try:
        import httpx  # huggingface_hub's HTTP client: its transport errors are not ConnectionErrors
    except ImportError:
        return errors
    return (*errors, httpx.TransportError)


@contextlib.contextmanager
def hub_access(what: str, without_hub: str) -> Iterator[None]:
    """Re-raise hub failures inside the block as `HubUnavailableError` about ``what``.

    ``without_hub`` tells the user how to run from a local copy instead.
    """
    try:
        yield
    except HubUnavailableError:
        raise
    except _hub_errors() as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise HubUnavailableError(
            f"Could not read {what} from the Hugging Face hub ({type(err).__name__}{': ' + reason if reason else ''}). "
            f"{without_hub}"
        ) from err
