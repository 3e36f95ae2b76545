"""Running it as a service, in process (issue 32): ``/readyz`` against a real PostgreSQL that stops and a
real small disk that fills, a draining server's 503s, ``/metrics``' token, and registering one's Git
addresses through the API and the web view."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

import pytest

from gitmem.engine.gitmem import Gitmem
from tests import postgres
from tests.apps import QUIET, TestHome, in_process, make_test_home, ui_sign_in

MIB = 1 << 20
TOKEN = "metrics-token-0123456789"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> TestHome:
    return make_test_home(tmp_path_factory.mktemp("service") / "home", fsync="never")


def test_ready_until_postgresql_stops_and_again_once_it_is_back(tmp_path: Path, pg_cluster: postgres.Cluster) -> None:
    gm = Gitmem.open(tmp_path / "home", database=pg_cluster.fresh_database())
    with in_process(gm, dataclasses.replace(QUIET, ready_min_free_bytes=0)) as app:
        client = app.http()
        ready = client.get("/readyz").json()
        assert (ready["status"], ready["failing"]) == ("ready", {})
        # The process's open stores: none yet, within a capacity sized from its open-file limit.
        assert ready["stores"]["open"] == 0 and ready["stores"]["capacity"] >= 8
        assert ready["stores"]["free_descriptors"] is None or ready["stores"]["free_descriptors"] > 0
        pg_cluster.pause()
        try:
            began = time.monotonic()
            answer = client.get("/readyz")
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            assert list(answer.json()["failing"]) == ["catalog"]
            assert time.monotonic() - began < 5  # a probe never waits for the pool's 15 s
            assert client.get("/healthz").status_code == 200  # alive all the same
        finally:
            pg_cluster.resume()
        deadline = time.monotonic() + 20
        while client.get("/readyz").status_code != 200:  # the pool reconnects by itself
            assert time.monotonic() < deadline, "not ready again after PostgreSQL came back"
            time.sleep(0.2)
    gm.close()


def test_unready_while_the_disk_is_nearly_full(small_disk: Path) -> None:
    home = make_test_home(small_disk / "home", fsync="never")
    with in_process(home.path, dataclasses.replace(QUIET, ready_min_free_bytes=4 * MIB)) as app:
        client = app.http()
        assert client.get("/readyz").status_code == 200
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * (os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize - 2 * MIB))
        answer = client.get("/readyz").json()
        assert answer["status"] == "unready" and list(answer["failing"]) == ["disk"]
        assert str(small_disk) not in str(answer)  # no path leaves the server
        filler.unlink()
        assert client.get("/readyz").status_code == 200


def test_a_draining_server_answers_503_to_all_but_the_probes(home: TestHome) -> None:
    with in_process(home.path) as app:
        client = app.http(home.admin)
        assert client.get("/v1/memory_stores").status_code == 200
        app.app_client.app.state.drain.begin()  # type: ignore[attr-defined]
        for method, path in (("get", "/v1/memory_stores"), ("post", "/v1/memory_stores"), ("get", "/ui/")):
            answer = client.request(method, path, json={"name": "never"} if method == "post" else None)
            assert answer.status_code == 503, path
            assert answer.headers["retry-after"] == "1" and answer.headers["x-should-retry"] == "true"
            assert answer.json()["error"]["type"] == "api_error" and answer.json()["request_id"]
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").json()["failing"]["draining"] == "this server is stopping"
    assert all(info.name != "never" for info in Gitmem.open(home.path).list_stores(home.workspace_id).items)


def test_metrics_are_off_by_default_and_need_their_token(home: TestHome) -> None:
    with in_process(home.path) as app:
        assert app.http(home.admin).get("/metrics").status_code == 404
    with in_process(home.path, dataclasses.replace(QUIET, metrics_token=TOKEN)) as app:
        assert app.http(home.admin).get("/metrics").status_code == 401  # an admin key is not the token
        answer = app.http(TOKEN, bearer=True).get("/metrics")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
        assert "gitmem_home_disk_free_bytes" in answer.text
        assert home.workspace_id not in answer.text and str(home.path) not in answer.text


def test_a_user_registers_their_addresses_and_nobody_else_can_claim_them(home: TestHome) -> None:
    gm = Gitmem.open(home.path)
    _, kim_token = gm.catalog.create_user(home.workspace_id, "kim")
    with in_process(home.path) as app:
        sam, kim = app.http(home.user, bearer=True), app.http(kim_token, bearer=True)
        assert sam.post("/v1/users/me/emails", json={"email": "Sam@Example.com"}).json()["email"] == "sam@example.com"
        me = sam.get("/v1/users/me").json()
        assert me["emails"] == ["sam@example.com"]
        assert me["git_identity"] == {"name": "sam", "email": "sam@example.com"}
        taken = kim.post("/v1/users/me/emails", json={"email": "sam@example.com"})
        assert taken.status_code == 409 and "another user" in taken.json()["error"]["message"]
        assert kim.post("/v1/users/me/emails", json={"email": "not an address"}).status_code == 400
        assert app.http(home.admin).get("/v1/users/me").status_code == 403  # keys are not people
        assert sam.delete("/v1/users/me/emails/SAM@example.com").status_code == 200
        assert sam.get("/v1/users/me/emails").json()["data"] == []


def test_the_account_page_adds_and_removes_an_address(home: TestHome) -> None:
    with in_process(home.path) as app:
        browser = app.app_client
        assert ui_sign_in(browser, home.user).status_code == 303
        page = browser.get("/ui/account").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf is not None and "None yet." in page
        added = browser.post("/ui/account/emails", data={"email": "sam@work.example", "csrf_token": csrf[1]})
        assert "<code>sam@work.example</code>" in added.text and "git config user.email sam@work.example" in added.text
        stale = browser.post("/ui/account/emails", data={"email": "x@work.example", "csrf_token": "stale"})
        assert stale.status_code == 403
        removed = browser.post("/ui/account/emails/remove", data={"email": "sam@work.example", "csrf_token": csrf[1]})
        assert "None yet." in removed.text


def test_starting_on_a_home_of_many_stores_opens_none(tmp_path: Path) -> None:
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    ws = gm.catalog.create_workspace("many").id
    for i in range(200):
        gm.create_store(ws, f"s{i}")
    with in_process(gm, QUIET) as app:
        stores = app.http().get("/readyz").json()["stores"]
        assert stores["open"] == 0 and stores["evictions"] == 0
        prefix = str((tmp_path / "home" / "stores").resolve())
        held = [fd for fd in os.listdir("/proc/self/fd") if _target(fd).startswith(prefix)]
        assert held == []  # start-up read no store
    gm.close()


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""
