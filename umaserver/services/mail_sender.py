"""The mail sender (issue 25, item 4): a background job that mails the notices whose mail is due,
never a request, so that a mail server that is slow or down never fails or holds up what a
person did (the notice is on their page meanwhile).

Each process that has `[mail]` runs one sender thread. A run claims the due notices
(`claim_due_mail`: one statement, which skips rows another process is taking, and moves each
one's `next_attempt_at` forward by a lease long enough for the whole batch to time out), so that
several processes on one PostgreSQL database never hold one notice at once; sends them over one
connection; and records each outcome at the claim's attempt. A process that dies mid-send leaves
its notices to be taken again when the lease ends; the Message-ID is the notice's own, so the
rare second copy is recognisably the same mail.

The connection follows `[mail] security`: `starttls` (a plain connection upgraded before
anything is said, the certificate checked against the host name), `tls` (TLS from the first
byte) or `none` (a server on the same host or network only); login when `username` is set,
every step bounded by `timeout`. A failure is retried after `FIRST_RETRY` seconds, then twice as
long each time (at most `RETRY_MAX`), up to `max_attempts` tries; a permanent refusal (a 5xx
answer of the server about the message or its recipient) is not retried. The error is kept on
the notice and logged with the notice's id, never the password.

Times in the database are the app's clock's.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from urllib.parse import urlsplit

from ..background import BackgroundJob
from ..clock import Clock
from ..sharing_config import MailSettings
from ..storage import Storage, StorageUnavailable
from ..storage.people_records import Notice

log = logging.getLogger("umaserver.mail")

BATCH = 20  # notices one run takes
POLL_INTERVAL = 2.0  # seconds between looks at the outbox
FIRST_RETRY = 60  # seconds after a first failure
RETRY_MAX = 6 * 3600
ERROR_LENGTH = 500


def retry_delay(attempts: int) -> int:
    """Seconds until the next try after `attempts` tries that failed: 60, 120, 240, ..."""
    return int(min(RETRY_MAX, FIRST_RETRY * 2 ** min(max(attempts - 1, 0), 30)))


@dataclass(frozen=True)
class Sent:
    """What one run did: mails sent, notices to be tried again, notices given up on."""

    sent: int = 0
    retried: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.sent + self.retried + self.failed


class MailSender(BackgroundJob):
    """Sends due notices on a daemon thread; `run_once` is its one step. The app keeps its
    sender in `app.extensions[MailSender.KEY]`."""

    KEY = "umaserver.mail_sender"

    def __init__(
        self,
        open_storage: Callable[[], Storage],
        clock: Clock,
        settings: MailSettings,
        issuer: str,
        interval: float = POLL_INTERVAL,
    ) -> None:
        self._open_storage = open_storage
        self._clock = clock
        self.settings = settings
        self._domain = urlsplit(issuer).hostname or "umaserver.invalid"
        self._issuer = issuer
        self._interval = interval
        self._wake = threading.Event()
        super().__init__("umaserver-mail")

    def wake(self) -> None:
        """Look at the outbox now (a notice was written)."""
        self._wake.set()

    def stop(self) -> None:
        self._wake.set()
        super().stop()

    def run_once(self, limit: int = BATCH) -> Sent:
        """Takes at most `limit` due notices and mails them, now, in this thread."""
        storage = self._open_storage()
        try:
            now = self._clock.now()
            # Long enough for every step of the batch to end on its timeout.
            lease = now + (limit + 3) * self.settings.timeout + 60
            due = storage.claim_due_mail(now, lease, limit)
            if not due:
                return Sent()
            return self._send(storage, due)
        finally:
            storage.close()  # a job holds no connection between its runs

    def message(self, notice: Notice) -> EmailMessage:
        """The mail of a notice: plain text, From `[mail] from`, a Message-ID of its own."""
        mail = EmailMessage()
        mail["From"] = self.settings.from_address
        mail["To"] = notice.address or ""
        mail["Subject"] = notice.subject
        mail["Date"] = formatdate(notice.created_at, usegmt=True)
        mail["Message-ID"] = f"<{notice.id}@{self._domain}>"
        # RFC 3834: an automatic message; auto-responders leave it alone.
        mail["Auto-Submitted"] = "auto-generated"
        mail.set_content(f"{notice.body}\n-- \numaserver at {self._issuer}\n")
        return mail

    def _send(self, storage: Storage, due: list[Notice]) -> Sent:
        sent = retried = failed = 0
        try:
            connection = self._connect()
        except OSError as error:  # smtplib's and ssl's errors among them
            for notice in due:
                if self._failed(storage, notice, _describe(error), permanent=False):
                    retried += 1
                else:
                    failed += 1
            return Sent(0, retried, failed)
        try:
            for notice in due:
                try:
                    connection.send_message(self.message(notice))
                except (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused) as error:
                    # The server's answer about this message (smtplib's errors are OSErrors too).
                    if self._failed(storage, notice, _describe(error), _permanent(error)):
                        retried += 1
                    else:
                        failed += 1
                except ValueError as error:  # no mail can be written to that address
                    self._failed(storage, notice, _describe(error), permanent=True)
                    failed += 1
                except OSError as error:
                    # The connection is gone (smtplib's SMTPServerDisconnected, a timeout, a
                    # reset): this notice and the rest wait for the next run.
                    for left in due[due.index(notice) :]:
                        if self._failed(storage, left, _describe(error), permanent=False):
                            retried += 1
                        else:
                            failed += 1
                    break
                else:
                    if storage.record_mail_sent(notice.id, notice.attempts):
                        log.info("mailed notice %s (%s)", notice.id, notice.kind)
                    else:  # the batch outlived its lease: another sender may have taken it
                        log.warning("mailed notice %s after its claim had passed", notice.id)
                    sent += 1
        finally:
            try:
                connection.quit()
            except (OSError, smtplib.SMTPException):
                connection.close()
        return Sent(sent, retried, failed)

    def _connect(self) -> smtplib.SMTP:
        settings = self.settings
        # The system's trusted certificates (SSL_CERT_FILE and SSL_CERT_DIR name others).
        context = ssl.create_default_context()
        connection: smtplib.SMTP
        if settings.security == "tls":
            connection = smtplib.SMTP_SSL(
                settings.host, settings.port, timeout=settings.timeout, context=context
            )
        else:
            connection = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
        try:
            if settings.security == "starttls":
                connection.starttls(context=context)
            if settings.username is not None:
                connection.login(settings.username, settings.password or "")
        except BaseException:
            connection.close()
            raise
        return connection

    def _failed(self, storage: Storage, notice: Notice, error: str, permanent: bool) -> bool:
        """Records a failed try: True when the notice will be tried again."""
        again = not permanent and notice.attempts < self.settings.max_attempts
        delay = retry_delay(notice.attempts)
        next_attempt = self._clock.now() + delay if again else None
        storage.record_mail_failure(notice.id, notice.attempts, error, next_attempt)
        if again:
            log.warning(
                "mailing notice %s failed (try %d of %d): %s; trying again in %d s",
                notice.id,
                notice.attempts,
                self.settings.max_attempts,
                error,
                delay,
            )
        else:
            log.error(
                "mailing notice %s failed for good after %d tries: %s",
                notice.id,
                notice.attempts,
                error,
            )
        return again

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                busy = self.run_once().total > 0
            except StorageUnavailable as error:
                log.debug("the outbox could not be read: %s; trying again", error)
                busy = False
            except Exception:  # anything else is a bug worth a traceback; the job goes on
                log.exception("the outbox could not be read; trying again")
                busy = False
            if not busy:
                self._wake.wait(self._interval)
                self._wake.clear()


def _permanent(error: Exception) -> bool:
    """Whether the server refused the message for good (a 5xx answer)."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in error.recipients.values())
    if isinstance(error, smtplib.SMTPResponseException):
        return error.smtp_code >= 500
    return False


def _describe(error: BaseException) -> str:
    """The error as kept on the notice and logged: its kind and the server's words."""
    if isinstance(error, smtplib.SMTPResponseException):
        text = error.smtp_error
        words = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        found = f"{error.smtp_code} {words}"
    elif isinstance(error, smtplib.SMTPRecipientsRefused):
        found = "; ".join(
            f"{code} {text.decode('utf-8', 'replace')}" for code, text in error.recipients.values()
        )
    else:
        found = f"{type(error).__name__}: {error}"
    return " ".join(found.split())[:ERROR_LENGTH]
