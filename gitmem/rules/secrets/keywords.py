"""Secrets anchored by a keyword: ``password: hunter2``, ``--api-key X``, ``Authorization: Bearer X``.

Where a keyword appears, the *key* around it (``DB_PASSWORD``, ``clientSecret``, ``x-api-key``) is
read and split into words; it names a secret only when its last word does (so ``password_policy``,
``token_url`` and ``max_tokens`` do not). What follows the key decides the syntax: an assignment in
any config language (``=``, ``:``, ``:=``, ``=>``), an XML element, a command-line flag, a Dockerfile
``ENV``, or prose ("the password is ..."). The value is then judged by :mod:`gitmem.rules.secrets.values`.
A key may also be followed by its value as code gives it: ``getenv("API_KEY", "value")``, ``key[]=``,
``dict["secret"] =``, ``@"value"``, ``private_key 'value';``. Fixed forms with their own shape
(``.netrc``, ``curl -u``, ``docker login -p``, ``psexec -p``, ``login: user / password``, a Terraform
variable's ``default``, headers, URLs with credentials, ``NetworkCredential("u", "p")``) have rules
of their own below.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from gitmem.rules.secrets import values
from gitmem.rules.secrets.engine import Locator, Rule, regex_rule
from gitmem.rules.secrets.values import words

PASSWORD_WORDS = frozenset({"password", "passwd", "pass", "pwd", "pw", "passphrase", "passcode", "passwort"})
SECRET_WORDS = frozenset(
    {
        "secret",
        "token",
        "credential",
        "credentials",
        "creds",
        "cred",
        "auth",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "accountkey",
        "masterkey",
        "authkey",
        "clientsecret",
        "authtoken",
        "accesstoken",
        "refreshtoken",
        "sessiontoken",
        "pat",
    }
)
KEY_QUALIFIERS = frozenset(
    words("""
    api access secret private account master auth app client encryption signing license shared service
    subscription consumer webhook storage admin sas primary secondary write deploy integration server
    preshared session hmac jwt decryption root personal management bot
""")
)
# Tokens that are not credentials: paging cursors, CSRF nonces, a language model's tokens.
NOT_SECRET_QUALIFIERS = frozenset(
    words("""
    page next continuation pagination cursor sync resume csrf xsrf idempotency cancel cancellation max
    num count lexer parse input output prompt completion stop bos eos pad unk special sep cls mask start
    end public publishable
