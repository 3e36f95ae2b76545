"""What every command shares: the data home, the workspace, error handling and output."""

from __future__ import annotations

import copy
import functools
import importlib
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from gitmem.errors import GitmemError, NotFound

if TYPE_CHECKING:
    from gitmem.config.values import Config
    from gitmem.db import Database
    from gitmem.engine.gitmem import Gitmem
    from gitmem.parts import Parts

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_WORKSPACE = "default"


class Context:
    """What every command shares: the settings as checked at start, and the home they open."""

    def __init__(self, home: Path | None, config: Callable[[], Config]) -> None:
        self._home = home
        self._read_config = config
        self._config: Config | None = None
        self._gm: Gitmem | None = None

    @property
    def config(self) -> Config:
        """The settings, typed; what Git runs checks them here, when a command first needs them."""
        if self._config is None:
            self._config = self._read_config()
        return self._config

    @property
    def home(self) -> Path:
        if self._home is None:
            from gitmem.config.home import home_path

            self._home = home_path(self.config.storage)
        return self._home

    @property
    def gm(self) -> Gitmem:
        if self._gm is None:
            from gitmem.config.home import open_home
            from gitmem.db import database_errors

            try:
                self._gm = open_home(self.config, self.home)
            except database_errors() as exc:  # e.g. PostgreSQL unreachable: one line, not a traceback
                unusable_database(self.config.storage.database, self.home, exc)
        return self._gm

    @property
    def parts(self) -> Parts:
        """The home's parts (reviews, tasks, dreams, profiles, ...), as the app hands them down."""
        from gitmem.parts import Parts

        return Parts(self.gm)

    def workspace_id(self, name: str | None, *, create: bool = False) -> str:
        """The named workspace, else the only one, else 'default'. Only a command that creates something
        (``create``) makes a workspace that does not exist; any other refuses, so a typo changes nothing."""
        catalog = self.gm.catalog
        if name is None:
            existing = catalog.list_workspaces()
            if len(existing) == 1:
                return existing[0].id
            if len(existing) > 1 and catalog.workspace_by_name(DEFAULT_WORKSPACE) is None:
                names = ", ".join(ws.name for ws in existing)
                raise click.UsageError(f"this home has several workspaces ({names}): name one with --workspace")
            name = DEFAULT_WORKSPACE
        ws = catalog.workspace_by_name(name)
        if ws is None and create:
            ws = catalog.create_workspace(name)
        if ws is None:
            names = ", ".join(sorted(w.name for w in catalog.list_workspaces())) or "none yet"
            raise NotFound(
                f"workspace {name!r} not found (workspaces here: {names}); a command that creates"
                " (store create, keys create, users create) makes a new one"
            )
        return ws.id


def unusable_database(url: str | None, home: Path, exc: Exception) -> NoReturn:
    """Exit 2 with one line: which database (never its password) and the driver's first line of why."""
    from gitmem.db import redact_url

    shown = redact_url(url) if url else str(home / "catalog.sqlite3")
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    click.echo(f"gitmem: cannot open the database {shown}: {reason}", err=True)
    sys.exit(2)


def connect(url: str | None, home: Path, what: str) -> Database:
    """The database at ``url`` (else the home's SQLite catalog), or exit 2 with one line saying why not."""
    from gitmem.config.settings import SettingsError
    from gitmem.db import check_database_url, database_errors, open_database

    if url is not None:
        try:
            check_database_url(url)
        except ValueError as exc:
            raise SettingsError(what, str(exc), "a postgresql:// URL (user, host and database name)") from None
    try:
        return open_database(url, home / "catalog.sqlite3")
    except database_errors() as exc:
        unusable_database(url, home, exc)


