"""The suite's fixtures, and the order its modules run in.

``gm`` is a data home on ``tmp_path`` with fsync on (the safe default; it is cheap at test sizes) and a
:class:`~gitmem.clock.FrozenClock`; ``fast_gm`` turns fsync off for bulk tests. ``workspace`` and
``store`` build on ``gm``; ``test_home`` builds the home most API tests share (tests/apps.py). Checks
tests share are in tests/checks.py, the in-process app in tests/apps.py, a real uvicorn in
tests/server.py (its shared instance: tests/system/conftest.py).

Hypothesis runs the ``ci`` profile (moderate example counts, no deadline: the machine is shared);
``HYPOTHESIS_PROFILE=thorough`` runs ten times more examples in the tests that set no count of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from gitmem.clock import FrozenClock
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.model import StoreInfo
from tests import postgres
from tests.apps import TestHome, make_test_home

if TYPE_CHECKING:  # imported where used: pytest-xdist's controller loads this module and runs no test
    pass

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
def gm(tmp_path: Path, clock: FrozenClock) -> Gitmem:
    return Gitmem.open(tmp_path / "home", clock=clock, fsync="always")


@pytest.fixture
def fast_gm(tmp_path: Path, clock: FrozenClock) -> Gitmem:
    return Gitmem.open(tmp_path / "fast-home", clock=clock, fsync="never")


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
    mix the two (e.g. tests/api/test_tasks.py's shared server) are not meaningful in this mode."""
    if os.environ.get("GITMEM_TEST_CATALOG") == "postgresql":
        cluster: postgres.Cluster = request.getfixturevalue("pg_cluster")
        url = cluster.fresh_database()
        made = Gitmem.__init__

        def on_postgres(self: Gitmem, home: Path, *, database: str | None = None, **options: Any) -> None:
            made(self, home, database=database or url, **options)

        monkeypatch.setattr(Gitmem, "__init__", on_postgres)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs: a real file system that really fills (mounting one needs root, as CI runs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


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


# -- checks -------------------------------------------------------------------------------------------


# -- the API: a shared home, served in this process ---------------------------------------------------


@pytest.fixture(scope="session")
def test_home(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., TestHome]:
    """A factory: ``test_home("name")`` builds a fresh :class:`TestHome` in a new temporary folder (usable
    from module-scoped fixtures, which cannot ask for ``tmp_path``)."""

    def build(name: str = "home", **kwargs: object) -> TestHome:
        return make_test_home(tmp_path_factory.mktemp(name), **kwargs)  # type: ignore[arg-type]

    return build
