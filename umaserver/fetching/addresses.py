"""Which addresses this server may fetch from: public unicast only.

An address is refused when it is private, loopback, link-local, shared (CGNAT, 100.64.0.0/10),
multicast, unspecified, reserved or otherwise not globally routable, and so is an IPv6 address
that carries such an IPv4 address inside it: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
(`::a.b.c.d`), 6to4 (`2002:abcd:...`) and the NAT64 prefixes (`64:ff9b::/96`, and the
local-use `64:ff9b:1::/48` whole); Teredo is refused whole. `allow_loopback` (tests, local development) lets 127.0.0.0/8
and ::1 through, nothing else.
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.ip_address("::1")


def parse(text: str) -> IPAddress | None:
    """The address written in `text` (no zone id, no brackets), or None."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_loopback(address: IPAddress) -> bool:
    return address in _LOOPBACK_V4 if address.version == 4 else address == _LOOPBACK_V6


def refusal(address: IPAddress, allow_loopback: bool = False) -> str | None:
    """Why this server must not connect to `address`, or None when it may."""
    if allow_loopback and is_loopback(address):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            # Whatever the outer form, the packet ends up at the IPv4 address inside it.
            inner = refusal(embedded, allow_loopback=False)
            return None if inner is None else f"it carries the IPv4 address {embedded}: {inner}"
        if address in _NAT64_LOCAL:
            return "it is a local-use NAT64 address"
        if address.teredo is not None:
            return "it is a Teredo address (a tunnel to an address of its own)"
    return _refusal_of_plain(address)


def _refusal_of_plain(address: IPAddress) -> str | None:
    if address.is_unspecified:
        return "it is unspecified"
    if address.is_loopback:
        return "it is a loopback address"
    if address.is_link_local:
        return "it is a link-local address"
    if address.is_multicast:
        return "it is a multicast address"
    if address.version == 4 and address in _CGNAT:
        return "it is a shared (CGNAT) address"
    if address.is_reserved:
        return "it is a reserved address"
    if address.is_private:
        return "it is a private address"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "it is a site-local address"
    if not address.is_global:
        return "it is not a public address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to, for the forms that carry one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    packed = address.packed
    if address in _NAT64 or (packed[:12] == bytes(12) and int(address) > 1):
        # NAT64 (RFC 6052) and IPv4-compatible (RFC 4291, deprecated): the last 32 bits.
        return ipaddress.IPv4Address(packed[12:])
    return None
