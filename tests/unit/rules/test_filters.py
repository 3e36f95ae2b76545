"""Write filters: saved passwords, private keys and access tokens are refused; prose is not; the chain
is extended with ``GITMEM_FILTERS``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gitmem.config.handoff import from_environment
from gitmem.config.home import filters
from gitmem.config.settings import SettingsError
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest, SecretRefused
from gitmem.rules.filters import DEFAULT_FILTERS, FilterChain, regex_filter
from tests.checks import store_state

# A body that looks like a real key's (random base64); a header alone, or around "...", is no secret.
KEY_BODY = (
    "kMekS0CEEMHT2Yat0ML8xMxdVmmCOIkbt5xGn2wMnRUGV2RTZJdhXp8LNLr/ZuUy\n"
    "A0DJ+ZbvtsbUDo4KT/u7NNrPvyRCsh92N9grHAR/DzkOdPNp66zYoXvILKweuUiY\n"
)

SECRETS = {
    "password colon": "db login\npassword: hunter22\n",
    "password equals, quoted": 'config: PASSWORD = "s3cr3t-value"',
    "passwd": "passwd=correcthorse",
    "db_password key": "DB_PASSWORD=averylongvalue",
    "pwd": "pwd: abcd1234",
    "passphrase": "passphrase: open sesame",
    "secret_key": "secret_key = 'abc123def456'",
    "client-secret JSON": '{"client-secret": "8f3a9c1e7b2d4f60"}',
    "RSA private key": "-----BEGIN RSA PRIVATE KEY-----\n" + KEY_BODY + "-----END RSA PRIVATE KEY-----",
    "OpenSSH private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA" + KEY_BODY,
    "PKCS8 private key": "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg" + KEY_BODY,
    "encrypted private key": "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + KEY_BODY,
    "PGP private key": "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF" + KEY_BODY,
    "PuTTY key": "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 1\n"
    "AAAAC3NzaC1lZDI1NTE5AAAAIE\nPrivate-Lines: 1\n" + KEY_BODY,
    "AWS access key id": "aws key AKIAIOSFODNN7EXAMPLE in the notes",
    "GitHub classic token": "token ghp_" + "a1B2c3D4e5" * 4,
    "GitHub OAuth token": "gho_ErQHQwjyaxErPZDS3MoJaQNjCxkv5ndK0meG",
    "GitHub fine-grained token": "github_pat_" + "11ABCDEFG0" * 7,
    "Anthropic API key": "use sk-ant-api03-" + "Ab3_-" * 10,
    "OpenAI-style key": "sk-proj-RZlchCl24o2rOugvkZ189XdkyHTUXNoGEQUVwdW3edC2fXAn",
    "Slack token": "xoxb-832140647590-8753547773278-xlmXVo6Ma8r6XZvlpYaGcpNh",
    "Google API key": "AIzaUtdPJpD9_TH4u5LfJQ4BKGdadqI1rEz38hH",
    "GitLab token": "glpat-f13lZzSVXuctdej1zWmT",
    "Stripe live key": "sk_live_mtr7YSRIFNNhnIMSRzLpeAwu",
    "JWT": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "gitmem key": "gm_key_kQslNNx3UwdA_4_whR6EPmCaUUJz3LCsQu7XF66gD0Y",
    "credentials in an https URL": "clone https://alice:tops3cret@git.example.com/repo.git",
    "credentials in a postgres URL": "DATABASE_URL postgres://app:pa55word@db:5432/app",
}

PROSE = {
    "mentions password": "Sam forgot their password again; reset it through the admin console.",
    "password policy": "The password policy requires 12 characters and rotation every 90 days.",
    "asks for a password": "When the login asks for a password, use the SSO button instead.",
    "password field label": "The form has fields for username and password.",
    "password colon with a short word": "password: n/a",
    "password reset link": "See https://example.com/password-reset for the flow.",
    "URL without credentials": "Docs at https://docs.example.com:8443/path?q=1",
    "email address": "Write to sam@example.com about the rollout.",
    "key mentioned": "Keys are rotated monthly; the private key lives in the HSM.",
    "sk- word": "The task-sk-list is short.",
    "begin block that is public": "-----BEGIN PUBLIC KEY-----\nMFkwEwYH\n-----END PUBLIC KEY-----",
    "AKIA prefix too short": "AKIA1234 is not a key",
    "empty": "",
    # The reversals: prose about passwords, placeholders and references are not secrets.
    "password rotation prose": "Password: rotate every 90 days",
    "token in the vault": "token: see the vault",
    "masked password": "password=********",
    "placeholder in angle brackets": "password: <your-password>",
    "placeholder GitHub token": "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "placeholder URL credentials": "postgres://username:password@localhost/db",
    "key header around xxx": "-----BEGIN RSA PRIVATE KEY-----\nxxx\n-----END RSA PRIVATE KEY-----",
    "os.environ": 'db_password = os.environ["DB_PASSWORD"]',
    "os.getenv": 'api_key = os.getenv("API_KEY")',
    "shell variable": "PASSWORD=${DB_PASSWORD}",
    "process.env": "const token = process.env.GITHUB_TOKEN;",
    "command substitution": "export VAULT_TOKEN=$(vault print token)",
    "template": "password: {{ pass }}",
    "getpass": "password = getpass.getpass()",
    "PHP request": '$password = $_POST["password"];',
}


@pytest.mark.parametrize("text", list(SECRETS.values()), ids=list(SECRETS))
def test_secrets_are_refused(text: str) -> None:
    with pytest.raises(SecretRefused) as refused:
        FilterChain().check("/notes/x.md", text)
    assert refused.value.status == 400
    assert refused.value.api_type == "invalid_request_error"
    assert isinstance(refused.value, InvalidRequest)
    assert "/notes/x.md" in refused.value.message


@pytest.mark.parametrize("text", list(PROSE.values()), ids=list(PROSE))
def test_prose_passes(text: str) -> None:
    FilterChain().check("/notes/x.md", text)


def test_the_refusal_names_what_was_found_and_never_echoes_the_secret() -> None:
    cases = {
        "a saved password": "password: hunter22",
        "a private key": "-----BEGIN PRIVATE KEY-----\n" + KEY_BODY,
        "an access token": "AKIAIOSFODNN7EXAMPLE",
    }
    for reason, text in cases.items():
        with pytest.raises(SecretRefused) as refused:
            FilterChain().check("/x", text)
        assert reason in refused.value.message
        assert "hunter22" not in refused.value.message and "AKIAIOSFODNN7EXAMPLE" not in refused.value.message


def test_a_store_refuses_a_secret_and_stays_as_it_was(store: MemoryStore) -> None:
    note = store.create("/ok.md", "fine")
    before = store_state(store)
    with pytest.raises(SecretRefused):
        store.create("/creds.md", "password: hunter22")
    with pytest.raises(SecretRefused):
        store.update(note.id, content="ghp_HRCQdgJKRtwWUbuXF5xOtkiEoZIiqFcBZxsA")
    assert store_state(store) == before
    assert store.get(note.id).content == "fine"


def test_regex_filter_and_extended_chain() -> None:
    chain = FilterChain().extended([regex_filter("a ticket id", r"\bTICKET-\d+\b")])
    assert len(chain.filters) == len(DEFAULT_FILTERS) + 1
    chain.check("/x", "tickets are tracked elsewhere")
    with pytest.raises(SecretRefused, match="a ticket id"):
        chain.check("/x", "see TICKET-42")


FILTER_MODULE = """
import re

