"""Conflicts over the API, shown with the official SDK: its own mount-sync client
(``anthropic.lib.tools._memories.SessionMemoryStores``, unchanged) loses an upload to a racing API edit, and
the local text is kept as a conflict of its key, readable and resolvable; access, review and the merge
extension."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anthropic
import anyio
import anyio.to_thread
import httpx2
import pytest
from anthropic.lib.tools._memories import SessionMemoryStores
from anthropic.types.beta.memory_stores import BetaManagedAgentsPreconditionParam

from gitmem.agents.review.review import Reviews
from gitmem.agents.tasks.tasks import tasks_for
from tests.apps import BASE_URL, InProcess, TestHome, _forward, in_process, make_test_home

API_TEXT = "# Plan\n- ship on Friday (edited through the API)\n- tell support\n"
LOCAL_TEXT = "# Plan\n- ship on Friday\n- tell support\n- write the release notes (edited on disk)\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, TestHome]]:
    home = make_test_home(tmp_path_factory.mktemp("conflicts-api"), fsync="never")
    with in_process(home.path) as ip:
        yield ip, home


class AsyncToApp(httpx2.AsyncBaseTransport):
    """The async SDK's requests, handed to the in-process app; ``before`` runs ahead of each one."""

    def __init__(self, ip: InProcess, before: Any) -> None:
        self.ip = ip
        self.before = before

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        self.before(request)
        status, headers, content = await anyio.to_thread.run_sync(_forward, self.ip.app_client, request)
        return httpx2.Response(status, headers=headers, content=content)


def rest(ip: InProcess, secret: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    with ip.http(secret) as http:
        return http.request(method, path, json=body)


def test_the_sdk_sync_clients_lost_upload_is_kept_and_resolvable(
    served: tuple[InProcess, TestHome], tmp_path: Path
) -> None:
    ip, home = served
    admin = ip.sdk(home.admin)
    store = admin.beta.memory_stores.create(name="plans")
    note = admin.beta.memory_stores.memories.create(
        store.id, path="/plan.md", content=LOCAL_TEXT.rsplit("- write", 1)[0]
    )
    sync_key, sync_secret = ip.gm.catalog.create_api_key(home.workspace_id, "session sync", role="read-write")
    raced: list[str] = []

    def the_api_edits_first(request: httpx2.Request) -> None:
        """Someone edits the note through the API between the sync's listing and its upload."""
        if request.method == "POST" and request.url.path.endswith(f"/memories/{note.id}") and not raced:
            raced.append(
                admin.beta.memory_stores.memories.update(note.id, memory_store_id=store.id, content=API_TEXT).id
            )

    client = anthropic.AsyncAnthropic(
        api_key=sync_secret,
        base_url=BASE_URL,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=AsyncToApp(ip, the_api_edits_first)),
    )
    mount = tmp_path / "mnt" / "plans"
    session = SimpleNamespace(
        resources=[
            SimpleNamespace(
                type="memory_store", memory_store_id=store.id, mount_path=str(mount), access="read_write", name="plans"
            )
        ]
    )
    stores = SessionMemoryStores(client, workdir=tmp_path)

    async def run() -> None:
        await stores.download(session)  # type: ignore[arg-type]
        (mount / "plan.md").write_text(LOCAL_TEXT)  # the agent edits the file on disk
        await stores.finish()  # the sync: the upload's precondition lost to the API edit

    anyio.run(run)
    assert raced
    # main has the API's text; the local text is a conflict of the sync client's key.
    assert admin.beta.memory_stores.memories.retrieve(note.id, memory_store_id=store.id).content == API_TEXT
    listed = rest(ip, home.admin, "GET", f"/v1/memory_stores/{store.id}/memories/{note.id}/conflicts?view=full")
    (conflict,) = listed.json()["data"]
    assert conflict["content"] == LOCAL_TEXT and conflict["content_sha256"] == sha(LOCAL_TEXT)
    assert conflict["created_by"] == {"type": "api_actor", "api_key_id": sync_key.id}
    assert conflict["base_sha256"] == note.content_sha256 and conflict["state"] == "open"
    seen = rest(ip, home.admin, "GET", f"/v1/memory_stores/{store.id}/conflicts/{conflict['id']}/compare").json()
    assert seen["merge"]["clean"] and "edited through the API" in seen["merge"]["text"]
    assert "+- write the release notes (edited on disk)" in seen["diff"]
    # Resolved by taking the merge: a new version, the conflict marked.
    done = rest(
        ip, home.admin, "POST", f"/v1/memory_stores/{store.id}/conflicts/{conflict['id']}/resolve", {"take": "merged"}
    ).json()
    assert done["conflict"]["state"] == "resolved" and done["conflict"]["resolution"] == "merged"
    text = admin.beta.memory_stores.memories.retrieve(note.id, memory_store_id=store.id).content
    assert text == API_TEXT + "- write the release notes (edited on disk)\n"
    versions = admin.beta.memory_stores.memory_versions.list(store.id, memory_id=note.id)
    assert next(v.id for v in versions) == done["memory_version_id"]
    anyio.run(client.close)


