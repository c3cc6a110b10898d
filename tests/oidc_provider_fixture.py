"""A real OpenID Connect provider for the tests: panva/oidc-provider 8.x (tests/oidc_provider), run
with the machine's Node.js on a free loopback port, over plain http.

In a test module (the fixtures are named `oidc_provider` and `start_oidc_provider`; the functions
have other names, so that a test's parameters do not shadow an import):

    from tests.oidc_provider_fixture import oidc_provider_fixture  # noqa: F401
    from tests.oidc_provider_fixture import start_oidc_provider_fixture  # noqa: F401

    pytestmark = pytest.mark.live  # the project's mark of tests that start real processes

Each module that imports them has a provider of its own (a session-scoped fixture belongs to the
module it is found in), stopped at the end of the session.

- `oidc_provider` (session): one provider with the client `CLIENT_ID` and the accounts alice and bob
  (`ACCOUNTS`), its only redirect URI `DEFAULT_REDIRECT_URI`; `add_redirect_uri` allows more.
- `start_oidc_provider` (session): a factory, `start_oidc_provider(redirect_uris=[...], ...)`, for a
  provider of its own (other clients, accounts or scopes); every one it started is stopped at the end.

Both give an `OidcProvider`: `issuer`, `discovery` (the URL of its discovery document), `client_id`,
`client_secret`, `redirect_uris`, `accounts` (by login: `OidcAccount` with `login`, `password`,
`sub`, `claims`), `add_redirect_uri(uri)`, `output()` (what it wrote on stderr, a line per request).

The server under test learns the provider's issuer from its config, and the provider learns the
server's redirect URI only once that server listens: start the provider first, then the server, then
`provider.add_redirect_uri(server.url + "/rqp_claims/callback")`.

The login form (GET <issuer>/interaction/<uid>, where the authorization request redirects): a form
id "login-form", text input id and name "login", password input id and name "password", submit button
id and name "submit"; it POSTs to <issuer>/interaction/<uid>/login. A wrong login shows the form again
with an element id "error". Consent is given at once: the browser only fills in the login form.

Node.js and `npm ci --prefix tests/oidc_provider` (`make test` runs it) are needed: without them the
fixtures fail, saying so; they never skip.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
PROVIDER_DIR = ROOT / "tests" / "oidc_provider"
PROVIDER_SCRIPT = PROVIDER_DIR / "provider.mjs"
INSTALL_HINT = "run `make test` (or `npm ci --prefix tests/oidc_provider`) with Node.js 20 and npm"

CLIENT_ID = "umaserver-under-test"
# Nothing listens there: a test stops following redirects when one goes to a redirect URI.
DEFAULT_REDIRECT_URI = "http://127.0.0.1:9/rqp_claims/callback"


@dataclass(frozen=True)
class OidcAccount:
    login: str
    password: str
    sub: str
    claims: Mapping[str, Any]

    def as_config(self) -> dict[str, Any]:
        return {
            "sub": self.sub,
            "login": self.login,
            "password": self.password,
            "claims": dict(self.claims),
        }


ACCOUNTS: tuple[OidcAccount, ...] = (
    OidcAccount(
        login="alice",
        password="alice-password-at-the-op",
        sub="op-alice-4f1c",
        claims={
            "email": "alice@example.org",
            "email_verified": True,
            "name": "Alice Liddell",
            "given_name": "Alice",
            "role": "doctor",
        },
    ),
    OidcAccount(
        login="bob",
        password="bob-password-at-the-op",
        sub="op-bob-9d27",
        claims={
            "email": "bob@example.org",
            "email_verified": False,
            "name": "Bob Builder",
            "given_name": "Bob",
            "role": "nurse",
        },
    ),
)
# A scope of their own for the custom claims (besides openid, email and profile).
SCOPES: dict[str, list[str]] = {"employee": ["role"]}


@dataclass
class OidcProvider:
    issuer: str
    client_id: str
    client_secret: str
    redirect_uris: list[str]
    accounts: dict[str, OidcAccount]  # by login
    process: subprocess.Popen[str]
    log_path: Path  # what the provider wrote on stderr
    admin_token: str = field(repr=False)

    @property
    def discovery(self) -> str:
        return self.issuer + "/.well-known/openid-configuration"

    def account(self, login: str) -> OidcAccount:
        return self.accounts[login]

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def add_redirect_uri(self, uri: str, client_id: str | None = None) -> None:
        """Allows `uri` (an exact match) as a redirect URI of the client from now on."""
        answer = requests.post(
            self.issuer + "/test-admin/redirect-uris",
            json={"client_id": client_id or self.client_id, "redirect_uri": uri},
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=10,
        )
        assert answer.status_code == 204, f"{answer.status_code} {answer.text}\n{self.output()}"
        self.redirect_uris.append(uri)


def node_command() -> str:
    """The path of `node`, and the provider's packages installed: else the test fails, saying how."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"node is not on PATH: the OpenID provider tests need Node.js; {INSTALL_HINT}")
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider" / "package.json").is_file():
        pytest.fail(f"{PROVIDER_DIR / 'node_modules'} is missing or incomplete: {INSTALL_HINT}")
    return node


