"""The checked settings behind one signature, whichever source they come from: the settings object of
a server or a command (:func:`from_settings`), or the values handed down to what Git starts
(:func:`from_environment`, :mod:`gitmem.config.handoff`). Light: a push hook imports it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gitmem.config import handoff

if TYPE_CHECKING:
    from gitmem.config.settings import GitmemSettings

Values = Callable[[str], Any]  # name -> the checked value of GITMEM_<name> (secrets as plain text)


def from_environment(environ: Mapping[str, str] | None = None) -> Values:
    """The environment's values as checked, or as handed down (cheap: a push hook starts per push)."""
    return lambda name: handoff.value(name, environ)


def from_settings(settings: GitmemSettings) -> Values:
    """A settings object's values, secrets unwrapped."""

    def value(name: str) -> Any:
        found = getattr(settings, name)
        return found.get_secret_value() if hasattr(found, "get_secret_value") else found

    return value
