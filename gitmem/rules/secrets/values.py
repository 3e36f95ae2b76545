"""Judging a value that a keyword anchors: is ``hunter2`` a password, is ``${DB_PASSWORD}`` one?

Three outcomes matter. A *placeholder* (``********``, ``<your-password>``, ``changeme``) or a
*reference* to where a secret lives (``os.environ["X"]``, ``$(vault read ...)``, a file path) is not a
secret. A *password* is judged leniently (people choose ``hunter2``), unless the value reads as prose
("rotate every 90 days"). A *token* (after ``token``, ``api_key``, ``secret`` ...) must look random:
long enough and mixing character classes, so ``token: see-the-vault`` passes and ``abc123def456`` does not.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter


def words(text: str) -> list[str]:
    """The words of a block of text (keeps long word lists readable)."""
    return text.split()


# Values that name or stand for a secret rather than hold one (compared lower-cased, whole value).
PLACEHOLDER_VALUES = frozenset(
    words("""
    password passwd pass pwd pw passphrase secret secrets token tokens key apikey api_key api-key
    credential credentials creds auth none null nil undefined empty true false yes no on off required
    optional hidden masked unset unknown default same n/a na tbd todo fixme test testing string str
    value username user login example sample dummy redacted placeholder changeme secret_key access_key
    private_key client_secret bearer basic token_here password_here
