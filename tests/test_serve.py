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
from gitmem.engine.home import Gitmem
from tests.server import free_port, wait_healthy

# `gitmem serve` with several workers, in a subprocess.
pytestmark = pytest.mark.slow


def test_serve_bootstraps_an_empty_home_and_workers_share_it(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    env = {**os.environ, "GITMEM_HOME": str(home), "GITMEM_PRUNE_INTERVAL": "0"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gitmem.cli", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_healthy(server, base_url)
        key_file = home / "admin.key"
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
        secret = key_file.read_text().strip()
        client = anthropic.Anthropic(api_key=secret, base_url=base_url, max_retries=2)
        store_id = client.beta.memory_stores.create(name="shared").id

        def write(worker: int) -> list[str]:
            own = anthropic.Anthropic(api_key=secret, base_url=base_url, max_retries=2)
            return [
                own.beta.memory_stores.memories.create(store_id, path=f"/w{worker}/n{i}.md", content=f"{i}").id
                for i in range(25)
            ]

        with ThreadPoolExecutor(4) as pool:
            written = [i for ids in pool.map(write, range(4)) for i in ids]
        listed = {m.id for m in client.beta.memory_stores.memories.list(store_id, limit=1000)}
        assert listed == set(written) and len(written) == 100

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
        _, stderr = server.communicate(timeout=30)
    assert f"it is in {key_file}" in stderr and "127.0.0.1" in stderr
    assert secret not in stderr  # the key is in the file, never in the log
    gm = Gitmem.open(home)
    info = gm.get_store(gm.catalog.authenticate(secret).workspace_id, store_id)
    assert check_store(gm.store(info.workspace_id, info.id)).ok