class CommandModules(click.Group):
    """The ``gitmem`` group: a command's modules are imported when that command runs (``--help`` imports
    them all). Git starts a push hook or a filter once per push or per file; each pays for its own
    imports only, not for every command's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # command name -> the modules that register it or add subcommands to it
        self.modules: dict[str, list[str]] = {}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for module in self.modules.get(cmd_name, []):
            importlib.import_module(module)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for modules in self.modules.values():
            for module in modules:
                importlib.import_module(module)
        return super().list_commands(ctx)


# What Git or an agent runtime runs, not a person: settings they do not read must not stop them.
UNCHECKED_COMMANDS = frozenset({"hook", "job", "git-filter"})


@click.group(cls=CommandModules)
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    envvar="GITMEM_HOME",
    default=None,
    help="Data home (default: $GITMEM_HOME, else the XDG data dir).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log what happens.")
@click.pass_context
def main(ctx: click.Context, home: Path | None, verbose: bool) -> None:
    """gitmem: memory stores for AI agents, each one a Git repository."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from gitmem.config.handoff import from_environment

    config: Callable[[], Config] = from_environment  # what Git runs: when first used, or as handed down
    if ctx.invoked_subcommand not in UNCHECKED_COMMANDS:
        from gitmem.config.settings import SettingsError, load_settings  # pydantic: not for a hook's every start
        from gitmem.config.values import from_settings

        try:  # every setting, before any command runs: a bad one is one line and exit 2
            checked = from_settings(load_settings())
            config = lambda: checked  # noqa: E731
        except SettingsError as exc:
            click.echo(f"gitmem: {exc.message}", err=True)
            sys.exit(2)
    ctx.obj = Context(home, config)


pass_context = click.make_pass_decorator(Context)

workspace_option = click.option("--workspace", "-w", default=None, help="Workspace name (default: the only one).")


def sync_timing(what: str) -> Callable[[F], F]:
    """The ``--debounce`` and ``--poll-interval`` options every mount command takes."""

    def decorate(command: F) -> F:
        command = click.option(
            "--poll-interval",
            type=click.FloatRange(0.05, 3600),
            default=1.0,
            show_default=True,
            help=f"Seconds between looks at the {what} for changes made elsewhere.",
        )(command)
        return click.option(
            "--debounce",
            type=click.FloatRange(0, 60),
            default=0.3,
            show_default=True,
            help="Seconds a file must be quiet before it is synced.",
        )(command)

    return decorate


def default_command(name: str) -> type[click.Group]:
    """A group whose first argument, when it names no subcommand, goes to ``name``: ``gitmem review STORE``
    is ``gitmem review show STORE``."""

    class DefaultGroup(click.Group):
        def resolve_command(self, ctx: click.Context, args: list[str]):  # type: ignore[no-untyped-def]
            if args and args[0] not in self.commands and not args[0].startswith("-"):
                args = [name, *args]
            return super().resolve_command(ctx, args)

    return DefaultGroup


def refusals(func: F) -> F:
    """Engine refusals become exit status 1 with the reason on standard error."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except GitmemError as exc:
            click.echo(f"gitmem: {exc.message}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(_plain(value), indent=2, ensure_ascii=False))


def size_text(n: int) -> str:
    """A count of bytes as a person reads it: 512 B, 3.4 KiB, 1.2 GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def table(rows: list[list[str]], headers: list[str] | None = None) -> None:
    """A plain aligned table, the way a person would rather look than read; every command's tables.
    Without ``headers``, bare lines (``git log --oneline`` style); with them, no rows still prints them."""
    lines = [[str(c) for c in row] for row in ([headers] if headers is not None else []) + rows]
    if not lines:
        return
    widths = [max(len(c) for c in col) for col in zip(*lines, strict=False)]
    if headers is not None:
        lines.insert(1, ["-" * w for w in widths])
    for line in lines:
        click.echo("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=False)).rstrip())


def old_spelling(command: click.Command, old: str, new: str) -> click.Command:
    """``command`` under the name it had (``gitmem OLD``): hidden, saying where it lives now (``gitmem NEW``)
    before it runs, for the release after a move; register it where the old name lived."""
    assert command.callback is not None  # noqa: S101  narrows the type for mypy; never a check of input
    run = command.callback

    def moved(*args: Any, **kwargs: Any) -> Any:
        click.echo(f"gitmem: 'gitmem {old}' is now 'gitmem {new}'; the old spelling goes next release", err=True)
        return run(*args, **kwargs)

    was = copy.copy(command)
    was.name = old.split()[-1]
    was.hidden = True
    was.callback = moved
    return was
