"""The HTTP layer's tree: ``api/schemas/`` mirrors ``api/routers/`` (the models of
``routers/stores/memories.py`` are ``schemas/stores/memories.py``), no router defines wire models of its
own, and no folder of ``api/`` holds more than 15 modules."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import REPO_ROOT

API = REPO_ROOT / "api"
ROUTERS, SCHEMAS = API / "routers", API / "schemas"
# Routers whose answers are not pydantic models: Git's smart HTTP and Prometheus' text format.
WITHOUT_MODELS = {"stores/git", "metrics"}
SHARED = {"common"}  # what every schemas module may use


def _modules(root: Path) -> set[str]:
    return {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.py") if p.name != "__init__.py"}


def test_schemas_mirror_routers() -> None:
    assert sorted(_modules(SCHEMAS) - SHARED) == sorted(_modules(ROUTERS) - WITHOUT_MODELS)
    packages = {p.parent.relative_to(root) for root in (ROUTERS, SCHEMAS) for p in root.rglob("__init__.py")}
    assert all((ROUTERS / p / "__init__.py").is_file() and (SCHEMAS / p / "__init__.py").is_file() for p in packages)


def test_routers_define_no_wire_models() -> None:
    defined = []
    for path in ROUTERS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id in {"BaseModel", "InModel", "OutModel"} for base in node.bases
            ):
                defined.append(f"{path.relative_to(API)}: {node.name}")
    assert defined == []


def test_no_api_folder_holds_more_than_15_modules() -> None:
    folders = {p.parent for p in API.rglob("*.py")}
    sizes = {
        folder.relative_to(REPO_ROOT).as_posix(): len(list(folder.glob("*.py")))
        + sum((sub / "__init__.py").is_file() for sub in folder.iterdir())
        for folder in folders
    }
    assert {folder: n for folder, n in sizes.items() if n > 15} == {}


def _calls(path: Path) -> list[tuple[str, int]]:
    """Every call in a module by the name it calls (``f(...)`` and ``X.f(...)``), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            found.append((f"{owner}.{name}" if owner else name, node.lineno))
    return found


def test_refusals_are_route_dependencies_not_handler_code() -> None:
    """What a task's token or a key that is not a user's may not do at all is refused by a route's
    dependency (``api.deps.not_a_task``, ``UserId``, ``USER_ONLY``, the web view's ``SessionUser``): those
    and nothing else call the refusals."""
    allowed = {API / "deps.py", API / "ui" / "session.py"}
    callers = [
        f"{path.relative_to(API)}:{line}"
        for path in API.rglob("*.py")
        if path not in allowed
        for name, line in _calls(path)
        if name in {"refuse_task", "require_user"}
    ]
    assert callers == []


def test_the_http_layer_looks_up_no_part_by_class() -> None:
    """Routes, MCP, Git and the web view reach a home's parts through the one ``gitmem.parts.Parts`` the
    app makes, never ``Reviews.of(gm)`` or ``tasks_for(gm)``."""
    parts = {"Reviews", "Tasks", "Dreams", "Profiles", "Webhooks", "WebSessions"}
    lookups = {"tasks_for", "dreams_for", "profiles_for", "webhooks_for"} | {f"{p}.of" for p in parts}
    found = [
        f"{p.relative_to(API)}:{line} {name}" for p in API.rglob("*.py") for name, line in _calls(p) if name in lookups
    ]
    assert found == []
