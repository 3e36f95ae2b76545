"""Settings handed down as checked (``GITMEM_CHECKED``), for the processes that start most often."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from gitmem.api.routers.stores.git import push_environment
from gitmem.config import handoff as checked_settings
from gitmem.config.handoff import checked_for
from gitmem.config.names import PER_PUSH
from gitmem.config.settings import GitmemSettings, SettingsError, load_settings
from gitmem.config.values import Config, from_settings
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.model import Actor

SERVER = {
    "GITMEM_HOME": "/srv/gitmem",
    "GITMEM_FSYNC": "Never",
    "GITMEM_DATABASE": "postgresql://gitmem:s3cret@db.internal/gitmem",
    "GITMEM_SECRETS_ALLOW": "jwt",
    "GITMEM_DREAM_TIMEOUT": "90",
}


Reader = Callable[[Mapping[str, str]], Config]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[str, str]]:
    """Every environment the settings object checks from here on."""
    seen: list[Mapping[str, str]] = []
    real_check = checked_settings.check

    def check(environ: Mapping[str, str]) -> Config:
        seen.append(environ)
        return real_check(environ)

    monkeypatch.setattr(checked_settings, "check", check)
    return seen


@pytest.fixture
def new_process(monkeypatch: pytest.MonkeyPatch) -> Reader:
    """``checked_settings.from_environment`` as a process just started with that environment reads it: with
    nothing kept yet (this process's own hand-downs are kept, and would answer instead)."""

    def read(environ: Mapping[str, str]) -> Config:
        monkeypatch.setattr(checked_settings, "_kept", {})
        return checked_settings.from_environment(environ)

    return read


def test_values_handed_down_are_the_settings_objects_values(
    new_process: Reader, checks: list[Mapping[str, str]]
) -> None:
    child = SERVER | checked_for(SERVER)
    checks.clear()
    settings = load_settings(SERVER)
    handed = new_process(child)
    assert handed == from_settings(settings)  # every part, typed alike (secrets from their own variables)
    assert handed.durability.mode == settings.FSYNC == "never"
    assert handed.storage.home == settings.HOME == Path("/srv/gitmem")
    assert handed.dreams.timeout == settings.DREAM_TIMEOUT == 90.0
    assert handed.rules.secrets_allow == "jwt"
    assert handed.storage.database == SERVER["GITMEM_DATABASE"]
    assert handed.keys.master_key is None
    assert checks == []  # the child used what was handed down, and checked nothing itself


def test_secrets_are_not_handed_down() -> None:
    handed = json.loads(checked_for(SERVER)["GITMEM_CHECKED"])
    assert "s3cret" not in json.dumps(handed)
    config = handed["config"]
    assert "database" not in config["storage"] and "metrics_token" not in config["serving"]
    assert not {"master_key", "signing_key"} & set(config["keys"])
    assert config["storage"]["home"] == "/srv/gitmem"


def test_a_hand_down_for_another_environment_is_not_used(new_process: Reader, checks: list[Mapping[str, str]]) -> None:
    """The digest says which environment the values were checked for: a child whose environment differs
    checks its own. (It is not a signature: whoever sets a hook's GITMEM_CHECKED sets its other
    variables too.)"""
    handed = checked_for(SERVER)
    assert new_process(SERVER | {"GITMEM_FSYNC": "always"} | handed).durability.mode == "always"
    for_another = checked_for(SERVER | {"GITMEM_FSYNC": "always"})
    checks.clear()
    assert new_process(SERVER | for_another).durability.mode == "never"
    assert new_process(SERVER | {"GITMEM_CHECKED": "not json"}).durability.mode == "never"
    assert len(checks) == 2  # each checked its own environment


def test_a_bad_value_is_the_settings_objects_error_either_way() -> None:
    with pytest.raises(SettingsError, match="GITMEM_FSYNC"):
        checked_settings.from_environment(SERVER | {"GITMEM_FSYNC": "sometimes"})
    with pytest.raises(SettingsError, match="GITMEM_FSYNC"):
        checked_for(SERVER | {"GITMEM_FSYNC": "sometimes"})


def test_one_check_serves_every_push() -> None:
    """The variables the server sets per push are outside the digest, and outside the values."""
    push = {"GITMEM_USER_ID": "user_1", "GITMEM_ACCESS": "read_write", "GITMEM_STORE_ID": "memstore_1"}
    assert checked_settings.digest(SERVER | push) == checked_settings.digest(SERVER)
    assert checked_for(SERVER | push) == checked_for(SERVER)
    handed = json.loads(checked_for(SERVER)["GITMEM_CHECKED"])["config"]
    assert not {name.lower() for name in PER_PUSH} & {name for part in handed.values() for name in part}
    fields = GitmemSettings.model_fields.items()
    hook_group = {name for name, field in fields if (field.json_schema_extra or {}).get("group") == "hook"}  # type: ignore[union-attr]
    assert hook_group >= PER_PUSH


def test_a_check_and_its_digest_see_one_environment_while_another_thread_changes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A value kept for one environment is never the value of another: here the environment changes
    between the digest and the check (tests change it while the server's threads read settings)."""
    real_check = checked_settings.check

    def check_while_it_changes(environ: Mapping[str, str]) -> Config:
        os.environ["GITMEM_DREAM_TIMEOUT"] = "7"  # another thread, at the worst moment
        return real_check(environ)

    monkeypatch.setattr(checked_settings, "_kept", {})  # nothing kept: the check runs
    monkeypatch.setenv("GITMEM_DREAM_TIMEOUT", "100")
    monkeypatch.setattr(checked_settings, "check", check_while_it_changes)
    assert checked_settings.from_environment().dreams.timeout == 100.0  # what the environment held when asked
    assert checked_settings.from_environment().dreams.timeout == 7.0
    os.environ["GITMEM_DREAM_TIMEOUT"] = "100"
    assert checked_settings.from_environment().dreams.timeout == 100.0  # kept for that environment, and right


def test_the_server_hands_its_hooks_the_rules_it_writes_by(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A push must be held to the rules an API write is: the secret rules a deployment turned off too."""
    monkeypatch.setenv("GITMEM_SECRETS_ALLOW", "jwt")
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    pusher = Principal("wrkspc_1", Actor("user_actor", "user_1"), "read-write", "user_1")
    environment = push_environment(gm, pusher, "memstore_1", "read_write")
    assert environment["GITMEM_SECRETS_ALLOW"] == "jwt"
    assert checked_settings.from_environment(environment).rules.secrets_allow == "jwt"  # from what was handed down
    assert json.loads(environment["GITMEM_CHECKED"])["config"]["rules"]["secrets_allow"] == "jwt"
