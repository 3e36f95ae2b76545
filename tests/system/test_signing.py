"""Every commit gitmem writes is signed, and stock ``git`` says so (docs/audit.md).

One store is built once for the module against the shared real server: API writes through the SDK, a
conflict kept, a dream that tidies it, a restore, a user's push through ``gitmem clone``, then a
retention run. A clone made by ``gitmem clone`` verifies with ``git verify-commit`` and ``git log
--show-signature``: every gitmem commit good, the pushed commit its pusher's (unsigned here) and its
record on ``refs/notes/gitmem`` signed; after the retention run rewrote history, every commit on
``main`` is gitmem's and good.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx
import pytest
from click.testing import CliRunner

from gitmem.agents.dreams.dreamers import OfflineTidier
from gitmem.agents.dreams.dreams import dreams_for
from gitmem.agents.dreams.runner import DreamRunner
from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.rewrite.retention import prune_store
from gitmem.engine.store.restore import restore
from tests.apps import make_test_home
from tests.server import RealServer

pytestmark = pytest.mark.slow  # a real server, real git, a push


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    result = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


@dataclass
class Built:
    home: Path
    base_url: str
    workspace_id: str
    store_id: str
    user: str
    admin: str
    clone: Path  # made by gitmem clone before the retention run, the push made from it
    old_clone: Path  # a copy of it as it was before the retention run, never fetched again
    pushed: str  # the pushed commit's id
    before_prune: list[str]  # main's commits before the retention run


def _cli(home: Path, *args: str) -> str:
    result = CliRunner().invoke(main, list(args), env={"GITMEM_HOME": str(home)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def built(real_server: RealServer, tmp_path_factory: pytest.TempPathFactory) -> Built:
    test_home = make_test_home(real_server.home, workspace="signing", other_workspace="signing-other", fsync="never")
    sdk = anthropic.Anthropic(api_key=test_home.admin, base_url=real_server.base_url, max_retries=0)
    store_id = sdk.beta.memory_stores.create(name="signed").id
    sam = sdk.beta.memory_stores.memories.create(
        store_id, path="/people/sam.md", content="# Sam\r\nstaging first  \r\n"
    )
    sdk.beta.memory_stores.memories.create(store_id, path="/ops/deploys.md", content="Tuesdays")
    sdk.beta.memory_stores.memories.update(sam.id, memory_store_id=store_id, content="# Sam\nstaging first\n\n\n")
    with pytest.raises(anthropic.APIStatusError):  # a stale write: kept as a conflict, signed too
        sdk.beta.memory_stores.memories.update(
            sam.id,
            memory_store_id=store_id,
            content="lost",
            precondition={"type": "content_sha256", "content_sha256": "0" * 64},
        )
    gm = Gitmem.open(real_server.home, fsync="never")
    dreams = dreams_for(gm)
    dream = dreams.create(
        test_home.workspace_id,
        [{"type": "memory_store", "memory_store_id": store_id}],
        "claude-opus-4-7",
        output_behavior={"type": "update_existing", "memory_store_id": store_id},
    )
    assert DreamRunner(gm, OfflineTidier()).run_pending() >= 1  # no other module of the server dreams
    assert dreams.get(test_home.workspace_id, dream.id).status == "completed"
    store = gm.store(test_home.workspace_id, store_id)
    first = store.versions(limit=100).items[-1]
    restore(store, first.memory_id, first.id)

    work = tmp_path_factory.mktemp("signing") / "clone"
    CliRunner().invoke(
        main,
        ["clone", store_id, str(work), "--url", real_server.base_url, "--token", test_home.user],
        catch_exceptions=False,
    )
    (work / "people" / "ana.md").write_text("Ana joined\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "Ana joined", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    pushed = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    git("fetch", "-q", "origin", "refs/notes/gitmem:refs/notes/gitmem", cwd=work)
    before = git("rev-list", "origin/main", cwd=work).stdout.split()
    old_clone = work.with_name("old-clone")
    shutil.copytree(work, old_clone, symlinks=True)
    return Built(
        real_server.home,
        real_server.base_url,
        test_home.workspace_id,
        store_id,
        test_home.user,
        test_home.admin,
        work,
        old_clone,
        pushed,
        before,
    )


def _verified(clone: Path, commit: str) -> subprocess.CompletedProcess[str]:
    return git("verify-commit", "-v", commit, cwd=clone, check=False)


def test_gitmem_clone_sets_up_verification(built: Built) -> None:
    config = (built.clone / ".git" / "config").read_text()
    assert "format = ssh" in config and "allowedSignersFile" in config
    assert (built.clone / ".git" / "gitmem-allowed-signers").read_text() == (built.home / "allowed_signers").read_text()
    public = _cli(built.home, "audit", "key").split()
    assert f"{public[0]} {public[1]}" in (built.home / "allowed_signers").read_text()
    served = httpx.get(f"{built.base_url}/v1/signing_key").json()  # public: no key needed
    assert served["public_key"] == f"{public[0]} {public[1]}" and served["fingerprint"] == public[2]


def test_every_gitmem_commit_verifies_and_the_push_is_recorded_signed(built: Built) -> None:
    assert len(built.before_prune) >= 7  # 3 writes, the dream's, a restore, the push
    for commit in built.before_prune:
        result = _verified(built.clone, commit)
        if commit == built.pushed:
            assert result.returncode != 0  # the pusher's own commit, unsigned: its bytes are its own
        else:
            assert result.returncode == 0, result.stderr
            assert 'Good "git" signature for gitmem@localhost' in result.stderr
    notes = _verified(built.clone, "refs/notes/gitmem")
    assert notes.returncode == 0 and "Good" in notes.stderr
    shown = git("log", "--show-signature", "--format=%H", "origin/main", cwd=built.clone).stdout
    assert shown.count('Good "git" signature') == len(built.before_prune) - 1


def test_conflicts_are_signed(built: Built) -> None:
    repo = built.home / "stores" / f"{built.store_id}.git"
    refs = git("for-each-ref", "--format=%(objectname)", "refs/conflicts/", cwd=repo).stdout.split()
    assert refs
    env_config = ["-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={built.home / 'allowed_signers'}"]
    for ref in refs:
        assert git(*env_config, "verify-commit", ref, cwd=repo, check=False).returncode == 0


def test_a_retention_run_signs_every_commit_it_makes(built: Built) -> None:
    gm = Gitmem.open(built.home, fsync="never")
    store = gm.store(built.workspace_id, built.store_id)
    report = prune_store(store, days=1, now=dt.datetime.now(dt.UTC) + dt.timedelta(days=30))
    assert report.dropped and report.error is None, report
    git("fetch", "-q", "-f", "origin", cwd=built.clone)
    after = git("rev-list", "origin/main", cwd=built.clone).stdout.split()
    assert after and not set(after) & set(built.before_prune)
    for commit in after:
        result = _verified(built.clone, commit)
        assert result.returncode == 0, result.stderr
    shown = git("log", "--show-signature", "--format=%H", "origin/main", cwd=built.clone).stdout
    assert shown.count('Good "git" signature') == len(after)


def test_a_tampered_commit_no_longer_verifies(built: Built) -> None:
    raw = git("cat-file", "commit", "origin/main", cwd=built.clone).stdout
    assert "gpgsig" in raw
    for forged in (raw.replace("\n\n", "\n\nforged: ", 1), raw.replace("author ", "author x", 1)):
        oid = subprocess.run(
            ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
            cwd=built.clone,
            input=forged,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert _verified(built.clone, oid).returncode != 0


def test_every_rewrite_leaves_a_signed_entry_that_clones_fetch(built: Built) -> None:
    gm = Gitmem.open(built.home, fsync="never")
    store = gm.store(built.workspace_id, built.store_id)
    versions = store.versions(limit=100).items  # newest first: redact one that a newer version follows
    old = next(v for i, v in enumerate(versions) if any(w.memory_id == v.memory_id for w in versions[:i]))
    redact(store, old.id, None)
    git("fetch", "-q", "-f", "origin", cwd=built.clone)  # gitmem clone's refspecs: the log and the notes
    log = git("log", "--format=%H %s", "refs/gitmem/rewrites", cwd=built.clone).stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in log][-1].startswith("rewrite: retention, ")
    assert log[0].split(" ", 1)[1] == "rewrite: redaction, 1 redacted"
    for line in log:
        assert _verified(built.clone, line.split()[0]).returncode == 0
    entries = json.loads(_cli(built.home, "log", "--repo", str(built.clone), "--rewrites", "--json"))
    assert [e["kind"] for e in entries][:2] == ["redaction", "retention"]
    assert entries[0]["redacted"] == [old.id] and entries[0]["by"] == "service"
    assert entries[1]["dropped"] and entries[1]["reason"].startswith("retention window 1 days")
    assert entries[0]["old_tip"] == entries[1]["new_tip"]  # nothing else rewrote main in between
    entry_text = git("show", "refs/gitmem/rewrites:entry.json", cwd=built.clone).stdout
    assert old.path is not None and old.path not in entry_text  # no redacted path, no content
    printed = _cli(built.home, "log", built.store_id, "--rewrites")
    assert "redaction" in printed and "retention" in printed


def _audit(built: Built, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["audit", "verify", *args], env={"GITMEM_HOME": str(built.home)})
    return result.exit_code, result.output


def test_audit_verify_holds_and_compares_an_older_clone_across_a_prune(built: Built) -> None:
    code, printed = _audit(built, built.store_id, "--against", str(built.old_clone))
    assert code == 0, printed
    assert "checked signatures:" in printed and "checked rewrite log:" in printed and "ok: the audit holds" in printed
    assert "checked older clone:" in printed and "dropped as the rewrite log records" in printed
    code, printed = _audit(built, "--repo", str(built.clone))
    assert code == 0, printed
    headers = {"x-api-key": built.admin}
    answer = httpx.get(f"{built.base_url}/v1/memory_stores/{built.store_id}/audit", headers=headers).json()
    assert answer["ok"] is True and answer["problems"] == [] and "signatures" in answer["checked"]


def _copy_of_store(built: Built, into: Path) -> Path:
    """The store's bare repository copied (to break by hand), set up to verify as a clone is."""
    copy = into / "copy.git"
    shutil.copytree(built.home / "stores" / f"{built.store_id}.git", copy, symlinks=True)
    git("config", "gpg.ssh.allowedSignersFile", str(built.home / "allowed_signers"), cwd=copy)
    return copy


