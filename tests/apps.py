"""The real app serving a home from the test's own process (starlette's TestClient, no sockets), with
httpx and official SDK clients on it; and the home most API tests share (:func:`make_test_home`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2

from gitmem.api.settings import Settings
from gitmem.durable import FsyncMode
from gitmem.engine.gitmem import Gitmem

if TYPE_CHECKING:  # imported where used
    import anthropic
    from fastapi.testclient import TestClient


BASE_URL = "http://gitmem.test"
# starlette's TestClient speaks httpx2 where it is installed (the SDK's own fork), our own clients httpx
Response = httpx.Response | httpx2.Response


@dataclass(frozen=True)
class TestHome:
    """A data home as most API tests want it: workspace ``alpha`` with an admin key, a read-only key and
    a user; workspace ``beta`` with an admin key of its own (the outsider)."""

    __test__ = False  # not a test class, whatever its name

    path: Path
    workspace_id: str
    admin_key_id: str
    admin: str
    reader: str
    user_id: str
    user: str
    other_workspace_id: str
    other: str


def make_test_home(
    path: Path, *, workspace: str = "alpha", other_workspace: str = "beta", fsync: FsyncMode = "always"
) -> TestHome:
    gm = Gitmem.open(path, fsync=fsync)
    ws = gm.catalog.create_workspace(workspace)
    admin_key, admin = gm.catalog.create_api_key(ws.id, "admin", role="admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    user, user_token = gm.catalog.create_user(ws.id, "sam")
    other = gm.catalog.create_workspace(other_workspace)
    _, other_secret = gm.catalog.create_api_key(other.id, "admin")
    return TestHome(path, ws.id, admin_key.id, admin, reader, user.id, user_token, other.id, other_secret)


def _forward(
    app_client: TestClient, request: httpx.Request | httpx2.Request
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request of either httpx, through the app client; the answer as (status, headers, body)."""
    body = request.read()
    # A body the caller sent without a length goes on without one (the app must count it itself).
    chunked = "content-length" not in request.headers and "transfer-encoding" in request.headers
    content: bytes | Iterator[bytes] = iter([body]) if chunked else body
    answer = app_client.request(
        request.method,
        str(request.url),
        headers=list(request.headers.multi_items()),
        content=content,
        follow_redirects=False,
    )
    kept = [
        (k, v)
        for k, v in answer.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return answer.status_code, kept, answer.content


class HttpxToApp(httpx.BaseTransport):
    """An httpx client's requests, handed to the in-process app."""

    def __init__(self, app_client: TestClient) -> None:
        self.app_client = app_client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        status, headers, content = _forward(self.app_client, request)
        return httpx.Response(status, headers=headers, content=content)


class Httpx2ToApp(httpx2.BaseTransport):
    """The official SDK's requests (it speaks httpx2), handed to the in-process app."""

    def __init__(self, app_client: TestClient) -> None:
        self.app_client = app_client

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        status, headers, content = _forward(self.app_client, request)
        return httpx2.Response(status, headers=headers, content=content)


@dataclass(frozen=True)
class InProcess:
    """The real app serving a home from this process; clients on it speak to no socket."""

    gm: Gitmem
    app_client: TestClient  # the one client whose context runs the app's lifespan
    base_url: str = BASE_URL

    def http(self, secret: str | None = None, *, bearer: bool = False) -> httpx.Client:
        """A raw httpx client; with ``secret`` as ``x-api-key`` (or a Bearer token), else no credentials."""
        headers = {}
        if secret is not None:
            headers = {"authorization": f"Bearer {secret}"} if bearer else {"x-api-key": secret}
        return httpx.Client(base_url=self.base_url, headers=headers, transport=HttpxToApp(self.app_client))

    def sdk(self, secret: str, **kwargs: Any) -> anthropic.Anthropic:
        """The official SDK. No retries: a retry would hide a wrong status or a missing x-should-retry."""
        import anthropic

        return anthropic.Anthropic(
            api_key=secret,
            base_url=self.base_url,
            max_retries=0,
            http_client=httpx2.Client(transport=Httpx2ToApp(self.app_client)),
            **kwargs,
        )


QUIET = Settings.defaults(rate_limit_per_second=0, prune_interval_seconds=0, dream_runner=False, webhook_delivery=False)


@contextlib.contextmanager
def in_process(home: Path | Gitmem, settings: Settings = QUIET) -> Iterator[InProcess]:
    """Serve ``home`` from this process until the block ends (the app's lifespan runs around it).
    ``QUIET`` (the default) runs no background job and no rate limit; pass ``Settings.defaults()`` for a server's."""
    from fastapi.testclient import TestClient

    from gitmem.api.app import create_app

    gm = home if isinstance(home, Gitmem) else Gitmem.open(home)
    with TestClient(create_app(gm, settings), base_url=BASE_URL) as app_client:
        yield InProcess(gm, app_client)


def ui_sign_in(client: httpx.Client | TestClient, secret: str, **headers: str) -> Response:
    """Sign ``client`` in to the web view as a browser does: the form first (its token and its
    pre-session cookie), then the post (with ``headers``, e.g. an ``origin``)."""
    import re

    form = client.get("/ui/sign-in")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert token is not None, "the sign-in form has no token"
    data = {"secret": secret, "csrf_token": token[1]}
    return client.post("/ui/sign-in", data=data, headers=headers, follow_redirects=False)
