"""Mailing notices (issue 25, item 4) to a real SMTP server in the test process (aiosmtpd), never
a mock of smtplib: alice shares with bob over the pages, and the sender's job mails bob; with
the server down the share still succeeds and the mail is retried with growing waits, then sent
when the server is back, or given up on after `max_attempts`; a permanent refusal is not retried;
STARTTLS with a self-signed certificate and a login; without `[mail]` no sender runs."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
import re
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from flask import Flask
from flask.testing import FlaskClient

from umaserver import secrets_at_rest
from umaserver.config import Config
from umaserver.services import notices
from umaserver.services.mail_sender import FIRST_RETRY, POLL_INTERVAL, MailSender
from umaserver.storage.people_records import Notice
from umaserver.storage.records import User

from .conftest import (
    FakeClock,
    Party,
    Store,
    dump_database,
    free_port,
    make_party,
    make_person,
    open_store,
    write_config,
)
from .flows import FlaskApi, Flow, wait_until
from .pages_helpers import TOKEN, sign_in

PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print"]}
PASSWORD = "the-mail-password-never-logged"


class Inbox:
    """aiosmtpd's handler: keeps what it is given; refuses the recipients of `refused`."""

    def __init__(self) -> None:
        self.mails: list[tuple[str, list[str], EmailMessage]] = []
        self.refused: set[str] = set()

    async def handle_RCPT(
        self, server: SMTPServer, session: Session, envelope: Envelope, address: str, _: Any
    ) -> str:
        if address in self.refused:
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        content = envelope.content
        assert isinstance(content, bytes)
        mail = message_from_bytes(content, policy=policy.default)
        assert isinstance(mail, EmailMessage)
        self.mails.append((str(envelope.mail_from), list(envelope.rcpt_tos), mail))
        return "250 OK"


class MailServer:
    """An SMTP server on `port` that can go down and come back (on the same port)."""

    def __init__(self, port: int, **options: Any) -> None:
        self.port = port
        self.inbox = Inbox()
        self.options = options
        self.controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(
            self.inbox, hostname="127.0.0.1", port=self.port, **self.options
        )
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def mail_port() -> int:
    return free_port()


@pytest.fixture
def mail_options() -> dict[str, Any]:
    """`[mail]` keys besides host, port and from; a test parametrizes it."""
    return {"security": "none", "max_attempts": 3}


