"""Every ``GITMEM_*`` environment variable, in one settings object, checked at start.

:func:`load_settings` reads the environment once into :class:`GitmemSettings`; a bad value is a
:class:`SettingsError` whose one line names the variable, what is wrong and the form expected (never the
value: it may be a key). ``gitmem`` (every command, ``serve`` included) and the app factory check them
before doing anything, so a bad setting stops the program (exit 2) instead of failing each request.
The table of settings in docs/settings.md is :func:`gitmem.config.table.markdown_table` (``gitmem settings
--markdown``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gitmem.config.names import PREFIX
from gitmem.errors import GitmemError

_ON = frozenset({"1", "on", "true", "yes"})
_OFF = frozenset({"0", "off", "false", "no"})


def _setting(
    default: Any, description: str, expected: str, *, group: str = "server", shown_default: str | None = None
) -> Any:
    """A field with what docs/settings.md says about it (in the table's ``group``, with ``shown_default`` when the
    default is not a plain value) and the form an error message asks for."""
    extra: dict[str, Any] = {"expected": expected, "group": group, "shown_default": shown_default}
    return Field(default, description=description, json_schema_extra=extra)


class SettingsError(GitmemError):
    """A setting with a value the program cannot run with (a fault of the deployment, not the request)."""

    def __init__(self, variable: str, problem: str, expected: str) -> None:
        super().__init__(f"{variable}: {problem}; expected {expected}")
        self.variable = variable


class GitmemSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_ignore_empty=True, extra="ignore", frozen=True, case_sensitive=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],  # noqa: ARG003
        init_settings: PydanticBaseSettingsSource,
        *_: PydanticBaseSettingsSource,
        **__: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The mapping load_settings gives, alone: pydantic-settings would fill its gaps from os.environ.
        return (init_settings,)

    # -- the server and every command ------------------------------------------------------------
    HOME: Path | None = _setting(
        None,
        "The data home for every command and the server.",
        "a folder path",
        shown_default="`./.gitmem` under `make serve`, else `$XDG_DATA_HOME/gitmem`",
    )
    DATABASE: SecretStr | None = _setting(
        None,
        "Where the catalog lives: unset for SQLite in the home (`catalog.sqlite3`), or a PostgreSQL URL"
        " (`postgresql://user:password@host:5432/gitmem`) shared by every node of a cluster.",
        "a postgresql:// URL (user, host and database name)",
        shown_default="SQLite in the home",
    )
    FSYNC: Literal["always", "files", "never"] = _setting(
        "always",
        "`always`: objects, the ref and its folder are on disk before a write returns, so an"
        " acknowledged write survives a power cut (costs two `syncfs` a batch of writes on Linux, which"
        " also flush what else was written to that file system; a few fsyncs elsewhere). `files`: the"
        " same promise kept with an fsync a file and a folder, for a home that shares its file system"
        " with heavy writers. `never`: faster (the OS decides when data reaches the disk); a crash of the"
        " process loses nothing, a power cut may lose the last writes.",
        "'always', 'files' or 'never'",
    )
    FILTERS: str = _setting(
        "",
        "Extra write filters, `module:factory` comma-separated, each returning `(path, text) -> reason or None`.",
        "comma-separated module:factory names that can be imported",
    )
    MASTER_KEY: SecretStr | None = _setting(
        None,
        "The master key that wraps encrypted stores' data keys (takes precedence over the file).",
        "64 hex digits or the base64 of 32 bytes (e.g. `openssl rand -base64 32`)",
    )
    MASTER_KEY_FILE: Path | None = _setting(
        None,
        "A file holding the master key (hex, base64 or 32 raw bytes); else `$GITMEM_HOME/master.key`,"
        " made on first use.",
        "a readable file holding 32 bytes as hex, base64 or raw",
    )
    SIGNING_KEY: SecretStr | None = _setting(
        None,
        "The Ed25519 key that signs every commit (takes precedence over the file; docs/audit.md).",
        "an unencrypted OpenSSH Ed25519 private key, or its 32-byte seed as hex or base64",
    )
    SIGNING_KEY_FILE: Path | None = _setting(
        None,
        "A file holding the signing key; else `$GITMEM_HOME/signing.key`, made with the home.",
        "a readable file holding an OpenSSH Ed25519 private key (ssh-keygen -t ed25519 -N '')",
    )
    RATE_LIMIT_RPS: Annotated[float, Field(ge=0)] = _setting(
        200.0, "Per-key token bucket: requests a second (0 turns rate limiting off).", "a number >= 0"
    )
    RATE_LIMIT_BURST: Annotated[int, Field(ge=1)] = _setting(
        400, "Per-key token bucket: the burst a key may spend at once.", "a whole number >= 1"
    )
    MAX_BODY_BYTES: Annotated[int, Field(ge=1024)] = _setting(
        1 << 20,
        "Request bodies above this are 413 (Git's smart HTTP streams past it).",
        "a whole number of bytes >= 1024",
    )
    PRUNE_INTERVAL: Annotated[float, Field(ge=0)] = _setting(
        3600.0, "Seconds between the server's retention rounds; 0 turns the schedule off.", "a number of seconds >= 0"
    )
    DREAMER: Literal["offline", "anthropic", "offline-hold"] = _setting(
        "offline",
        "`offline` (a deterministic tidier, no network), `anthropic` (the SDK against a real"
        " model, configured by `ANTHROPIC_API_KEY`/`ANTHROPIC_BASE_URL`) or `offline-hold` (tests: the"
        " offline tidier holding each dream `GITMEM_DREAM_HOLD` seconds).",
        "'offline', 'anthropic' or 'offline-hold'",
    )
    DREAM_RUNNER: bool = _setting(
        True, "Run dreams in this server process (`off` leaves them to other processes).", "'on' or 'off'"
    )
    DREAM_POLL: Annotated[float, Field(gt=0)] = _setting(
        1.0, "Seconds between the dream runner's looks for pending dreams.", "a number of seconds > 0"
    )
    DREAM_TIMEOUT: Annotated[float, Field(gt=0)] = _setting(
        12 * 3600.0, "Seconds a dream may run.", "a number of seconds > 0"
    )
    DREAM_HOLD: Annotated[float, Field(ge=0)] = _setting(
        30.0, "Tests only: seconds the `offline-hold` dreamer holds a dream.", "a number of seconds >= 0"
    )
    SEARCH_BUDGET: Annotated[float, Field(gt=0)] = _setting(
        1.0,
        "Seconds one search may take in the database (SQLite's progress handler, PostgreSQL's"
        " `statement_timeout`); a search stopped there answers 400 (docs/search.md).",
        "a number of seconds > 0",
    )
    SECRETS_ALLOW: str = _setting(
        "",
        "Secret-detector rule ids a deployment does not enforce, comma-separated (e.g. `jwt,url-credentials`).",
        "comma-separated rule ids",
    )
    WEBHOOKS: bool = _setting(
        True,
        "Deliver webhooks from this server process (one process at a time holds the lease; `off`"
        " leaves delivery to others).",
        "'on' or 'off'",
    )
    WEBHOOK_POLL: Annotated[float, Field(gt=0)] = _setting(
        1.0, "Seconds between the webhook deliverer's looks at the outbox.", "a number of seconds > 0"
    )
    WEBHOOK_FIRST_RETRY: Annotated[float, Field(gt=0)] = _setting(
        5.0, "Seconds before a failed webhook delivery is first retried.", "a number of seconds > 0"
    )
    WEBHOOK_MAX_RETRY: Annotated[float, Field(gt=0)] = _setting(
        3600.0, "The longest wait between webhook retries, in seconds.", "a number of seconds > 0"
    )
    WEBHOOK_GIVE_UP_AFTER: Annotated[float, Field(gt=0)] = _setting(
        3 * 86400.0, "Seconds after which an undelivered webhook is given up.", "a number of seconds > 0"
    )
    WEBHOOK_TIMEOUT: Annotated[float, Field(gt=0)] = _setting(
        10.0,
        "Seconds a webhook delivery attempt may take in all (resolving, connecting, sending, the answer).",
        "a number of seconds > 0",
    )
    WEBHOOK_CONCURRENCY: Annotated[int, Field(ge=1, le=256)] = _setting(
        8, "Webhook subscriptions delivered to at once (a slow receiver holds one of them).", "a whole number 1-256"
    )
    WEBHOOK_ALLOW_NETWORKS: str = _setting(
        "",
        "Networks webhooks may be delivered to although loopback, private, link-local or this server's own"
        " (CIDRs, comma-separated, e.g. `10.20.0.0/16`); by default only public addresses"
        " (docs/webhooks.md).",
        "comma-separated CIDRs such as 10.0.0.0/8 or fd00::/8",
    )
    LOG_FORMAT: Literal["text", "json"] = _setting(
        "text",
        "`text` (uvicorn's lines) or `json`: one JSON object a line, with each request's id, route"
        " template, status, duration and caller, never a secret, a query string or a note's content.",
        "'text' or 'json'",
    )
    METRICS_TOKEN: SecretStr | None = _setting(
        None,
        "Turns `/metrics` (Prometheus' text format) on: a scrape must send this as `Authorization:"
        " Bearer`. Unset, `/metrics` is 404.",
        "a token of at least 16 characters (e.g. `openssl rand -hex 16`)",
    )
    METRICS_DIR: Path | None = _setting(
        None,
        "Where the server's processes keep their metric files, so that every worker reports one set"
        " (emptied at start).",
        "a folder path on a local file system",
        shown_default="a fresh folder in the temp dir, made by `gitmem serve`",
    )
    READY_MIN_FREE_BYTES: Annotated[int, Field(ge=0)] = _setting(
        256 << 20,
        "`/readyz` answers 503 while the home's file system has fewer bytes free than this.",
        "a whole number of bytes >= 0",
        shown_default="268435456 (256 MiB)",
    )
    DRAIN_SECONDS: Annotated[float, Field(ge=0)] = _setting(
        0.0,
        "After SIGTERM, seconds a server answers 503 (with `Retry-After`) before it stops accepting"
        " connections, for a load balancer to see `/readyz` fail.",
        "a number of seconds >= 0",
    )
    STOP_TIMEOUT: Annotated[float, Field(gt=0)] = _setting(
        20.0,
        "After SIGTERM (and the drain), seconds a server waits for the requests in flight, then for its"
        " background work to stop; it exits within DRAIN_SECONDS + STOP_TIMEOUT + about a second.",
        "a number of seconds > 0",
    )
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] | None = _setting(
        None,
        "Log level of the server app (default INFO) and of the agent hooks' bank mount (default WARNING).",
        "DEBUG, INFO, WARNING, ERROR or CRITICAL",
    )

    # -- clients (the CLI's --url/--token/--key options read these) --------------------------------
    URL: str | None = _setting(
        None, "The server, for `gitmem mount`, `clone`, `prompt` and the agent hooks.", "an http(s) URL", group="client"
    )
    TOKEN: SecretStr | None = _setting(
        None, "A user's token (or an API key) for the client commands.", "a token", group="client"
    )
    API_KEY: SecretStr | None = _setting(None, "The API key `gitmem mount` uses.", "an API key", group="client")
    PROFILE: str | None = _setting(
        None,
        "The profile whose bank the agent hooks mount at `.memory/`.",
        "a profile id (profile_...)",
        group="client",
    )
    STATE_DIR: Path | None = _setting(
        None,
        "Where the agent hooks keep their mount's state (else `$XDG_RUNTIME_DIR`, else the temp dir).",
        "a folder path",
        group="client",
    )

    # -- set by the server for its Git hooks, not by people ----------------------------------------
    USER_ID: str | None = _setting(None, "The pushing user (`user_...`).", "a user id", group="hook")
    ACCESS: str | None = _setting(None, "The pusher's access (`read_write` may push).", "an access level", group="hook")
    STORE_ID: str | None = _setting(
        None, "The store pushed to (default: the repository's folder name).", "a store id", group="hook"
    )
    PYTHON: str | None = _setting(
        None, "The interpreter the hook scripts run gitmem with.", "an executable path", group="hook"
    )
    CHECKED: str | None = _setting(
        None,
        "The settings above as the server checked them, so that a hook need not check them again"
        " (`gitmem/config/handoff.py`).",
        "what the server sets",
        group="hook",
    )
    REWRITE_CRASH_AT: str | None = _setting(
        None, "Tests only: the rewrite step at which to simulate a crash.", "a step name", group="hook"
    )

    @field_validator("DREAM_RUNNER", "WEBHOOKS", mode="before")
    @classmethod
    def _on_off(cls, value: object) -> object:
        if isinstance(value, str):
            word = value.strip().lower()
            if word in _ON or word in _OFF:
                return word in _ON
            raise ValueError("not on or off")
        return value

    @field_validator("LOG_LEVEL", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("METRICS_TOKEN")
    @classmethod
    def _metrics_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().strip()) < 16:
            raise ValueError("is shorter than 16 characters")
        return value

    @field_validator("FSYNC", "DREAMER", "LOG_FORMAT", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("SECRETS_ALLOW")
    @classmethod
    def _known_rules(cls, value: str) -> str:
        from gitmem.rules.secrets import allowed_rules

        allowed_rules(value)  # ValueError names an unknown rule
        return value

    @field_validator("WEBHOOK_ALLOW_NETWORKS")
    @classmethod
    def _networks(cls, value: str) -> str:
        from gitmem.webhooks.targets import parse_networks

        parse_networks(value)  # ValueError names the entry that is not a CIDR
        return value

    @field_validator("DATABASE")
    @classmethod
    def _database(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            from gitmem.db import check_database_url

            check_database_url(value.get_secret_value())
        return value

    @field_validator("MASTER_KEY")
    @classmethod
    def _master_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            from gitmem.crypto.master_key import check_master_key_text

            check_master_key_text(value.get_secret_value())
        return value

    @field_validator("MASTER_KEY_FILE")
    @classmethod
    def _master_key_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            from gitmem.crypto.master_key import check_master_key_file

            check_master_key_file(value)
        return value

    @field_validator("SIGNING_KEY")
    @classmethod
    def _signing_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            from gitmem.crypto.signing_key import check_signing_key_text

            check_signing_key_text(value.get_secret_value())
        return value

    @field_validator("SIGNING_KEY_FILE")
    @classmethod
    def _signing_key_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            from gitmem.crypto.signing_key import check_signing_key_file

            check_signing_key_file(value)
        return value

    @field_validator("FILTERS")
    @classmethod
    def _filters(cls, value: str) -> str:
        for name in filter(None, (s.strip() for s in value.split(","))):
            module_name, _, attr = name.partition(":")
            if not module_name or not attr:
                raise ValueError(f"{name!r} is not module:factory")
            try:
                factory = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError) as exc:
                raise ValueError(f"{name!r} cannot be loaded ({exc})") from None
            if not callable(factory):
                raise ValueError(f"{name!r} is not callable")
        return value


def _problem(error: Mapping[str, Any]) -> str:
    # pydantic's message without the input (it may be a key): "Input should be ..." reads as "should be ...".
    message = str(error.get("msg", "invalid"))
    message = message.removeprefix("Value error, ").removeprefix("Input ")
    return message[:1].lower() + message[1:]


def load_settings(environ: Mapping[str, str] | None = None) -> GitmemSettings:
    """The settings from ``environ`` (default: the process environment), or :class:`SettingsError`
    for the first bad one."""
    try:
        environ = os.environ if environ is None else environ
        values = {name: environ[PREFIX + name] for name in GitmemSettings.model_fields if environ.get(PREFIX + name)}
        return GitmemSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error.get("loc") else "?"
        expected = field_extra(name).get("expected", "a valid value") if name in GitmemSettings.model_fields else "?"
        raise SettingsError(PREFIX + name, _problem(error), str(expected)) from None


def field_extra(name: str) -> dict[str, Any]:
    extra = GitmemSettings.model_fields[name].json_schema_extra
    return extra if isinstance(extra, dict) else {}
