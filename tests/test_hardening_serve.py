"""`gitmem serve` as a user runs it: what reaches its log, and settings checked before it binds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.server import free_port


def _serve(home: Path, port: int, **env: str) -> subprocess.Popen[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    full_env.update({"GITMEM_HOME": str(home), "GITMEM_PRUNE_INTERVAL": "0", **env})
    return subprocess.Popen([sys.executable, "-m", "gitmem.cli", "serve", "--port", str(port)], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_healthy(base_url: str, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"{base_url}/healthz").status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("gitmem serve did not start")


def test_keys_in_query_strings_never_reach_the_log(tmp_path: Path) -> None:
    port = free_port()
    server = _serve(tmp_path / "home", port)
    secret = "gm_key_ThisIsNotARealKeyButLooksLikeOne0123456789"
    try:
        base_url = f"http://127.0.0.1:{port}"
        _wait_healthy(base_url, server)
        refused = httpx.get(f"{base_url}/v1/memory_stores", params={"api_key": secret, "limit": 1})
        assert refused.status_code == 401
        admin = (tmp_path / "home" / "admin.key").read_text().strip()
        accepted = httpx.get(f"{base_url}/v1/memory_stores?limit=1&token={admin}", headers={"x-api-key": admin})
        assert accepted.status_code == 200
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert '"GET /v1/memory_stores?… HTTP/1.1" 401' in output, output  # the request is still logged
    assert secret not in output and admin not in output
    assert "api_key" not in output
