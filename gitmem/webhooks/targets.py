"""Where a webhook may be delivered: the URL's form, and the addresses a delivery may connect to.

A subscription's URL is parsed once, strictly, when it is registered (:func:`parse_target`): http or
https, a host that is a valid name or IP literal, no user-info (it would travel as Basic auth), no
control characters or spaces; anything else is :class:`InvalidRequest`. The same parse runs again at
each delivery, for rows kept from before these rules.

**Addresses.** A delivery connects only to a public unicast address (:func:`refusal`): never loopback,
link-local (``169.254.169.254``, the cloud metadata service), private, shared (CGNAT), reserved,
multicast or unspecified, nor an address of this very host (whatever its interface), and IPv6 forms
that carry an IPv4 address (``::ffff:127.0.0.1``, 6to4, NAT64) are judged by that address. Every
numeric spelling of IPv4 (``2130706433``, ``127.1``, ``0x7f000001``, ``0177.0.0.1``) is read as the
resolver reads it. The check is made on the address the connection uses: the sender
(:mod:`gitmem.webhooks.sender`) resolves the name once, checks every address it resolved to, and
connects to that checked address, so a name that re-resolves elsewhere (DNS rebinding) cannot switch
it. A deployment that delivers inside its own network lists those networks in
``GITMEM_WEBHOOK_ALLOW_NETWORKS`` (CIDRs); an address inside one of them is allowed whatever it is.

Registration refuses what it can tell without DNS (an IP literal or ``localhost``); a name is judged at
each delivery, by what it resolves to then.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna

from gitmem.errors import InvalidRequest

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Networks = tuple[IPNetwork, ...]

MAX_URL_LENGTH = 2048
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# What the resolver may read as an IPv4 address in one of inet_aton's forms (decimal, octal, hex, 1-4 parts).
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$")


class RefusedAddress(Exception):
    """A delivery's host is, or resolves to, an address it may not reach."""


@dataclass(frozen=True)
class Target:
    """A webhook URL as checked: its host in ASCII (IDNA) form, and the IP if the host is a literal."""

    url: str
    scheme: str
    host: str
    port: int
    ip: IPAddress | None


def parse_networks(text: str) -> Networks:
    """``"10.0.0.0/8, fd00::/8"`` -> networks; ``ValueError`` naming the entry that is not a CIDR."""
    found: list[IPNetwork] = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        try:
            found.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not a network (CIDR such as 10.0.0.0/8 or fd00::/8)") from None
    return tuple(found)


def parse_target(url: object) -> Target:
    """The URL checked for form (never for where its name resolves); :class:`InvalidRequest` if bad."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(f"url must be an http(s) URL of at most {MAX_URL_LENGTH} characters")
    if any(ord(c) < 0x21 or 0x7F <= ord(c) <= 0x9F or c.isspace() for c in url):
        raise InvalidRequest("url must not hold spaces or control characters (CR, LF, NUL, ...)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidRequest(f"url is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidRequest("url must be an http:// or https:// URL")
    if "@" in parts.netloc:
        raise InvalidRequest("url must not carry a user name or password (they would be sent as Basic auth)")
    if port == 0:
        raise InvalidRequest("url has port 0")
    host, ip = _host(parts.netloc, parts.hostname or "")
    return Target(url, scheme, host, port or (443 if scheme == "https" else 80), ip)


def _host(netloc: str, hostname: str) -> tuple[str, IPAddress | None]:
    if not hostname:
        raise InvalidRequest("url names no host")
    if netloc.startswith("["):
        if "%" in hostname:
            raise InvalidRequest("url's IPv6 host must not name an interface (a zone id)")
        try:
            return hostname, ipaddress.IPv6Address(hostname)
        except ValueError:
            raise InvalidRequest("url's bracketed host is not an IPv6 address") from None
    try:
        return hostname, ipaddress.IPv4Address(hostname)
    except ValueError:
        pass
    if _NUMERIC_HOST.match(hostname):
        try:  # the forms inet_aton (and so the resolver) reads as IPv4: 2130706433, 127.1, 0x7f000001
            return hostname, ipaddress.IPv4Address(socket.inet_aton(hostname.rstrip(".")))
        except OSError:
            raise InvalidRequest("url's host is not a valid IPv4 address") from None
    try:
        ascii_host = idna.encode(hostname.rstrip("."), uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise InvalidRequest(f"url's host is not a valid domain name ({exc})") from None
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in ascii_host.split(".")):
        raise InvalidRequest("url's host is not a valid domain name")
    return ascii_host, None


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, 6to4, NAT64, Teredo's client)."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: IPAddress, allow: Networks = ()) -> str | None:
    """Why a delivery may not connect to ``ip`` (``None``: it may). The allow-list wins over every rule."""
    if any(ip.version == net.version and ip in net for net in allow):
        return None
    inner = embedded_ipv4(ip)
    if inner is not None:
        return refusal(inner, allow)
    for word, refused in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("non-public", not ip.is_global),
        ("this server's own", is_own_address(ip)),
    ):
        if refused:
            return f"{word} address {ip}"
    return None


def is_own_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is an address of this host: binding to it succeeds only then (no IP_FREEBIND)."""
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(ip), 0))
        return True
    except OSError:
        return False


def check_registration(url: object, allow: Networks = ()) -> Target:
    """A URL fit to subscribe: well formed, and not a literal address (or ``localhost``) it may not reach."""
    target = parse_target(url)
    local_name = target.host.lower() in _LOCAL_NAMES or target.host.lower().endswith(".localhost")
    if local_name and not allow_local(allow):
        raise InvalidRequest("url must not point at this host (localhost); see GITMEM_WEBHOOK_ALLOW_NETWORKS")
    if target.ip is not None:
        why = refusal(target.ip, allow)
        if why is not None:
            raise InvalidRequest(
                f"url must point at a public address, and this is a {why} (a deployment that delivers"
                " inside its network lists those networks in GITMEM_WEBHOOK_ALLOW_NETWORKS)"
            )
    return target


def allow_local(allow: Networks) -> bool:
    """Whether the allow-list admits loopback (then ``localhost`` may be registered: it is judged at delivery)."""
    return any(ipaddress.ip_address("127.0.0.1") in n or ipaddress.ip_address("::1") in n for n in allow)


def checked_addresses(infos: Iterable[tuple[object, ...]], allow: Networks) -> list[IPAddress]:
    """The resolver's answers as addresses, refused whole if any one of them is refused (a name that
    resolves to a public and a private address is not trusted with either)."""
    found: list[IPAddress] = []
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)  # noqa: S101  narrows the type for mypy; never a check of input
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        why = refusal(ip, allow)
        if why is not None:
            raise RefusedAddress(f"refused: the host is or resolves to a {why}")
        if ip not in found:
            found.append(ip)
    if not found:
        raise RefusedAddress("the host resolves to no address")
    return found