""")
)
_NEUTRAL_SUFFIXES = frozenset(
    {"value", "val", "str", "string", "plain", "plaintext", "raw", "text", "b64", "base64", "hex", "literal"}
)
_LONG_ENDINGS = ("password", "passwd", "passphrase", "pwd", "pw", "secret", "token", "apikey", "secretkey", "accesskey")
_SPLIT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@lru_cache(maxsize=4096)  # notes repeat their keys
def key_family(key: str) -> str | None:
    """``"password"`` or ``"secret"`` if the key names one (by its last word), else None."""
    words = [w.lower() for w in _SPLIT.findall(key)]
    while len(words) > 1 and (words[-1] in _NEUTRAL_SUFFIXES or words[-1].isdigit()):
        words.pop()
    if not words:
        return None
    last, before = words[-1], words[-2] if len(words) > 1 else ""
    if before in NOT_SECRET_QUALIFIERS or last in NOT_SECRET_QUALIFIERS:
        return None
    if last in PASSWORD_WORDS:
        return "password"
    if last in SECRET_WORDS or (last == "key" and before in KEY_QUALIFIERS):
        return "secret"
    for ending in _LONG_ENDINGS:  # PGPASSWORD, MYSQLPWD-style run-together names
        if last.endswith(ending) and last[: -len(ending)] not in NOT_SECRET_QUALIFIERS:
            return "password" if ending.startswith("p") else "secret"
    return None


def value_is_secret(family: str, raw: str, rest: str, *, key: str = "", prose: bool = False) -> bool:
    if family == "password":
        if "phrase" in key.lower() and raw[:1] not in "\"'`":  # an unquoted passphrase runs to the line's end
            return values.looks_like_password((raw + rest).strip(), multiword=True)
        return values.looks_like_password(raw, rest, strict=prose)
    bare_key = key.lower().strip("-_.\"'") in {"key", "auth"}
    min_length = 40 if _ROW_KEY.search(key) else 16 if bare_key else 8
    if values.looks_like_token(raw, min_length=min_length):
        return True
    pair = values.credential_pair_password(raw) if "cred" in key.lower() else None
    return pair is not None and values.looks_like_password(pair)


_ROW_KEY = re.compile(r"(?i)(?:primary|secondary)[_.\-]?key$")  # a column, unless as long as Azure's keys
_KEY_CHARS = re.compile(r"[\w.\-]{0,64}")  # a key's characters, read forwards (and backwards, reversed)
_VALUE = r"""(?P<value>"[^"\n]{0,300}"|'[^'\n]{0,300}'|`[^`\n]{0,300}`|[^\s"'`<>;,|&]{1,300})(?P<rest>[^\n]{0,120})"""
_ASSIGNED = re.compile(r"""(?:\[\])?["']?\]?[ \t]*(?::=|=>|==|[:=])[ \t]*@?""" + _VALUE)
# getenv("API_KEY", "value"), config.get("db_password", "value"): a default given beside its key
_CALL_DEFAULT = re.compile(r"""["'][ \t]*,[ \t]*(?P<value>"[^"\s]{1,300}"|'[^'\s]{1,300}')[ \t]*\)(?P<rest>)""")
# private_key '...'; : a quoted value after the key, ending a statement
_QUOTED_STATEMENT = re.compile(r"""[ \t]+(?P<value>"[^"\n]{1,300}"|'[^'\n]{1,300}')[ \t]*;(?P<rest>)""")
_PROSE = re.compile(
    r"""(?:[ \t]+(?:for|to|of|on|at)[ \t]+(?:the[ \t]+|my[ \t]+|our[ \t]+|this[ \t]+)?["']?[\w.@\-]{1,40}["']?"""
    r"""(?:[ \t]+["']?[\w.@\-]{1,40}["']?)?)?[ \t]+(?:is|was|are|=)[ \t]+"""
    r"""(?:now[ \t]+|still[ \t]+|set[ \t]+to[ \t]+"""
    r"""|just[ \t]+)?""" + _VALUE
)
_SPACED = re.compile(r"[ \t]+" + _VALUE)
_XML_VALUE = re.compile(r">(?P<value>[^<\n]{1,300})</")
_QUALIFIER_BEFORE = re.compile(r"(?<![A-Za-z])([A-Za-z]{2,20})[ \t]\Z")
_ARN = re.compile(r"\barn:[\w\-:/]*\Z")


@dataclass(frozen=True)
class _Reading:
    key_start: int
    family: str | None
    secret: bool
    read_to: int  # where the next keyword may start without being read again