@pytest.fixture
def mail_extra(
    mail_port: int, mail_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.setenv("UMA_TEST_MAIL_PASSWORD", PASSWORD)
    keys = "".join(f"{key} = {json.dumps(value)}\n" for key, value in mail_options.items())
    return (
        f'[mail]\nhost = "127.0.0.1"\nport = {mail_port}\nfrom = "Photos <uma@example.org>"\n'
        + keys
    )


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str, mail_extra: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    return write_config(tmp_path, extra=mail_extra)


@pytest.fixture
def smtp(mail_port: int) -> Iterator[MailServer]:
    server = MailServer(mail_port)
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    make_person(store, "alice", secrets_at_rest.hash_password("alice's password"))
    make_person(store, "bob", None, {"email": "bob@example.org"})


@pytest.fixture
def flow(http: FlaskClient, rs: Party, store: Store, people: None) -> Flow:
    return Flow(FlaskApi(http), rs, make_party(store, "bob", "uma_authorization"), PHOTOS)


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


def share_with_bob(alice: FlaskClient, flow: Flow) -> None:
    page = f"/policy/resource_set/{flow.rs_id}"
    found = TOKEN.search(alice.get(page).text)
    assert found is not None
    reply = alice.post(
        f"{page}/shares",
        data={"to": "bob", "scopes": ["view", "print"], "csrf_token": found[1]},
    )
    assert reply.status_code == 303, reply.text


def share_with(alice: FlaskClient, flow: Flow, to: str) -> str:
    """alice's Share form for `to`: the page it returns to."""
    page = f"/policy/resource_set/{flow.rs_id}"
    found = TOKEN.search(alice.get(page).text)
    assert found is not None
    reply = alice.post(
        f"{page}/shares", data={"to": to, "scopes": ["view"], "csrf_token": found[1]}
    )
    assert reply.status_code == 303, reply.text
    return alice.get(urlsplit(reply.headers["Location"]).path).text


def test_an_invitation_mails_its_link_to_the_address_and_forgets_it_once_sent(
    alice: FlaskClient, flow: Flow, app: Flask, smtp: MailServer, config: Config
) -> None:
    page = share_with(alice, flow, "Carol@Example.org")
    shown = re.search(r"http://uma\.test/invitations/[A-Za-z0-9_-]{22,}", page)
    assert shown is not None, page  # shown once to alice, and mailed to carol
    wait_until(lambda: smtp.inbox.mails, message="the invitation did not arrive")
    [(_, recipients, mail)] = smtp.inbox.mails
    assert recipients == ["Carol@Example.org"]
    assert mail["Subject"] == "alice shared Holiday photos with you"
    body = mail.get_content().replace("\r\n", "\n")
    assert f"\n\n{shown[0]}\n\n" in body
    assert "it works once, until" in body
    # The link works for carol (the invitation's page); once mailed, the database no longer
    # holds it (the invitation's token is kept as a digest only).
    assert app.test_client().get(urlsplit(shown[0]).path).status_code == 200
    token = shown[0].rsplit("/", 1)[1]
    wait_until(lambda: token not in dump_database(config.database), message="the link is kept")


def bobs_notice(store: Store) -> Notice:
    bob = store.get_user_by_username("bob")
    assert bob is not None
    [notice] = store.notices_of(bob.sub, 10)
    return notice


def test_a_share_with_bob_puts_a_mail_in_his_inbox(
    alice: FlaskClient, flow: Flow, store: Store, smtp: MailServer, app: Flask, clock: FakeClock
) -> None:
    share_with_bob(alice, flow)
    wait_until(lambda: smtp.inbox.mails, message="no mail arrived")
    [(sender, recipients, mail)] = smtp.inbox.mails
    assert (sender, recipients) == ("uma@example.org", ["bob@example.org"])
    assert mail["From"] == "Photos <uma@example.org>"
    assert mail["To"] == "bob@example.org"
    assert mail["Subject"] == "alice shared Holiday photos with you"
    assert mail["Auto-Submitted"] == "auto-generated"
    notice = wait_until(lambda: (n := bobs_notice(store)).mail_state == "sent" and n)
    assert mail["Message-ID"] == f"<{notice.id}@uma.test>"
    assert mail["Date"].datetime == dt.datetime.fromtimestamp(clock.now(), dt.UTC)
    assert mail.get_content_type() == "text/plain"
    body = mail.get_content().replace("\r\n", "\n")  # CRLF on the wire
    assert body.startswith("alice shared Holiday photos with you: view, print.\n")
    assert body.endswith("-- \numaserver at http://uma.test\n")
    assert (notice.attempts, notice.next_attempt_at, notice.last_error) == (1, None, None)
    assert isinstance(app.extensions[MailSender.KEY], MailSender)


def test_with_the_server_down_the_share_succeeds_and_the_mail_waits_for_it(
    alice: FlaskClient, flow: Flow, store: Store, mail_port: int, clock: FakeClock
) -> None:
    share_with_bob(alice, flow)  # nothing listens on the port
    assert flow.ask(flow.ticket("view")).status == 201  # the share holds
    first = wait_until(lambda: (n := bobs_notice(store)).attempts == 1 and n.last_error and n)
    assert first.mail_state == "pending"
    assert first.next_attempt_at == clock.now() + FIRST_RETRY
    assert "ConnectionRefusedError" in (first.last_error or "")

    server = MailServer(mail_port)
    server.start()
    try:
        clock.advance(FIRST_RETRY - 1)  # not due yet: the sender looks, and leaves it
        time.sleep(POLL_INTERVAL + 0.5)
        assert bobs_notice(store).attempts == 1
        assert server.inbox.mails == []
        clock.advance(1)
        wait_until(lambda: server.inbox.mails, message="the retry did not arrive")
        sent = wait_until(lambda: (n := bobs_notice(store)).mail_state == "sent" and n)
        assert (sent.attempts, sent.last_error) == (2, None)
        assert len(server.inbox.mails) == 1
    finally:
        server.stop()


LOGIN = {"username": "uma", "password_env": "UMA_TEST_MAIL_PASSWORD"}


def notify_carol(store: Store, config: Config, clock: FakeClock, message: Any = None) -> User:
    carol = make_person(store, "carol", None, {"email": "carol@example.org"})
    outbox = notices.Outbox.of(config)
    message = message or notices.shared_with_you(
        outbox, owner="alice", set_name="Photos", scopes=["view"], until=None
    )
    notices.notify(store, outbox, message, now=clock.now(), user_sub=carol.sub)
    return carol


@pytest.mark.parametrize("mail_options", [{"security": "none", "max_attempts": 2, **LOGIN}])
def test_a_mail_is_given_up_after_max_attempts_and_the_password_is_never_logged(
    app: Flask,
    config: Config,
    store: Store,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="umaserver")
    sender: MailSender = app.extensions[MailSender.KEY]
    sender.stop()  # run by hand here, one try at a time (nothing listens on the port)
    carol = notify_carol(store, config, clock)
    assert sender.run_once().retried == 1
    assert sender.run_once().total == 0  # not due yet
    clock.advance(FIRST_RETRY)
    assert sender.run_once().failed == 1
    [notice] = store.notices_of(carol.sub, 10)
    assert (notice.mail_state, notice.attempts, notice.next_attempt_at) == ("failed", 2, None)
    assert "ConnectionRefusedError" in (notice.last_error or "")
    clock.advance(10 * FIRST_RETRY)
    assert sender.run_once().total == 0
    logged = [record.getMessage() for record in caplog.records]
    assert any("failed for good after 2 tries" in line for line in logged), logged
    assert not any(PASSWORD in line for line in logged)


def test_a_permanent_refusal_is_not_retried(
    alice: FlaskClient, flow: Flow, store: Store, smtp: MailServer
) -> None:
    smtp.inbox.refused.add("bob@example.org")
    share_with_bob(alice, flow)
    notice = wait_until(lambda: (n := bobs_notice(store)).mail_state == "failed" and n)
    assert (notice.attempts, notice.last_error) == (1, "550 5.1.1 no such mailbox here")
    assert smtp.inbox.mails == []


# -- STARTTLS with a self-signed certificate, and a login ------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and localhost) signed by its own key: (cert, key) files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("smtp-tls"))


class Logins:
    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []

    def __call__(
        self, server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        assert isinstance(data, LoginPassword)
        good = (data.login, data.password) == (b"uma", PASSWORD.encode())
        self.seen.append((data.login.decode(), good))
        return AuthResult(success=good)


@pytest.fixture
def tls_server(
    tls_files: tuple[Path, Path], mail_port: int, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[MailServer, Logins]]:
    """A server that speaks only after STARTTLS and takes only a login over TLS, its certificate
    trusted as an operator trusts a private CA: SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files[0]))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*tls_files)
    logins = Logins()
    server = MailServer(
        mail_port,
        tls_context=context,
        require_starttls=True,
        authenticator=logins,
        auth_required=True,
        auth_require_tls=True,
    )
    server.start()
    yield server, logins
    server.stop()


@pytest.mark.parametrize("mail_options", [{"security": "starttls", **LOGIN}])
def test_starttls_with_a_trusted_self_signed_certificate_and_a_login(
    tls_server: tuple[MailServer, Logins],
    app: Flask,
    config: Config,
    store: Store,
    clock: FakeClock,
) -> None:
    server, logins = tls_server
    message = notices.decision_to_party(
        notices.Outbox.of(config),
        owner="alice",
        set_name="Photos",
        scopes=["print"],
        approved=False,
    )
    notify_carol(store, config, clock, message)
    wait_until(lambda: server.inbox.mails, message="no mail arrived over STARTTLS")
    [(_, recipients, mail)] = server.inbox.mails
    assert recipients == ["carol@example.org"]
    assert mail["Subject"] == "alice denied your request for Photos"
    assert logins.seen == [("uma", True)]


@pytest.mark.parametrize("mail_options", [{"security": "starttls"}])
def test_starttls_refuses_a_certificate_it_does_not_trust(
    tls_server: tuple[MailServer, Logins],
    monkeypatch: pytest.MonkeyPatch,
    app: Flask,
    config: Config,
    store: Store,
    clock: FakeClock,
) -> None:
    server, _ = tls_server
    monkeypatch.delenv("SSL_CERT_FILE")
    carol = notify_carol(store, config, clock)
    notice = wait_until(lambda: (n := store.notices_of(carol.sub, 1)[0]).last_error and n)
    assert "CERTIFICATE_VERIFY_FAILED" in (notice.last_error or "")
    assert notice.mail_state == "pending"
    assert server.inbox.mails == []


@pytest.mark.parametrize("mail_options", [{"security": "tls"}])
def test_tls_from_the_first_byte(
    tls_files: tuple[Path, Path],
    mail_port: int,
    monkeypatch: pytest.MonkeyPatch,
    app: Flask,
    config: Config,
    store: Store,
    clock: FakeClock,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files[0]))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*tls_files)
    server = MailServer(mail_port, server_hostname="127.0.0.1", ssl_context=context)
    server.start()
    try:
        notify_carol(store, config, clock)
        wait_until(lambda: server.inbox.mails, message="no mail arrived over TLS")
        [(_, recipients, _mail)] = server.inbox.mails
        assert recipients == ["carol@example.org"]
    finally:
        server.stop()


# -- several senders on one database ---------------------------------------------------------------


def test_two_senders_on_one_database_send_each_notice_once(
    app: Flask, config: Config, store: Store, clock: FakeClock, smtp: MailServer
) -> None:
    """Two processes' senders (two jobs, each with its own connections) racing on the outbox."""
    app.extensions[MailSender.KEY].stop()
    outbox = notices.Outbox.of(config)
    carol = make_person(store, "carol", None, {"email": "carol@example.org"})
    for n in range(30):
        message = notices.decision_to_party(
            outbox, owner="alice", set_name=f"Set {n}", scopes=["view"], approved=False
        )
        notices.notify(store, outbox, message, now=clock.now(), user_sub=carol.sub)
    assert config.mail is not None
    senders = [
        MailSender(lambda: open_store(config.database), clock, config.mail, config.issuer)
        for _ in range(2)
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda sender: [sender.run_once(limit=4) for _ in range(10)], senders))
    assert sum(run.sent for runs_of_one in runs for run in runs_of_one) == 30
    ids = [mail["Message-ID"] for _, _, mail in smtp.inbox.mails]
    assert len(ids) == len(set(ids)) == 30
    assert {n.mail_state for n in store.notices_of(carol.sub, 100)} == {"sent"}


def test_a_notice_held_by_a_sender_that_died_is_sent_after_its_lease(
    app: Flask, config: Config, store: Store, clock: FakeClock, smtp: MailServer
) -> None:
    sender: MailSender = app.extensions[MailSender.KEY]
    sender.stop()
    carol = notify_carol(store, config, clock)
    [held] = store.claim_due_mail(clock.now(), clock.now() + 600, 10)  # and never recorded
    assert sender.run_once().total == 0
    clock.advance(600)
    assert sender.run_once().sent == 1
    [notice] = store.notices_of(carol.sub, 10)
    assert (notice.id, notice.mail_state, notice.attempts) == (held.id, "sent", 2)
    assert len(smtp.inbox.mails) == 1


@pytest.mark.parametrize("mail_extra", [""])
def test_without_mail_no_sender_runs(
    app: Flask, alice: FlaskClient, flow: Flow, store: Store
) -> None:
    assert MailSender.KEY not in app.extensions
    share_with_bob(alice, flow)
    notice = bobs_notice(store)
    assert (notice.address, notice.mail_state, notice.next_attempt_at) == (
        "bob@example.org",
        "none",
        None,
    )
