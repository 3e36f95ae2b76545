"""Where webhooks may go (issue 28, items 1 and 3): no loopback, private, link-local, multicast,
unspecified or own address in any spelling, checked on the address the connection uses (a name that
re-resolves cannot switch it), an allow-list for deployments that deliver inside their network, no
user-info; a malformed URL is a 400 at registration, and at delivery any failure is that subscription's
alone. Receivers are real HTTP servers on loopback (tests/system/test_webhooks.py's ``Receiver``).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.clock import FrozenClock, to_micros
from gitmem.engine.gitmem import Gitmem
from gitmem.webhooks.delivery import DeliveryPolicy, Dispatcher
from gitmem.webhooks.outbox import new_secret, webhooks_for
from gitmem.webhooks.sender import Sender
from gitmem.webhooks.targets import is_own_address, parse_networks, refusal
from tests.checks import with_outbox
from tests.system.test_webhooks import LOOPBACK, POLICY, Receiver

# Every spelling the red team reached loopback, metadata or a private network with (PORT: a receiver).
REFUSED_URLS = [
    "http://2130706433:PORT/hook",
    "http://127.1:PORT/hook",
    "http://0x7f000001:PORT/hook",
    "http://0177.0.0.1:PORT/hook",
    "http://localhost:PORT/hook",
    "http://LocalHost.:PORT/hook",
    "http://0.0.0.0:PORT/hook",
    "http://[::ffff:127.0.0.1]:PORT/hook",
    "http://[::1]:PORT/hook",
    "http://[::]:PORT/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/hook",
    "http://192.168.1.1/hook",
    "http://100.64.0.1/hook",
    "http://224.0.0.1/hook",
    "http://[fe80::1]/hook",
    "http://[fd00::1]/hook",
    "http://[64:ff9b::7f00:1]/hook",
    "http://user:pass@example.com/hook",
]
MALFORMED_URLS = [
    "http://xn--/",
    "http://[::1",
    "http://example.com/a\r\nX-Injected: 1",
    "http://example.com/\nb",
    "http://exa\x00mple.com/",
    "http://exa mple.com/",
    "http:///no-host",
    "http://example.com:99999/",
    "http://-bad-.example/",
    "ftp://example.com/",
]


@pytest.fixture
def home(tmp_path: Path) -> Gitmem:
    return with_outbox(Gitmem.open(tmp_path / "home", clock=FrozenClock(), fsync="never"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.up()
    yield r
    r.down()


@pytest.fixture
def api(home: Gitmem) -> Iterator[tuple[TestClient, dict[str, str]]]:
    ws = home.catalog.create_workspace("w")
    _, admin = home.catalog.create_api_key(ws.id, "admin")
    app = create_app(home, Settings.defaults(webhook_delivery=False, dream_runner=False, prune_interval_seconds=0))
    with TestClient(app) as client:
        yield client, {"x-api-key": admin}


def _subscribe(client: TestClient, admin: dict[str, str], url: str) -> Any:
    return client.post("/v1/webhooks", json={"url": url, "event_types": ["memory.created"]}, headers=admin)


def test_registration_refuses_unreachable_and_malformed_urls(
    api: tuple[TestClient, dict[str, str]], receiver: Receiver
) -> None:
    client, admin = api
    for url in REFUSED_URLS + MALFORMED_URLS:
        answer = _subscribe(client, admin, url.replace("PORT", str(receiver.port)))
        assert answer.status_code == 400, (url, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"].startswith("url"), (url, error)
    assert client.get("/v1/webhooks", headers=admin).json()["data"] == []


def test_registration_takes_public_urls_and_the_allow_list(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    _, admin = home.catalog.create_api_key(ws.id, "admin")
    for url in ("https://example.com/hook", "https://bücher.example/h?x=1", "http://93.184.216.34:8080/h"):
        assert webhooks_for(home).create(ws.id, url, ["memory.created"]).id
    allowed = DeliveryPolicy(allow_networks=parse_networks("127.0.0.0/8, ::1/128"))
    settings = Settings.defaults(
        webhook_delivery=False, dream_runner=False, prune_interval_seconds=0, webhook_policy=allowed
    )
    with TestClient(create_app(home, settings)) as client:
        for url in (receiver.url, f"http://localhost:{receiver.port}/", f"http://[::1]:{receiver.port}/"):
            assert _subscribe(client, {"x-api-key": admin}, url).status_code == 200, url
        assert _subscribe(client, {"x-api-key": admin}, "http://10.0.0.1/").status_code == 400  # not listed


def _keep_subscription(home: Gitmem, workspace_id: str, url: str) -> str:
    """A subscription as kept from before URLs were checked: written to the catalog as it was then."""
    webhook_id = f"whk_{uuid.uuid4().hex}"
    with home.catalog.transaction() as db:
        db.execute(
            "INSERT INTO webhooks VALUES (?,?,?,?,?,?,?)",
            (webhook_id, workspace_id, url, json.dumps(["memory.created"]), new_secret(), "", to_micros(home.clock())),
        )
        home.catalog.changed(db, "webhooks", workspace_id)
    return webhook_id


def _deliveries(home: Gitmem) -> dict[str, tuple[Any, ...]]:
    rows = home.catalog.db.execute(
        "SELECT webhook_id, delivered_at, given_up_at, last_error, attempts FROM webhook_deliveries"
    ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def test_delivery_checks_the_address_it_connects_to(home: Gitmem, receiver: Receiver) -> None:
    """Names and numbers kept in the catalog that reach loopback are refused when the connection is
    made: nothing arrives, each is that subscription's failure, backed off."""
    ws = home.catalog.create_workspace("w")
    kept = [_keep_subscription(home, ws.id, url.replace("PORT", str(receiver.port))) for url in REFUSED_URLS[:10]]
    home.store(ws.id, home.create_store(ws.id, "notes").id).create("/a.md", "x")
    dispatcher = Dispatcher(home, DeliveryPolicy(timeout_seconds=2, catch_up_seconds=0))  # no allow-list
    try:
        assert dispatcher.run_once() == 0
    finally:
        dispatcher.stop()
    assert receiver.received == []
    rows = _deliveries(home)
    for webhook_id in kept:
        delivered, _given_up, error, attempts = rows[webhook_id]
        assert delivered is None and attempts == 1 and error, (webhook_id, error)
    refused = [rows[w][2] for w in kept]
    assert all("refused" in e or "invalid url" in e for e in refused), refused


