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