def _read_ready_line(stream: IO[str], lines: list[str], ready: threading.Event) -> None:
    """Reads the provider's stdout until it ends: the READY line, and anything else it prints."""
    for line in stream:
        lines.append(line)
        if line.startswith("READY "):
            ready.set()
    ready.set()  # stdout closed: the process is gone (the caller sees no READY line)


def start_provider(
    folder: Path,
    redirect_uris: Sequence[str] = (DEFAULT_REDIRECT_URI,),
    *,
    client_id: str = CLIENT_ID,
    client_secret: str | None = None,
    token_endpoint_auth_method: str = "client_secret_basic",  # noqa: S107 (a method, no secret)
    accounts: Sequence[OidcAccount] = ACCOUNTS,
    scopes: Mapping[str, Sequence[str]] = SCOPES,
    extra_clients: Sequence[Mapping[str, Any]] = (),
    timeout: float = 30,
) -> OidcProvider:
    """Starts tests/oidc_provider/provider.mjs on a port the system picks; returns once its discovery
    document answers. `extra_clients`: more clients, as provider.mjs takes them."""
    node = node_command()
    folder.mkdir(parents=True, exist_ok=True)
    client_secret = client_secret or secrets.token_urlsafe(24)
    admin_token = secrets.token_urlsafe(24)
    config = {
        "port": 0,
        "clients": [
            {
                "client_id": client_id,
                "client_secret": client_secret,
                "redirect_uris": list(redirect_uris),
                "token_endpoint_auth_method": token_endpoint_auth_method,
            },
            *(dict(client) for client in extra_clients),
        ],
        "accounts": [account.as_config() for account in accounts],
        "scopes": {name: list(claims) for name, claims in scopes.items()},
        "admin_token": admin_token,
    }
    log_path = folder / f"oidc-provider-{time.monotonic_ns()}.log"
    # stderr to a file, not a pipe: a pipe nobody reads would stall a provider that logs a lot.
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [node, str(PROVIDER_SCRIPT), json.dumps(config)],
            cwd=PROVIDER_DIR,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert process.stdout is not None
    lines: list[str] = []
    ready = threading.Event()
    threading.Thread(
        target=_read_ready_line, args=(process.stdout, lines, ready), daemon=True
    ).start()

    def failed(why: str) -> AssertionError:
        stop_process(process)
        stderr = log_path.read_text(encoding="utf-8", errors="replace")
        return AssertionError(
            f"the OpenID provider did not start: {why}\nstdout:\n{''.join(lines)}\nstderr:\n{stderr}"
        )

    deadline = time.monotonic() + timeout
    ready.wait(timeout)
    ready_lines = [line for line in lines if line.startswith("READY ")]
    if not ready_lines:
        raise failed(f"no READY line within {timeout}s (exit status {process.poll()})")
    issuer = ready_lines[0].split()[1]
    provider = OidcProvider(
        issuer=issuer,
        client_id=client_id,
        client_secret=client_secret,
        redirect_uris=list(redirect_uris),
        accounts={account.login: account for account in accounts},
        process=process,
        log_path=log_path,
        admin_token=admin_token,
    )
    while True:
        if process.poll() is not None:
            raise failed(f"exited with status {process.returncode}")
        try:
            answer = requests.get(provider.discovery, timeout=2)
            if answer.status_code == 200 and answer.json().get("issuer") == issuer:
                return provider
            why = f"discovery answered {answer.status_code}: {answer.text[:500]}"
        except (requests.ConnectionError, requests.Timeout, ValueError) as error:
            why = f"discovery did not answer: {error}"
        if time.monotonic() > deadline:
            raise failed(why)
        time.sleep(0.1)