def test_a_name_that_re_resolves_cannot_switch_the_address() -> None:
    """DNS rebinding: the first answer is an allowed address, every later one loopback's internal
    service. The connection goes to the address that was checked; the next connection, resolving
    again, is refused. (The resolver is the one thing replaced: no real DNS server to point at.)"""
    allowed, internal = Receiver("127.0.0.2"), None
    allowed.up()
    internal = Receiver("127.0.0.1", allowed.port)
    internal.up()
    answers: list[str] = []

    def rebinding(host: str, port: int, family: int, kind: int) -> list[tuple[Any, ...]]:  # noqa: ARG001  stands in for socket.getaddrinfo
        ip = "127.0.0.2" if not answers else "127.0.0.1"
        answers.append(ip)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    sender = Sender(parse_networks("127.0.0.2/32"), resolve=rebinding)
    try:
        url = f"http://rebind.example:{allowed.port}/hook"
        assert sender.post(url, b"{}", {"content-type": "application/json"}, 2.0) == 200
        sender.close()  # a fresh connection: resolved again
        sender = Sender(parse_networks("127.0.0.2/32"), resolve=rebinding)
        with pytest.raises(Exception, match=r"loopback address 127\.0\.0\.1"):
            sender.post(url, b"{}", {}, 2.0)
    finally:
        sender.close()
        allowed.down()
        internal.down()
    assert answers == ["127.0.0.2", "127.0.0.1"]  # once a connection
    assert len(allowed.received) == 1 and internal.received == []
    assert allowed.received[0][1]["host"] == f"rebind.example:{allowed.port}"  # Host is the name, not the IP


