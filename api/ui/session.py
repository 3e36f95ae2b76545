"""The web view's plumbing: the signed-in person (a cookie naming a session), the sign-in form's own
guard, HTML error pages, and the headers every page carries.

**Sign-in.** A page on another site could post the sign-in form with the attacker's key and sign a
victim's browser in to the attacker's workspace (login CSRF). The form therefore carries a token bound
to a pre-session cookie (``gitmem_sign_in``, set with the form: strict, HttpOnly, ``/ui`` only), which
another site can neither read nor send; and a post whose ``Sec-Fetch-Site`` or ``Origin`` names another
site is refused before anything else. Wrong secrets spend the address's budget
(:class:`gitmem.api.ratelimit.WrongSecrets`), as on the API.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from gitmem.api.deps import HomeParts
from gitmem.api.ui.render import Names, template_globals
from gitmem.banks.profiles import require_user
from gitmem.engine.web_sessions import WebSession
from gitmem.errors import GitmemError, PermissionDenied, RateLimited

COOKIE = "gitmem_session"
SIGN_IN = "/ui/sign-in"
SIGN_IN_COOKIE = "gitmem_sign_in"  # the pre-session the sign-in form's token is bound to
_PRE_SESSION = re.compile(r"[A-Za-z0-9_-]{43}")  # what secrets.token_urlsafe(32) makes
_SAME_SITE = frozenset({"same-origin", "none"})  # "none": typed in, a bookmark

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
templates.env.globals.update(template_globals())

# No script runs, nothing loads from elsewhere, no page frames another: a note's Markdown is sanitised,
# and this says so to the browser too.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class SignInRequired(Exception):
    """No live session: the page sends the browser to the sign-in form."""


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    session: WebSession | None = getattr(request.state, "ui_session", None)
    names = getattr(request.state, "ui_names", None)
    return templates.TemplateResponse(
        request, name, {"session": session, "names": names, **context}, status_code=status
    )


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    titles = {
        400: "That request cannot be done",
        401: "Sign in again",
        403: "Not allowed",
        404: "Not found",
        409: "Conflict",
        429: "Too many attempts",
    }
    return page(request, "error.html", status, title=titles.get(status, "Something went wrong"), message=message)


class UiRoute(APIRoute):
    """Pages answer in HTML: engine refusals become error pages (a store of another workspace is a
    plain 404 page), a missing session goes to the sign-in form."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                response = await handler(request)
            except SignInRequired:
                response = RedirectResponse(SIGN_IN, status_code=303)
            except GitmemError as error:
                status = error.status if error.status < 500 else 500
                response = error_page(request, status, error.message if status < 500 else "internal error")
                if isinstance(error, RateLimited):
                    response.headers["retry-after"] = str(max(1, math.ceil(error.retry_after)))
            except RequestValidationError:
                response = error_page(request, 400, "the request is missing a field or has a malformed one")
            response.headers.update(SECURITY_HEADERS)
            return response

        return route


def current_session(request: Request, parts: HomeParts) -> WebSession:
    """The signed-in person; looked up on every request, so a revoked key or user is out at once."""
    session = parts.web_sessions.session(request.cookies.get(COOKIE))
    if session is None:
        raise SignInRequired()
    request.state.ui_session = session
    request.state.principal = session.principal  # for the access log: who called
    request.state.ui_names = Names(parts, session.principal.workspace_id)
    return session


Session = Annotated[WebSession, Depends(current_session)]


def session_user(session: Session) -> str:
    """The signed-in user (a page for users only): a key's session is 403, as over the API."""
    return require_user(session.principal)


SessionUser = Annotated[str, Depends(session_user)]


def set_session_cookie(request: Request, response: Response, session_id: str) -> None:
    set_ui_cookie(request, response, COOKIE, session_id)


def set_ui_cookie(request: Request, response: Response, name: str, value: str) -> None:
    response.set_cookie(name, value, httponly=True, samesite="strict", path="/ui", secure=request.url.scheme == "https")


def pre_session(request: Request) -> str:
    """The browser's pre-session (kept while well formed, else a new one), for the sign-in form."""
    found = request.cookies.get(SIGN_IN_COOKIE, "")
    return found if _PRE_SESSION.fullmatch(found) else secrets.token_urlsafe(32)


def sign_in_token(pre: str) -> str:
    """The form's token for pre-session ``pre`` (derived, so the page never shows the cookie itself)."""
    return hashlib.sha256(b"gitmem sign-in form\0" + pre.encode()).hexdigest()


def check_sign_in_post(request: Request, token: str) -> None:
    """Refuse a sign-in posted from another site, or without the token of this browser's form."""
    # Sec-Fetch-Site, where the browser sends it, decides; else the Origin. Our pages' no-referrer
    # policy makes Chromium send "Origin: null" for its own forms: that says nothing either way.
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None:
        other_site = site not in _SAME_SITE
    else:
        other_site = origin not in (None, "null") and urlsplit(origin).netloc != request.headers.get("host")
    if other_site:
        raise PermissionDenied("a sign-in from another site is refused; open the sign-in page here")
    pre = request.cookies.get(SIGN_IN_COOKIE, "")
    if not _PRE_SESSION.fullmatch(pre) or not hmac.compare_digest(token, sign_in_token(pre)):
        raise PermissionDenied("this sign-in form is stale or came from another site; reload the page and retry")
