"""The settings as checked, for the processes that start most often: Git's push hooks.

:mod:`gitmem.config.settings` checks every ``GITMEM_*`` variable with pydantic-settings, and loading it costs a
process about 0.15 s of CPU: more than a push hook's whole work. So a process that has checked an
environment hands the result down with it: ``GITMEM_CHECKED`` (made by :func:`checked_for`) holds a
digest of the variables checked and their values as checked. Secrets are left out of it; they are read
from their own variables, which the digest covers.

:func:`value` uses the values handed down while the digest matches this process's environment, and
otherwise checks the environment itself with the settings object, keeping the result for as long as the
environment stays the same. Either way a bad value is the same :class:`gitmem.config.settings.SettingsError`.
The variables the server sets for each push (who pushes, where) are not in the digest: the hooks read
them as they are (:class:`gitmem.engine.push.receive.PushEnv`), and one check serves every push.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitmem.config.names import CHECKED, NOT_DIGESTED, PREFIX

_kept: dict[str, Checked] = {}  # digest of an environment -> its checked values
_kept_lock = threading.Lock()


@dataclass(frozen=True)
class Checked:
    """An environment's settings as checked: plain values, and the names of the secret ones."""

    values: Mapping[str, Any]
    secrets: frozenset[str]

    def to_json(self, digest: str) -> str:
        return json.dumps({"digest": digest, "values": dict(self.values), "secrets": sorted(self.secrets)})

    @classmethod
    def from_json(cls, text: str, digest: str) -> Checked | None:
        """The values handed down, if they were checked for an environment with this digest."""
        try:
            data = json.loads(text)
            if data["digest"] != digest:
                return None
            return cls(data["values"], frozenset(data["secrets"]))
        except (ValueError, KeyError, TypeError):
            return None


def digest(environ: Mapping[str, str]) -> str:
    """What a check of ``environ`` depends on: its ``GITMEM_*`` variables but the per-push ones."""
    items = sorted(
        (name, text)
        for name, text in environ.items()
        if name.startswith(PREFIX) and name[len(PREFIX) :] not in NOT_DIGESTED
    )
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


def _snapshot(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``GITMEM_*`` variables, read once: a check and its digest must see the same values while
    another thread changes the environment (tests do)."""
    while True:
        try:
            return {name: text for name, text in environ.items() if name.startswith(PREFIX)}
        except RuntimeError:  # the environment changed size while it was read: read it again
            continue


def _checked(snapshot: dict[str, str], key: str) -> Checked:
    """The settings of ``snapshot`` (whose digest is ``key``): kept, handed down, or checked now."""
    found = _kept.get(key)
    if found is None:
        found = Checked.from_json(snapshot.get(CHECKED, ""), key)
        if found is None:
            found = check(snapshot)
        with _kept_lock:
            if len(_kept) > 16:  # environments come and go in tests; a server has one
                _kept.clear()
            _kept[key] = found
    return found


def check(environ: Mapping[str, str]) -> Checked:
    """``environ``'s settings checked by the settings object, as plain values, the per-push variables
    aside; :class:`gitmem.config.settings.SettingsError` if one is bad."""
    import typing

    from pydantic import SecretStr

    from gitmem.config.settings import GitmemSettings, load_settings  # loaded only when nothing was handed down

    fields = GitmemSettings.model_fields
    secrets = frozenset(
        name for name, field in fields.items() if SecretStr in (field.annotation, *typing.get_args(field.annotation))
    )
    digested = {PREFIX + name for name in fields if name not in NOT_DIGESTED}
    settings = load_settings({k: v for k, v in environ.items() if k in digested})
    return Checked(settings.model_dump(mode="json", exclude=set(secrets | NOT_DIGESTED)), secrets)


def value(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The checked value of ``GITMEM_<name>`` (None if unset and without a default); not for the
    variables in :data:`NOT_DIGESTED`."""
    snapshot = _snapshot(os.environ if environ is None else environ)
    settings = _checked(snapshot, digest(snapshot))
    if name in settings.secrets:
        return snapshot.get(PREFIX + name) or None
    return settings.values[name]


def checked_for(environ: Mapping[str, str]) -> dict[str, str]:
    """``GITMEM_CHECKED`` for a process started with ``environ``, which then need not load the settings
    object; :class:`gitmem.config.settings.SettingsError` if a value is bad."""
    snapshot = _snapshot(environ)
    key = digest(snapshot)
    return {CHECKED: _checked(snapshot, key).to_json(key)}
