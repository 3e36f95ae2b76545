"""Hidden commands: what Git, agent runtimes and the server start, not people.

- ``gitmem hook pre-receive|post-receive``: the push hooks (``hooks/pre-receive``, ``hooks/post-receive``);
- ``gitmem hook session-start|session-end``: an agent runtime's session hooks (``hooks/agent/``);
- ``gitmem git-filter process|smudge|clean|textconv``: the encryption filter of a clone
  (written into the clone's config by ``gitmem clone --key``).

Git starts a hook once per push and a filter once per file (or once per checkout for ``process``),
so each command imports what it runs only when it runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import click

from gitmem.cli.base import main, sync_timing
from gitmem.errors import GitmemError

if TYPE_CHECKING:
    from gitmem.sync.bank_session import BankSession


@main.group("hook", hidden=True)
def hook() -> None:
    """What Git and agent runtimes run as hooks."""


@hook.command("pre-receive")
def pre_receive() -> None:
    """Check every pushed commit against the store's rules (``<old> <new> <ref>`` lines on stdin)."""
    _push_hook("pre-receive")


@hook.command("post-receive")
def post_receive() -> None:
    """Record an accepted push as Git notes and bring the index up to date."""
    _push_hook("post-receive")


def _push_hook(name: Literal["pre-receive", "post-receive"]) -> None:
    from gitmem.hooks import push  # what python -m gitmem runs for a hook, without this framework

    sys.exit(push.run(name))


def _session_options(func: click.decorators.FC) -> click.decorators.FC:
    for option in reversed(
        [
            click.option("--url", default=None, help="Default: $GITMEM_URL."),
            click.option("--profile", default=None, help="Default: $GITMEM_PROFILE."),
            click.option("--workspace", default=None, help="Default: $WORKSPACE, the hook's cwd, or '.'."),
            sync_timing("bank"),
        ]
    ):
        func = option(func)
    return func


@hook.command("session-start")
@_session_options
def session_start(
    url: str | None, profile: str | None, workspace: str | None, debounce: float, poll_interval: float
) -> None:
    """Mount the profile's bank at .memory/ in the background and print its prompt section."""
    from gitmem.sync import bank_session

    _session_hook(
        lambda session: bank_session.session_start(
            session, workspace=workspace, debounce=debounce, poll_interval=poll_interval
        ),
        url,
        profile,
    )


@hook.command("session-end")
@_session_options
def session_end(
    url: str | None,
    profile: str | None,
    workspace: str | None,
    debounce: float,  # noqa: ARG001  every session hook takes these; session-end only stops the mount
    poll_interval: float,  # noqa: ARG001  (the same)
) -> None:
    """Stop the background mount, which pushes every pending change first."""
    from gitmem.sync import bank_session

    _session_hook(lambda session: bank_session.session_end(session, workspace=workspace), url, profile)


def _session_hook(run: Callable[[BankSession], int], url: str | None, profile: str | None) -> None:
    # The hook's standard error reaches the agent runner: warnings only, unless GITMEM_LOG_LEVEL says more.
    from gitmem.config.settings import SettingsError, load_settings
    from gitmem.sync.bank_session import BankSession

    try:
        settings = load_settings()
        logging.basicConfig(
            level=settings.LOG_LEVEL or "WARNING",
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            force=True,
        )
        token = settings.TOKEN.get_secret_value() if settings.TOKEN is not None else ""
        session = BankSession(url or settings.URL or "", token, profile or settings.PROFILE, settings.STATE_DIR)
        code = run(session)
    except SettingsError as exc:
        click.echo(f"gitmem: {exc.message}", err=True)
        code = 2
    except GitmemError as exc:
        click.echo(f"gitmem: {exc.message}", err=True)
        code = 1
    sys.exit(code)


@main.command("git-filter", hidden=True)
@click.argument("command", type=click.Choice(["process", "smudge", "clean", "textconv"]))
@click.argument("path", required=False)
def git_filter(command: Literal["process", "smudge", "clean", "textconv"], path: str | None) -> None:
    """The encryption filter Git runs in a clone: ``process``, ``smudge PATH``, ``clean PATH``, ``textconv FILE``."""
    if (command == "process") != (path is None):
        raise click.UsageError("process takes no PATH; smudge, clean and textconv take one")
    from gitmem.git.crypt_filter import run_filter

    sys.exit(run_filter(command, path, sys.stdin.buffer, sys.stdout.buffer))