def employee_ids():
    pattern = re.compile(r"\\bEMP-\\d{6}\\b")

    def check(path, text):
        return "an employee identifier" if pattern.search(text) else None

    return check

def no_drafts():
    return lambda path, text: "a note under /drafts/" if path.startswith("/drafts/") else None
"""


@pytest.fixture
def filter_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = tmp_path / "filtermods"
    folder.mkdir()
    (folder / "gitmem_test_filters.py").write_text(textwrap.dedent(FILTER_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    return "gitmem_test_filters"


def test_gitmem_filters_extends_the_chain(tmp_path: Path, filter_module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITMEM_FILTERS", f"{filter_module}:employee_ids, {filter_module}:no_drafts")
    chain = filters(from_environment().rules)
    assert len(chain.filters) == len(DEFAULT_FILTERS) + 2
    gm = Gitmem.open(tmp_path / "home", fsync="never", filters=chain)
    ws = gm.catalog.create_workspace("ws")
    store = gm.store(ws.id, gm.create_store(ws.id, "s").id)
    ok = store.create("/people/sam.md", "Sam's id is in the HR system.")
    before = store_state(store)
    with pytest.raises(SecretRefused, match="an employee identifier"):
        store.create("/people/kim.md", "Kim is EMP-123456.")
    with pytest.raises(SecretRefused, match="an employee identifier"):
        store.update(ok.id, content="Sam is EMP-654321.")
    with pytest.raises(SecretRefused, match="/drafts/"):
        store.create("/drafts/a.md", "anything")
    with pytest.raises(SecretRefused, match="a saved password"):  # the defaults still apply
        store.create("/x.md", "password: hunter22")
    assert store_state(store) == before
    store.create("/people/kim.md", "Kim's badge is EMP-12 (too short to be an id).")


def test_gitmem_filters_empty_means_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITMEM_FILTERS", " , ")
    assert tuple(filters(from_environment().rules).filters) == DEFAULT_FILTERS
    monkeypatch.delenv("GITMEM_FILTERS")
    assert tuple(filters(from_environment().rules).filters) == DEFAULT_FILTERS


def test_gitmem_filters_naming_a_missing_module_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITMEM_FILTERS", "no_such_module_for_gitmem:factory")
    with pytest.raises(SettingsError, match="no_such_module_for_gitmem"):
        filters(from_environment().rules)
