"""Shared fixtures and checks for the engine's tests.

``gm`` is a data home on ``tmp_path`` with fsync on (the safe default; it is cheap at test sizes) and a
:class:`~gitmem.clock.FrozenClock`; ``fast_gm`` turns fsync off for bulk tests. ``workspace`` and
``store`` build on ``gm``. :func:`assert_fsck_clean` runs the real ``git fsck --full``;
:func:`store_state` captures everything a refusal must leave alone.

For the API: :func:`make_test_home` (and the ``test_home`` fixture factory) builds the home most API
tests share (two workspaces, their keys, a user); :func:`in_process` serves a home from this process
(the real app behind starlette's TestClient, no sockets), with httpx clients and official SDK clients
on it. A real uvicorn (tests/server.py) is kept for the few tests where the network itself matters.

Hypothesis runs the ``ci`` profile (moderate example counts, no deadline: the machine is shared);
``HYPOTHESIS_PROFILE=thorough`` runs ten times more examples in the tests that set no count of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
import pytest
from gitmem.api.settings import Settings
from hypothesis import HealthCheck, settings

from gitmem.clock import FrozenClock
from gitmem.durable import FsyncMode
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index.store_index import NoteRow, VersionRow
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.packing import loose_objects
from gitmem.git.repository import MAIN
from gitmem.model import StoreInfo
from tests import postgres

if TYPE_CHECKING:  # imported where used: pytest-xdist's controller loads this module and runs no test
    import anthropic
    from fastapi.testclient import TestClient

settings.register_profile(
    "ci", max_examples=50, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=500, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# How long each test module took in the last run that ran it (pytest's cache, .pytest_cache/); a fresh
# clone (CI) has no cache and starts from tests/module_seconds.json, a copy of one (refresh it with
# `cp .pytest_cache/v/gitmem/module-seconds tests/module_seconds.json` when modules change much).
MODULE_SECONDS = "gitmem/module-seconds"
COMMITTED_SECONDS = Path(__file__).with_name("module_seconds.json")
LAST_SECONDS = pytest.StashKey[dict[str, float]]()


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    # An xdist worker takes the lengths from the controller, which reads them once: every worker must
    # sort alike (or xdist aborts the run), even if another run rewrites the cache meanwhile.
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.stash[LAST_SECONDS] = workerinput.get(MODULE_SECONDS, {})
    else:
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        last = cache.get(MODULE_SECONDS, {}) if cache is not None else {}
        config.stash[LAST_SECONDS] = json.loads(COMMITTED_SECONDS.read_text()) | last


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller, starting a worker: hand it the module lengths to sort by."""
    node.workerinput[MODULE_SECONDS] = node.config.stash[LAST_SECONDS]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules run first. ``make test`` hands each worker whole modules in this order
    (--dist loadfile --no-loadscope-reorder): a long module left for last would keep one worker busy
    while the others idle. Lengths come from the last run; without them, modules with slow tests lead."""
    seconds = config.stash[LAST_SECONDS]
    slow_modules = {_module(item.nodeid) for item in items if item.get_closest_marker("slow")}
    # Stable: the order within a module stays.
    items.sort(key=lambda item: (-seconds.get(_module(item.nodeid), 0.0), _module(item.nodeid) not in slow_modules))


_ran_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist the controller sees every worker's reports too; only it records (sessionfinish).
    _ran_seconds[_module(report.nodeid)] = _ran_seconds.get(_module(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _ran_seconds:
        return
    known: dict[str, float] = cache.get(MODULE_SECONDS, {})
    cache.set(MODULE_SECONDS, {**known, **{name: round(t, 2) for name, t in _ran_seconds.items()}})


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def gm(tmp_path: Path, clock: FrozenClock) -> Iterator[Gitmem]:
    yield Gitmem.open(tmp_path / "home", clock=clock, fsync="always")


@pytest.fixture
def fast_gm(tmp_path: Path, clock: FrozenClock) -> Iterator[Gitmem]:
    yield Gitmem.open(tmp_path / "fast-home", clock=clock, fsync="never")


@pytest.fixture(scope="session")
def pg_cluster() -> postgres.Cluster:
    """This test process's throwaway PostgreSQL server (tests/postgres.py); skips only if none is installed."""
    found = postgres.cluster()
    if found is None:
        pytest.skip(postgres.SKIP_REASON)
    return found


@pytest.fixture
def postgres_url(pg_cluster: postgres.Cluster) -> str:
    """The URL of an empty PostgreSQL database of this test's own."""
    return pg_cluster.fresh_database()