def test_access_review_and_the_merge_extension(served: tuple[InProcess, TestHome]) -> None:
    ip, home = served
    admin = ip.sdk(home.admin)
    store = admin.beta.memory_stores.create(name="access")
    note = admin.beta.memory_stores.memories.create(store.id, path="/a.md", content="1\n2\n3\n4\n5\n")
    admin.beta.memory_stores.memories.update(note.id, memory_store_id=store.id, content="one\n2\n3\n4\n5\n")
    stale: BetaManagedAgentsPreconditionParam = {"type": "content_sha256", "content_sha256": note.content_sha256}
    with pytest.raises(anthropic.APIStatusError) as refused:  # the SDK sees the 409 it knows
        admin.beta.memory_stores.memories.update(
            note.id, memory_store_id=store.id, content="1\n2\n3\n4\nfive\n", precondition=stale
        )
    assert refused.value.status_code == 409
    cid = refused.value.body["error"]["conflict_id"]  # type: ignore[index]
    base = f"/v1/memory_stores/{store.id}"
    # Another workspace: every conflict route is 404; a read-only key reads but does not resolve.
    for method, path in [
        ("GET", f"{base}/conflicts"),
        ("GET", f"{base}/memories/{note.id}/conflicts"),
        ("GET", f"{base}/conflicts/{cid}"),
        ("GET", f"{base}/conflicts/{cid}/compare"),
        ("POST", f"{base}/conflicts/{cid}/resolve"),
        ("POST", f"{base}/conflicts/{cid}/redact"),
    ]:
        answer = rest(ip, home.other, method, path, {"take": "winner"} if method == "POST" else None)
        assert answer.status_code == 404, (path, answer.text)
    assert [c["id"] for c in rest(ip, home.reader, "GET", f"{base}/conflicts").json()["data"]] == [cid]
    assert rest(ip, home.reader, "POST", f"{base}/conflicts/{cid}/resolve", {"take": "winner"}).status_code == 403
    assert rest(ip, home.admin, "GET", f"{base}/memories/mem_nope/conflicts").status_code == 404
    assert rest(ip, home.admin, "GET", f"{base}/conflicts/cnf_nope").status_code == 404
    bad = rest(ip, home.admin, "POST", f"{base}/conflicts/{cid}/resolve", {"take": "both"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    # A task of a store under read_approved_only sees no conflicts; its own lost edit is still kept.
    Reviews.of(ip.gm).configure(home.workspace_id, store.id, enabled=True, read_approved_only=True)
    tasks = tasks_for(ip.gm)
    worker = tasks.create_worker(home.workspace_id, "reviewed")
    _, token = tasks.create_task(
        home.workspace_id, worker.id, [{"type": "memory_store", "memory_store_id": store.id, "access": "read_write"}]
    )
    assert rest(ip, token, "GET", f"{base}/conflicts").json()["data"] == []
    assert rest(ip, token, "GET", f"{base}/conflicts/{cid}").status_code == 404
    assert rest(ip, token, "POST", f"{base}/conflicts/{cid}/resolve", {"take": "winner"}).status_code == 404
    Reviews.of(ip.gm).configure(home.workspace_id, store.id, enabled=False)
    # The merge extension: asked for, a stale update that overlaps nothing is merged, not refused.
    merged = admin.beta.memory_stores.memories.with_raw_response.update(
        note.id,
        memory_store_id=store.id,
        content="1\n2\nthree\n4\n5\n",
        precondition=stale,
        extra_headers={"Gitmem-Merge": "three-way"},
    )
    assert merged.headers["gitmem-merged"] == "three-way"
    assert merged.parse().content_sha256 == sha("one\n2\nthree\n4\n5\n")
    # Redacted: its text gone, the record kept.
    redacted = rest(ip, home.admin, "POST", f"{base}/conflicts/{cid}/redact").json()
    assert redacted["redacted_at"] and redacted["path"] is None and redacted["content"] is None
    again = rest(ip, home.admin, "GET", f"{base}/conflicts/{cid}").json()
    assert again["content"] is None and again["created_by"]["api_key_id"] == home.admin_key_id
