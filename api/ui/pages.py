"""The pages: sign-in, stores, a store's folders (one level at a time) and search, a note with its
history and its conflicts, a conflict against its winner with the forms that resolve it, a version's
diff, a store's activity, and the review with its forms. Every listing is paged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from gitmem.access import check_reviewer
from gitmem.agents.review.review import PendingChange, current_mark
from gitmem.agents.tasks.scope import visible_store_ids
from gitmem.api.deps import HomeParts
from gitmem.api.ratelimit import WrongSecrets, client_address
from gitmem.api.ui.session import (
    COOKIE,
    SIGN_IN,
    SIGN_IN_COOKIE,
    Session,
    UiRoute,
    check_sign_in_post,
    page,
    pre_session,
    set_session_cookie,
    set_ui_cookie,
    sign_in_token,
)
from gitmem.engine.audit.rewrites import rewrites
from gitmem.engine.store.conflict_resolution import compare, resolve
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.web_sessions import WebSession
from gitmem.errors import AuthenticationFailed, InvalidRequest, NotFound, PreconditionFailed
from gitmem.git.conflict_records import RESOLUTIONS
from gitmem.model import MemoryPrefix, Note
from gitmem.parts import Parts
from gitmem.rules.paths import validate_prefix

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)

FOLDER_PAGE = 100
HISTORY_PAGE = 20
ACTIVITY_PAGE = 50
REVIEW_PAGE = 20
STORES_PAGE = 20
CONFLICTS_PAGE = 20
STYLESHEET = Path(__file__).parent / "static" / "style.css"


def _store(parts: Parts, session: WebSession, store_id: str, *, write: bool = False) -> MemoryStore:
    """The store as this person may read it (else 404, exactly as the API answers)."""
    return parts.open_store(session.principal, store_id, write=write)


def _open(
    parts: Parts, session: WebSession, store_id: str, *, write: bool = False
) -> tuple[MemoryStore, dict[str, Any]]:
    """The store and what every store page shows of it (its name, whether this person reviews it)."""
    grant = parts.grant(session.principal, store_id, write=write)
    ctx = {"info": grant.info, "may_review": _may_review(parts, session, store_id)}
    return grant.open(), ctx


def _may_review(parts: Parts, session: WebSession, store_id: str) -> bool:
    try:
        check_reviewer(parts.gm, session.principal, store_id)
    except Exception:  # any refusal simply hides the review's actions
        return False
    return parts.reviews.settings(store_id).enabled


@router.get("/style.css")
def stylesheet() -> Response:
    return FileResponse(STYLESHEET, media_type="text/css", headers={"cache-control": "max-age=3600"})


@router.get("/sign-in", response_class=HTMLResponse)
def sign_in_form(request: Request) -> HTMLResponse:
    return _sign_in_page(request, 200, None)


def _sign_in_page(request: Request, status: int, error: str | None) -> HTMLResponse:
    """The form, with the token of this browser's pre-session (the cookie set beside it)."""
    pre = pre_session(request)
    response = page(request, "sign_in.html", status, error=error, csrf_token=sign_in_token(pre))
    set_ui_cookie(request, response, SIGN_IN_COOKIE, pre)
    return response


@router.post("/sign-in")
def sign_in(request: Request, parts: HomeParts, secret: str = Form(""), csrf_token: str = Form("")) -> Response:
    check_sign_in_post(request, csrf_token)  # login CSRF: this browser's own form, from this site
    wrong: WrongSecrets = request.app.state.wrong_secrets
    address = client_address(request.scope)
    wrong.check(address)
    try:
        session_id = parts.web_sessions.sign_in(secret.strip())
    except AuthenticationFailed as refused:
        if secret.strip():
            wrong.failed(address)
        return _sign_in_page(request, 401, refused.message)
    response = RedirectResponse("/ui/", status_code=303)
    set_session_cookie(request, response, session_id)
    response.delete_cookie(SIGN_IN_COOKIE, path="/ui")  # spent: the next sign-in gets a new one
    return response


