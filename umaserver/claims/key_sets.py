"""The keys of the configured OpenID Connect providers: read, fetched and kept fresh.

`KeySets` holds each provider's JSON Web Key Set: read from a file at start, or fetched from the
provider's `jwks_uri` by one background thread. A fetch never happens inside a request; a token
that names a key we do not hold yet asks the thread to fetch early (key rollover), and the caller
answers "try again later" when that fetch may bring the key. Only public signature keys are kept.
Plain Python: no Flask here.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence

import requests
import urllib3
from joserfc.jwk import KeySet

from umaserver.claims.jwks import JwksError, parse_jwks
from umaserver.claims.oidc_issuers import OidcIssuer
from umaserver.http_bodies import BodyError, read_body

logger = logging.getLogger("umaserver.keys")


#: How many unknown kids are remembered per issuer (tokens name whatever they like).
MAX_ASKED_KIDS = 256


class KeySets:
    """The JWK set of every configured OIDC issuer, kept fresh by one background thread."""

    def __init__(
        self,
        issuers: Sequence[OidcIssuer],
        *,
        fetch_timeout: float = 5.0,
        max_bytes: int = 65536,
        refresh_interval: float = 3600.0,
        retry_interval: float = 30.0,
    ) -> None:
        self._fetch_timeout = fetch_timeout
        self._max_bytes = max_bytes
        self._refresh_interval = refresh_interval
        self._retry_interval = retry_interval
        self._lock = threading.Lock()
        self._key_sets: dict[str, KeySet] = {}
        self._uris: dict[str, str] = {}
        self._last_attempt: dict[str, float] = {}
        self._fetched_at: dict[str, float] = {}
        self._due: dict[str, float] = {}
        # By issuer: the kids tokens named that we lacked, with when each was first asked for.
        self._asked: dict[str, dict[str, float]] = {}
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

        for entry in issuers:
            if entry.issuer in self._key_sets or entry.issuer in self._uris:
                raise ValueError(f"OIDC issuer {entry.issuer!r} is configured twice")
            if entry.file_keys is not None:
                self._key_sets[entry.issuer] = entry.file_keys
            elif entry.jwks_uri is not None:
                self._uris[entry.issuer] = entry.jwks_uri
                self._due[entry.issuer] = 0.0

    def key_set(self, issuer: str) -> KeySet | None:
        """The keys of `issuer`, or None when they have not been read or fetched (yet)."""
        with self._lock:
            return self._key_sets.get(issuer)

    def fetch_states(self) -> dict[str, str]:
        """By issuer, where its keys stand (`/readyz`): `file` (read at start), `fetched`,
        `fetch failed` (attempted, nothing fetched yet) or `not attempted` (the first fetch has
        not ended yet)."""
        with self._lock:
            states = {issuer: "file" for issuer in self._key_sets if issuer not in self._uris}
            for issuer in self._uris:
                if issuer in self._fetched_at:
                    states[issuer] = "fetched"
                elif issuer in self._last_attempt:
                    states[issuer] = "fetch failed"
                else:
                    states[issuer] = "not attempted"
        return states

    def refresh_now(self) -> None:
        """Fetch every `jwks_uri` now, in this thread (for tests and the CLI). Never raises:
        a failed fetch is logged and leaves the keys we had."""
        for issuer, uri in self._uris.items():
            self._refresh(issuer, uri)

    def request_refresh(self, issuer: str, kid: str | None = None) -> int | None:
        """Ask the background thread to fetch `issuer`'s keys early, as soon as the retry
        interval since its last attempt allows (a token named a key we do not know).

        Returns the seconds until that fetch when it may bring keys we lack, else None (the keys
        come from a file, or are what the provider publishes now). Without `kid`: when we have no
        keys, or ours are older than the retry interval. With the `kid` a token named: until a
        fetch begun after that kid was first asked for has come back without it (a provider may
        publish a new key just before signing with it, so keys fetched a moment ago may lack it);
        after the retry interval it may be asked for again.
        """
        with self._lock:
            if issuer not in self._due:
                return None
            now = time.monotonic()
            earliest = self._last_attempt.get(issuer, -math.inf) + self._retry_interval
            self._due[issuer] = min(self._due[issuer], earliest)
            fetched = self._fetched_at.get(issuer, -math.inf)
            wait = self._due[issuer] - now
            if kid is None:
                hopeless = now - fetched < self._retry_interval
            else:
                asked = self._asked.setdefault(issuer, {})
                first = asked.get(kid)
                answered = first is not None and fetched > first
                hopeless = answered and now - fetched < self._retry_interval
                if not hopeless and (first is None or answered):
                    asked.pop(kid, None)
                    asked[kid] = now
                    while len(asked) > MAX_ASKED_KIDS:  # forget the oldest: memory stays bounded
                        del asked[next(iter(asked))]
        self._wake.set()
        return None if hopeless else math.ceil(max(1.0, wait))

    def start(self) -> None:
        """Start the one background thread that fetches and refreshes every `jwks_uri`;
        nothing happens when it runs already."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            if self._stopping.is_set():
                # A stop() gave up waiting for its fetch; a second thread would run beside it.
                raise RuntimeError("the JWKS thread has not stopped yet; start it again later")
            return
        if not self._uris:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="umaserver-jwks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread; waits for a fetch in progress to end. Safe to call more
        than once, and from a finalizer."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        # A finalizer may run in the thread itself (garbage collection happens anywhere).
        if thread is None or thread is threading.current_thread():
            return
        wait = 2 * self._fetch_timeout + 1.0
        thread.join(timeout=wait)
        if thread.is_alive():
            # Keep the handle, so that start() does not run a second thread beside this one.
            logger.warning("the JWKS thread has not stopped within %.1f s", wait)
        else:
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            # Cleared before reading the due times, so a request_refresh() after this point
            # wakes the wait below.
            self._wake.clear()
            for issuer, uri in self._uris.items():
                if self._stopping.is_set():
                    return
                with self._lock:
                    due = self._due[issuer] <= time.monotonic()
                if due:
                    self._refresh(issuer, uri)
            with self._lock:
                wait = max(0.0, min(self._due.values()) - time.monotonic())
            self._wake.wait(wait)

    def _refresh(self, issuer: str, uri: str) -> bool:
        started = time.monotonic()
        try:
            key_set = parse_jwks(_fetch(uri, self._fetch_timeout, self._max_bytes))
        except (JwksError, requests.RequestException, urllib3.exceptions.HTTPError) as error:
            logger.warning("JWKS of OIDC issuer %r from %s not refreshed: %s", issuer, uri, error)
            ok = False
        except Exception:
            # The thread must survive whatever a provider sends.
            logger.exception("JWKS of OIDC issuer %r from %s not refreshed", issuer, uri)
            ok = False
        else:
            ok = True
        with self._lock:
            if ok:
                self._key_sets[issuer] = key_set
                self._fetched_at[issuer] = started
            self._last_attempt[issuer] = started
            interval = self._refresh_interval if ok else self._retry_interval
            self._due[issuer] = time.monotonic() + interval
        if ok:
            logger.info("JWKS of OIDC issuer %r fetched: %d keys", issuer, len(key_set.keys))
        return ok


def _fetch(uri: str, timeout: float, max_bytes: int) -> bytes:
    headers = {
        "Accept": "application/jwk-set+json, application/json",
        # Nothing to inflate; a server that compresses anyway is inflated here, within the cap.
        "Accept-Encoding": "identity",
    }
    with requests.get(
        uri, headers=headers, timeout=timeout, stream=True, allow_redirects=False
    ) as response:
        if response.status_code != 200:
            raise JwksError(f"the server answered HTTP {response.status_code}")
        # A slow body would hold the one thread that serves every issuer.
        try:
            return read_body(response, timeout, max_bytes)
        except BodyError as error:
            raise JwksError(str(error)) from error
