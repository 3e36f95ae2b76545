"""Wire shapes of ``/v1/users/me``: the person a user token stands for and their Git addresses."""

from __future__ import annotations

from typing import Literal

from gitmem.api.schemas.memory_stores import _In, _Out
from pydantic import Field


class GitIdentity(_Out):
    """What ``git config user.name`` and ``user.email`` should say for a push to be theirs."""

    name: str
    email: str


class UserOut(_Out):
    type: Literal["user"] = "user"
    id: str
    name: str
    workspace_id: str
    emails: list[str] = Field(description="The Git e-mail addresses registered as this user's, oldest first")
    git_identity: GitIdentity


class UserEmailCreate(_In):
    email: str = Field(description="An address you commit with (git config user.email)", max_length=1000)


class UserEmailOut(_Out):
    type: Literal["user_email"] = "user_email"
    email: str
    user_id: str


class UserEmailList(_Out):
    data: list[UserEmailOut]


class UserEmailDeleted(_Out):
    type: Literal["user_email_deleted"] = "user_email_deleted"
    email: str
