"""The HTTP layer seen raw (httpx against the app, served in this process): the error envelope, headers,
auth, parsing, rate limits."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.ratelimit import TokenBucketLimiter
from gitmem.api.settings import Settings
from gitmem.config.settings import GitmemSettings, load_settings
from gitmem.engine.gitmem import Gitmem
from tests.apps import InProcess, Response, TestHome, in_process, make_test_home, ui_sign_in

REQUEST_ID = re.compile(r"^req_[0-9A-Z]{26}$")


@dataclass(frozen=True)
class Live:
    server: InProcess
    admin: str
    reader: str
    other: str

    def http(self, secret: str | None = None) -> httpx.Client:
        return self.server.http(secret or self.admin)

    def anonymous(self, headers: dict[str, str] | None = None) -> httpx.Client:
        client = self.server.http()
        client.headers.update(headers or {})
        return client


@pytest.fixture(scope="module")
def live(test_home: Callable[..., TestHome]) -> Iterator[Live]:
    home = test_home("gitmem-home")
    with in_process(home.path) as server:
        yield Live(server, home.admin, home.reader, home.other)


@pytest.fixture
def http(live: Live) -> Iterator[httpx.Client]:
    with live.http() as client:
        yield client


@pytest.fixture
def store_id(http: httpx.Client) -> str:
    response = http.post("/v1/memory_stores", json={"name": "raw"})
    assert response.status_code == 200, response.text
    store: str = response.json()["id"]
    return store


def assert_error(response: Response, status: int, error_type: str) -> dict[str, Any]:
    """The envelope, the request id in body and header, and x-should-retry."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert REQUEST_ID.match(body["request_id"])
    assert response.headers["request-id"] == body["request_id"]
    return body


# -- envelope and headers --------------------------------------------------------------------------


def test_request_id_on_every_response(live: Live, http: httpx.Client) -> None:
    ok = http.get("/v1/memory_stores")
    assert ok.status_code == 200
    assert REQUEST_ID.match(ok.headers["request-id"])
    with live.anonymous() as anonymous:
        assert REQUEST_ID.match(anonymous.get("/healthz").headers["request-id"])
    ids = {http.get("/v1/memory_stores").headers["request-id"] for _ in range(3)}
    assert len(ids) == 3


def test_list_shape(http: httpx.Client, store_id: str) -> None:
    body = http.get(f"/v1/memory_stores/{store_id}/memories").json()
    assert body == {"data": [], "next_page": None}


def test_timestamps_are_rfc3339_utc_with_z(http: httpx.Client, store_id: str) -> None:
    store = http.get(f"/v1/memory_stores/{store_id}").json()
    for field in ("created_at", "updated_at"):
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", store[field]), store[field]
    assert store["archived_at"] is None
    assert store["description"] == ""


