"""The audit's wire models: the home's signing key (``/v1/signing_key``), a store's audit."""

from __future__ import annotations

from pydantic import Field

from gitmem.api.schemas.common import OutModel


class SigningKey(OutModel):
    """The public key that signs every commit, and the allowed-signers file that verifies them all."""

    type: str = "signing_key"
    public_key: str = Field(description="The key in use, as `ssh-ed25519 AAAA...`")
    fingerprint: str = Field(description="Its SHA256 fingerprint, as `ssh-keygen -l` prints it")
    allowed_signers: str = Field(
        description="Git's gpg.ssh.allowedSignersFile: every key the home has signed with, old ones with valid-before"
    )


class AuditProblem(OutModel):
    check: str
    commit_id: str | None
    message: str


class StoreAudit(OutModel):
    """What ``GET /v1/memory_stores/{id}/audit`` checked and found (``gitmem audit verify --json``)."""

    type: str = "memory_store_audit"
    memory_store_id: str
    ok: bool
    checked: dict[str, str] = Field(description="Each check and what it covered")
    problems: list[AuditProblem] = Field(description="Every break, oldest commit first; empty when ok")
