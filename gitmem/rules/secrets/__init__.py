"""The secret detector: is there a credential in this note, and if so what kind and on which line?

Every write goes through it (the store's policy on each REST, memory-tool, MCP, mount and bank write,
and the pre-receive hook on each pushed note), as the first filter of :mod:`gitmem.rules.filters`; so
does every other text a caller stores, through :meth:`~gitmem.rules.filters.FilterChain.check_caller_text`.

What is refused
    * tokens in a vendor's own format (:mod:`.vendors`: AWS, GitHub, GitLab, Slack, Stripe, OpenAI,
      Anthropic, Google, Azure and some seventy more);
    * private keys of every kind with a real body (:mod:`.keys`: PEM, base64-wrapped PEM, PuTTY,
      age, WireGuard);
    * values that a keyword names a password, secret, token, API key or credential, in assignments
      (env, YAML, JSON, XML, INI, TOML), command-line flags, HTTP headers, URLs, ``.netrc``,
      connection strings, code, command lines (:mod:`.commands`) and prose (:mod:`.keywords`), when the
      value looks like one
      (:mod:`.values`: a password leniently, a token by its randomness).

What is not
    placeholders (``********``, ``<your-password>``, ``changeme``, ``${VAR}``, ``{{pass}}``),
    references to where a secret lives (``os.environ[...]``, ``process.env.X``, ``getpass()``, a
    file path, ``vault read``), hashes, UUIDs and commit ids standing alone, public keys, and password
    hashes (bcrypt, argon2, crypt): a hash is what a system is meant to store and does not log anyone
    in. A hex string or UUID that a keyword names (``HEROKU_API_KEY=<uuid>``) *is* refused.

A refusal names the rule and the line, never the value. The scan is one pass for trigger words, then
only the rules they wake (:mod:`.engine`).

Allow-listing
    ``GITMEM_SECRETS_ALLOW`` is a comma-separated list of rule ids (e.g. ``jwt,url-credentials``) that
    a deployment does not want enforced; an unknown id is an error at start. Deployments add rules of
    their own through ``GITMEM_FILTERS`` (see :mod:`gitmem.rules.filters`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gitmem.rules.secrets.commands import COMMAND_RULES
from gitmem.rules.secrets.engine import Rule, Scanner
from gitmem.rules.secrets.keys import KEY_RULES
from gitmem.rules.secrets.keywords import KEYWORD_RULES
from gitmem.rules.secrets.vendors import VENDOR_RULES

RULES: tuple[Rule, ...] = (*VENDOR_RULES, *KEY_RULES, *KEYWORD_RULES, *COMMAND_RULES)
RULE_IDS = frozenset(rule.id for rule in RULES)
_KEYWORD_RULE_IDS = frozenset(rule.id for rule in (*KEYWORD_RULES, *COMMAND_RULES))


@dataclass(frozen=True)
class Finding:
    rule_id: str
    kind: str
    line: int  # 1-based

    def describe(self) -> str:
        return f"{self.kind} on line {self.line} (rule {self.rule_id})"


def allowed_rules(spec: str) -> frozenset[str]:
    """The rule ids a ``GITMEM_SECRETS_ALLOW`` value turns off; raises ValueError naming an unknown one."""
    ids = frozenset(filter(None, (part.strip() for part in spec.split(","))))
    unknown = sorted(ids - RULE_IDS)
    if unknown:
        raise ValueError(f"unknown rule(s) {', '.join(unknown)}; rules are: {', '.join(sorted(RULE_IDS))}")
    return ids


_SCANNERS: dict[frozenset[str], Scanner] = {}


def _scanner(allow: frozenset[str]) -> Scanner:
    # Building a scanner builds its automaton; one per allow-list, shared by threads (it holds no state).
    scanner = _SCANNERS.get(allow)
    if scanner is None:
        scanner = _SCANNERS.setdefault(allow, Scanner([r for r in RULES if r.id not in allow]))
    return scanner


@dataclass(frozen=True)
class SecretDetector:
    """A content filter (``(path, text) -> reason or None``) over all rules but the allowed ones."""

    allow: frozenset[str] = frozenset()

    def findings(self, text: str) -> list[Finding]:
        """Every secret found, by line; on a line, a vendor's or a key's rule before a keyword's."""
        rows = []
        line, counted_to = 1, 0
        for hit in sorted(_scanner(self.allow).hits(text), key=lambda h: h.offset):
            line += text.count("\n", counted_to, hit.offset)  # lines counted once, however many hits
            counted_to = hit.offset
            rows.append((line, hit.rule.id in _KEYWORD_RULE_IDS, hit.offset, hit.rule))
        return [Finding(rule.id, rule.kind, line) for line, _, _, rule in sorted(rows, key=lambda r: r[:3])]

    def first(self, text: str) -> Finding | None:
        """The finding a refusal names (``token: AKIA…`` names the AWS key rather than the keyword)."""
        found = self.findings(text)
        return found[0] if found else None

    def __call__(self, path: str, text: str) -> str | None:  # noqa: ARG002  the ContentFilter signature
        finding = self.first(text)
        return finding.describe() if finding else None

    @property
    def __name__(self) -> str:  # filters are logged by name
        return "secrets"


def detector_for(allow_spec: str) -> SecretDetector:
    """The detector less the rules a ``GITMEM_SECRETS_ALLOW`` value turns off."""
    return SecretDetector(allowed_rules(allow_spec))


def find_secrets(text: str, allow: Iterable[str] = ()) -> list[Finding]:
    return SecretDetector(frozenset(allow)).findings(text)
