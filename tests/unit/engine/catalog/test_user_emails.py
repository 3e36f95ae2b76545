"""Registered Git addresses (gitmem/engine/user_emails.py): one owner per workspace, checked forms."""

from __future__ import annotations

import pytest

from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.catalog.user_emails import MAX_EMAILS_PER_USER, UserEmails
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import Conflict, InvalidRequest, NotFound


def test_one_owner_an_address_in_a_workspace(gm: Gitmem, workspace: Workspace) -> None:
    emails = UserEmails(gm.catalog)
    sam, _ = gm.catalog.create_user(workspace.id, "sam")
    kim, _ = gm.catalog.create_user(workspace.id, "kim")
    assert emails.add(sam.id, " Sam@Example.com ").email == "sam@example.com"
    emails.add(sam.id, "sam@example.com")  # one's own again: nothing changes
    with pytest.raises(Conflict, match="another user"):
        emails.add(kim.id, "SAM@example.com")
    assert emails.of_user(sam.id) == ["sam@example.com"] and emails.of_user(kim.id) == []
    assert emails.owner(workspace.id, "sam@EXAMPLE.com") == sam.id
    # Another workspace's user may register it there: the rule is per workspace, and says nothing across.
    other = gm.catalog.create_workspace("other")
    twin, _ = gm.catalog.create_user(other.id, "sam")
    emails.add(twin.id, "sam@example.com")
    assert emails.owner(workspace.id, "sam@example.com") == sam.id
    with pytest.raises(NotFound):
        emails.remove(kim.id, "sam@example.com")
    emails.remove(sam.id, "sam@example.com")
    emails.add(kim.id, "sam@example.com")
    assert emails.owner(workspace.id, "sam@example.com") == kim.id


@pytest.mark.parametrize(
    "address",
    ["", "sam", "sam@localhost", "a b@example.com", "<sam@example.com>", "user_1@user.gitmem", "gitmem@localhost"],
)
def test_refused_forms(gm: Gitmem, workspace: Workspace, address: str) -> None:
    sam, _ = gm.catalog.create_user(workspace.id, "sam")
    with pytest.raises(InvalidRequest, match="email"):
        UserEmails(gm.catalog).add(sam.id, address)
    assert UserEmails(gm.catalog).of_user(sam.id) == []


def test_only_users_and_a_bounded_number(gm: Gitmem, workspace: Workspace) -> None:
    emails = UserEmails(gm.catalog)
    key, _ = gm.catalog.create_api_key(workspace.id, "k")
    with pytest.raises(NotFound):
        emails.add(key.id, "k@example.com")
    sam, _ = gm.catalog.create_user(workspace.id, "sam")
    for n in range(MAX_EMAILS_PER_USER):
        emails.add(sam.id, f"sam{n}@example.com")
    with pytest.raises(InvalidRequest, match="at most"):
        emails.add(sam.id, "one-more@example.com")