def test_sdk_extras_are_accepted(http: httpx.Client) -> None:
    response = http.get(
        "/v1/memory_stores?beta=true",
        headers={"anthropic-beta": "agent-memory-2026-07-22", "anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 200


def test_unknown_route_is_404_in_envelope(live: Live, http: httpx.Client) -> None:
    body = assert_error(http.get("/v1/no_such_thing"), 404, "not_found_error")
    assert "/v1/no_such_thing" in body["error"]["message"]
    with live.anonymous() as anonymous:
        assert_error(anonymous.get("/nowhere"), 404, "not_found_error")


def test_wrong_method_is_405_in_envelope(http: httpx.Client, store_id: str) -> None:
    response = http.put(f"/v1/memory_stores/{store_id}", json={"name": "x"})
    assert_error(response, 405, "invalid_request_error")
    assert response.headers["x-should-retry"] == "false"
    assert response.headers["allow"]
    assert_error(http.patch(f"/v1/memory_stores/{store_id}", json={"name": "x"}), 405, "invalid_request_error")


def test_missing_object_is_404(http: httpx.Client, store_id: str) -> None:
    response = http.get(f"/v1/memory_stores/{store_id}/memories/mem_01NOPE0000000000000000000")
    assert_error(response, 404, "not_found_error")
    assert response.headers["x-should-retry"] == "false"
    assert_error(http.get("/v1/memory_stores/memstore_01NOPE000000000000000000"), 404, "not_found_error")
    assert_error(http.get("/v1/memory_stores/not-an-id"), 404, "not_found_error")


# -- auth ------------------------------------------------------------------------------------------


def test_missing_key_is_401(live: Live) -> None:
    with live.anonymous() as anonymous:
        response = anonymous.get("/v1/memory_stores")
    assert_error(response, 401, "authentication_error")
    assert response.headers["x-should-retry"] == "false"


def test_wrong_key_is_401(live: Live) -> None:
    for headers in (
        {"x-api-key": "gm_key_wrong"},
        {"authorization": "Bearer gm_key_wrong"},
        {"authorization": f"Basic {live.admin}"},
        {"x-api-key": ""},
    ):
        with live.anonymous(headers) as client:
            response = client.get("/v1/memory_stores")
        body = assert_error(response, 401, "authentication_error")
        assert live.admin not in response.text
        assert "gm_key_wrong" not in body["error"]["message"]


def test_bearer_token_works(live: Live) -> None:
    with live.anonymous({"authorization": f"Bearer {live.admin}"}) as bearer:
        response = bearer.get("/v1/memory_stores")
    assert response.status_code == 200, response.text


def test_read_only_key_may_only_read(live: Live, store_id: str) -> None:
    with live.http(live.reader) as reader:
        assert reader.get(f"/v1/memory_stores/{store_id}").status_code == 200
        assert_error(reader.post("/v1/memory_stores", json={"name": "x"}), 403, "permission_error")
        assert_error(reader.delete(f"/v1/memory_stores/{store_id}"), 403, "permission_error")


def test_workspace_header_must_match_the_key(http: httpx.Client) -> None:
    response = http.get("/v1/memory_stores", headers={"anthropic-workspace-id": "wrkspc_01SOMEONEELSE0000000000"})
    assert_error(response, 403, "permission_error")


def test_other_workspace_store_is_404(live: Live, store_id: str) -> None:
    with live.http(live.other) as outsider:
        assert_error(outsider.get(f"/v1/memory_stores/{store_id}"), 404, "not_found_error")
        assert_error(outsider.get(f"/v1/memory_stores/{store_id}/memory_versions"), 404, "not_found_error")


# -- parsing ---------------------------------------------------------------------------------------


def test_malformed_json_is_400(http: httpx.Client) -> None:
    response = http.post("/v1/memory_stores", content=b'{"name": ', headers={"content-type": "application/json"})
    body = assert_error(response, 400, "invalid_request_error")
    assert "JSON" in body["error"]["message"]
    assert response.headers["x-should-retry"] == "false"


@pytest.mark.parametrize(
    "payload",
    [
        {"name": 5},
        {"name": ["a"]},
        {},
        [],
        "name",
        {"name": "ok", "metadata": {"k": 1}},
        {"name": "ok", "unexpected": True},
    ],
)
def test_wrong_types_are_400_not_422(http: httpx.Client, payload: object) -> None:
    response = http.post("/v1/memory_stores", json=payload)
    assert_error(response, 400, "invalid_request_error")
    assert "detail" not in response.json()


def test_bad_query_parameters_are_400(http: httpx.Client, store_id: str) -> None:
    for query in ("limit=0", "limit=abc", "view=everything", "depth=2", "limit=1001"):
        assert_error(http.get(f"/v1/memory_stores/{store_id}/memories?{query}"), 400, "invalid_request_error")
    assert_error(http.get("/v1/memory_stores?limit=101"), 400, "invalid_request_error")
    assert_error(http.get("/v1/memory_stores?created_at[gte]=yesterday"), 400, "invalid_request_error")
    assert_error(
        http.delete(f"/v1/memory_stores/{store_id}/memories/mem_x?expected_content_sha256=nothex"),
        400,
        "invalid_request_error",
    )


def test_bad_precondition_is_400(http: httpx.Client, store_id: str) -> None:
    note = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/p.md", "content": "p"}).json()
    url = f"/v1/memory_stores/{store_id}/memories/{note['id']}"
    for precondition in (
        {"type": "content_sha256"},
        {"type": "etag", "content_sha256": "0" * 64},
        {"type": "content_sha256", "content_sha256": "XYZ"},
    ):
        assert_error(http.post(url, json={"content": "q", "precondition": precondition}), 400, "invalid_request_error")


def test_oversized_body_is_413_before_parsing(http: httpx.Client) -> None:
    big = b'{"name": "' + b"x" * (2 << 20) + b'"}'
    response = http.post("/v1/memory_stores", content=big, headers={"content-type": "application/json"})
    assert_error(response, 413, "request_too_large")
    assert response.headers["x-should-retry"] == "false"


def test_oversized_chunked_body_is_413(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"name": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'"}'

    response = http.post("/v1/memory_stores", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "request_too_large")


def test_git_paths_are_exempt_from_the_body_limit(http: httpx.Client, store_id: str) -> None:
    # A push carries a pack of any size: the limit must not answer for Git's smart HTTP paths.
    big = b"0" * (2 << 20)
    response = http.post(f"/v1/memory_stores/{store_id}.git/git-receive-pack", content=big)
    assert response.status_code != 413


def test_note_over_100_kib_is_refused(http: httpx.Client, store_id: str) -> None:
    response = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/big.md", "content": "x" * 102_401})
    assert_error(response, 413, "request_too_large")
    ok = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/max.md", "content": "x" * 102_400})
    assert ok.status_code == 200, ok.text


def test_null_content_creates_an_empty_note(http: httpx.Client, store_id: str) -> None:
    response = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/null.md", "content": None})
    assert response.status_code == 200, response.text
    assert response.json()["content_size_bytes"] == 0


# -- conflicts, preconditions, ETag ----------------------------------------------------------------


def test_path_conflict_details(http: httpx.Client, store_id: str) -> None:
    first = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/dir/a.md", "content": "a"}).json()
    response = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/dir", "content": "b"})
    body = assert_error(response, 409, "memory_path_conflict_error")
    assert body["error"]["conflicting_memory_id"] == first["id"]
    assert body["error"]["conflicting_path"] == "/dir/a.md"
    assert response.headers["x-should-retry"] == "false"


def test_etag_and_if_match(http: httpx.Client, store_id: str) -> None:
    created = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/e.md", "content": "one"})
    etag = created.headers["etag"]
    assert re.match(r'^"[0-9a-f]{40}([0-9a-f]{24})?"$', etag)
    url = f"/v1/memory_stores/{store_id}/memories/{created.json()['id']}"
    assert http.get(url).headers["etag"] == etag

    updated = http.post(url, json={"content": "two"}, headers={"if-match": etag})
    assert updated.status_code == 200, updated.text
    assert updated.headers["etag"] != etag

    stale = http.post(url, json={"content": "three"}, headers={"if-match": etag})
    assert_error(stale, 409, "memory_precondition_failed_error")
    assert stale.headers["x-should-retry"] == "false"
    assert_error(http.delete(url, headers={"if-match": etag}), 409, "memory_precondition_failed_error")
    assert_error(http.post(url, json={"content": "x"}, headers={"if-match": "not-a-tag"}), 400, "invalid_request_error")

    view_full = http.post(f"{url}?view=full", json={"content": "four"}, headers={"if-match": "*"})
    assert view_full.json()["content"] == "four"
    gone = http.delete(url, headers={"if-match": view_full.headers["etag"]})
    assert gone.json() == {"id": created.json()["id"], "type": "memory_deleted"}


def test_versions_filters_conflict(http: httpx.Client, store_id: str) -> None:
    response = http.get(f"/v1/memory_stores/{store_id}/memory_versions?session_id=task_a&task_id=task_b")
    assert_error(response, 400, "invalid_request_error")


def test_openapi_has_no_422(http: httpx.Client) -> None:
    schema = http.get("/openapi.json").json()
    text = json.dumps(schema)
    assert '"422"' not in text and "HTTPValidationError" not in text
    assert "/v1/memory_stores/{memory_store_id}/memories/{memory_id}" in schema["paths"]
    assert "x-api-key" in text


# -- rate limiting ---------------------------------------------------------------------------------


def test_rate_limit_is_429_with_retry_after(tmp_path: Path) -> None:
    home = make_test_home(tmp_path)
    settings = Settings.defaults(
        rate_limit_per_second=0.01,
        rate_limit_burst=3,  # no refill during the test
        prune_interval_seconds=0,
        dream_runner=False,
        webhook_delivery=False,
    )
    with in_process(home.path, settings) as server, server.http(home.admin) as admin:
        statuses = [admin.get("/v1/memory_stores") for _ in range(4)]
        assert [r.status_code for r in statuses[:3]] == [200, 200, 200]
        limited = statuses[3]
        assert_error(limited, 429, "rate_limit_error")
        assert limited.headers["x-should-retry"] == "true"
        assert int(limited.headers["retry-after"]) >= 1
        # Buckets are per key: another key is not slowed down.
        with server.http(home.other) as other:
            assert other.get("/v1/memory_stores").status_code == 200


def test_git_over_http_spends_the_keys_one_rate_limit(tmp_path: Path) -> None:
    """A key's budget is one bucket whichever surface spends it: Git over HTTP takes from it as REST does,
    and is refused with 429 and Retry-After once it is empty."""
    home = make_test_home(tmp_path)
    settings = Settings.defaults(
        rate_limit_per_second=0.01, rate_limit_burst=3, prune_interval_seconds=0, dream_runner=False
    )
    with in_process(home.path, settings) as server, server.http(home.admin) as admin:
        store_id = admin.post("/v1/memory_stores", json={"name": "limited"}).json()["id"]  # 1 of 3
        refs = f"/v1/memory_stores/{store_id}.git/info/refs?service=git-upload-pack"
        assert admin.get(refs, auth=("k", home.admin)).status_code == 200  # 2
        assert admin.get("/v1/memory_stores").status_code == 200  # 3
        limited = admin.get(refs, auth=("k", home.admin))
        assert limited.status_code == 429 and "rate limit exceeded" in limited.text, limited.text
        assert int(limited.headers["retry-after"]) >= 1
        assert_error(admin.get("/v1/memory_stores"), 429, "rate_limit_error")  # the same bucket, spent
        # Another key is not slowed down (another workspace's: its store is not found, not limited).
        assert admin.get(refs, auth=("k", home.other)).status_code == 404


def test_a_flood_of_wrong_keys_from_one_address_is_refused_there_alone(tmp_path: Path) -> None:
    """Wrong keys spend their address's budget on every surface (REST, MCP, Git, the web view's sign-in);
    past it that address is 429 with Retry-After, even for a right key (so a flood guesses nothing more),
    while a right key from another address is served."""
    home = make_test_home(tmp_path, fsync="never")
    settings = Settings.defaults(
        wrong_secret_burst=4,
        wrong_secret_per_second=0.001,  # no refill during the test
        prune_interval_seconds=0,
        dream_runner=False,
        webhook_delivery=False,
    )
    app = create_app(Gitmem.open(home.path, fsync="never"), settings)
    with TestClient(app, client=("203.0.113.7", 40000)) as flood, TestClient(app, client=("198.51.100.2", 1)) as other:
        assert flood.get("/v1/memory_stores").status_code == 401  # a missing key spends nothing
        assert flood.get("/v1/memory_stores/x.git/info/refs").status_code == 401  # nor Git's first, bare ask
        wrong = {"x-api-key": "gm_key_wrong"}
        assert flood.get("/v1/memory_stores", headers=wrong).status_code == 401
        assert flood.post("/mcp", headers=wrong, json={}).status_code == 401
        assert flood.get("/v1/memory_stores/x.git/info/refs", auth=("k", "gm_key_wrong")).status_code == 401
        assert ui_sign_in(flood, "gm_key_wrong").status_code == 401
        for refused in (
            flood.get("/v1/memory_stores", headers=wrong),
            flood.get("/v1/memory_stores", headers={"x-api-key": home.admin}),  # right, but from the flood
            flood.post("/mcp", headers={"x-api-key": home.admin}, json={}),
            flood.get("/v1/memory_stores/x.git/info/refs", auth=("k", home.admin)),
        ):
            assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1, refused.text
        assert_error(flood.get("/v1/memory_stores", headers=wrong), 429, "rate_limit_error")
        signing_in = ui_sign_in(flood, home.user)
        assert signing_in.status_code == 429 and "retry-after" in signing_in.headers
        assert other.get("/v1/memory_stores", headers={"x-api-key": home.admin}).status_code == 200
        assert ui_sign_in(other, home.user).status_code == 303


def test_token_bucket_refills() -> None:
    now = [0.0]
    limiter = TokenBucketLimiter(rate=2.0, burst=2, clock=lambda: now[0])
    assert limiter.acquire("k") == 0 and limiter.acquire("k") == 0
    assert limiter.acquire("k") == pytest.approx(0.5)
    now[0] += 0.5
    assert limiter.acquire("k") == 0
    assert TokenBucketLimiter(rate=0, burst=1).acquire("k") == 0  # disabled


# -- unhandled errors ------------------------------------------------------------------------------


def test_unhandled_exception_is_500_without_details(tmp_path: Path) -> None:
    admin = make_test_home(tmp_path).admin
    app = create_app(Gitmem.open(tmp_path), Settings.defaults())
    boom = APIRouter()

    @boom.get("/boom")
    def explode() -> None:
        raise RuntimeError(f"secret {admin} leaked in a traceback")

    app.include_router(boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert admin not in response.text and "Traceback" not in response.text and "RuntimeError" not in response.text
    assert response.headers["request-id"] == body["request_id"]


def test_app_settings_default_to_the_settings_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # One default a setting: the app's come from the table, and a given mapping is read alone (the
    # process environment fills nothing in).
    monkeypatch.setenv("GITMEM_RATE_LIMIT_RPS", "5")
    fields = GitmemSettings.model_fields
    defaults = Settings.defaults()
    assert defaults.rate_limit_per_second == fields["RATE_LIMIT_RPS"].default == 200.0
    assert defaults.rate_limit_burst == fields["RATE_LIMIT_BURST"].default
    assert defaults.max_body_bytes == fields["MAX_BODY_BYTES"].default
    assert defaults.prune_interval_seconds == fields["PRUNE_INTERVAL"].default
    assert load_settings({}).RATE_LIMIT_RPS == 200.0
    assert Settings.from_env().rate_limit_per_second == 5.0
    assert Settings.defaults(dream_runner=False).dream_runner is False
