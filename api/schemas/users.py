"""Wire shapes of ``/v1/users/me``: the person a user token stands for and their Git addresses."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gitmem.api.schemas.common import InModel, OutModel


class GitIdentity(OutModel):
    """What ``git config user.name`` and ``user.email`` should say for a push to be theirs."""

    name: str
    email: str


class UserOut(OutModel):
    type: Literal["user"] = "user"
    id: str
    name: str
    workspace_id: str
    emails: list[str] = Field(description="The Git e-mail addresses registered as this user's, oldest first")
    git_identity: GitIdentity


class UserEmailCreate(InModel):
    email: str = Field(description="An address you commit with (git config user.email)", max_length=1000)


class UserEmailOut(OutModel):
    type: Literal["user_email"] = "user_email"
    email: str
    user_id: str


class UserEmailList(OutModel):
    data: list[UserEmailOut]


class UserEmailDeleted(OutModel):
    type: Literal["user_email_deleted"] = "user_email_deleted"
    email: str
