"""The settings as checked, for the processes that start most often: Git's push hooks.

:mod:`gitmem.config.settings` checks every ``GITMEM_*`` variable with pydantic-settings, and loading it costs a
process about 0.15 s of CPU: more than a push hook's whole work. So a process that has checked an
environment hands the result down with it: ``GITMEM_CHECKED`` (made by :func:`checked_for`) holds a
digest of the variables checked and the typed values they became (:class:`gitmem.config.values.Config`,
as plain JSON). Secrets are left out of it; they are read from their own variables, which the digest covers.

:func:`from_environment` uses the values handed down while the digest matches this process's environment, and
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

from gitmem.config.names import CHECKED, NOT_DIGESTED, PREFIX
from gitmem.config.values import Config, from_plain, from_settings, to_plain

_kept: dict[str, Config] = {}  # digest of an environment -> its settings
_kept_lock = threading.Lock()


def to_json(config: Config, digest: str) -> str:
    return json.dumps({"digest": digest, "config": to_plain(config)})


def from_json(text: str, digest: str, environ: Mapping[str, str]) -> Config | None:
    """The settings handed down, if they were checked for an environment with this digest (secrets
    from ``environ``)."""
    try:
        data = json.loads(text)
        if data["digest"] != digest:
            return None
        return from_plain(data["config"], environ, PREFIX)
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


def _checked(snapshot: dict[str, str], key: str) -> Config:
    """The settings of ``snapshot`` (whose digest is ``key``): kept, handed down, or checked now."""
    found = _kept.get(key)
    if found is None:
        found = from_json(snapshot.get(CHECKED, ""), key, snapshot)
        if found is None:
            found = check(snapshot)
        with _kept_lock:
            if len(_kept) > 16:  # environments come and go in tests; a server has one
                _kept.clear()
            _kept[key] = found
    return found


def check(environ: Mapping[str, str]) -> Config:
    """``environ``'s settings checked by the settings object, the per-push variables aside;
    :class:`gitmem.config.settings.SettingsError` if one is bad."""
    from gitmem.config.settings import GitmemSettings, load_settings  # loaded only when nothing was handed down

    digested = {PREFIX + name for name in GitmemSettings.model_fields if name not in NOT_DIGESTED}
    return from_settings(load_settings({k: v for k, v in environ.items() if k in digested}))


def from_environment(environ: Mapping[str, str] | None = None) -> Config:
    """The checked settings of ``environ`` (default: this process's environment)."""
    snapshot = _snapshot(os.environ if environ is None else environ)
    return _checked(snapshot, digest(snapshot))


def checked_for(environ: Mapping[str, str]) -> dict[str, str]:
    """``GITMEM_CHECKED`` for a process started with ``environ``, which then need not load the settings
    object; :class:`gitmem.config.settings.SettingsError` if a value is bad."""
    snapshot = _snapshot(environ)
    key = digest(snapshot)
    return {CHECKED: to_json(_checked(snapshot, key), key)}
