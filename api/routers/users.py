"""``/v1/users/me``: the person a user token stands for, and the Git addresses they commit with.

- ``GET    /v1/users/me``                 who they are, their addresses and the Git identity to commit as
- ``GET    /v1/users/me/emails``          their addresses
- ``POST   /v1/users/me/emails``          ``{"email": ...}``: register one (409 if another user of the
  workspace has it)
- ``DELETE /v1/users/me/emails/{email}``  unregister one

Only a user's token: an API key or a task token gets 403 (an admin registers addresses for a user with
``gitmem users emails add``). The rule is :mod:`gitmem.engine.catalog.user_emails`'s.
"""

from __future__ import annotations

from fastapi import APIRouter

from gitmem.api.deps import USER_ONLY, Engine, UserId
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.users import (
    GitIdentity,
    UserEmailCreate,
    UserEmailDeleted,
    UserEmailList,
    UserEmailOut,
    UserOut,
)
from gitmem.engine.catalog.user_emails import UserEmails
from gitmem.engine.push.check import git_identity

# Users only: an API key or a task's token is 403 before any route of the router runs.
router = APIRouter(prefix="/v1/users/me", tags=["users"], responses=ERROR_RESPONSES, dependencies=[USER_ONLY])


@router.get("", response_model=UserOut, summary="The user this token stands for")
def get_me(user_id: UserId, gm: Engine) -> UserOut:
    user = gm.catalog.credential(user_id)
    emails = UserEmails(gm.catalog).of_user(user.id)
    name, email = git_identity(user.id, user.name, emails)
    return UserOut(
        id=user.id,
        name=user.name,
        workspace_id=user.workspace_id,
        emails=emails,
        git_identity=GitIdentity(name=name, email=email),
    )


@router.get("/emails", response_model=UserEmailList, summary="The Git addresses registered as yours")
def list_emails(user_id: UserId, gm: Engine) -> UserEmailList:
    return UserEmailList(data=[UserEmailOut(email=e, user_id=user_id) for e in UserEmails(gm.catalog).of_user(user_id)])


@router.post("/emails", response_model=UserEmailOut, summary="Register a Git address you commit with")
def add_email(body: UserEmailCreate, user_id: UserId, gm: Engine) -> UserEmailOut:
    added = UserEmails(gm.catalog).add(user_id, body.email)
    return UserEmailOut(email=added.email, user_id=added.user_id)


@router.delete("/emails/{email}", response_model=UserEmailDeleted, summary="Unregister one of your Git addresses")
def remove_email(email: str, user_id: UserId, gm: Engine) -> UserEmailDeleted:
    UserEmails(gm.catalog).remove(user_id, email)
    return UserEmailDeleted(email=email.strip().lower())
