"""The wheel's package list (pyproject.toml) names every package of the repository, mapped as it installs:
api/ as gitmem.api, hooks/ as gitmem.hooks. A package missing from the list would be left out of the wheel."""

from __future__ import annotations

import tomllib

from tests import REPO_ROOT

MAPPED = {"gitmem": "gitmem", "api": "gitmem.api", "hooks": "gitmem.hooks"}


def test_every_package_folder_is_listed_and_nothing_else() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {name: folder for folder, name in MAPPED.items()}
    on_disk = set()
    for folder, name in MAPPED.items():
        for init in (REPO_ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO_ROOT / folder).parts
            on_disk.add(".".join((name, *parts)))
    assert set(config["packages"]) == on_disk
    assert not (REPO_ROOT / "gitmem" / "api").exists() and not (REPO_ROOT / "gitmem" / "hooks").exists()  # no links
