"""The checked settings as typed values: one frozen dataclass a concern, all of them in :class:`Config`,
built once where a program starts and handed down; what takes a setting takes the part it needs.

Two sources give the same :class:`Config`: the settings object of a server or a command
(:func:`from_settings`), and the values handed down to what Git starts
(:func:`gitmem.config.handoff.from_environment`, in the plain form of :func:`to_plain`). Light (no
pydantic): a push hook imports it. The clients' settings (``URL``, ``TOKEN``...) and the ones the server
sets per push are not here: the commands that read them take them from the settings object, the push
hooks from :class:`gitmem.engine.push.receive.PushEnv`.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitmem.durable import Durability

if TYPE_CHECKING:
    from gitmem.config.settings import GitmemSettings

Dreamer = Literal["offline", "anthropic", "offline-hold"]
LogFormat = Literal["text", "json"]


def _secret(variable: str) -> Any:
    """A field holding a secret: never handed down in ``GITMEM_CHECKED`` (read from ``variable``), never
    in a repr."""
    return field(repr=False, metadata={"secret": variable})


@dataclass(frozen=True)
class Storage:
    """Where the home is (``GITMEM_HOME``; None: the XDG default) and its catalog (``GITMEM_DATABASE``;
    None: SQLite in the home)."""

    home: Path | None
    database: str | None = _secret("DATABASE")


@dataclass(frozen=True)
class Keys:
    """Where the master key (``GITMEM_MASTER_KEY[_FILE]``) and the signing key (``GITMEM_SIGNING_KEY[_FILE]``)
    come from; None: the home's own files."""

    master_key_file: Path | None
    signing_key_file: Path | None
    master_key: str | None = _secret("MASTER_KEY")
    signing_key: str | None = _secret("SIGNING_KEY")


@dataclass(frozen=True)
class WriteRules:
    """What every write is checked against: extra filters (``GITMEM_FILTERS``) and the secret rules not
    enforced (``GITMEM_SECRETS_ALLOW``)."""

    filters: str
    secrets_allow: str


@dataclass(frozen=True)
class Limits:
    """What one request may take: its body, its key's rate, a search's seconds; and the free space
    ``/readyz`` asks for."""

    max_body_bytes: int
    rate_limit_rps: float
    rate_limit_burst: int
    search_budget: float
    ready_min_free_bytes: int


@dataclass(frozen=True)
class Dreams:
    """Which dreamer (``GITMEM_DREAMER``), how long a dream may run, and the server's dream runner."""

    dreamer: Dreamer
    timeout: float
    hold: float  # offline-hold (tests): seconds a dream is held
    runner: bool
    poll: float


@dataclass(frozen=True)
class Webhooks:
    """Whether this server delivers webhooks, and how (``GITMEM_WEBHOOK*``)."""

    deliver: bool
    poll: float
    first_retry: float
    max_retry: float
    give_up_after: float
    timeout: float
    concurrency: int
    allow_networks: str  # CIDRs, comma-separated (checked: gitmem.webhooks.targets.parse_networks)


@dataclass(frozen=True)
class Serving:
    """The server process: its logs, metrics, schedule and stop."""

    log_format: LogFormat
    log_level: str | None
    metrics_dir: Path | None
    prune_interval: float
    drain_seconds: float
    stop_timeout: float
    metrics_token: str | None = _secret("METRICS_TOKEN")


@dataclass(frozen=True)
class Config:
    """Every setting a program runs with, by concern (``durability``: the home's ``GITMEM_FSYNC``)."""

    storage: Storage
    durability: Durability
    keys: Keys
    rules: WriteRules
    limits: Limits
    dreams: Dreams
    webhooks: Webhooks
    serving: Serving


def from_settings(s: GitmemSettings) -> Config:
    """A settings object's values, typed (secrets unwrapped). The one place that names the settings."""

    def secret(value: Any) -> str | None:
        return value.get_secret_value() if value is not None else None

    return Config(
        storage=Storage(home=s.HOME, database=secret(s.DATABASE)),
        durability=Durability(s.FSYNC),
        keys=Keys(
            master_key_file=s.MASTER_KEY_FILE,
            signing_key_file=s.SIGNING_KEY_FILE,
            master_key=secret(s.MASTER_KEY),
            signing_key=secret(s.SIGNING_KEY),
        ),
        rules=WriteRules(filters=s.FILTERS, secrets_allow=s.SECRETS_ALLOW),
        limits=Limits(
            max_body_bytes=s.MAX_BODY_BYTES,
            rate_limit_rps=s.RATE_LIMIT_RPS,
            rate_limit_burst=s.RATE_LIMIT_BURST,
            search_budget=s.SEARCH_BUDGET,
            ready_min_free_bytes=s.READY_MIN_FREE_BYTES,
        ),
        dreams=Dreams(
            dreamer=s.DREAMER, timeout=s.DREAM_TIMEOUT, hold=s.DREAM_HOLD, runner=s.DREAM_RUNNER, poll=s.DREAM_POLL
        ),
        webhooks=Webhooks(
            deliver=s.WEBHOOKS,
            poll=s.WEBHOOK_POLL,
            first_retry=s.WEBHOOK_FIRST_RETRY,
            max_retry=s.WEBHOOK_MAX_RETRY,
            give_up_after=s.WEBHOOK_GIVE_UP_AFTER,
            timeout=s.WEBHOOK_TIMEOUT,
            concurrency=s.WEBHOOK_CONCURRENCY,
            allow_networks=s.WEBHOOK_ALLOW_NETWORKS,
        ),
        serving=Serving(
            log_format=s.LOG_FORMAT,
            log_level=s.LOG_LEVEL,
            metrics_dir=s.METRICS_DIR,
            prune_interval=s.PRUNE_INTERVAL,
            drain_seconds=s.DRAIN_SECONDS,
            stop_timeout=s.STOP_TIMEOUT,
            metrics_token=secret(s.METRICS_TOKEN),
        ),
    )


# -- the hand-down's form: plain JSON, secrets left out ---------------------------------------------


def to_plain(config: Config) -> dict[str, dict[str, Any]]:
    """``config`` as JSON-able values, without its secrets (they travel in their own variables)."""
    return {
        part.name: {
            f.name: str(v) if isinstance(v := getattr(value, f.name), Path) else v
            for f in fields(value)
            if "secret" not in f.metadata
        }
        for part in fields(config)
        if (value := getattr(config, part.name)) is not None
    }


def from_plain(plain: Mapping[str, Mapping[str, Any]], environ: Mapping[str, str], prefix: str) -> Config:
    """The :class:`Config` :func:`to_plain` gave, its secrets read from ``environ`` (``prefix`` + their
    variable); ``KeyError`` or ``TypeError`` if ``plain`` is not of that form."""
    parts: dict[str, Any] = {}
    for name, cls in typing.get_type_hints(Config).items():
        kinds = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if "secret" in f.metadata:
                values[f.name] = environ.get(prefix + f.metadata["secret"]) or None
                continue
            value = plain[name][f.name]
            is_path = kinds[f.name] is Path or Path in typing.get_args(kinds[f.name])
            values[f.name] = Path(value) if is_path and value is not None else value
        parts[name] = cls(**values)
    return Config(**parts)
