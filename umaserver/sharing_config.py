"""The owner's side of the configuration: `[sharing]` (shares, invitations and requests to the
owner) and `[mail]` (the notices sent by e-mail), each read from its TOML table into a typed,
validated object. Every problem is recorded by the reader, one line per key."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from email.utils import parseaddr
from pathlib import Path

from .toml_reader import TableReader, non_empty, positive, valid_port

DAY = 86400
MAIL_SECURITY = ("starttls", "tls", "none")
# The usual port of each way of securing the connection (RFC 8314 for implicit TLS).
MAIL_PORTS = {"starttls": 587, "tls": 465, "none": 25}


@dataclass(frozen=True)
class SharingSettings:
    # Seconds an invitation link (sent when an owner shares with an e-mail address that no local
    # user has) may be used: 7 days.
    invitation_lifetime: int = 7 * DAY
    # true: an invited person without an account sets a password through the link and gets one.
    invitations_create_accounts: bool = False
    # true: a client acting for a person may ask the owner when the rules refuse (submit_request);
    # each owner may still turn it off on /account.
    requests: bool = True
    # Seconds a client is told to wait between polls of a pending request (`interval`).
    poll_interval: int = 5
    # Seconds a request waits for the owner's answer before its ticket answers expired_ticket.
    request_lifetime: int = 7 * DAY
    # Pending requests one requesting party may have at once; past it, refusals stay refusals.
    max_pending_requests: int = 20


@dataclass(frozen=True)
class MailSettings:
    host: str
    from_address: str
    port: int = 587
    # "starttls" (upgrade a plain connection), "tls" (TLS from the first byte) or "none".
    security: str = "starttls"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    # Seconds one connection to the mail server may take.
    timeout: int = 10
    # Times a notice is tried before it is given up on (the waits between them grow).
    max_attempts: int = 5


def sharing_settings(reader: TableReader) -> SharingSettings:
    default = SharingSettings()
    settings = SharingSettings(
        invitations_create_accounts=reader.take(
            "invitations_create_accounts", bool, default.invitations_create_accounts
        ),
        requests=reader.take("requests", bool, default.requests),
        **{
            name: reader.take(name, int, getattr(default, name), positive)
            for name in (
                "invitation_lifetime",
                "poll_interval",
                "request_lifetime",
                "max_pending_requests",
            )
        },
    )
    reader.finish()
    return settings


def mail_settings(reader: TableReader, present: bool, base: Path) -> MailSettings | None:
    """`[mail]`, or None when the table is absent (notices then show on the pages only). The
    password is read here, from the environment variable `password_env` names or the file
    `password_file` names (relative to the configuration file), never from the file itself."""
    if not present:
        reader.finish()
        return None
    errors_before = len(reader.errors)
    host = reader.take("host", str, None, non_empty)
    from_address = reader.take("from", str, None, _address)
    security = reader.take("security", str, "starttls", _one_of_security)
    port = reader.take("port", int, MAIL_PORTS.get(security, 587), valid_port)
    username = reader.take("username", str, "", non_empty) or None
    password_env = reader.take("password_env", str, "", non_empty)
    password_file = reader.take("password_file", str, "", non_empty)
    timeout = reader.take("timeout", int, MailSettings.timeout, positive)
    max_attempts = reader.take("max_attempts", int, MailSettings.max_attempts, positive)
    reader.finish()
    password = None
    if password_env and password_file:
        reader.errors.append(f"{reader.where}: give at most one of password_env and password_file")
    elif password_env:
        password = os.environ.get(password_env)
        if not password:
            reader.errors.append(
                f"{reader.where}.password_env: the environment variable {password_env} is not set"
            )
    elif password_file:
        path = (base / password_file).resolve()
        try:
            password = path.read_text(encoding="utf-8").strip()
        except OSError as error:
            reader.errors.append(
                f"{reader.where}.password_file: {path} cannot be read: {error.strerror}"
            )
        else:
            if not password:
                reader.errors.append(f"{reader.where}.password_file: {path} is empty")
    if username is None and (password_env or password_file):
        reader.errors.append(f"{reader.where}: a password is given without a username")
    if username is not None and not (password_env or password_file):
        reader.errors.append(
            f"{reader.where}: username is given: give password_env or password_file too"
        )
    if len(reader.errors) > errors_before:
        return None
    return MailSettings(
        host=host,
        from_address=from_address,
        port=port,
        security=security,
        username=username,
        password=password,
        timeout=timeout,
        max_attempts=max_attempts,
    )


def _address(value: str) -> str | None:
    """An address, bare or with a display name ("Photos <photos@example.org>")."""
    _, address = parseaddr(value)
    local, at, domain = address.rpartition("@")
    if not at or not local or "." not in domain:
        return "must be an e-mail address (photos@example.org or Photos <photos@example.org>)"
    return None


def _one_of_security(value: str) -> str | None:
    if value in MAIL_SECURITY:
        return None
    return f"must be one of {', '.join(MAIL_SECURITY)}"
