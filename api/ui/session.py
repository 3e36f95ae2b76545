"""The web view's plumbing: the signed-in person (a cookie naming a session), HTML error pages, and
the headers every page carries."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from gitmem.api.deps import Engine
from gitmem.api.ui.render import Names, template_globals
from gitmem.engine.web_sessions import WebSession, WebSessions
from gitmem.errors import GitmemError

COOKIE = "gitmem_session"
SIGN_IN = "/ui/sign-in"

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
            except RequestValidationError:
                response = error_page(request, 400, "the request is missing a field or has a malformed one")
            response.headers.update(SECURITY_HEADERS)
            return response

        return route


def current_session(request: Request, gm: Engine) -> WebSession:
    """The signed-in person; looked up on every request, so a revoked key or user is out at once."""
    session = WebSessions.of(gm).session(request.cookies.get(COOKIE))
    if session is None:
        raise SignInRequired()
    request.state.ui_session = session
    request.state.principal = session.principal  # for the access log: who called
    request.state.ui_names = Names(gm, session.principal.workspace_id)
    return session


Session = Annotated[WebSession, Depends(current_session)]


def set_session_cookie(request: Request, response: Response, session_id: str) -> None:
    response.set_cookie(
        COOKIE, session_id, httponly=True, samesite="strict", path="/ui", secure=request.url.scheme == "https"
    )