@lru_cache(maxsize=16)  # both keyword rules read the same key; a str caches its hash, so this is cheap
def _read_key(text: str, start: int) -> _Reading:
    """The key around the keyword at ``start``, what it names, and whether a secret follows it."""
    behind = _KEY_CHARS.match(text[max(0, start - 64) : start][::-1])
    key_start = start - (behind.end() if behind else 0)
    key_end = _KEY_CHARS.match(text, start).end()  # type: ignore[union-attr]  # [..]* always matches
    flag = text.startswith("-", key_start)
    key = text[key_start:key_end].lstrip("-.")
    family = key_family(key)
    if family is None and text[key_start - 1 : key_start] in (" ", "\t"):  # prose: "the API key is ..."
        qualifier = _QUALIFIER_BEFORE.search(text, max(0, key_start - 24), key_start)
        if qualifier is not None:
            family = key_family(f"{qualifier[1]}_{key}")
    if family is None:
        return _Reading(key_start, None, False, key_end)
    if text.startswith(":", key_start - 1) and _ARN.search(text, max(0, key_start - 120), key_start):
        return _Reading(key_start, None, False, key_end)  # arn:...:secret:name names a secret, holds none
    if text.startswith("<", key_start - 1) and text.startswith(">", key_end):
        xml = _XML_VALUE.match(text, key_end)
        return _Reading(
            key_start, family, xml is not None and value_is_secret(family, xml["value"], "", key=key), key_end
        )
    match = _ASSIGNED.match(text, key_end)
    prose = False
    if match is None:
        call = _CALL_DEFAULT.match(text, key_end) or _QUOTED_STATEMENT.match(text, key_end)
        if call is not None:  # code: a value that is one word, not a label ("Mot de passe")
            secret = _code_value(family, call["value"], key)
            return _Reading(key_start, family, secret, call.end("value"))
        match = _SPACED.match(text, key_end) if flag else _PROSE.match(text, key_end)
        prose = not flag
    if match is None and family == "password":  # "passphrase Corr3ct-H0rse!": no verb, so only a strong shape
        spaced = _SPACED.match(text, key_end)
        if spaced is not None and _strong(spaced["value"]):
            return _Reading(key_start, family, True, spaced.end("value"))
    if match is None:
        return _Reading(key_start, family, False, key_end)
    secret = value_is_secret(family, match["value"], match["rest"], key=key, prose=prose)
    # The value was judged whole: keys inside it ("password=password=...") need no second look.
    return _Reading(key_start, family, secret, match.end("value"))


def _strong(raw: str) -> bool:
    """Mixes upper and lower case, digits and symbols, at eight characters or more: no word of prose."""
    value, quoted = values.strip_quotes(raw)
    whole = raw.strip().strip("\"'`") if quoted else raw.strip()  # a password may end in "!"
    return len(value) >= 8 and values.char_classes(whole) == 4 and values.looks_like_password(value)


def _code_value(family: str, raw: str, key: str) -> bool:
    value, _ = values.strip_quotes(raw)
    if values.is_plain_word(value) or values.char_classes(value) < 2:
        return False
    return value_is_secret(family, raw, "", key=key)


def _keyword_locator(family: str) -> Locator:
    def locate(text: str, start: int, end: int, floor: int) -> tuple[int | None, int]:  # noqa: ARG001  the Locator signature
        if start < floor:  # inside a key or value already read
            return None, floor
        reading = _read_key(text, start)
        found = reading.secret and reading.family == family
        return (reading.key_start if found else None), reading.read_to

    return locate


def judged(family_of_key: str | None = None) -> Callable[[re.Match[str]], bool]:
    """Accept a match whose ``value`` group is a secret (of the family the match's ``key`` names)."""

    def accept(match: re.Match[str]) -> bool:
        raw = match["value"]
        family = family_of_key or key_family(match["key"])
        return family is not None and value_is_secret(family, raw, "", key=match.groupdict().get("key") or "")

    return accept


def _basic_credentials(match: re.Match[str]) -> bool:
    """``Basic dXNlcjpwYXNz``: base64 of ``user:password`` with a real password."""
    encoded = match["value"]
    try:
        decoded = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, password = decoded.partition(":")
    # Any real password counts here, even a word: the header exists only to carry it.
    return bool(sep and user and password.isprintable() and len(password) >= 4) and not values.is_placeholder(password)


def _url_credentials(match: re.Match[str]) -> bool:
    return values.looks_like_password(match["value"]) or values.looks_like_token(match["user"], min_length=20)


_QUOTED = r"""(?P<value>"[^"\n]{1,200}"|'[^'\n]{1,200}')"""
ANY_VALUE = r"""(?P<value>"[^"\n]{1,200}"|'[^'\n]{1,200}'|[^\s"'|;&]{1,200})"""