@router.post("/sign-out")
def sign_out(request: Request, session: Session, parts: HomeParts, csrf_token: str = Form("")) -> Response:
    session.check_csrf(csrf_token)
    parts.web_sessions.sign_out(request.cookies.get(COOKIE, ""))
    response = RedirectResponse(SIGN_IN, status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("/", response_class=HTMLResponse)
def stores(
    request: Request, session: Session, parts: HomeParts, page_token: str | None = Query(None, alias="page")
) -> Response:
    principal = session.principal
    visible = visible_store_ids(parts.gm, principal)
    listing = parts.gm.list_stores(principal.workspace_id, include_archived=True, limit=STORES_PAGE, page=page_token)
    rows = []
    for info in listing.items:
        if visible is not None and info.id not in visible:
            continue
        store = parts.gm.store(principal.workspace_id, info.id)
        store.index.catch_up()
        count, total = store.index.totals()
        newest = store.versions(limit=1).items
        rows.append(
            {
                "info": info,
                "notes": count,
                "bytes": total,
                "changed": newest[0].created_at if newest else info.updated_at,
            }
        )
    return page(request, "stores.html", rows=rows, next_page=listing.next_page)


@router.get("/stores/{store_id}", response_class=HTMLResponse)
def store_page(
    request: Request,
    store_id: str,
    session: Session,
    parts: HomeParts,
    path: str = Query("/"),
    q: str = Query(""),
    page_token: str | None = Query(None, alias="page"),
) -> Response:
    store, ctx = _open(parts, session, store_id)
    folder = validate_prefix(path or "/")
    hits, folders, notes, next_page = [], [], [], None
    if q.strip():
        found = store.search(q, path_prefix=folder if folder != "/" else None, limit=FOLDER_PAGE // 5, page=page_token)
        hits, next_page = found.items, found.next_page
    else:
        listing = store.list(path_prefix=folder, depth=1, limit=FOLDER_PAGE, page=page_token)
        folders = [item.path for item in listing.items if isinstance(item, MemoryPrefix)]
        notes = [item for item in listing.items if isinstance(item, Note)]
        next_page = listing.next_page
    crumbs, names = [("/", "/")], [p for p in folder.strip("/").split("/") if p]
    for i, name in enumerate(names):
        crumbs.append(("/" + "/".join(names[: i + 1]) + "/", name))
    settings = parts.reviews.settings(store_id)
    return page(
        request,
        "store.html",
        **ctx,
        folder=folder,
        crumbs=crumbs,
        folders=folders,
        notes=notes,
        hits=hits,
        q=q,
        next_page=next_page,
        review=settings,
        mark=current_mark(store),
    )


@router.get("/stores/{store_id}/notes/{memory_id}", response_class=HTMLResponse)
def note_page(
    request: Request,
    store_id: str,
    memory_id: str,
    session: Session,
    parts: HomeParts,
    page_token: str | None = Query(None, alias="page"),
) -> Response:
    store, ctx = _open(parts, session, store_id)
    try:
        note: Note | None = store.get(memory_id)
    except NotFound:
        note = None
    history = store.versions(memory_id=memory_id, limit=HISTORY_PAGE, page=page_token)
    if note is None and not history.items:
        raise NotFound(f"memory {memory_id} not found")
    title = note.path if note else next((v.path for v in history.items if v.path), memory_id)
    conflicts = store.conflicts.list(memory_id=memory_id, limit=CONFLICTS_PAGE)
    return page(
        request,
        "note.html",
        **ctx,
        note=note,
        title=title,
        memory_id=memory_id,
        versions=history.items,
        next_page=history.next_page,
        conflicts=conflicts.items,
        more_conflicts=conflicts.next_page is not None,
        may_edit=session.principal.can_write,
    )


@router.get("/stores/{store_id}/conflicts/{conflict_id}", response_class=HTMLResponse)
def conflict_page(
    request: Request, store_id: str, conflict_id: str, session: Session, parts: HomeParts, done: str = Query("")
) -> Response:
    """A conflict beside its note: its text, the diff from the winner, the three-way merge, and the forms
    that resolve it."""
    store, ctx = _open(parts, session, store_id)
    store.conflicts.get(conflict_id, with_content=False)  # 404 for one this person may not read
    seen = compare(store, conflict_id)
    diff = SimpleNamespace(redacted=seen.conflict.redacted_at is not None, hunks=seen.hunks, renamed=False)
    return page(
        request,
        "conflict.html",
        **ctx,
        seen=seen,
        conflict=seen.conflict,
        diff=diff,
        mode="unified",
        may_edit=session.principal.can_write and not ctx["info"].archived_at,
        done=done,
    )


@router.post("/stores/{store_id}/conflicts/{conflict_id}/resolve")
def resolve_form(
    store_id: str,
    conflict_id: str,
    session: Session,
    parts: HomeParts,
    take: str = Form(...),
    content: str | None = Form(None),
    expected_sha256: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    session.check_csrf(csrf_token)
    store = _store(parts, session, store_id, write=True)
    if take not in RESOLUTIONS:
        raise InvalidRequest("take must be winner, loser or merged")
    text = content.replace("\r\n", "\n") if content is not None and take == "merged" else None
    try:
        resolve(
            store,
            conflict_id,
            take,
            content=text,
            expected_sha256=expected_sha256 or None,
            actor=session.principal.actor,
        )
    except PreconditionFailed as lost:  # the note moved on meanwhile: this resolution is a conflict of its own
        return RedirectResponse(f"/ui/stores/{store_id}/conflicts/{lost.details['conflict_id']}", status_code=303)
    return RedirectResponse(f"/ui/stores/{store_id}/conflicts/{conflict_id}?done=resolved", status_code=303)


@router.get("/stores/{store_id}/versions/{version_id}", response_class=HTMLResponse)
def version_page(
    request: Request,
    store_id: str,
    version_id: str,
    session: Session,
    parts: HomeParts,
    mode: str = Query("unified"),
    against: str | None = Query(None),
) -> Response:
    store, ctx = _open(parts, session, store_id)
    if mode not in ("unified", "split"):
        raise InvalidRequest("mode is unified or split")
    diff = store.diff(version_id, against or None)
    return page(request, "version.html", **ctx, diff=diff, mode=mode, against=against)


@router.get("/stores/{store_id}/activity", response_class=HTMLResponse)
def activity(
    request: Request,
    store_id: str,
    session: Session,
    parts: HomeParts,
    page_token: str | None = Query(None, alias="page"),
) -> Response:
    store, ctx = _open(parts, session, store_id)
    result = store.versions(limit=ACTIVITY_PAGE, page=page_token)
    return page(request, "activity.html", **ctx, versions=result.items, next_page=result.next_page)


@router.get("/stores/{store_id}/rewrites", response_class=HTMLResponse)
def rewrites_page(request: Request, store_id: str, session: Session, parts: HomeParts) -> Response:
    store, ctx = _open(parts, session, store_id)
    return page(request, "rewrites.html", **ctx, entries=rewrites(store))


@router.get("/stores/{store_id}/review", response_class=HTMLResponse)
def review_page(
    request: Request,
    store_id: str,
    session: Session,
    parts: HomeParts,
    page_token: str | None = Query(None, alias="page"),
    done: str = Query(""),
) -> Response:
    check_reviewer(parts.gm, session.principal, store_id)
    store, ctx = _open(parts, session, store_id)
    reviews = parts.reviews
    result = reviews.pending(store, limit=REVIEW_PAGE, page=page_token)
    groups: dict[str, list[PendingChange]] = {}
    for change in result.items:
        groups.setdefault(change.version.memory_id, []).append(change)
    return page(
        request,
        "review.html",
        **ctx,
        groups=groups,
        next_page=result.next_page,
        count=reviews.pending_count(store),
        mark=current_mark(store),
        settings=reviews.settings(store_id),
        done=done,
    )


@router.post("/stores/{store_id}/review/approve")
def approve(
    store_id: str, session: Session, parts: HomeParts, through_version_id: str = Form(...), csrf_token: str = Form("")
) -> Response:
    session.check_csrf(csrf_token)
    check_reviewer(parts.gm, session.principal, store_id)
    parts.reviews.approve(_store(parts, session, store_id), through_version_id, session.principal.actor)
    return RedirectResponse(f"/ui/stores/{store_id}/review?done=approved", status_code=303)


@router.post("/stores/{store_id}/review/revert")
def revert(
    store_id: str, session: Session, parts: HomeParts, version_id: str = Form(...), csrf_token: str = Form("")
) -> Response:
    session.check_csrf(csrf_token)
    check_reviewer(parts.gm, session.principal, store_id)
    parts.reviews.revert(_store(parts, session, store_id, write=True), version_id, session.principal.actor)
    return RedirectResponse(f"/ui/stores/{store_id}/review?done=reverted", status_code=303)


@router.get("/stores/{store_id}/notes/{memory_id}/edit", response_class=HTMLResponse)
def edit_form(request: Request, store_id: str, memory_id: str, session: Session, parts: HomeParts) -> Response:
    store, ctx = _open(parts, session, store_id, write=True)
    return page(request, "edit.html", **ctx, note=store.get(memory_id), error=None)


@router.post("/stores/{store_id}/notes/{memory_id}/edit")
def edit(
    request: Request,
    store_id: str,
    memory_id: str,
    session: Session,
    parts: HomeParts,
    content: str = Form(""),
    expected_sha256: str = Form(...),
    csrf_token: str = Form(""),
) -> Response:
    session.check_csrf(csrf_token)
    store = _store(parts, session, store_id, write=True)
    try:
        store.update(
            memory_id, content.replace("\r\n", "\n"), expected_sha256=expected_sha256, actor=session.principal.actor
        )
    except PreconditionFailed as lost:  # someone saved first: the edit is kept; show it beside the winner
        if "conflict_id" not in lost.details:
            raise
        return RedirectResponse(f"/ui/stores/{store_id}/conflicts/{lost.details['conflict_id']}", status_code=303)
    except InvalidRequest as refused:  # a secret, a size limit: show the form again with the reason
        return page(
            request,
            "edit.html",
            400,
            info=parts.gm.get_store(session.principal.workspace_id, store_id),
            note=store.get(memory_id),
            error=refused.message,
        )
    return RedirectResponse(f"/ui/stores/{store_id}/notes/{memory_id}", status_code=303)