def test_one_bad_url_fails_alone_and_the_round_goes_on(home: Gitmem, receiver: Receiver) -> None:
    """URLs kept from before they were checked (``xn--``, an open bracket, CR/LF, NUL) are given up at
    once; another workspace's event is delivered in the same round, and rounds keep running."""
    bad_ws, good_ws = home.catalog.create_workspace("bad"), home.catalog.create_workspace("good")
    bad = [_keep_subscription(home, bad_ws.id, url) for url in MALFORMED_URLS[:5]]
    good = webhooks_for(home).create(good_ws.id, receiver.url, ["memory.created"], allow_networks=LOOPBACK)
    for ws in (bad_ws, good_ws):
        home.store(ws.id, home.create_store(ws.id, "notes").id).create("/a.md", "x")
    dispatcher = Dispatcher(home, POLICY)
    try:
        assert dispatcher.run_once() == 1, [v for k, v in _deliveries(home).items() if k == good.id]
        home.clock.advance(hours=1)  # type: ignore[attr-defined]
        assert dispatcher.run_once() == 0  # nothing left to try: the bad ones were given up
    finally:
        dispatcher.stop()
    rows = _deliveries(home)
    assert rows[good.id][0] is not None, rows[good.id]
    for webhook_id in bad:
        delivered, given_up, error, attempts = rows[webhook_id]
        assert delivered is None and given_up is not None and attempts == 1 and error.startswith("invalid url")
    assert len(receiver.received) == 1


def test_address_rules_and_the_allow_list() -> None:
    import ipaddress

    own = _own_address()
    for text, reason in (
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("127.0.0.1", "loopback"),
        ("::ffff:10.1.2.3", "private"),
        ("2002:a9fe:a9fe::", "link-local"),  # 6to4 of 169.254.169.254
        ("192.0.2.1", "private"),  # documentation (TEST-NET-1)
        ("255.255.255.255", "private"),
        ("ff02::1", "multicast"),
    ):
        why = refusal(ipaddress.ip_address(text))
        assert (why is None) if reason is None else (why is not None and reason in why), (text, why)
    assert refusal(ipaddress.ip_address("10.1.2.3"), parse_networks("10.0.0.0/8")) is None
    assert refusal(ipaddress.ip_address("10.1.2.3"), parse_networks("10.2.0.0/16")) is not None
    if own is not None:  # this host's address, whatever network it is on, is its own
        assert is_own_address(ipaddress.ip_address(own)) and refusal(ipaddress.ip_address(own)) is not None
    assert not is_own_address(ipaddress.ip_address("192.0.2.1"))
    with pytest.raises(ValueError, match="not a network"):
        parse_networks("10.0.0.0/8, nonsense")