def test_a_commit_written_by_hand_is_named_unsigned(built: Built, tmp_path: Path) -> None:
    copy = _copy_of_store(built, tmp_path)
    tree = git("rev-parse", "main^{tree}", cwd=copy).stdout.strip()
    env = {"GIT_AUTHOR_NAME": "mallory", "GIT_AUTHOR_EMAIL": "m@x", "GIT_COMMITTER_NAME": "gitmem"}
    forged = subprocess.run(
        ["git", "commit-tree", tree, "-p", "main", "-m", "created /x.md"],
        cwd=copy,
        env={**os.environ, **env, "GIT_COMMITTER_EMAIL": "gitmem@localhost"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    git("update-ref", "refs/heads/main", forged, cwd=copy)
    code, printed = _audit(built, "--repo", str(copy))
    assert code == 1 and f"BROKEN  signatures: {forged[:12]}: unsigned and no recorded push" in printed
    assert f"first at {forged}" in printed


def test_a_tampered_message_or_author_breaks_its_signature(built: Built, tmp_path: Path) -> None:
    for change in (("\n\n", "\n\nforged "), ("author ", "author mallory")):
        copy = _copy_of_store(built, tmp_path / change[1].strip())
        raw = git("cat-file", "commit", "main", cwd=copy).stdout
        tampered = subprocess.run(
            ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
            cwd=copy,
            input=raw.replace(*change, 1),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        git("update-ref", "refs/heads/main", tampered, cwd=copy)
        code, printed = _audit(built, "--repo", str(copy))
        assert code == 1 and f"signatures: {tampered[:12]}: bad signature" in printed, printed


def test_an_entry_removed_from_the_rewrite_log_breaks_the_chain(built: Built, tmp_path: Path) -> None:
    copy = _copy_of_store(built, tmp_path)
    newest, older = git("rev-list", "refs/gitmem/rewrites", cwd=copy).stdout.split()[:2]
    assert older  # the retention run's entry, then the redaction's: drop the retention run's
    tree = git("rev-parse", f"{newest}^{{tree}}", cwd=copy).stdout.strip()
    parents = git("rev-list", "--parents", "-n1", older, cwd=copy).stdout.split()[1:]
    args = [a for p in parents for a in ("-p", p)]
    who = ["-c", "user.name=gitmem", "-c", "user.email=gitmem@localhost"]
    skipped = git(*who, "commit-tree", tree, *args, "-m", "rewrite: redaction, 1 redacted", cwd=copy).stdout.strip()
    git("update-ref", "refs/gitmem/rewrites", skipped, cwd=copy)
    code, printed = _audit(built, "--repo", str(copy))
    assert code == 1 and f"rewrite log: {skipped[:12]}: entry unsigned: the chain is broken" in printed


def test_an_older_clone_fails_against_a_hand_made_filter_branch(built: Built, tmp_path: Path) -> None:
    copy = _copy_of_store(built, tmp_path)
    env = {**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1"}
    subprocess.run(
        ["git", "filter-branch", "-f", "--msg-filter", "sed 's/^Created-At: 20/Created-At: 19/'", "--", "main"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    code, printed = _audit(built, "--repo", str(copy), "--against", str(built.old_clone))
    assert code == 1 and "BROKEN  signatures:" in printed and "unsigned and no recorded push" in printed
    assert "BROKEN  older clone:" in printed and "its time changed since the older clone" in printed


def test_erasure_receipts_verify_with_the_public_key_alone(built: Built, tmp_path: Path) -> None:
    headers = {"x-api-key": built.admin}
    entries = json.loads(_cli(built.home, "log", built.store_id, "--rewrites", "--json"))
    redacted, dropped = entries[0]["redacted"][0], entries[1]["dropped"][0]
    public = " ".join(_cli(built.home, "audit", "key").split()[:2])
    for version_id, kind in ((redacted, "redaction"), (dropped, "retention")):
        url = f"{built.base_url}/v1/memory_stores/{built.store_id}/memory_versions/{version_id}/receipt"
        answer = httpx.get(url, headers=headers)
        assert answer.status_code == 200, answer.text
        receipt = answer.json()
        assert receipt["receipt"]["kind"] == kind and version_id in receipt["receipt"]["version_ids"]
        assert receipt["receipt"]["blobs"] and all(not b["in_repository"] for b in receipt["receipt"]["blobs"])
        assert all(b["fetch_refused"] for b in receipt["receipt"]["blobs"])
        assert receipt["rewrite_entry"] == entries[0 if kind == "redaction" else 1]["commit_id"]
        file = tmp_path / f"{kind}.json"
        file.write_text(json.dumps(receipt))
        good = CliRunner().invoke(main, ["audit", "receipt", str(file), "--key", public])
        assert good.exit_code == 0 and good.output.startswith("good receipt:"), good.output
        text = file.read_text()
        at = text.index('"erased_at": "') + len('"erased_at": "') + 3  # one digit of the year
        file.write_text(text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1 :])
        bad = CliRunner().invoke(main, ["audit", "receipt", str(file), "--key", public])
        assert bad.exit_code == 1 and "the receipt was changed after it was signed" in bad.output
    other = " ".join(_cli(Path(tmp_path / "other-home"), "audit", "key").split()[:2])
    file.write_text(json.dumps(receipt))
    assert CliRunner().invoke(main, ["audit", "receipt", str(file), "--key", other]).exit_code == 1
    missing = httpx.get(
        f"{built.base_url}/v1/memory_stores/{built.store_id}/memory_versions/memver_x/receipt", headers=headers
    )
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
