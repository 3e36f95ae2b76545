"""The review mark is history a clone can fetch (refs/reviews/main), and nobody can push it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gitmem.cli import main
from tests.test_git_access import Site, clone, git, new_store, site  # noqa: F401 (site is a fixture)


def test_a_clone_fetches_the_review_records(site: Site, tmp_path: Path) -> None:  # noqa: F811
    store_id = new_store(site, {"/a.md": "approved fact"})
    admin = site.sdk()
    admin.post(f"/v1/memory_stores/{store_id}", cast_to=object, body={"review": True})
    note = admin.beta.memory_stores.memories.create(store_id, path="/b.md", content="pending fact")
    steward = site.sdk(site.user)
    steward.post(
        f"/v1/memory_stores/{store_id}/review/approve",
        cast_to=object,
        body={"through_version_id": note.memory_version_id},
    )

    repo = clone(site, store_id, tmp_path / "c", site.reader)
    git("fetch", "-q", "origin", "refs/reviews/main:refs/reviews/main", cwd=repo, secret=site.reader)
    records = git("log", "--format=%an %s", "refs/reviews/main", cwd=repo).stdout.splitlines()
    assert records[0] == f"{site.user_id} review: approved through {note.memory_version_id}"
    first = admin.beta.memory_stores.memory_versions.list(store_id).data[-1].id
    assert records[1].endswith(f"review: enabled through {first}")
    audit = CliRunner().invoke(main, ["log", "--repo", str(repo)])
    assert audit.exit_code == 0
    assert any(
        "reviewed" in line and site.user_id in line and note.memory_version_id in line
        for line in audit.output.splitlines()
    )

    # Pushing a forged review record is refused: only main may be pushed.
    empty_tree = git("hash-object", "-t", "tree", "/dev/null", cwd=repo).stdout.strip()
    forged = git(
        "commit-tree", empty_tree, "-p", "refs/reviews/main", "-m", "review: approved through everything", cwd=repo
    ).stdout.strip()
    git("update-ref", "refs/reviews/main", forged, cwd=repo)
    pushed = git("push", "origin", "refs/reviews/main:refs/reviews/main", cwd=repo, secret=site.user, check=False)
    assert pushed.returncode != 0 and "only refs/heads/main may be pushed" in pushed.stderr
