"""One webhook POST: to a checked address, within a total deadline, reading a bounded answer.

:class:`Sender` is an ``httpcore`` connection pool over a network backend of its own
(:class:`_GuardedBackend`): asked for a connection to ``host:port``, it resolves the name once (within
the deadline), refuses it if any address it resolves to is refused (:func:`targets.checked_addresses`)
and connects to one of those very addresses. TLS still verifies the certificate against the name and
sends it as SNI, and the request's ``Host`` is the name, because httpcore takes both from the URL, not
from the socket. A kept-alive connection was made to a checked address, so reusing it is safe.

**The deadline.** httpx's timeouts bound each read, so a receiver that sends a byte every few seconds
would hold a delivery forever. Every socket operation here gets at most what is left of the attempt's
deadline (a per-thread value: each delivery runs in one thread), so an attempt ends by its deadline
whatever the receiver does. Only the status line and headers are needed: at most
``MAX_RESPONSE_BYTES`` of the body are read, then the connection is closed (h11 bounds the headers).
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import quote

import httpcore

from gitmem.webhooks.targets import Networks, RefusedAddress, Target, checked_addresses, parse_target

# socket.getaddrinfo's signature (host, port, family, type): the resolver, replaceable in tests.
Resolver = Callable[[str, int, int, int], Sequence[tuple[Any, ...]]]
MAX_RESPONSE_BYTES = 4096
USER_AGENT = "gitmem-webhooks/0.1"
_deadline = threading.local()


def _remaining(kind: type[Exception]) -> float:
    left = getattr(_deadline, "at", float("inf")) - time.monotonic()
    if left <= 0:
        raise kind("the delivery's deadline passed")
    return left


def _bounded(timeout: float | None, kind: type[Exception]) -> float:
    left = _remaining(kind)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every operation ends by the current attempt's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """Connects only to addresses the allow-list and the rules of :mod:`targets` admit."""

    def __init__(self, allow: Networks, resolve: Resolver, lookups: ThreadPoolExecutor) -> None:
        self._allow = allow
        self._resolve = resolve
        self._lookups = lookups
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        lookup = self._lookups.submit(self._resolve, host, port, 0, socket.SOCK_STREAM)
        try:
            infos = lookup.result(timeout=_bounded(timeout, httpcore.ConnectTimeout))
        except FutureTimeout:
            raise httpcore.ConnectTimeout(f"resolving {host} took past the deadline") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
        error: Exception | None = None
        for ip in checked_addresses(infos, self._allow):
            try:  # the checked address itself: no second lookup that could answer otherwise
                stream = self._sockets.connect_tcp(
                    str(ip), port, _bounded(timeout, httpcore.ConnectTimeout), local_address, socket_options
                )
                return _DeadlineStream(stream)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None  # noqa: S101  narrows the type for mypy; never a check of input
        raise error

    def connect_unix_socket(
        self,
        path: str,  # noqa: ARG002  httpcore's NetworkBackend signature
        timeout: float | None = None,  # noqa: ARG002  (the same)
        socket_options: Iterable[Any] | None = None,  # noqa: ARG002  (the same)
    ) -> httpcore.NetworkStream:
        raise RefusedAddress("webhooks are delivered over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Sender:
    """POSTs to webhook URLs; thread-safe (deliveries to different subscriptions run at once)."""

    def __init__(
        self, allow: Networks = (), *, max_connections: int = 32, resolve: Resolver = socket.getaddrinfo
    ) -> None:
        self.allow = allow
        # getaddrinfo cannot be interrupted: lookups run in these threads so that an attempt stops waiting
        # at its deadline (the lookup ends when the resolver gives up). As many as connections: a name
        # whose servers never answer holds its own lookups, not everyone's.
        self._lookups = ThreadPoolExecutor(max_workers=max_connections, thread_name_prefix="gitmem-webhook-dns")
        self._pool = httpcore.ConnectionPool(
            network_backend=_GuardedBackend(allow, resolve, self._lookups),
            max_connections=max_connections,
            keepalive_expiry=5.0,
        )

    def post(self, url: str, body: bytes, headers: Mapping[str, str], deadline_seconds: float) -> int:
        """The answer's status. Raises on a bad URL (:class:`InvalidRequest`), a refused address
        (:class:`RefusedAddress`), a deadline passed or any failure of the network or the receiver."""
        target: Target = parse_target(url)
        _deadline.at = time.monotonic() + deadline_seconds
        timeouts = {"connect": deadline_seconds, "read": deadline_seconds, "write": deadline_seconds}
        try:
            # The target's own (IDNA) host: the URL as the subscriber wrote it may hold a Unicode name.
            request_url = httpcore.URL(
                scheme=target.scheme.encode(),
                host=target.host.encode("ascii"),
                port=target.port,
                target=_request_target(url),
            )
            all_headers = [(b"host", _host_header(target)), (b"user-agent", USER_AGENT.encode())]
            all_headers += [(k.encode(), v.encode()) for k, v in headers.items()]
            all_headers.append((b"content-length", str(len(body)).encode()))
            with self._pool.stream(
                "POST",
                request_url,
                headers=all_headers,
                content=body,
                extensions={"timeout": {**timeouts, "pool": deadline_seconds}},
            ) as response:
                read = 0
                for chunk in response.iter_stream():  # a few KB at most, then the connection is dropped
                    read += len(chunk)
                    if read >= MAX_RESPONSE_BYTES:
                        break
                return int(response.status)
        finally:
            _deadline.at = float("inf")

    def close(self) -> None:
        self._pool.close()
        self._lookups.shutdown(wait=False, cancel_futures=True)


def _request_target(url: str) -> bytes:
    """The path and query of ``url`` as a request line's target (its fragment is never sent)."""
    rest = url.split("://", 1)[1]
    slash = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=-1)
    target = rest[slash:] if slash >= 0 else "/"
    target = target.split("#", 1)[0] or "/"
    if target.startswith("?"):
        target = "/" + target
    # Bytes outside ASCII (a Unicode path) travel percent-encoded, as a browser sends them.
    return "".join(c if ord(c) < 0x80 else quote(c) for c in target).encode("ascii")


def _host_header(target: Target) -> bytes:
    host = f"[{target.host}]" if target.ip is not None and target.ip.version == 6 else target.host
    default = (target.scheme == "https" and target.port == 443) or (target.scheme == "http" and target.port == 80)
    return (host if default else f"{host}:{target.port}").encode("ascii")
