"""``/v1/profiles``: a user's profiles and each profile's memory bank (the profile-bank API).

Only users (``Authorization: Bearer <user token>``) own profiles: an API key or a task token gets 403,
and another user's profile is 404. The bank's REST surface is the seed's:

- ``GET    /v1/profiles/{id}/memories``                 metadata of every entry
- ``GET    /v1/profiles/{id}/memories/content?path=P``  one entry with its content
- ``PUT    /v1/profiles/{id}/memories/content?path=P``  ``{"content": ...}``: create or update
- ``DELETE /v1/profiles/{id}/memories/content?path=P``  remove it
- ``GET    /v1/profiles/{id}/prompt``                   the system-prompt section, ``text/markdown``

``PUT`` and ``DELETE`` also take an optional precondition (used by the mount): ``If-Match:
"<content_hash>"`` (the entry's current SHA-256) or, on ``PUT``, ``If-None-Match: *`` (create only).
A failed one is 409 ``memory_precondition_failed_error``.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Header, Query, Response

from gitmem.agents.prompt import bank_section
from gitmem.api.deps import USER_ONLY, Caller, HomeParts, UserId
from gitmem.api.schemas.agents.profiles import (
    BankMemory,
    BankMemoryContent,
    BankMemoryDeleted,
    BankMemoryList,
    BankMemoryPut,
    BankMemoryWritten,
    DeletedProfile,
    ProfileCreate,
    ProfileList,
    ProfileOut,
    ProfileUpdate,
)
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.banks.profiles import Bank
from gitmem.engine.catalog.catalog import Principal
from gitmem.errors import InvalidRequest

# Users only: an API key or a task's token is 403 before any route of the router runs.
router = APIRouter(prefix="/v1/profiles", tags=["profiles"], responses=ERROR_RESPONSES, dependencies=[USER_ONLY])

_HASH = re.compile(r"[0-9a-f]{64}")
PathQuery = Query(..., description="The entry's relative path, e.g. projects/acme.md", max_length=4096)
IfMatch = Header(None, alias="If-Match", description='Only if the entry\'s content_hash is this: "<hash>"')
IfNoneMatch = Header(None, alias="If-None-Match", description="*: only if there is no entry at the path yet")


def _bank(parts: HomeParts, principal: Principal, user_id: str, profile_id: str) -> Bank:
    return parts.profiles.user_bank(principal.workspace_id, user_id, profile_id)


def _expected(if_match: str | None, if_none_match: str | None) -> str | None:
    """The precondition as :meth:`Bank.put` takes it: a hash, ``""`` (must not exist) or None."""
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise InvalidRequest("If-None-Match takes only *: create the entry only if it does not exist")
        if if_match is not None:
            raise InvalidRequest("send If-Match or If-None-Match, not both")
        return ""
    if if_match is None or if_match.strip() == "*":
        return None
    value = if_match.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not _HASH.fullmatch(value):
        raise InvalidRequest('If-Match takes an entry\'s content_hash: "<64 lowercase hex>"')
    return value


# -- profiles --------------------------------------------------------------------------------------


@router.post("", response_model=ProfileOut, summary="Create a profile (with an empty, encrypted memory bank)")
def create_profile(body: ProfileCreate, principal: Caller, user_id: UserId, parts: HomeParts) -> ProfileOut:
    profile = parts.profiles.create(principal.workspace_id, user_id, body.name)
    return ProfileOut.of(profile)


@router.get("", response_model=ProfileList, summary="List the caller's profiles, oldest first")
def list_profiles(principal: Caller, user_id: UserId, parts: HomeParts) -> ProfileList:
    found = parts.profiles.list(principal.workspace_id, user_id)
    return ProfileList(data=[ProfileOut.of(p) for p in found])


@router.get("/{profile_id}", response_model=ProfileOut, summary="Retrieve a profile")
def retrieve_profile(profile_id: str, principal: Caller, user_id: UserId, parts: HomeParts) -> ProfileOut:
    return ProfileOut.of(parts.profiles.get(principal.workspace_id, user_id, profile_id))


@router.post("/{profile_id}", response_model=ProfileOut, summary="Rename a profile")
def update_profile(
    profile_id: str, body: ProfileUpdate, principal: Caller, user_id: UserId, parts: HomeParts
) -> ProfileOut:
    profile = parts.profiles.rename(principal.workspace_id, user_id, profile_id, body.name)
    return ProfileOut.of(profile)


@router.delete(
    "/{profile_id}",
    response_model=DeletedProfile,
    summary="Delete a profile, every entry of its bank, its history and its key",
)
def delete_profile(profile_id: str, principal: Caller, user_id: UserId, parts: HomeParts) -> DeletedProfile:
    parts.profiles.delete(principal.workspace_id, user_id, profile_id)
    return DeletedProfile(id=profile_id)


# -- the bank --------------------------------------------------------------------------------------


@router.get("/{profile_id}/memories", response_model=BankMemoryList, summary="List bank entries (metadata only)")
def list_bank_memories(profile_id: str, principal: Caller, user_id: UserId, parts: HomeParts) -> BankMemoryList:
    bank = _bank(parts, principal, user_id, profile_id)
    return BankMemoryList(memories=[BankMemory.of(e) for e in bank.entries()])


@router.get("/{profile_id}/memories/content", response_model=BankMemoryContent, summary="Read a bank entry")
def read_bank_memory(
    profile_id: str, response: Response, principal: Caller, user_id: UserId, parts: HomeParts, path: str = PathQuery
) -> BankMemoryContent:
    entry = _bank(parts, principal, user_id, profile_id).read(path)
    response.headers["ETag"] = f'"{entry.content_hash}"'
    return BankMemoryContent.of(entry)


@router.put(
    "/{profile_id}/memories/content",
    response_model=BankMemoryWritten,
    summary="Create or update a bank entry (the same content again is a no-op)",
)
def put_bank_memory(
    profile_id: str,
    body: BankMemoryPut,
    response: Response,
    principal: Caller,
    user_id: UserId,
    parts: HomeParts,
    path: str = PathQuery,
    if_match: str | None = IfMatch,
    if_none_match: str | None = IfNoneMatch,
) -> BankMemoryWritten:
    bank = _bank(parts, principal, user_id, profile_id)
    result = bank.put(path, body.content, actor=principal.actor, expected_hash=_expected(if_match, if_none_match))
    response.headers["ETag"] = f'"{result.entry.content_hash}"'
    return BankMemoryWritten.of(result)


@router.delete("/{profile_id}/memories/content", response_model=BankMemoryDeleted, summary="Delete a bank entry")
def delete_bank_memory(
    profile_id: str,
    principal: Caller,
    user_id: UserId,
    parts: HomeParts,
    path: str = PathQuery,
    if_match: str | None = IfMatch,
) -> BankMemoryDeleted:
    entry = _bank(parts, principal, user_id, profile_id).delete(
        path, actor=principal.actor, expected_hash=_expected(if_match, None)
    )
    return BankMemoryDeleted(path=entry.path)


@router.get(
    "/{profile_id}/prompt",
    response_class=Response,
    summary="The system-prompt section for the bank",
    responses={200: {"content": {"text/markdown": {}}}},
)
def bank_prompt(profile_id: str, principal: Caller, user_id: UserId, parts: HomeParts) -> Response:
    section = bank_section(_bank(parts, principal, user_id, profile_id))
    return Response(section, media_type="text/markdown; charset=utf-8")