def _own_address() -> str | None:
    """An address of this host that is not loopback (the one it would use to go out), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


# -- what a receiver can cost (item 4) -----------------------------------------------------------------


class RawReceiver:
    """A TCP server on loopback that reads a request and answers as ``answer(connection)`` does, in a
    thread a connection; it keeps what it saw (``opened``, ``closed``, ``sent`` bytes)."""

    def __init__(self, answer: Callable[[socket.socket, RawReceiver], None]) -> None:
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.sent = 0
        self.open_connections = 0
        self.answering = threading.Event()  # a request came in
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with self.lock:
            self.open_connections += 1
        try:
            with connection:
                connection.recv(65536)  # the request (small: one event)
                self.answering.set()
                self._answer(connection, self)
        except OSError:
            pass  # the sender hung up: what this receiver is about
        finally:
            with self.lock:
                self.open_connections -= 1

    def close(self) -> None:
        self._listener.close()


def _trickle(connection: socket.socket, receiver: RawReceiver, every: float = 0.1, limit: int = 300) -> None:
    """A byte of a status line every ``every`` seconds (``limit`` bytes at most: a broken sender must not
    hang the suite)."""
    stop = threading.Event()
    for byte in (b"HTTP/1.1 200 OK\r\n" + b"X" * limit)[:limit]:
        connection.sendall(bytes([byte]))
        with receiver.lock:
            receiver.sent += 1
        stop.wait(every)


def _flood(connection: socket.socket, receiver: RawReceiver) -> None:
    """200 OK with a 400 MB body, written as fast as the sender takes it."""
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 400000000\r\n\r\n")
    chunk = bytes(1 << 16)
    for _ in range(400_000_000 // len(chunk)):
        connection.sendall(chunk)
        with receiver.lock:
            receiver.sent += len(chunk)


def test_a_trickling_receiver_delays_no_other_tenant(home: Gitmem, receiver: Receiver) -> None:
    """A receiver sending a byte every 0.1 s is cut off at the attempt's deadline (2 s), and another
    workspace's event, behind it in the outbox, arrives while the trickle is still going on."""
    trickler = RawReceiver(_trickle)
    slow_ws, fast_ws = home.catalog.create_workspace("slow"), home.catalog.create_workspace("fast")
    webhooks_for(home).create(slow_ws.id, trickler.url, ["memory.created"], allow_networks=LOOPBACK)
    fast = webhooks_for(home).create(fast_ws.id, receiver.url, ["memory.created"], allow_networks=LOOPBACK)
    for ws in (slow_ws, fast_ws):  # the slow tenant's event first: it is ahead in the outbox
        home.store(ws.id, home.create_store(ws.id, "notes").id).create("/a.md", "x")
    seen_while_trickling: list[bool] = []

    def note(_: object) -> None:  # both attempts start at once: look once the trickle has begun
        trickler.answering.wait(5)
        seen_while_trickling.append(trickler.open_connections > 0)

    receiver.received = _Recording(note)
    dispatcher = Dispatcher(home, POLICY)
    try:
        assert dispatcher.run_once() == 1
    finally:
        dispatcher.stop()
        trickler.close()
    assert seen_while_trickling == [True]
    assert receiver.events(fast.secret or "")
    rows = _deliveries(home)
    slow_delivered, _, slow_error, _ = next(v for k, v in rows.items() if k != fast.id)
    assert slow_delivered is None and "Timeout" in slow_error, slow_error
    assert trickler.sent < 100  # cut off by the deadline (~20 bytes), not by the trickler's own limit (300)


class _Recording(list[Any]):
    """A list that tells ``on_append`` of each item (the receiver's thread appends what it receives)."""

    def __init__(self, on_append: Callable[[Any], None]) -> None:
        super().__init__()
        self._on_append = on_append

    def append(self, item: Any) -> None:
        self._on_append(item)
        super().append(item)


def test_a_huge_answer_is_not_read(home: Gitmem) -> None:
    """A 400 MB answer: the status is read (200: delivered), a few KB of the body at most, then the
    connection is dropped; the receiver gets to write little beyond what the sockets buffer."""
    flood = RawReceiver(_flood)
    ws = home.catalog.create_workspace("w")
    webhooks_for(home).create(ws.id, flood.url, ["memory.created"], allow_networks=LOOPBACK)
    home.store(ws.id, home.create_store(ws.id, "notes").id).create("/a.md", "x")
    dispatcher = Dispatcher(home, dataclasses.replace(POLICY, timeout_seconds=5.0))
    try:
        assert dispatcher.run_once() == 1
        _wait_until(lambda: flood.open_connections == 0)  # the sender dropped the connection
    finally:
        dispatcher.stop()
        flood.close()
    assert flood.sent < 32 << 20, flood.sent  # of 400 MB: what loopback's socket buffers take, no more


def _wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.01)
