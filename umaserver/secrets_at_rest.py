"""Secrets at rest are digests: random tokens with a recognisable prefix, stored as SHA-256, and
passwords hashed with scrypt. Comparisons are constant-time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

# Recognisable prefixes make a leaked token easy to spot in a log or a paste.
ACCESS_TOKEN_PREFIX = "uma_at_"  # noqa: S105 - a prefix, not a secret
RPT_PREFIX = "uma_rpt_"
TICKET_PREFIX = "uma_pt_"
CLIENT_SECRET_PREFIX = "uma_cs_"  # noqa: S105

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def new_id(prefix: str = "") -> str:
    """An opaque, random identifier (never a counter)."""
    return prefix + secrets.token_urlsafe(16)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def matches_digest(unverified: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(unverified), stored_digest)


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    derived = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${derived.hex()}"


def check_password(unverified: str, stored: str) -> bool:
    try:
        scheme, salt, expected = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    derived = hashlib.scrypt(unverified.encode("utf-8"), salt=bytes.fromhex(salt), **_SCRYPT)
    return hmac.compare_digest(derived.hex(), expected)
