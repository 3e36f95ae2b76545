"""Examples in README.md and docs/*.md as real output: ``cog`` runs the commands and writes what they print.

Used from the ``[[[cog ...]]]`` blocks of those pages (``cog -r -I docs README.md docs/*.md`` to
refresh; ``make test`` checks them with ``python -m tools.docscheck``). Each :func:`console` call runs its commands in
one ``bash`` on a fresh temporary data home, with this interpreter's ``gitmem`` first on ``PATH``, and
prints them as a console session. Ids, secrets and times differ on every run, so they are replaced by
stable stand-ins of the same length (the same value always by the same stand-in, times in the same
order), which keeps the pages' tables aligned and ``cog --check`` quiet.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cog  # type: ignore[import-not-found]  # provided by cogapp while it runs a README block

_MARK = "\x1e"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Ids: a prefix and 26 characters of Crockford's base32 (time-ordered, or derived from a pushed commit).
_ULID = re.compile(r"\b([a-z]+_)([0-9A-HJKMNP-TV-Z]{26})\b")
_PORT = re.compile(r"\b127\.0\.0\.1:\d+")
_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")
_SECRET = re.compile(r"\b(gm_key_|gm_usr_|gm_user_|gm_tsk_)([A-Za-z0-9_-]{20,})")


# A store with a few versions, made out of sight for the examples that need one: $S, $SAM (a note's id),
# $FIRST and $EDIT (two of its versions).
TEAM_NOTES = r"""
S=$(gitmem store create team-notes -d "What the team learned")
read _ _ SAM FIRST < <(echo "Sam prefers terraform plans against staging first." | gitmem note put $S /people/sam.md)
printf "# Acme\n- single-tenant\n- deploys with terraform on Fridays\n" | gitmem note put $S /projects/acme.md
read _ _ _ EDIT < <(echo "Sam prefers plans against staging; applies on Fridays are off." \
    | gitmem note put $S /people/sam.md)
"""

# A shared store of runbooks with a note, for the examples of tasks and dreams: $S.
RUNBOOKS = r"""
S=$(gitmem store create runbooks -d "How we operate prod")
echo "Restart the primary last." | gitmem note put $S /db/restart.md
"""

# A server on this home, on a free port, stopped when the example's shell exits: $GITMEM_URL; $S, a store
# with a note; $GITMEM_TOKEN, the token of a user, ana, with write access; $GITMEM_API_KEY, the admin key
# the server made on its first start.
SERVER = r"""
PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export GITMEM_URL=http://127.0.0.1:$PORT
gitmem serve --port $PORT > serve.log 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID; wait $SERVER_PID' EXIT
python -c '
import sys, time, urllib.request
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(sys.argv[1] + "/healthz")
        break
    except OSError:
        time.sleep(0.05)' $GITMEM_URL
S=$(gitmem store create team-notes -d "What the team learned")
echo "Sam prefers terraform plans against staging first." | gitmem note put $S /people/sam.md
export GITMEM_TOKEN=$(gitmem users create --name ana)
export GITMEM_API_KEY=$(cat $GITMEM_HOME/admin.key)
"""

# Setups made once a check and copied into each example's home (they start no process).
_SHAREABLE = (TEAM_NOTES, RUNBOOKS)


def _fake_ulid(prefix: str, n: int) -> str:
    rng = random.Random(f"{prefix}{n}")
    return "01M8KS" + "".join(rng.choice(_CROCKFORD) for _ in range(20))


def normalise(text: str) -> str:
    """Ids, secrets and times of one run replaced by stable stand-ins of the same length."""
    times = {
        t: f"2026-11-29T13:53:{10 + i:02d}.{((i + 1) * 104729) % 1000000:06d}Z"
        for i, t in enumerate(sorted(set(_TIME.findall(text))))
    }
    ulids: dict[str, str] = {}
    secrets: dict[str, str] = {}

    def secret(m: re.Match[str]) -> str:
        rng = random.Random(len(secrets))
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return secrets.setdefault(m.group(0), m.group(1) + "".join(rng.choice(alphabet) for _ in m.group(2)))

    text = _SECRET.sub(secret, text)
    text = _ULID.sub(lambda m: m.group(1) + ulids.setdefault(m.group(2), _fake_ulid(m.group(1), len(ulids))), text)
    text = _PORT.sub("127.0.0.1:8765", text)  # a server of the examples listens on a free port
    return _TIME.sub(lambda m: times[m.group(0)], text)


def _env(home: str | Path) -> dict[str, str]:
    return {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_FSYNC": "never",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _bash(script: str, home: str | Path) -> str:
    return subprocess.run(
        ["bash", "--noprofile", "--norc"],
        input=script,
        env=_env(home),
        cwd=home,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _shared(setup: str, home: str) -> str:
    """A shared setup made once a check (``GITMEM_DOCS_CACHE``, set by tools.docscheck) and copied into
    ``home``: the variables it set, as a script. The pages of one check take turns making it."""
    cache = Path(os.environ["GITMEM_DOCS_CACHE"]) / hashlib.sha256(setup.encode()).hexdigest()[:16]
    cache.mkdir(exist_ok=True)
    with (cache / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cache / "variables").exists():
            made = cache / "home"
            made.mkdir()
            listed = 'for v in $(compgen -v); do grep -qxF "$v" <<<"$BEFORE" || declare -p "$v"; done'
            out = _bash(f'BEFORE="$(compgen -v)"\n{{ {setup}\n}} >/dev/null 2>&1\n{listed}\n', made)
            (cache / "variables").write_text(out)
    shutil.copytree(cache / "home", home, dirs_exist_ok=True)
    return "".join(line + "\n" for line in (cache / "variables").read_text().splitlines() if " BEFORE=" not in line)


def run(commands: str, setup: str = "") -> str:
    """The commands (one a line) and what each printed, as a console session. ``setup`` runs first in
    the same shell (its variables stay set) and is not shown; a setup that starts with one shared by
    several pages (TEAM_NOTES, RUNBOOKS) is made once a check and copied (``GITMEM_DOCS_CACHE``)."""
    lines = [c for c in commands.strip().splitlines() if c.strip()]
    with tempfile.TemporaryDirectory(prefix="gitmem-readme-") as home:
        script = ""
        shared = next((s for s in _SHAREABLE if setup.startswith(s)), None)
        if shared and os.environ.get("GITMEM_DOCS_CACHE"):
            script, setup = _shared(shared, home), setup[len(shared) :]
        script += f"{{ {setup}\n}} >/dev/null 2>&1\n" if setup.strip() else ""
        script += "".join(f"printf '{_MARK}%d\\n' {n}\n{{ {c}\n}} 2>&1\n" for n, c in enumerate(lines))
        out = _bash(script, home)
    session: list[str] = []
    for chunk in out.split(_MARK)[1:]:
        n, _, printed = chunk.partition("\n")
        session.append(f"$ {lines[int(n)]}")
        session += [line.rstrip() for line in printed.rstrip("\n").splitlines()]  # Git pads remote: lines
    return normalise("\n".join(session))


def console(commands: str, setup: str = "", steady: dict[str, str] | None = None) -> None:
    """Write a ``console`` code block of the commands and their real output into the page (after
    ``setup``, run first and not shown). ``steady`` maps a pattern of output that changes from run to
    run (a duration) to what to print instead."""
    session = run(commands, setup)
    for pattern, replacement in (steady or {}).items():
        session = re.sub(pattern, replacement, session)
    cog.outl("```console")
    cog.outl(session)
    cog.outl("```")
