"""Installed as a wheel (not editable), gitmem takes pushes: the hooks ship inside the package and
``api``/``hooks`` install as ``gitmem.api``/``gitmem/hooks``, never as top-level packages."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import REPO_ROOT
from tests.server import free_port, wait_healthy

pytestmark = pytest.mark.slow


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_a_wheel_installs_in_the_gitmem_namespace_and_takes_pushes(tmp_path: Path) -> None:
    built = run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", REPO_ROOT, cwd=tmp_path
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("gitmem-*.whl")
    assert {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()} == {
        "gitmem",
        wheel.name.split("-py")[0] + ".dist-info",
    }

    # A fresh venv whose only gitmem is the wheel; its dependencies are this venv's (a path entry, so
    # this venv's editable-install hook is not loaded there). This venv's pip installs into it: a pip of
    # its own would cost more than the rest of the test.
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path).returncode == 0
    (next((venv / "lib").glob("python3*")) / "site-packages" / "deps.pth").write_text(site.getsitepackages()[0] + "\n")
    pip = (sys.executable, "-m", "pip", "--python", venv / "bin" / "python")
    installed = run(*pip, "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    where = run(venv / "bin" / "python", "-c", "import gitmem; print(gitmem.__file__)", cwd=tmp_path)
    assert str(venv) in where.stdout, where

    home = tmp_path / "home"
    env = {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_PRUNE_INTERVAL": "0",
        "GITMEM_DREAM_RUNNER": "off",
        "GITMEM_WEBHOOKS": "off",
        "PYTHONPATH": "",
    }
    env.pop("GITMEM_PYTHON", None)
    gitmem = venv / "bin" / "gitmem"
    token = run(gitmem, "users", "create", "--name", "ana", "--workspace", "w", cwd=tmp_path, env=env).stdout.strip()
    store = run(gitmem, "store", "create", "notes", "-w", "w", cwd=tmp_path, env=env).stdout.strip()
    user_id = run(gitmem, "users", "list", "-w", "w", cwd=tmp_path, env=env).stdout.split("user_", 1)[1].split()[0]
    port = free_port()
    server = subprocess.Popen(
        [str(gitmem), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(server, url)
        git_env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(tmp_path),
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {token}",
            "GIT_AUTHOR_NAME": "ana",
            "GIT_AUTHOR_EMAIL": f"user_{user_id}@user.gitmem",
            "GIT_COMMITTER_NAME": "ana",
            "GIT_COMMITTER_EMAIL": f"user_{user_id}@user.gitmem",
        }
        work = tmp_path / "clone"
        cloned = run("git", "clone", "-q", f"{url}/v1/memory_stores/{store}.git", work, cwd=tmp_path, env=git_env)
        assert cloned.returncode == 0, cloned.stderr
        (work / "clean.md").write_text("a clean note\n")
        run("git", "add", ".", cwd=work, env=git_env)
        run("git", "commit", "-qm", "clean", cwd=work, env=git_env)
        pushed = run("git", "push", "-q", "origin", "main", cwd=work, env=git_env)
        assert pushed.returncode == 0, pushed.stderr

        (work / "leak.md").write_text("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
        run("git", "add", ".", cwd=work, env=git_env)
        run("git", "commit", "-qm", "leak", cwd=work, env=git_env)
        refused = run("git", "push", "-q", "origin", "main", cwd=work, env=git_env)
        assert refused.returncode != 0
        assert "gitmem: refused" in refused.stderr and "leak.md" in refused.stderr, refused.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