# Where a keyword can be followed by a value: an assignment or an XML element (``password:``,
# ``apiKey =``, ``"token":``, ``<password>``) or prose (``password is``, ``password for the db is``).
# Command-line flags (``--password X``) wake the rules through their triggers.
_KEYWORDS = ("pass", "pw", "secret", "token", "key", "auth", "cred")
# A value that cannot be a secret fails here already: a template or reference (``$``, ``{``, ``<``,
# ``(``, ``[``, ``%``, ``*``), an empty string, or fewer than three characters.
_VALUE_MAY_FOLLOW = r"""[ \t]*+@?["'`]?(?![$<{\[(%*"'`]|os\.|process\.|true\b|false\b|null\b|none\b)[^\s"'`]{3}"""
KEYWORD_ANCHOR = (
    r"""-+[a-z0-9_.\-]{0,40}+[ \t=]"""  # --password X, -Password X, --api-key=X
    r"""|[a-z0-9_.\-]{0,40}+(?:\[\])?["']?\]?[ \t]*+(?:(?::=|=>|==|[:=>])"""
    + _VALUE_MAY_FOLLOW
    + r"""|(?<=["'])[ \t]*+,[ \t]*+["'][^\s"']{3}"""  # getenv("API_KEY", "...")
    + r"""|(?:is|was|are|for|to|of|on|at)[ \t]"""
    + r"""|(?=\S{0,60}[0-9])(?=\S{0,60}[^\sa-z0-9])\S{8})"""
)  # "passphrase Corr3ct-H0rse!"
_KEYWORD_TRIGGERS = _KEYWORDS + tuple("-" + k for k in _KEYWORDS)

