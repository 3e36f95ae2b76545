"""``gitmem mount``: stores as folders, synced both ways with a gitmem server over its HTTP API.

    gitmem mount --url http://127.0.0.1:8765 --store memstore_A --store memstore_B:ro ./memory
    gitmem mount --url http://127.0.0.1:8765 --task task_01H... ./memory

One ``--store`` is mounted at DIR itself; several (and a task's stores) each get a folder named after the
store under DIR. Runs until interrupted (Ctrl-C or SIGTERM), then pushes what is pending and exits.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from gitmem.cli.base import main, refusals, sync_timing
from gitmem.sync.mount import Mount, MountSpec, safe_folder_name, task_mount_specs
from gitmem.sync.remote import MemoryStoreRemote, RemoteRefused, RemoteUnavailable

if TYPE_CHECKING:
    import anthropic

SDK_RETRIES = 2


def parse_store(value: str) -> tuple[str, bool]:
    """``STORE_ID``, ``STORE_ID:ro`` or ``STORE_ID:rw``."""
    store_id, _, access = value.partition(":")
    if not store_id or access not in ("", "ro", "rw"):
        raise click.BadParameter(f"{value!r}: expected STORE_ID, STORE_ID:ro or STORE_ID:rw", param_hint="--store")
    return store_id, access == "ro"


@main.command("mount")
@click.option("--url", required=True, envvar="GITMEM_URL", help="The server, e.g. http://127.0.0.1:8765.")
@click.option("--key", required=True, envvar="GITMEM_API_KEY", help="API key (default: $GITMEM_API_KEY).")
@click.option("--store", "stores", multiple=True, metavar="STORE_ID[:ro]", help="A store to mount (repeatable).")
@click.option("--task", "task_id", default=None, help="Mount every store the task reads.")
@click.option(
    "--profile",
    "profile_id",
    default=None,
    help="Mount a profile's memory bank (e.g. at .memory); --key is then the owner's token. A clean "
    "start: files that are not entries are removed.",
)
@sync_timing("store")
@click.option("--clean", is_flag=True, help="Remove files that are not notes when the mount starts.")
@click.option("--once", is_flag=True, help="Materialise, push local changes, and exit instead of watching.")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@refusals
def mount_command(
    url: str,
    key: str,
    stores: tuple[str, ...],
    task_id: str | None,
    profile_id: str | None,
    debounce: float,
    poll_interval: float,
    clean: bool,
    once: bool,
    folder: Path,
) -> None:
    """Materialise stores into FOLDER, watch it and sync both ways until interrupted."""
    import anthropic

    for noisy in ("httpx", "httpx2"):  # one line per poll otherwise, with -v
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if sum(map(bool, (stores, task_id, profile_id))) != 1:
        raise click.UsageError("give --store (one or more), --task or --profile")
    if profile_id:
        _mount_bank(url, key, profile_id, folder, debounce, poll_interval, once)
        return
    specs = [MountSpec(*parse_store(s), "") for s in stores]
    # The command owns the client its mounts share: closed here once every mount has stopped.
    with anthropic.Anthropic(api_key=key, base_url=url.rstrip("/"), max_retries=SDK_RETRIES) as client:
        try:
            if task_id:
                specs = _task_specs(url, key, task_id)
            elif len(specs) > 1:
                specs = _named_folders(client, specs)
        except anthropic.APIStatusError as exc:
            raise RemoteRefused(f"{exc.status_code}: {exc.message}") from None
        except anthropic.APIConnectionError as exc:
            raise RemoteUnavailable(f"cannot reach {url}: {exc}") from None
        mounts = _run_mounts(
            client, specs, folder, debounce=debounce, poll_interval=poll_interval, clean=clean, once=once
        )
    if any(m.status.errors for m in mounts):
        sys.exit(1)


def _run_mounts(
    client: anthropic.Anthropic,
    specs: list[MountSpec],
    folder: Path,
    *,
    debounce: float,
    poll_interval: float,
    clean: bool,
    once: bool,
) -> list[Mount]:
    """Start a mount for each spec, flush them (``--once``) or wait for a signal; every one is stopped."""
    mounts: list[Mount] = []
    try:
        for spec in specs:
            mounts.append(
                _start_mount(client, spec, folder, debounce=debounce, poll_interval=poll_interval, clean=clean)
            )
        if once:
            for mount in mounts:
                mount.flush()
        else:
            _wait_for_signal(mounts)
    finally:
        for mount in mounts:
            mount.stop()
            click.echo(f"unmounted {mount.name}: {mount.status.line()}", err=True)
    return mounts


def _start_mount(
    client: anthropic.Anthropic, spec: MountSpec, folder: Path, *, debounce: float, poll_interval: float, clean: bool
) -> Mount:
    """One store materialised at its folder (FOLDER itself, or the spec's folder under it) and watched."""
    target = folder / spec.folder if spec.folder else folder
    mount = Mount(
        MemoryStoreRemote(client, spec.store_id),
        target,
        read_only=spec.read_only,
        debounce=debounce,
        poll_interval=poll_interval,
        clean=clean,
        name=spec.store_id,
    )
    mount.start()
    access = "read-only" if spec.read_only else "read-write"
    click.echo(f"mounted {spec.store_id} ({access}) at {target}: {mount.status.notes} notes", err=True)
    return mount


def _mount_bank(
    url: str, token: str, profile_id: str, folder: Path, debounce: float, poll_interval: float, once: bool
) -> None:
    from gitmem.sync.bank_remote import bank_mount, run_until_signal

    with bank_mount(url, token, profile_id, folder, debounce=debounce, poll_interval=poll_interval) as mount:
        click.echo(f"mounted the bank of {profile_id} at {folder}: {mount.status.notes} entries", err=True)
        if once:
            mount.flush()
            mount.stop()
            code = 1 if mount.status.errors else 0
        else:
            code = run_until_signal(mount)
    click.echo(f"unmounted {profile_id}: {mount.status.line()}", err=True)
    sys.exit(code)


def _task_specs(url: str, key: str, task_id: str) -> list[MountSpec]:
    import httpx

    try:
        response = httpx.get(f"{url.rstrip('/')}/v1/tasks/{task_id}/memory", headers={"x-api-key": key}, timeout=30)
    except httpx.HTTPError as exc:
        raise RemoteUnavailable(f"cannot reach {url}: {exc}") from None
    if response.status_code != 200:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        raise RemoteRefused(f"task {task_id}: {response.status_code} {message}")
    specs = task_mount_specs(response.json())
    if not specs:
        raise RemoteRefused(f"task {task_id} reads no memory stores")
    return specs


def _named_folders(client: anthropic.Anthropic, specs: list[MountSpec]) -> list[MountSpec]:
    """Several stores: one folder each, named after the store."""
    out: list[MountSpec] = []
    used: set[str] = set()
    for spec in specs:
        name = safe_folder_name(client.beta.memory_stores.retrieve(spec.store_id).name, spec.store_id)
        if name in used:
            name = safe_folder_name(f"{name}-{spec.store_id}", spec.store_id)
        used.add(name)
        out.append(MountSpec(spec.store_id, spec.read_only, name))
    return out


def _wait_for_signal(mounts: list[Mount]) -> None:
    done = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        last = ""
        while not done.wait(1.0):
            line = "; ".join(f"{m.name}: {m.status.line()}" for m in mounts)
            if line != last:
                click.echo(line, err=True)
                last = line
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- a bank mounted at a folder -------------------------------------------------------------------------


@main.command("bank-mount")
@click.option("--profile", "profile_id", required=True, envvar="GITMEM_PROFILE", help="The profile ($GITMEM_PROFILE).")
@click.option("--url", required=True, envvar="GITMEM_URL", help="The server ($GITMEM_URL).")
@click.option("--token", required=True, envvar="GITMEM_TOKEN", help="The profile owner's token ($GITMEM_TOKEN).")
@sync_timing("bank")
@click.option(
    "--pid-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the process id here once every entry is on disk; removed on exit.",
)
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@refusals
def bank_mount_command(
    profile_id: str, url: str, token: str, debounce: float, poll_interval: float, pid_file: Path | None, folder: Path
) -> None:
    """Mount a profile's memory bank at FOLDER (e.g. .memory) until interrupted.

    A clean start: files in FOLDER that are not entries are removed. Edits are synced back debounced;
    on Ctrl-C or SIGTERM every pending change is pushed before the command exits.
    """
    from gitmem.sync.bank_remote import bank_mount, run_until_signal

    with bank_mount(url, token, profile_id, folder, debounce=debounce, poll_interval=poll_interval) as mount:
        click.echo(f"mounted the bank of {profile_id} at {folder}: {mount.status.notes} entries", err=True)
        code = run_until_signal(mount, pid_file=pid_file)
    click.echo(f"unmounted {profile_id}: {mount.status.line()}", err=True)
    sys.exit(code)