""")
)

# Words whose presence marks a template or documentation value (``your-api-key``, ``changeme123``).
PLACEHOLDER_WORDS = (
    "changeme",
    "change_me",
    "change-me",
    "example",
    "sample",
    "dummy",
    "redacted",
    "placeholder",
    "your",
    "replace",
    "insert",
    "fixme",
    "todo",
    "fake",
    "xxx",
    "here",
)
_PLACEHOLDER_WORD = re.compile("|".join(map(re.escape, PLACEHOLDER_WORDS)))
# Remove these from a value; what is left decides whether anything secret remains.
_FILLER = re.compile(
    "|".join(
        (
            *PLACEHOLDER_WORDS,
            "test",
            "password",
            "passwd",
            "secret",
            "token",
            "apikey",
            "api",
            "key",
            "pass",
            "my",
            "the",
            "value",
            "user",
            "name",
            "access",
            "private",
            "client",
            "auth",
        )
    ),
    re.IGNORECASE,
)

# Templating and indirection: shell/compose ${X} and $(cmd), Jinja/Helm {{x}}, Python %(x)s and %s,
# ERB <%= %>, Ruby #{x}, Windows %X%, a leading $NAME, and SQL bind variables.
_TEMPLATE = re.compile(
    r"\$\{|\$\(|\{\{|\}\}|%\(\w*\)s|%s\b|<%|#\{|^%\w+%$|^\$[A-Za-z_]\w*$|^@\w+@$|^\{\w+\}$"
    r"|^:['\"]?[A-Za-z_]\w*['\"]?$"
)  # psql :'var', SQL :name
_WRAPPED = re.compile(r"^(?:<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}|\([^()]*\))$")
_MASK = re.compile(r"\*{3}|•|…|\.\.\.|x{4}|X{4}|_{4}|#{4}")

# Code that fetches a secret from somewhere (a value beginning with one of these is a reference).
_REFERENCE = re.compile(
    r"""(?ix)^(?:os\.environ|os\.getenv|getenv\b|environ\b|process\.env|env\s*[\[(.]|ENV\s*[\[.]|
    System\.getenv|Environment\.GetEnvironmentVariable|secrets?\.|vault\b|getpass|keyring\.|input\(|
    \$_(?:POST|GET|ENV|SERVER|REQUEST|COOKIE)|request\.|req\.|params\b|config\b|settings\b|self\.|this\.|
    ssm:|arn:aws|secretkeyref|valuefrom|!ref\b|!sub\b|op://|awssm:|vault:|file:|@microsoft\.keyvault|
    credstash|sops\b|kms:|\{\{\s*resolve|read_secret|get_secret|load_secret|fetch_secret|
    !+\w+|ENC[(\[]|enc:|vault:v\d:)"""
)
_PATH = re.compile(
    r"(?:^|[:=])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*$|^(?:[A-Za-z]:\\|\\\\)"
    r"|\.(?:pem|key|txt|json|env|crt|p12|pfx|jks|kdbx|gpg|age)$"
)
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
# Identifiers in code (a variable, an attribute, a call): ``password = user_password``.
_EXPRESSION = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)*(?:\(.*\)?|\[.*\]?)?$")
_SNAKE = re.compile(r"^[a-z]+(?:_[a-z]+)+$")
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_CAMEL = re.compile(r"^[a-z]+(?:[A-Z][a-z]+)+$")
_PASCAL = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z]+)+$")  # a type: ``password: SecretStr``
# Password hashes are what systems are meant to store: they are not credentials (see the module docs).
_PASSWORD_HASH = re.compile(
    r"^(?:\$2[abxy]?\$\d\d\$|\$argon2|\$[1567]\$|\$apr1\$|\$scrypt\$|\{S?SHA\d*\}|"
    r"(?:pbkdf2_sha\d+|bcrypt_sha256|argon2|sha\d+)\$|md5[0-9a-f]{32}$|SCRAM-SHA-)"
)
_WORDS = re.compile(r"[A-Za-z]+")
# Compiled once: these run for every value judged.
_SEPARATORS = re.compile(r"[\s\-_.:/]")
_NOT_LETTERS = re.compile(r"[\W_\d]")
_CALL_PARTS = re.compile(r"[.(\[:]")
_NAME_PARTS = re.compile(r"[-_.]")

# Words that, opening an unquoted value, show that a sentence goes on rather than a password.
STOPWORDS = frozenset(
    words("""
    a an the is are was were be been being to of in on at for from with by via as and or not no every
    each all any some must should will can may might never always only see use using set stored kept
    managed saved rotated required needed provided changed reset expires expired our your their its this
    that these those it them we you they if when then than after before
""")
)
_PROSE_SUFFIXES = ("ed", "ing", "ly", "tion", "sion", "ment", "ness", "able", "ible", "ive", "ous")


def strip_quotes(raw: str) -> tuple[str, bool]:
    """The value without surrounding quotes and trailing punctuation, and whether it was quoted."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] in "\"'`" and raw[-1] == raw[0]:
        return raw[1:-1], True
    if raw[:1] in "\"'`":
        return raw[1:], True
    if raw.endswith(("...", "…")) or _WRAPPED.match(raw):  # an elided example, a [PLACEHOLDER]
        return raw, False
    return raw.rstrip(".,;:!?)]}>\"'`"), False


def is_placeholder(value: str) -> bool:
    lowered = value.lower()
    if lowered in PLACEHOLDER_VALUES or not value.strip():
        return True
    compact = _SEPARATORS.sub("", value)
    if len(set(compact)) <= 2 or ascending_run(compact):  # ********, xxxxxxxx, abababab, 12345678
        return True
    if _TEMPLATE.search(value) or _WRAPPED.match(value) or _MASK.search(value):
        return True
    if _PLACEHOLDER_WORD.search(lowered) or lowered.startswith("test"):  # test123, testpass
        residue = _NOT_LETTERS.sub("", _FILLER.sub("", value))
        return len(residue) < 6
    return False


_RUN = 8
_ASCENDING = re.compile(
    "|".join(
        alphabet[i : i + _RUN]
        for alphabet in (string.digits, string.ascii_lowercase, string.ascii_uppercase)
        for i in range(len(alphabet) - _RUN + 1)
    )
)


def ascending_run(value: str) -> bool:
    """``12345678``, ``abcdefgh``: typed by a person writing an example."""
    return _ASCENDING.search(value) is not None


def is_reference(value: str, quoted: bool) -> bool:
    """A pointer to a secret (an env var, a file, a vault path, a call), not the secret itself."""
    if _REFERENCE.match(value) or _PATH.search(value) or _URL.match(value) or _PASSWORD_HASH.match(value):
        return True
    if quoted:
        return False
    if not _EXPRESSION.match(value) or any(_random_word(w) for w in _CALL_PARTS.split(value)):
        return False
    return any(ch in value for ch in ".([:") or bool(
        _SNAKE.match(value) or _CONSTANT.match(value) or _CAMEL.match(value) or _PASCAL.match(value)
    )


def _random_word(word: str) -> bool:
    """``Zg4yGrpQhqaptZzXXLioyylv`` is no name a person gives a variable."""
    return len(word) >= 12 and char_classes(word) >= 3


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


_CLASSES = (re.compile(r"[a-z]"), re.compile(r"[A-Z]"), re.compile(r"[0-9]"), re.compile(r"[^A-Za-z0-9]"))


def char_classes(value: str) -> int:
    """How many of lower-case, upper-case, digits and other characters ``value`` mixes."""
    return sum(1 for pattern in _CLASSES if pattern.search(value))


def _is_prose_word(word: str) -> bool:
    lowered = word.lower()
    return lowered in STOPWORDS or lowered.endswith(_PROSE_SUFFIXES)


def _identifier_like(value: str) -> bool:
    """``min-length-12``, ``prod_db_creds``: words joined by separators, a name rather than a secret."""
    parts = [p for p in _NAME_PARTS.split(value) if p]
    if len(parts) < 2 or not all(p.isdigit() or is_plain_word(p) for p in parts):
        return False
    return any(len(p) >= 3 and p.isalpha() for p in parts)


def is_plain_word(value: str) -> bool:
    """Letters only, lower-case or Capitalised: a dictionary word more likely than a password."""
    return value.isalpha() and (value.islower() or value.isupper() or (value[0].isupper() and value[1:].islower()))


def looks_like_password(raw: str, rest: str = "", *, strict: bool = False, multiword: bool = False) -> bool:
    """Whether ``raw`` (the text after ``password:``), followed on its line by ``rest``, is a password.

    ``strict`` is for prose ("the password is X"): a plain dictionary word is not taken unless quoted.
    ``multiword`` accepts a short unquoted phrase (a passphrase) that holds no common English word.
    """
    value, quoted = strip_quotes(raw)
    if len(value) < 4 or len(value) > 200 or is_placeholder(value) or is_reference(value, quoted):
        return False
    if value.startswith("-----"):  # a PEM block: the private-key rules judge it
        return False
    words = value.split()
    if len(words) > 1:
        if not (quoted or multiword) or len(words) > 5:
            return False
        return not any(_is_prose_word(w) for w in words) and not any(_is_prose_word(w) for w in _WORDS.findall(rest))
    if _identifier_like(value):
        return False
    if is_plain_word(value):
        if quoted:
            return not _is_prose_word(value)
        if strict or _is_prose_word(value) or len(value) < 6:
            return False
        return not _WORDS.search(rest)  # "password: reset via the portal" goes on as a sentence
    return True


def looks_like_token(raw: str, *, min_length: int = 8) -> bool:
    """Whether a value anchored by ``token``/``secret``/``api_key`` looks machine-generated."""
    value, quoted = strip_quotes(raw)
    if len(value) < min_length or " " in value or is_placeholder(value) or is_reference(value, quoted):
        return False
    if value.startswith("-----") or _identifier_like(value) or is_plain_word(value):
        return False
    if value.isdigit():
        return len(value) >= 16
    return char_classes(value) >= 2 and entropy(value) >= 2.5


def credential_pair_password(raw: str) -> str | None:
    """The password half of ``user:pass`` or ``user/pass`` (``creds: admin/hunter2``), if any."""
    value, _ = strip_quotes(raw)
    if "://" in value:
        return None
    for sep in (":", "/"):
        user, found, password = value.partition(sep)
        if found and user and password and sep not in password:
            return password
    return None
