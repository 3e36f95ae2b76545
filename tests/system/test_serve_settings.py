"""`gitmem serve` and the CLI as a user runs them: settings checked before anything binds or runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from gitmem.cli import main
from tests import REPO_ROOT
from tests.server import free_port


def _serve(home: Path, port: int, **env: str) -> subprocess.Popen[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    full_env.update({"GITMEM_HOME": str(home), "GITMEM_PRUNE_INTERVAL": "0", **env})
    return subprocess.Popen(
        [sys.executable, "-m", "gitmem.cli", "serve", "--port", str(port)],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


# A key in a query string never reaches the log of a real `gitmem serve`: tests/system/test_serve.py.


# -- settings: checked at start, one line, exit 2 -----------------------------------------------------

BAD_SETTINGS = {
    "GITMEM_MASTER_KEY": ("not-a-key!", "hex"),
    "GITMEM_MASTER_KEY_FILE": ("/nonexistent/master.key", "readable file"),
    "GITMEM_FSYNC": ("sometimes", "'always', 'files' or 'never'"),
    "GITMEM_FILTERS": ("no_such_module:factory", "module:factory"),
    "GITMEM_RATE_LIMIT_RPS": ("fast", "a number >= 0"),
    "GITMEM_RATE_LIMIT_BURST": ("0", "a whole number >= 1"),
    "GITMEM_MAX_BODY_BYTES": ("1MB", "bytes"),
    "GITMEM_PRUNE_INTERVAL": ("-5", "seconds >= 0"),
    "GITMEM_DREAMER": ("gpt", "'offline', 'anthropic' or 'offline-hold'"),
    "GITMEM_WEBHOOKS": ("sometimes", "'on' or 'off'"),
    "GITMEM_WEBHOOK_TIMEOUT": ("0", "seconds > 0"),
    "GITMEM_DREAM_RUNNER": ("maybe", "'on' or 'off'"),
    "GITMEM_DREAM_POLL": ("0", "seconds > 0"),
    "GITMEM_DREAM_TIMEOUT": ("soon", "seconds > 0"),
    "GITMEM_LOG_LEVEL": ("LOUD", "DEBUG, INFO"),
}


def _cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    full_env.update({"GITMEM_HOME": str(home), **env})
    return subprocess.run(
        [sys.executable, "-m", "gitmem.cli", *args], env=full_env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("variable", list(BAD_SETTINGS))
def test_every_bad_setting_stops_the_cli_with_one_line(tmp_path: Path, variable: str) -> None:
    value, expected = BAD_SETTINGS[variable]
    env = {name: None for name in os.environ if name.startswith("GITMEM_")}
    result = CliRunner().invoke(main, ["fsck"], env={**env, "GITMEM_HOME": str(tmp_path / "home"), variable: value})
    assert result.exit_code == 2, (variable, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gitmem: {variable}: "), (variable, result.stderr)
    assert expected in lines[0], (variable, lines[0])
    if "KEY" in variable:
        assert value not in lines[0]  # a key is never echoed
    assert not (tmp_path / "home").exists()  # nothing ran


def test_a_bad_setting_stops_a_real_cli_process(tmp_path: Path) -> None:
    result = _cli(tmp_path / "home", "store", "ls", GITMEM_FSYNC="sometimes")
    assert result.returncode == 2
    assert (
        result.stderr
        == "gitmem: GITMEM_FSYNC: should be 'always', 'files' or 'never'; expected 'always', 'files' or 'never'\n"
    )


def test_serve_with_a_bad_master_key_exits_2_before_binding(tmp_path: Path) -> None:
    port = free_port()
    server = _serve(tmp_path / "home", port, GITMEM_MASTER_KEY="not*a*key!")
    try:
        output, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 2
    assert output.strip().splitlines() == [
        "gitmem: GITMEM_MASTER_KEY: key is neither hex nor base64; expected 64 hex digits or the base64 of"
        " 32 bytes (e.g. `openssl rand -base64 32`)"
    ]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz")


def test_the_app_factory_refuses_a_bad_setting_too(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    env.update(GITMEM_HOME=str(tmp_path / "home"), GITMEM_MAX_BODY_BYTES="lots")
    result = subprocess.run(
        [sys.executable, "-c", "import api.app; api.app.create_app_from_env()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("gitmem: GITMEM_MAX_BODY_BYTES: ")


def test_the_docs_table_of_settings_is_the_generated_one() -> None:
    from gitmem.config.settings import GitmemSettings
    from gitmem.config.table import markdown_table

    page = (REPO_ROOT / "docs" / "settings.md").read_text()
    assert markdown_table() in page
    for name in GitmemSettings.model_fields:
        assert f"`GITMEM_{name}`" in markdown_table()
