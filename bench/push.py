"""What a ``git push`` to a store costs beside a push to a plain bare repository, in one run.

    python -m bench.push [--pushes 10]

Three remotes take the same commits from the stock ``git`` client (one note changed a commit, one push
a commit), pushed locally as ``git http-backend`` would run them:

  plain        a bare repository without hooks (the baseline: what Git itself costs);
  gitmem       a store, with the environment the server gives its hooks (``push_environment``: the
               settings handed down checked, ``GITMEM_CHECKED``);
  unchecked    the same, without ``GITMEM_CHECKED``: each hook checks the settings itself.

Printed: CPU seconds a push (the pushing ``git`` and everything it starts: receive-pack and the hooks,
read from ``RUSAGE_CHILDREN``) and wall ms a push, with the ratios against ``plain``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from gitmem.api.routers.stores.git import push_environment
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.push.check import pusher_identity
from gitmem.model import Actor
from tests.git_client import client_environment


def git(cwd: Path, env: Mapping[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=dict(env), check=True, capture_output=True)


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class Remote:
    """A clone of ``remote`` that pushes a commit of one new note at a time, counting what each costs."""

    def __init__(self, remote: Path, clone: Path, env: Mapping[str, str]) -> None:
        self.clone, self.env, self.cpu, self.wall, self.count = clone, env, 0.0, 0.0, 0
        git(clone.parent, env, "clone", "-q", str(remote), str(clone))
        git(clone, env, "checkout", "-q", "-B", "main")
        (clone / "notes").mkdir(exist_ok=True)

    def push_one(self) -> None:
        (self.clone / "notes" / f"{self.clone.name}-{self.count}.md").write_text(f"note {self.count}\n")
        git(self.clone, self.env, "add", "-A")
        git(self.clone, self.env, "commit", "-q", "-m", f"note {self.count}")
        began_cpu, began = children_cpu(), time.perf_counter()
        git(self.clone, self.env, "push", "-q", "origin", "main")
        self.cpu += children_cpu() - began_cpu
        self.wall += time.perf_counter() - began
        self.count += 1


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.push", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pushes", type=int, default=10, help="pushes to each remote")
    args = parser.parse_args()
    os.environ["GITMEM_FSYNC"] = "never"  # the "server's" setting, handed to its hooks like the others
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gm = Gitmem.open(root / "home", fsync="never")
        workspace = gm.catalog.create_workspace("bench")
        user, _ = gm.catalog.create_user(workspace.id, "sam")
        info = gm.create_store(workspace.id, "notes")
        gm.store(workspace.id, info.id).create("/first.md", "first\n")
        base = client_environment(*pusher_identity(user.id, user.name))
        pusher = Principal(workspace.id, Actor("user_actor", user.id), "read-write", user.id)
        server = base | push_environment(gm, pusher, info.id, "read_write")
        unchecked = {k: v for k, v in server.items() if k != "GITMEM_CHECKED"}
        plain = root / "plain.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(plain)], check=True)
        git(root, base, "clone", "-q", str(gm.repo_path(info.id)), str(root / "seed"))
        git(root / "seed", base, "push", "-q", str(plain), "HEAD:main")
        remotes = {
            "plain": Remote(plain, root / "plain", base),
            "gitmem": Remote(gm.repo_path(info.id), root / "gitmem", server),
            "unchecked": Remote(gm.repo_path(info.id), root / "unchecked", unchecked),
        }
        for _ in range(args.pushes):  # turn by turn: the machine's moods fall on every remote alike
            for remote in remotes.values():
                if remote.clone.name != "plain":
                    git(remote.clone, remote.env, "pull", "-q", "--rebase", "origin", "main")
                remote.push_one()
        gm.close()
    results = {name: (r.cpu / r.count, r.wall / r.count) for name, r in remotes.items()}
    cpu_plain, wall_plain = results["plain"]
    print(f"{args.pushes} pushes a remote, one new note each; ratio = against a plain bare repository")
    print(f"  {'remote':<12}{'CPU s a push':>14}{'ratio':>8}{'wall ms a push':>17}{'ratio':>8}")
    for name, (cpu, wall) in results.items():
        print(f"  {name:<12}{cpu:14.3f}{cpu / cpu_plain:7.1f}x{wall * 1e3:17.0f}{wall / wall_plain:7.1f}x")


if __name__ == "__main__":
    main()
