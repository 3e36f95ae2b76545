"""The audit: the home's signing key, public and without auth, so that a clone can verify every commit
(``git verify-commit``), a store's audit checked end to end, and erasure receipts (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from gitmem.api.deps import Engine, Store
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.stores.audit import SigningKey, StoreAudit
from gitmem.crypto.signing_key import known_keys
from gitmem.engine.audit.rewrites import receipt_for
from gitmem.engine.audit.verify import verify_store

router = APIRouter(tags=["audit"])


@router.get("/v1/signing_key", response_model=SigningKey, summary="The public key that signs every commit")
def signing_key(gm: Engine) -> SigningKey:
    public = gm.signer.public
    return SigningKey(
        public_key=public.openssh, fingerprint=public.fingerprint, allowed_signers=gm.signer.allowed_signers()
    )


@router.get(
    "/v1/signing_key/allowed_signers",
    response_class=PlainTextResponse,
    summary="The allowed-signers file for gpg.ssh.allowedSignersFile",
)
def allowed_signers(gm: Engine) -> PlainTextResponse:
    return PlainTextResponse(gm.signer.allowed_signers())


@router.get(
    "/v1/memory_stores/{memory_store_id}/audit",
    response_model=StoreAudit,
    responses=ERROR_RESPONSES,
    summary="Check a store's audit end to end: signatures, trailers and index, the rewrite log",
)
async def store_audit(
    store: Store,
    gm: Engine,
    against: str | None = Query(None, description="An old tip of the store to compare today's history with"),
) -> dict[str, Any]:
    report = await run_in_threadpool(verify_store, store, known_keys(gm.home), against)
    return report.to_json()


@router.get(
    "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/receipt",
    responses=ERROR_RESPONSES,
    summary="The signed erasure receipt of a redacted or dropped version",
)
def erasure_receipt(store: Store, memory_version_id: str) -> dict[str, Any]:
    return receipt_for(store, memory_version_id)
