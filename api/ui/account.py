"""The signed-in person's account page (``/ui/account``): the Git addresses they commit with, to add
and remove, and the identity ``git config`` should give a clone. For users only: a key has no
addresses (the page says so)."""

from __future__ import annotations

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gitmem.api.deps import Engine
from gitmem.api.ui.session import Session, SessionUser, UiRoute, page
from gitmem.engine.catalog.user_emails import UserEmails
from gitmem.engine.push.check import git_identity

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


@router.get("/account", response_class=HTMLResponse)
def account(request: Request, session: Session, gm: Engine, done: str | None = None) -> Response:
    principal = session.principal
    if principal.actor.type != "user_actor":
        return page(request, "account.html", user=None)
    user = gm.catalog.credential(principal.actor.id)
    emails = UserEmails(gm.catalog).of_user(user.id)
    name, email = git_identity(user.id, user.name, emails)
    return page(request, "account.html", user=user, emails=emails, identity=(name, email), done=done)


@router.post("/account/emails")
def add_email(
    session: Session, user_id: SessionUser, gm: Engine, email: str = Form(""), csrf_token: str = Form("")
) -> Response:
    session.check_csrf(csrf_token)
    UserEmails(gm.catalog).add(user_id, email)
    return RedirectResponse("/ui/account?done=added", status_code=303)


@router.post("/account/emails/remove")
def remove_email(
    session: Session, user_id: SessionUser, gm: Engine, email: str = Form(""), csrf_token: str = Form("")
) -> Response:
    session.check_csrf(csrf_token)
    UserEmails(gm.catalog).remove(user_id, email)
    return RedirectResponse("/ui/account?done=removed", status_code=303)