KEYWORD_RULES: tuple[Rule, ...] = (
    Rule(
        "pat-assignment",
        "a secret (personal access token)",
        ("pat",),
        _keyword_locator("secret"),  # ado_pat, GITHUB_PAT: "pat" is too common a trigger for every rule
        anchor=r"""(?<![a-z])pat["']?\]?[ \t]*+(?::=|=>|[:=])[ \t]*+["']?[a-z0-9_\-]{16}""",
    ),
    Rule(
        "password-assignment",
        "a saved password",
        _KEYWORD_TRIGGERS,
        _keyword_locator("password"),
        anchor=KEYWORD_ANCHOR,
    ),
    Rule(
        "secret-assignment",
        "a secret (token, API key or credential)",
        _KEYWORD_TRIGGERS,
        _keyword_locator("secret"),
        anchor=KEYWORD_ANCHOR,
    ),
    regex_rule(
        "with-password",
        "a saved password (prose)",
        ["with ", "using ", "use "],
        r"(?i:with|using|use)[ \t]+(?i:the[ \t]+)?(?i:password|passwd|pw|passphrase)[ \t]+(?P<value>\S{1,100})",
        ahead=130,
        accept=lambda m: values.looks_like_password(m["value"], strict=True),
        anchor=r"(?:with|using|use)[ \t]+(?:the[ \t]+)?(?:password|passwd|pw|passphrase)[ \t]",
    ),
    regex_rule(
        "dockerfile-env",
        "a saved password or secret (Dockerfile ENV)",
        ["env "],
        r"(?m)^[ \t]*ENV[ \t]+(?P<key>[\w.\-]{1,64})[ \t]+(?P<value>[^\s\"'=][^\n]{0,200})",
        back=20,
        ahead=300,
        accept=judged(),
    ),
    regex_rule(
        "netrc-password",
        "a saved password (.netrc)",
        ["login"],
        r"login(?<!\wlogin)[ \t]+\S{1,100}\s{1,20}password[ \t]+(?P<value>\S{1,200})",
        ahead=330,
        accept=judged("password"),
    ),
    regex_rule(
        "terraform-default",
        "a saved password or secret (Terraform variable)",
        ["variable"],
        r"""variable[ \t]+"(?P<key>[\w.\-]{1,64})"[ \t]*\{[^{}]{0,400}?\bdefault[ \t]*=[ \t]*""" + _QUOTED,
        ahead=700,
        accept=judged(),
        anchor=r"""variable[ \t]+"[a-z0-9_.\-]{0,64}(?:pass|pw|secret|token|key|auth|cred|pat)""",
    ),
    regex_rule(
        "bearer-token",
        "a token (Authorization header)",
        ["bearer"],
        r"(?i:bearer)[ \t]+(?P<value>[A-Za-z0-9._~+/\-]{16,2000}=*)",
        ahead=2030,
        accept=lambda m: values.looks_like_token(m["value"], min_length=16),
    ),
    regex_rule(
        "basic-auth-header",
        "a saved password (Basic authorization)",
        ["basic"],
        r"(?i:basic)[ \t]+(?P<value>[A-Za-z0-9+/]{8,500}={0,2})(?![A-Za-z0-9+/=])",
        ahead=520,
        accept=_basic_credentials,
    ),
    regex_rule(
        "authorization-header",
        "a token (Authorization header)",
        ["authorization"],
        r"""(?i:authorization)["']?[ \t]*[:=][ \t]*["']?(?:[A-Za-z][A-Za-z0-9_-]{1,20}[ \t]+)?"""
        r"""(?P<value>[A-Za-z0-9._~+/:=\-]{12,2000})""",
        ahead=2060,
        accept=lambda m: values.looks_like_token(m["value"], min_length=12),
    ),
    regex_rule(
        "credential-constructor",
        "a saved password (in code)",
        [
            "networkcredential",
            "basicauth",
            "digestauth",
            "usernamepassword",
            "passwordauthentication",
            "passwordcredential",
            "auth=(",
            "auth = (",
            ".login(",
            "credentials(",
        ],
        r"""(?:NetworkCredential|HTTP(?:Basic|Digest)Auth|BasicAuth|UsernamePasswordCredentials?|"""
        r"""PasswordAuthentication|PasswordCredential|UsernamePasswordAuthenticationToken|\.login|\bauth|"""
        r"""Credentials)[ \t]*(?:=[ \t]*)?\([ \t]*(?:\([ \t]*)?(?:"[^"\n]{0,100}"|'[^'\n]{0,100}'|"""
        r"""[\w.$\[\]"']{1,64})[ \t]*,[ \t]*""" + _QUOTED,
        back=40,
        ahead=420,
        accept=judged("password"),
    ),
    regex_rule(
        "powershell-securestring",
        "a saved password (PowerShell)",
        ["asplaintext"],
        r"""ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?""" + _QUOTED + r"""[ \t]+-AsPlainText""",
        back=300,
        ahead=20,
        accept=judged("password"),
    ),
    regex_rule(
        "named-secret-value",
        "a saved password or secret (name/value pair)",
        ["value"],
        r"""(?i:name|key)["']?[ \t]*[:=][ \t]*["']?(?P<key>[\w.\-]{1,64})["']?[ \t]*,?[ \t]*(?:\r?\n[ \t]*)?"""
        r"""(?:-[ \t]*)?["']?(?i:value)["']?[ \t]*[:=][ \t]*(?P<value>"[^"\n]{1,300}"|'[^'\n]{1,300}'|"""
        r"""[^\s"'<>,}]{1,300})""",
        back=120,
        ahead=320,
        accept=judged(),
        anchor=r"""value["']?[ \t]*[:=]""",
    ),  # Python's many "value"s cost one C-level check each
    regex_rule(
        "url-credentials",
        "a saved password (in a URL)",
        ["://"],
        r"""://(?<=[A-Za-z0-9]://)(?P<user>[^\s:/@"'<>]{0,100}):(?P<value>[^\s/@"'<>]{1,200})@"""
        r"""(?=[\w\[])""",
        ahead=310,
        accept=_url_credentials,
    ),
)
