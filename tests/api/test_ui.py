"""The web view, in process: sign-in and its cookie, revocation, CSRF, the API's access rules, sanitised
Markdown, redacted versions, paging, and the review's forms."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from gitmem.agents.review.review import Reviews, current_mark
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.app import create_app
from gitmem.api.ui.session import COOKIE
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite import redaction
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import PreconditionFailed
from gitmem.model import Actor
from tests.apps import Response, ui_sign_in

EVIL_NOTE = """# Sam

Sam likes <b>staging</b>.

<script>alert("stolen")</script>

![tracker](https://evil.example/pixel.png) ![inline](data:image/png;base64,iVBORw0KGgo=)

[click](javascript:alert(1)) and [docs](https://docs.example/page)
"""


@dataclass
class World:
    gm: Gitmem
    app: TestClient
    workspace_id: str
    admin: str
    reader: str
    user_id: str
    user: str
    store: MemoryStore
    other_store_id: str

    def client(self) -> TestClient:
        return TestClient(self.app.app, base_url="http://testserver")


@pytest.fixture
def world(fast_gm: Gitmem) -> Iterator[World]:
    gm = fast_gm
    ws = gm.catalog.create_workspace("default")
    _, admin = gm.catalog.create_api_key(ws.id, "ops admin")
    _, reader = gm.catalog.create_api_key(ws.id, "auditor", role="read-only")
    user, user_secret = gm.catalog.create_user(ws.id, "dana")
    info = gm.create_store(ws.id, "team-notes", description="what the team learned")
    other_ws = gm.catalog.create_workspace("beta")
    other = gm.create_store(other_ws.id, "their-notes")
    with TestClient(create_app(gm)) as app:
        yield World(gm, app, ws.id, admin, reader, user.id, user_secret, gm.store(ws.id, info.id), other.id)


def signed_in(world: World, secret: str) -> TestClient:
    client = world.client()
    response = ui_sign_in(client, secret)
    assert response.status_code == 303 and response.headers["location"] == "/ui/"
    return client


def csrf(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_sign_in_sets_a_strict_httponly_cookie_and_keeps_no_secret(world: World) -> None:
    client = world.client()
    assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui/sign-in"
    form = client.get("/ui/sign-in")
    assert form.status_code == 200 and '<label for="secret">' in form.text
    response = ui_sign_in(client, world.user)
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    session_id = cookie.split(";")[0].split("=", 1)[1]
    assert world.user not in cookie and world.user not in response.headers.get("location", "")
    rows = world.gm.catalog.db.execute("SELECT * FROM ui_sessions").fetchall()
    assert len(rows) == 1 and rows[0]["credential_id"] == world.user_id
    assert session_id not in [str(v) for v in tuple(rows[0])]  # only its digest is kept
    home = client.get("/ui/")
    assert home.status_code == 200 and "team-notes" in home.text and "dana" in home.text
    assert "default-src 'none'" in home.headers["content-security-policy"]


def test_a_wrong_secret_or_a_task_token_cannot_sign_in(world: World) -> None:
    client = world.client()
    refused = ui_sign_in(client, "gm_key_wrong")
    assert refused.status_code == 401 and "invalid" in refused.text and COOKIE not in refused.headers["set-cookie"]
    worker = tasks_for(world.gm).create_worker(world.workspace_id, "w")
    _, token = tasks_for(world.gm).create_task(world.workspace_id, worker.id)
    assert ui_sign_in(client, token).status_code == 401


def test_sign_in_takes_this_browsers_own_form_from_this_site(world: World) -> None:
    """Login CSRF: another site's page posting the form (the attacker's key, with no token, or with the
    token of the attacker's own form, or from another Origin / Sec-Fetch-Site) signs nobody in."""
    victim, attacker = world.client(), world.client()
    forged = attacker.get("/ui/sign-in").text
    victim.get("/ui/sign-in")  # the victim's browser has a pre-session of its own
    attempts = [
        {"data": {"secret": world.admin}},
        {"data": {"secret": world.admin, "csrf_token": csrf(forged)}},
    ]
    refused: Response
    for attempt in attempts:
        refused = victim.post("/ui/sign-in", follow_redirects=False, **attempt)  # type: ignore[arg-type]
        assert refused.status_code == 403 and COOKIE not in refused.headers.get("set-cookie", "")
    cross = {"origin": "null", "sec-fetch-site": "cross-site"}
    for other_site in ({"origin": "https://evil.example"}, {"sec-fetch-site": "same-site"}, cross):
        refused = ui_sign_in(victim, world.admin, **other_site)
        assert refused.status_code == 403 and "another site" in refused.text
    assert victim.get("/ui/", follow_redirects=False).headers["location"] == "/ui/sign-in"  # signed in nowhere
    same_site = {"origin": "null", "sec-fetch-site": "same-origin"}  # what Chromium sends under no-referrer
    assert ui_sign_in(victim, world.user, **same_site).status_code == 303
    assert ui_sign_in(world.client(), world.user, origin="http://testserver").status_code == 303


def test_revoking_the_credential_signs_the_session_out_at_once(world: World) -> None:
    client = signed_in(world, world.user)
    assert client.get("/ui/").status_code == 200
    world.gm.catalog.revoke(world.user_id)
    assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui/sign-in"


def test_sign_out_needs_the_csrf_token(world: World) -> None:
    client = signed_in(world, world.admin)
    page = client.get("/ui/").text
    assert client.post("/ui/sign-out", data={"csrf_token": "forged"}).status_code == 403
    assert client.get("/ui/").status_code == 200  # still signed in
    assert client.post("/ui/sign-out", data={"csrf_token": csrf(page)}, follow_redirects=False).status_code == 303
    assert client.get("/ui/", follow_redirects=False).status_code == 303


def test_another_workspaces_store_is_simply_not_there(world: World) -> None:
    client = signed_in(world, world.admin)
    assert "their-notes" not in client.get("/ui/").text
    for url in (
        f"/ui/stores/{world.other_store_id}",
        f"/ui/stores/{world.other_store_id}/activity",
        f"/ui/stores/{world.other_store_id}/review",
        "/ui/stores/memstore_nope/notes/mem_x",
    ):
        response = client.get(url)
        assert response.status_code == 404 and "<h1>Not found</h1>" in response.text, url


def test_markdown_is_sanitised(world: World) -> None:
    note = world.store.create("/people/sam.md", EVIL_NOTE)
    html = signed_in(world, world.admin).get(f"/ui/stores/{world.store.id}/notes/{note.id}").text
    article = html[html.index("<article") : html.index("</article>")]
    assert "<script" not in article and "&lt;script&gt;" in article  # shown as text, never run
    assert "<b>" not in article
    assert "evil.example" not in article and "image not shown: tracker" in article
    assert '<img src="data:image/png;base64,iVBORw0KGgo="' in article
    assert "javascript:" not in article.replace("[click](javascript:alert(1))", "")
    assert 'href="https://docs.example/page" rel="noopener noreferrer nofollow"' in article
    assert html.count("<h1") == 1 and "<h2>Sam</h2>" in article  # the note's heading sits under the page's


def test_history_diffs_and_redacted_versions(world: World) -> None:
    store = world.store
    note = store.create("/a.md", "secret-ish draft\n")
    first = note.version_id
    store.update(note.id, "line one\nline two\n", actor=Actor("user_actor", world.user_id))
    worker = tasks_for(world.gm).create_worker(world.workspace_id, "planner")
    task, _ = tasks_for(world.gm).create_task(world.workspace_id, worker.id)
    store.update(note.id, "line one\nline two\nline three\n", actor=Actor("task_actor", task.id))
    latest = store.update(note.id, "line one\nline 2\n")
    redaction.redact(store, first, None)
    client = signed_in(world, world.admin)
    history = client.get(f"/ui/stores/{store.id}/notes/{note.id}").text
    assert "secret-ish" not in history and "redacted" in history
    assert "dana (user)" in history and f"{task.id} (task of planner)" in history  # names gitmem knows
    unified = client.get(f"/ui/stores/{store.id}/versions/{latest.version_id}").text
    assert re.search(r'<tr class="removed">.*?<pre>line two</pre>', unified, re.S)
    assert re.search(r'<tr class="added">.*?<pre>line 2</pre>', unified, re.S)
    split = client.get(f"/ui/stores/{store.id}/versions/{latest.version_id}?mode=split").text
    assert '<tr class="changed">' in split and "line 2" in split
    redacted = client.get(f"/ui/stores/{store.id}/versions/{first}").text
    assert "secret-ish" not in redacted and "its content is not shown" in redacted
    rewrites = text(client.get(f"/ui/stores/{store.id}/rewrites").text)  # the signed rewrite log
    assert "redaction" in rewrites and "redacted by the service" in rewrites and "secret-ish" not in rewrites


def test_folders_show_one_level_and_listings_page(world: World) -> None:
    for i in range(105):
        world.store.create(f"/bulk/n{i:03}.md", f"note {i}")
    world.store.create("/top.md", "top")
    client = signed_in(world, world.admin)
    root = client.get(f"/ui/stores/{world.store.id}").text
    assert "bulk/" in root and "n000.md" not in root and "top.md" in root
    folder = client.get(f"/ui/stores/{world.store.id}", params={"path": "/bulk/"}).text
    assert folder.count('href="/ui/stores/' + world.store.id + "/notes/") == 100 and ">More<" in folder
    more = re.search(r'href="([^"]+page=[^"]+)">More', folder)
    assert more is not None
    rest = client.get(more.group(1).replace("&amp;", "&")).text
    assert "n104.md" in rest and "n000.md" not in rest
    found = client.get(f"/ui/stores/{world.store.id}", params={"q": "top"}).text
    assert "/top.md" in found


def test_the_review_page_and_its_forms(world: World) -> None:
    store = world.store
    Reviews.of(world.gm).configure(world.workspace_id, store.id, enabled=True)
    wrong = store.create(
        "/facts/revenue.md", "Revenue is booked on draft invoices.", actor=Actor("api_actor", "apikey_agent")
    )
    client = signed_in(world, world.user)
    page = client.get(f"/ui/stores/{store.id}/review").text
    assert "1 version pending" in page and "/facts/revenue.md" in page and "Revenue is booked" in page
    token = csrf(page)
    url = f"/ui/stores/{store.id}/review"
    # A forged or missing token changes nothing.
    assert client.post(f"{url}/revert", data={"version_id": wrong.version_id, "csrf_token": "x"}).status_code == 403
    assert client.post(f"{url}/revert", data={"version_id": wrong.version_id}).status_code == 403
    assert store.get(wrong.id).content == "Revenue is booked on draft invoices."
    done = client.post(f"{url}/revert", data={"version_id": wrong.version_id, "csrf_token": token})
    assert done.status_code == 200 and "Done: reverted" in done.text
    revert = store.versions(limit=1).items[0]
    assert revert.operation == "deleted" and revert.created_by == Actor("user_actor", world.user_id)
    client.post(f"{url}/approve", data={"through_version_id": revert.id, "csrf_token": token})
    mark = current_mark(store)
    assert mark is not None and mark.version_id == revert.id
    assert "Nothing is pending" in client.get(url).text
    # A read-only key sees the store but not the review.
    reader = signed_in(world, world.reader)
    assert reader.get(url).status_code == 403
    assert ">Review<" not in reader.get(f"/ui/stores/{store.id}").text


def test_editing_a_note_makes_a_version_by_the_person(world: World) -> None:
    note = world.store.create("/a.md", "old")
    client = signed_in(world, world.user)
    form = client.get(f"/ui/stores/{world.store.id}/notes/{note.id}/edit").text
    assert '<label for="content">' in form
    sha = re.search(r'name="expected_sha256" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
    saved = client.post(
        f"/ui/stores/{world.store.id}/notes/{note.id}/edit",
        data={"content": "new", "expected_sha256": sha, "csrf_token": csrf(form)},
    )
    assert saved.status_code == 200 and world.store.get(note.id).content == "new"
    assert world.store.get(note.id, with_content=False).version_id == world.store.versions(limit=1).items[0].id
    assert world.store.versions(limit=1).items[0].created_by == Actor("user_actor", world.user_id)
    refused = client.post(
        f"/ui/stores/{world.store.id}/notes/{note.id}/edit",
        data={"content": "newer", "expected_sha256": sha, "csrf_token": csrf(form)},
        follow_redirects=False,
    )
    assert refused.status_code == 303 and world.store.get(note.id).content == "new"
    (kept,) = world.store.conflicts.of_note(note.id)  # the stale save is kept, and shown beside the winner
    assert refused.headers["location"] == f"/ui/stores/{world.store.id}/conflicts/{kept.id}"
    assert kept.created_by == Actor("user_actor", world.user_id)


def test_a_conflict_beside_its_note_with_its_diff_merge_and_resolution(world: World) -> None:
    store = world.store
    note = store.create("/plan.md", "1\n2\n3\n4\n5\n")
    store.update(note.id, content="one\n2\n3\n4\n5\n")
    with pytest.raises(PreconditionFailed) as lost:
        store.update(note.id, content="1\n2\n3\n4\n<b>five</b>\n", expected_sha256=note.content_sha256)
    cid = lost.value.details["conflict_id"]
    client = signed_in(world, world.user)
    listed = client.get(f"/ui/stores/{store.id}/notes/{note.id}").text
    assert "<h2>Conflicts</h2>" in listed and f"/ui/stores/{store.id}/conflicts/{cid}" in listed
    shown = client.get(f"/ui/stores/{store.id}/conflicts/{cid}").text
    assert "&lt;b&gt;five&lt;/b&gt;" in shown and "<b>five</b>" not in shown  # the text is escaped, never markup
    assert 'class="removed"' in shown and 'class="added"' in shown  # the diff against the winner
    assert "do not overlap" in shown and "one\n2\n3\n4\n&lt;b&gt;five&lt;/b&gt;" in shown  # the clean merge
    # Another workspace's store is the API's 404; a read-only key reads but has no forms.
    assert client.get(f"/ui/stores/{world.other_store_id}/conflicts/{cid}").status_code == 404
    assert signed_in(world, world.reader).get(f"/ui/stores/{store.id}/conflicts/{cid}").text.count("<form") == 1
    merged = client.post(
        f"/ui/stores/{store.id}/conflicts/{cid}/resolve",
        data={
            "take": "merged",
            "content": "one\n2\n3\n4\nfive\n",
            "expected_sha256": store.get(note.id).content_sha256,
            "csrf_token": csrf(shown),
        },
    )
    assert merged.status_code == 200 and "Resolved: the note took the merged" in merged.text
    assert store.get(note.id).content == "one\n2\n3\n4\nfive\n"
    assert store.conflicts.get(cid).resolved_by == Actor("user_actor", world.user_id)
