"""The secret detector's corpus: credentials that must be refused and ordinary notes that must save.

Each file holds entries separated by a line ``%%``; an entry's first line ``## label`` names it. So
that no real credential is ever committed, random parts are written as templates filled from a
seeded generator: ``{an:36}`` letters and digits, ``{lo:N}`` lower-case letters and digits,
``{hex:N}``, ``{HEX:N}``, ``{up:N}`` upper-case letters and digits, ``{dig:N}``, ``{b64:N}``,
``{url:N}`` (base64url), ``{b32:N}`` (bech32, as in age keys), ``{uuid}``, ``{pem}`` (a key body of
five lines), ``{pemj}`` (the same with JSON ``\\n`` escapes),
``{pem64}`` (a whole PEM file in base64), ``{wg}`` (a WireGuard key), ``{jwt}``,
and ``{basic:user:password}`` (base64 of ``user:password``).

``positives.txt`` and ``negatives.txt`` are the project's own. ``positives.public.txt`` and
``negatives.public.txt`` are grown from public secret scanners' test data (gitleaks, Yelp's
detect-secrets, trufflehog) and from the classes an outside corpus found missed or wrongly refused
(issue 28): each entry's second line ``@source <repository> <path> (<licence>; ...)`` says where its
case comes from. The text is written here in its own words and forms, with generated values: no
test file, and no credential, is copied.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from pathlib import Path

HERE = Path(__file__).parent
_ALPHABETS = {
    "an": string.ascii_letters + string.digits,
    "lo": string.ascii_lowercase + string.digits,
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "up": string.ascii_uppercase + string.digits,
    "dig": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "url": string.ascii_letters + string.digits + "_-",
    "b32": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
}
_TEMPLATE = re.compile(
    r"\{(an|lo|hex|HEX|up|dig|b64|url|b32):(\d+)\}|\{(uuid|pem|pemj|pem64|wg|jwt)\}"
    r"|\{basic:([^}]*)\}"
)


def _fill(text: str, rng: random.Random) -> str:
    def chars(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    def b64url(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    def one(match: re.Match[str]) -> str:
        kind, count, name, basic = match.groups()
        if kind:
            return chars(_ALPHABETS[kind], int(count))
        if basic is not None:
            return base64.b64encode(basic.encode()).decode()
        if name == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if name in ("pem", "pemj"):
            body = base64.b64encode(rng.randbytes(240)).decode()
            lines = [body[i : i + 64] for i in range(0, len(body), 64)]
            return ("\\n" if name == "pemj" else "\n").join(lines)
        if name == "pem64":
            body = base64.b64encode(rng.randbytes(240)).decode()
            pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
            return base64.b64encode(pem.encode()).decode()
        if name == "wg":
            return base64.b64encode(rng.randbytes(32)).decode()
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        claims = b64url(
            json.dumps({"sub": chars(_ALPHABETS["dig"], 8), "iat": 1700000000 + rng.randrange(10**7)}).encode()
        )
        return f"{header}.{claims}.{b64url(rng.randbytes(32))}"

    return _TEMPLATE.sub(one, text)


def sources(name: str) -> list[tuple[str, str]]:
    """``(label, source)`` for each entry of ``name``'s public file (its ``@source`` line)."""
    return [(label, source) for label, source, _ in _entries(f"{name}.public.txt")]


def _entries(file_name: str) -> list[tuple[str, str, str]]:
    entries = []
    for block in (HERE / file_name).read_text().split("\n%%\n"):
        label, _, body = block.strip("\n").partition("\n")
        if not label.startswith("## "):
            raise ValueError(f"{file_name}: an entry must start with '## label', not {label!r}")
        source = ""
        if body.startswith("@source "):
            source, _, body = body.partition("\n")
            source = source.removeprefix("@source ")
        entries.append((label[3:], source, body))
    return entries


def load(name: str, seed: int = 12) -> list[tuple[str, str]]:
    """``(label, text)`` for each entry of ``name`` (``positives`` or ``negatives``): the project's
    own file, then the public one."""
    rng = random.Random(seed)
    return [
        (label, _fill(body, rng))
        for file_name in (f"{name}.txt", f"{name}.public.txt")
        for label, _, body in _entries(file_name)
    ]
