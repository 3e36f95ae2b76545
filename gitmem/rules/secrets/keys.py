"""Private keys: PEM blocks of every kind, the same wrapped in base64, PuTTY, age and WireGuard keys.

A key header alone, or around ``xxx`` or ``...``, is documentation: a block counts only when a real
base64 body follows it (PEM header lines such as ``Proc-Type:`` and JSON's ``\\n`` escapes are skipped).
Public keys (``-----BEGIN PUBLIC KEY-----``, ``ssh-rsa AAAA…``) never match.
"""

from __future__ import annotations

import base64
import binascii
import re

from gitmem.rules.secrets.engine import Rule, regex_rule

MIN_BODY_CHARS = 40  # a real key's body is hundreds of characters; a line of one is enough to refuse

_PEM_HEADER = r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_BODY_LINES = re.compile(r"(?:\\[rn]|\s)+")
_HEADER_LINE = re.compile(r"(?:\\[rn]|\s)*[A-Za-z][A-Za-z-]{1,39}:[^\n\\]*")  # Proc-Type:, Version:, Comment:
_BASE64 = re.compile(r"[A-Za-z0-9+/=]+")


def real_body(after_header: str) -> bool:
    """Whether the text after a BEGIN line starts with a key body and not with ``xxx``, ``...`` or nothing."""
    rest = after_header[:1200]
    for _ in range(6):
        header = _HEADER_LINE.match(rest)
        if header is None:
            break
        rest = rest[header.end() :]
    run = _BASE64.match(_BODY_LINES.sub("", rest[:400]))
    if run is None:
        return False
    chars = run.group().rstrip("=")
    return len(chars) >= MIN_BODY_CHARS and len(set(chars)) >= 16 and "xxxx" not in chars.lower()


def _pem(match: re.Match[str]) -> bool:
    """A real key body follows the match (a PEM header, or PuTTY's ``Private-Lines:``)."""
    return real_body(match.string[match.end() : match.end() + 2000])


def _wrapped_pem(match: re.Match[str]) -> bool:
    """``LS0tLS1CRUdJTi…``: a PEM file put through base64 (Kubernetes secrets, CI variables)."""
    encoded = match.group()
    try:
        decoded = base64.b64decode(encoded[: len(encoded) // 4 * 4]).decode("ascii", "replace")
    except (binascii.Error, ValueError):
        return False
    header = re.match(_PEM_HEADER, decoded)
    return header is not None and real_body(decoded[header.end() :])


KEY_RULES: tuple[Rule, ...] = (
    regex_rule("private-key", "a private key (PEM)", ["-----begin"], _PEM_HEADER, ahead=80, accept=_pem),
    regex_rule(
        "private-key-base64",
        "a private key (base64-wrapped PEM)",
        ["ls0tls1crudjt"],
        r"LS0tLS1CRUdJT[A-Za-z0-9+/=]{100,4000}",
        ahead=4000,
        accept=_wrapped_pem,
    ),
    regex_rule(
        "putty-private-key",
        "a private key (PuTTY)",
        ["putty-user-key-file-"],
        r"PuTTY-User-Key-File-\d:[^\n]{0,300}\n(?:[^\n]{0,300}\n){0,40}?Private-Lines:[ \t]*\d+[ \t]*\r?\n",
        ahead=6000,
        accept=_pem,
    ),
    regex_rule(
        "wireguard-private-key",
        "a private key (WireGuard)",
        ["privatekey", "presharedkey"],
        r"(?i:privatekey|presharedkey)[ \t]*=[ \t]*[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=",
        back=0,
        ahead=80,
        accept=lambda m: len(set(m.group()[-44:])) > 12,
    ),
)