@pytest.fixture(autouse=True)
def _catalog_on_postgres(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GITMEM_TEST_CATALOG=postgresql``: every home a test opens keeps its catalog in a fresh
    PostgreSQL database of its own (given to every Gitmem made), to run part of the suite on PostgreSQL. Homes
    made by module- or session-scoped fixtures are made before it and stay on SQLite, so tests that
    mix the two (e.g. tests/test_tasks_api.py's shared server) are not meaningful in this mode."""
    if os.environ.get("GITMEM_TEST_CATALOG") == "postgresql":
        cluster: postgres.Cluster = request.getfixturevalue("pg_cluster")
        url = cluster.fresh_database()
        made = Gitmem.__init__

        def on_postgres(self: Gitmem, home: Path, *, database: str | None = None, **options: Any) -> None:
            made(self, home, database=database or url, **options)

        monkeypatch.setattr(Gitmem, "__init__", on_postgres)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """Run the test on each engine: ``None`` (SQLite in the home) or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def workspace(gm: Gitmem) -> Workspace:
    return gm.catalog.create_workspace("tests")


@pytest.fixture
def store_info(gm: Gitmem, workspace: Workspace) -> StoreInfo:
    return gm.create_store(workspace.id, "notes", description="engine tests")


@pytest.fixture
def store(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> MemoryStore:
    return gm.store(workspace.id, store_info.id)


@pytest.fixture
def fast_store(fast_gm: Gitmem) -> MemoryStore:
    ws = fast_gm.catalog.create_workspace("bulk")
    info = fast_gm.create_store(ws.id, "bulk")
    return fast_gm.store(ws.id, info.id)


def with_outbox(gm: Gitmem) -> Gitmem:
    """``gm`` with its changes told to the webhooks' outbox, as every program opens a home."""
    from gitmem.webhooks.outbox import webhooks_for

    gm.listen(webhooks_for(gm))
    return gm


# -- checks -------------------------------------------------------------------------------------------


def git(repo_path: Path, *args: str) -> str:
    """Run the real ``git`` on a repository; fail the test if it fails."""
    proc = subprocess.run(["git", "-C", str(repo_path), *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def run_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """``work(0)`` ... ``work(count - 1)`` in threads that start together; what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def body(me: int) -> None:
        start.wait()
        try:
            work(me)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on by the test
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(me,)) for me in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def start_together(workers: list[subprocess.Popen[str]]) -> None:
    """Wait until every worker process has printed ``ready``, then tell them all ``go``: their writes
    race from the same moment, not in the order they happened to start."""
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()


def assert_fsck_clean(repo_path: Path) -> None:
    """``git fsck --full`` finds nothing wrong (dangling objects from retried writes are allowed, and
    notices such as a repository without a branch). A store's background packer (its process may
    outlive a killed writer) is waited for and held off."""
    held = repository.packers_held_off(repo_path) if (repo_path / "gitmem").is_dir() else contextlib.nullcontext()
    with held:
        proc = subprocess.run(
            ["git", "-C", str(repo_path), "fsck", "--full", "--strict", "--no-progress"], capture_output=True, text=True
        )
    output = proc.stdout + proc.stderr
    problems = [line for line in output.splitlines() if not line.startswith(("dangling ", "notice: "))]
    assert proc.returncode == 0 and not problems, f"git fsck: {output}"


@dataclass(frozen=True)
class StoreState:
    """Everything a refused write must leave as it was."""

    tip: str | None
    indexed_tip: str | None
    notes: tuple[NoteRow, ...]
    versions: tuple[VersionRow, ...]
    loose_objects: int
    refs: str


def store_state(store: MemoryStore) -> StoreState:
    ref = store.repo.references.get(MAIN)
    refs = subprocess.run(["git", "-C", str(store.path), "for-each-ref"], capture_output=True, text=True).stdout
    return StoreState(
        str(ref.target) if ref else None,
        store.index.indexed_tip(),
        tuple(store.index.all_notes()),
        tuple(store.index.all_versions()),
        loose_objects(store.path).count,
        refs,
    )


def index_snapshot(store: MemoryStore) -> tuple[tuple[NoteRow, ...], tuple[VersionRow, ...], str | None]:
    return tuple(store.index.all_notes()), tuple(store.index.all_versions()), store.index.indexed_tip()


# -- the API: a shared home, served in this process ---------------------------------------------------

BASE_URL = "http://gitmem.test"


@dataclass(frozen=True)
class TestHome:
    """A data home as most API tests want it: workspace ``alpha`` with an admin key, a read-only key and
    a user; workspace ``beta`` with an admin key of its own (the outsider)."""

    __test__ = False  # not a test class, whatever its name

    path: Path
    workspace_id: str
    admin_key_id: str
    admin: str
    reader: str
    user_id: str
    user: str
    other_workspace_id: str
    other: str


def make_test_home(
    path: Path, *, workspace: str = "alpha", other_workspace: str = "beta", fsync: FsyncMode = "always"
) -> TestHome:
    gm = Gitmem.open(path, fsync=fsync)
    ws = gm.catalog.create_workspace(workspace)
    admin_key, admin = gm.catalog.create_api_key(ws.id, "admin", role="admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    user, user_token = gm.catalog.create_user(ws.id, "sam")
    other = gm.catalog.create_workspace(other_workspace)
    _, other_secret = gm.catalog.create_api_key(other.id, "admin")
    return TestHome(path, ws.id, admin_key.id, admin, reader, user.id, user_token, other.id, other_secret)


@pytest.fixture(scope="session")
def test_home(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., TestHome]:
    """A factory: ``test_home("name")`` builds a fresh :class:`TestHome` in a new temporary folder (usable
    from module-scoped fixtures, which cannot ask for ``tmp_path``)."""

    def build(name: str = "home", **kwargs: object) -> TestHome:
        return make_test_home(tmp_path_factory.mktemp(name), **kwargs)  # type: ignore[arg-type]

    return build


@dataclass(frozen=True)
class RealServer:
    """A real uvicorn on 127.0.0.1 serving ``home``."""

    home: Path
    base_url: str


# Background jobs and the rate limit off; fsync off (durability is proved without a server).
REAL_SERVER_ENV = {
    "GITMEM_RATE_LIMIT_RPS": "0",
    "GITMEM_DREAM_RUNNER": "off",
    "GITMEM_PRUNE_INTERVAL": "0",
    "GITMEM_WEBHOOKS": "off",
    "GITMEM_FSYNC": "never",
}


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    """One real uvicorn per test process, shared by the modules where the network itself matters (Git's
    client, the CLI, mounts): starting one costs seconds of CPU. Each module makes workspaces of its own
    (names are unique in a home) in ``home``; the server sees them at once."""
    from tests.server import serve

    home = tmp_path_factory.mktemp("served") / "home"
    Gitmem.open(home, fsync="never")
    with serve(home, env=REAL_SERVER_ENV) as base_url:
        yield RealServer(home, base_url)


def _forward(
    app_client: TestClient, request: httpx.Request | httpx2.Request
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request of either httpx, through the app client; the answer as (status, headers, body)."""
    body = request.read()
    # A body the caller sent without a length goes on without one (the app must count it itself).
    chunked = "content-length" not in request.headers and "transfer-encoding" in request.headers
    content: bytes | Iterator[bytes] = iter([body]) if chunked else body
    answer = app_client.request(
        request.method,
        str(request.url),
        headers=list(request.headers.multi_items()),
        content=content,
        follow_redirects=False,
    )
    kept = [
        (k, v)
        for k, v in answer.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return answer.status_code, kept, answer.content


class HttpxToApp(httpx.BaseTransport):
    """An httpx client's requests, handed to the in-process app."""

    def __init__(self, app_client: TestClient) -> None:
        self.app_client = app_client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        status, headers, content = _forward(self.app_client, request)
        return httpx.Response(status, headers=headers, content=content)


class Httpx2ToApp(httpx2.BaseTransport):
    """The official SDK's requests (it speaks httpx2), handed to the in-process app."""

    def __init__(self, app_client: TestClient) -> None:
        self.app_client = app_client

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        status, headers, content = _forward(self.app_client, request)
        return httpx2.Response(status, headers=headers, content=content)


@dataclass(frozen=True)
class InProcess:
    """The real app serving a home from this process; clients on it speak to no socket."""

    gm: Gitmem
    app_client: TestClient  # the one client whose context runs the app's lifespan
    base_url: str = BASE_URL

    def http(self, secret: str | None = None, *, bearer: bool = False) -> httpx.Client:
        """A raw httpx client; with ``secret`` as ``x-api-key`` (or a Bearer token), else no credentials."""
        headers = {}
        if secret is not None:
            headers = {"authorization": f"Bearer {secret}"} if bearer else {"x-api-key": secret}
        return httpx.Client(base_url=self.base_url, headers=headers, transport=HttpxToApp(self.app_client))

    def sdk(self, secret: str, **kwargs: object) -> anthropic.Anthropic:
        """The official SDK. No retries: a retry would hide a wrong status or a missing x-should-retry."""
        import anthropic

        return anthropic.Anthropic(
            api_key=secret,
            base_url=self.base_url,
            max_retries=0,  # type: ignore[arg-type]
            http_client=httpx2.Client(transport=Httpx2ToApp(self.app_client)),
            **kwargs,
        )


QUIET = Settings(rate_limit_per_second=0, prune_interval_seconds=0, dream_runner=False, webhook_delivery=False)


@contextlib.contextmanager
def in_process(home: Path | Gitmem, settings: Settings = QUIET) -> Iterator[InProcess]:
    """Serve ``home`` from this process until the block ends (the app's lifespan runs around it).
    ``QUIET`` (the default) runs no background job and no rate limit; pass ``Settings()`` for a server's."""
    from fastapi.testclient import TestClient
    from gitmem.api.app import create_app

    gm = home if isinstance(home, Gitmem) else Gitmem.open(home)
    with TestClient(create_app(gm, settings), base_url=BASE_URL) as app_client:
        yield InProcess(gm, app_client)
