"""gitmem's tests: unit/ (the library, package by package), api/ (the app in process) and system/ (real
servers, processes, crashes, PostgreSQL, the wheel, a browser). Shared fixtures: conftest.py; shared
checks: checks.py; the in-process app: apps.py; a real uvicorn: server.py."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