def stop_process(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def stop_provider(provider: OidcProvider) -> None:
    stop_process(provider.process)


# -- Signing in without a browser ------------------------------------------------------------------


def pkce_pair() -> tuple[str, str]:
    """A PKCE code_verifier and its S256 code_challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass
class HtmlForm:
    """A form of a page: where it goes, and its inputs and buttons by name (with their ids)."""

    action: str
    method: str
    form_id: str | None
    fields: dict[str, dict[str, str]]  # name -> the attributes of the <input> or <button>


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[HtmlForm] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append(
                HtmlForm(
                    attributes.get("action", ""),
                    attributes.get("method", "get").lower(),
                    attributes.get("id"),
                    {},
                )
            )
        elif tag in ("input", "button") and self.forms and "name" in attributes:
            self.forms[-1].fields[attributes["name"]] = {"tag": tag, **attributes}


def html_forms(page: str) -> list[HtmlForm]:
    parser = _FormParser()
    parser.feed(page)
    return parser.forms


def follow_redirects(
    session: requests.Session, answer: requests.Response, stop_at: str, limit: int = 10
) -> requests.Response | str:
    """Follows the redirects of `answer` by GET; returns the first Location that starts with
    `stop_at` (not fetched: nothing need listen there), or the first answer that is no redirect."""
    for _ in range(limit):
        if not answer.is_redirect:
            return answer
        location = urljoin(answer.url, answer.headers["Location"])
        if location.startswith(stop_at):
            return location
        answer = session.get(location, allow_redirects=False, timeout=10)
    raise AssertionError(f"more than {limit} redirects, the last to {answer.url}")


def sign_in(
    session: requests.Session, authorization_url: str, login: str, password: str, redirect_uri: str
) -> str:
    """The authorization request at `authorization_url`, the login form filled in as a browser
    would: the URL the provider sends the browser back to (at `redirect_uri`)."""
    page = follow_redirects(
        session, session.get(authorization_url, allow_redirects=False, timeout=10), redirect_uri
    )
    assert isinstance(page, requests.Response), f"no login form: sent straight to {page}"
    forms = [form for form in html_forms(page.text) if form.form_id == "login-form"]
    assert page.status_code == 200 and forms, f"no login form: {page.status_code} {page.text}"
    answer = session.post(
        urljoin(page.url, forms[0].action),
        data={"login": login, "password": password},
        allow_redirects=False,
        timeout=10,
    )
    back = follow_redirects(session, answer, redirect_uri)
    assert isinstance(back, str), f"not sent back: {back.status_code} {back.text}"
    return back


@pytest.fixture(scope="session", name="start_oidc_provider")
def start_oidc_provider_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., OidcProvider]]:
    """A factory: `start_oidc_provider(redirect_uris=[...], **start_provider's options)`."""
    started: list[OidcProvider] = []
    folder = tmp_path_factory.mktemp("oidc-provider")

    def start(
        redirect_uris: Sequence[str] = (DEFAULT_REDIRECT_URI,), **options: Any
    ) -> OidcProvider:
        provider = start_provider(folder, redirect_uris, **options)
        started.append(provider)
        return provider

    yield start
    for provider in started:
        stop_provider(provider)


@pytest.fixture(scope="session", name="oidc_provider")
def oidc_provider_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    """The provider shared by the module's tests: client `CLIENT_ID`, accounts alice and bob."""
    provider = start_provider(tmp_path_factory.mktemp("oidc-provider"))
    yield provider
    stop_provider(provider)
