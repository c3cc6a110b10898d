"""Reading an answer of another server with bounds: a deadline for the whole body (a socket
timeout bounds each read only, so a server dripping its body could hold us for ever) and a size
cap (checked on the declared length, and on the bytes as they come, inflated or not)."""

from __future__ import annotations

import time
import zlib
from typing import Any

import requests


class BodyError(ValueError):
    """The body is too large, too slow, or encoded in a way we do not read; the message says why."""


def read_body(response: requests.Response, timeout: float, max_bytes: int) -> bytes:
    """The body of a `stream=True` response, within `timeout` seconds and `max_bytes` bytes."""
    deadline = time.monotonic() + timeout
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise BodyError(f"the body is larger than {max_bytes} bytes")
    inflate = _inflater(response.headers.get("Content-Encoding", ""))
    body = bytearray()
    while True:
        # read1() returns what one read brought, so the deadline is checked after each. Raw
        # bytes: a decoder inside read1 would read on until it had output, which compressed
        # nothing never gives.
        if time.monotonic() > deadline:
            raise BodyError(f"the body took longer than {timeout} s")
        chunk = response.raw.read1(8192, decode_content=False)
        if not chunk:
            if inflate is not None and not inflate.eof:
                raise BodyError("the compressed body ends early")
            return bytes(body)
        if inflate is not None:
            # At most one byte past the cap is inflated, so a small body cannot inflate huge.
            chunk = inflate.decompress(chunk, max_bytes + 1 - len(body))
        body += chunk
        if len(body) > max_bytes:
            raise BodyError(f"the body is larger than {max_bytes} bytes")


def _inflater(content_encoding: str) -> Any:
    """A zlib decompressor for the body's Content-Encoding, or None for an unencoded body."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise BodyError(f"the body is encoded as {encoding!r}, which this server does not read")
