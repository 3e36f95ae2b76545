"""`gitmem serve` on an empty home: a workspace and an admin key it says where it put, 127.0.0.1 by
default, and several uvicorn workers writing one store safely."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx
import pytest

from gitmem.engine.fsck import check_store
from gitmem.engine.gitmem import Gitmem
from tests.checks import memory
from tests.server import free_port, start_gitmem_serve, wait_healthy

# `gitmem serve` with several workers, in a subprocess.
pytestmark = pytest.mark.slow


def test_serve_bootstraps_an_empty_home_and_workers_share_it(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    env = {**os.environ, "GITMEM_HOME": str(home), "GITMEM_PRUNE_INTERVAL": "0"}
    log = tmp_path / "serve.log"
    server = start_gitmem_serve(port, env, log, "--workers", "2")
    not_a_key = "gm_key_ThisIsNotARealKeyButLooksLikeOne0123456789"
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_healthy(server, base_url, log=log.read_text)
        key_file = home / "admin.key"
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
        secret = key_file.read_text().strip()
        client = anthropic.Anthropic(api_key=secret, base_url=base_url, max_retries=2)
        store_id = client.beta.memory_stores.create(name="shared").id

        def write(worker: int) -> list[str]:
            own = anthropic.Anthropic(api_key=secret, base_url=base_url, max_retries=2)
            return [
                own.beta.memory_stores.memories.create(store_id, path=f"/w{worker}/n{i}.md", content=f"{i}").id
                for i in range(10)
            ]

        with ThreadPoolExecutor(4) as pool:
            written = [i for ids in pool.map(write, range(4)) for i in ids]
        listed = {memory(m).id for m in client.beta.memory_stores.memories.list(store_id, limit=1000)}
        assert listed == set(written) and len(written) == 40

        # A key in a query string (refused or not) never reaches the access log; the request does.
        refused = httpx.get(f"{base_url}/v1/memory_stores", params={"api_key": not_a_key, "limit": 1})
        assert refused.status_code == 401
        accepted = httpx.get(f"{base_url}/v1/memory_stores?limit=1&token={secret}", headers={"x-api-key": secret})
        assert accepted.status_code == 200

        # Keys and users made (and revoked) from the CLI count at once against the running server.
        def cli(*args: str) -> str:
            return subprocess.run(
                [sys.executable, "-m", "gitmem", *args], env=env, capture_output=True, text=True, check=True
            ).stdout.strip()

        reader = cli("keys", "create", "--name", "late", "--role", "read-only")
        as_reader = anthropic.Anthropic(api_key=reader, base_url=base_url, max_retries=0)
        assert as_reader.beta.memory_stores.retrieve(store_id).id == store_id
        user = cli("users", "create", "--name", "ana")
        assert httpx.get(f"{base_url}/v1/memory_stores", headers={"x-api-key": user}).status_code == 200
        cli("keys", "revoke", Gitmem.open(home).catalog.authenticate(reader).credential_id)
        assert httpx.get(f"{base_url}/v1/memory_stores", headers={"x-api-key": reader}).status_code == 401
    finally:
        server.terminate()
        server.wait(timeout=30)
    output = log.read_text()
    assert f"it is in {key_file}" in output and "127.0.0.1" in output
    assert '"GET /v1/memory_stores HTTP/1.1" 401' in output, output  # the request is logged, not its query
    assert secret not in output and not_a_key not in output and "api_key" not in output  # keys never logged
    gm = Gitmem.open(home)
    info = gm.get_store(gm.catalog.authenticate(secret).workspace_id, store_id)
    assert check_store(gm.store(info.workspace_id, info.id)).ok
