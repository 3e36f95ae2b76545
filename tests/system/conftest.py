"""Fixtures of the system tests: a real uvicorn shared by the modules where the network matters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gitmem.engine.gitmem import Gitmem
from tests.server import REAL_SERVER_ENV, RealServer, serve


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    """One real uvicorn per test process, shared by the modules where the network itself matters (Git's
    client, the CLI, mounts): starting one costs seconds of CPU. Each module makes workspaces of its own
    (names are unique in a home) in ``home``; the server sees them at once."""
    home = tmp_path_factory.mktemp("served") / "home"
    Gitmem.open(home, fsync="never")
    with serve(home, env=REAL_SERVER_ENV) as base_url:
        yield RealServer(home, base_url)
