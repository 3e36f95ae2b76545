"""The web view in a real browser: Debian's chromium driven by Playwright against a real ``gitmem serve``.

Signs in, opens a store, a folder, a note, its history and a diff, and reviews a change, checking what a
person sees and that the pages are usable without a mouse (one h1, every field labelled, Tab reaches
the links). Screenshots of each page go to ``tests/artifacts/`` (not committed). Skipped, saying why,
where chromium or the playwright package is missing (``make browser`` installs chromium).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from gitmem.agents.review.review import Reviews
from gitmem.engine.gitmem import Gitmem
from gitmem.model import Actor
from tests import REPO_ROOT
from tests.server import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

pytestmark = pytest.mark.slow  # a real server and a real browser

CHROMIUM = Path(os.environ.get("GITMEM_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
if not CHROMIUM.exists():
    pytest.skip(f"no chromium at {CHROMIUM}: run `make browser` (as root) to install it", allow_module_level=True)

NOTE = """# Sam

Sam prefers **terraform plans** against staging first.

<script>document.title = "owned"</script>

![tracker](https://evil.example/pixel.png)
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("browser") / "home"
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("default")
    user, secret = gm.catalog.create_user(ws.id, "dana")
    info = gm.create_store(ws.id, "team-notes", description="What the team learned")
    store = gm.store(ws.id, info.id)
    note = store.create("/people/sam.md", NOTE, actor=Actor("user_actor", user.id))
    store.create("/projects/acme.md", "# Acme\n- single-tenant\n")
    Reviews.of(gm).configure(ws.id, info.id, enabled=True, actor=Actor("user_actor", user.id))
    changed = store.update(
        note.id, NOTE.replace("staging first", "prod on Fridays"), actor=Actor("api_actor", "apikey_agent")
    )
    port = free_port()
    env = {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_FSYNC": "never",
        "GITMEM_PRUNE_INTERVAL": "0",
        "GITMEM_DREAM_RUNNER": "off",
        "GITMEM_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitmem", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "gitmem serve did not start"
            time.sleep(0.1)
        yield {"base": base, "secret": secret, "store": info.id, "note": note.id, "version": changed.version_id}
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture(scope="module")
def browser(served: dict[str, str]) -> Iterator[Browser]:  # noqa: ARG001  the server runs first (a fixture takes no usefixtures mark)
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def check_accessible(page: Page, name: str) -> None:
    """One h1; every visible field has a label; Tab reaches every control; a screenshot."""
    assert page.locator("h1").count() == 1, f"{name}: one h1"
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input, textarea, select')]
        .filter(e => e.type !== 'hidden')
        .filter(e => !(e.id && document.querySelector(`label[for="${e.id}"]`)) && !e.getAttribute('aria-label'))
        .map(e => e.outerHTML)""")
    assert unlabelled == [], f"{name}: fields without a label: {unlabelled}"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    # Every link, button and field can be reached with Tab alone (none is skipped or trapped).
    focusable = page.evaluate("""() => [...document.querySelectorAll('a[href], button, input, textarea')]
        .filter(e => e.type !== 'hidden').length""")
    reached = set()
    for _ in range(focusable + 2):
        page.keyboard.press("Tab")
        reached.add(
            page.evaluate("""() => { const e = document.activeElement;
            return [...document.querySelectorAll('a[href], button, input, textarea')]
                .filter(c => c.type !== 'hidden').indexOf(e); }""")
        )
    assert set(range(focusable)) <= reached, f"{name}: Tab reached {len(reached - {-1})} of {focusable} controls"


def test_a_person_reads_a_store_a_note_its_history_and_a_diff(browser: Browser, served: dict[str, str]) -> None:
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))

    page.goto(f"{served['base']}/ui/")
    assert page.url.endswith("/ui/sign-in")
    check_accessible(page, "01-sign-in")
    page.get_by_label("Key or user token").fill(served["secret"])
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/")
    assert served["secret"] not in page.url
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies["gitmem_session"]["httpOnly"] and cookies["gitmem_session"]["sameSite"] == "Strict"
    assert page.get_by_role("heading", level=1).inner_text() == "Memory stores"
    assert "team-notes" in page.get_by_role("table").inner_text()
    check_accessible(page, "02-stores")

    page.get_by_role("link", name="team-notes").click()
    assert page.get_by_role("heading", level=1).inner_text() == "team-notes"
    assert "under review" in page.content().lower()
    check_accessible(page, "03-store")
    page.get_by_role("link", name="people/", exact=True).click()
    page.get_by_role("link", name="sam.md").click()
    assert page.get_by_role("heading", level=1).inner_text() == "/people/sam.md"
    article = page.locator("article")
    assert "Sam prefers terraform plans against prod on Fridays." in article.inner_text()
    assert article.locator("strong").inner_text() == "terraform plans"
    assert article.locator("script").count() == 0 and article.locator("img").count() == 0
    assert "image not shown: tracker" in article.inner_text()
    assert page.title() != "owned" and dialogs == []
    history = page.get_by_role("table").inner_text()
    assert "modified" in history and "created" in history and "dana (user)" in history
    check_accessible(page, "04-note")

    page.get_by_role("link", name=f"Changes in version {served['version']}").click()
    assert page.get_by_role("heading", level=1).inner_text() == "Changes in /people/sam.md"
    removed = page.locator("tr.removed").inner_text()
    added = page.locator("tr.added").inner_text()
    assert "staging first" in removed and "prod on Fridays" in added
    check_accessible(page, "05-diff-unified")
    page.get_by_role("link", name="Side by side").click()
    row = page.locator("tr.changed").inner_text()
    assert "staging first" in row and "prod on Fridays" in row
    check_accessible(page, "06-diff-split")

    page.get_by_role("link", name="Activity").click()
    assert page.get_by_role("heading", level=1).inner_text() == "Recent activity in team-notes"
    check_accessible(page, "07-activity")
    assert all(url.startswith(served["base"]) for url in requests), "nothing is fetched from elsewhere"
    context.close()


def test_a_steward_reviews_a_change_in_the_browser(browser: Browser, served: dict[str, str]) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{served['base']}/ui/sign-in")
    page.get_by_label("Key or user token").fill(served["secret"])
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{served['base']}/ui/stores/{served['store']}/review")
    assert "1 version pending" in page.locator("main").inner_text()
    assert "by apikey_agent (key)" in page.locator("main").inner_text()
    check_accessible(page, "08-review")
    page.get_by_role("button", name="Revert this change").click()
    assert "Done: reverted." in page.locator("main").inner_text()
    check_accessible(page, "09-review-after-revert")
    page.goto(f"{served['base']}/ui/stores/{served['store']}/notes/{served['note']}")
    assert "against staging first" in page.locator("article").inner_text()
    page.get_by_role("button", name="Sign out").click()
    assert page.url.endswith("/ui/sign-in")
    context.close()
