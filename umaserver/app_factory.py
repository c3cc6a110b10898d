"""The app factory: `create_app` is the one way the server is built, by tests, by `app.py`
(waitress, `flask --app app`) and by the command line alike. `umaserver.create_app` is this one,
imported only when first asked for (`umaserver/__init__.py`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask, Response

from . import error_responses, pages, secrets_at_rest, wsgi_request
from .api import (
    authorization,
    discovery,
    health,
    introspection,
    jwks,
    keycloak_policies,
    keycloak_realm,
    keycloak_resources,
    metadata,
    metrics,
    openapi,
    permissions,
    registration,
    resource_sets,
    revocation,
    rpt,
    token,
)
from .clock import Clock, SystemClock
from .config import Config, load_config
from .fetching import running
from .fetching.job import FetchJob
from .pages import (
    account,
    authorize,
    claims_interaction,
    external_signin,
    history,
    invitations,
    notices,
    policy,
    requests,
    rqp_claims,
    untrusted,
)
from .policy.store import PolicyStore, require_rule_file
from .runtime import Runtime, install
from .services import signing_keys
from .services.claim_verifiers import ConfiguredVerifiers
from .services.database import Opener
from .services.mail_sender import MailSender
from .services.maintenance import EXPIRED_MEMORY, CheckpointJob, PruneJob
from .storage import is_postgresql, per_request

if TYPE_CHECKING:
    from .services.postgresql_opener import PostgreSQLOpener

__all__ = ["create_app"]


def create_app(config: Config | None = None, clock: Clock | None = None) -> Flask:
    """Build the app from `config`, or from the file named by UMASERVER_CONFIG, with the database
    created or upgraded (or, when its storage cannot be used now, an ERROR logged and 503s until
    it can). `clock` is where every part of the server reads the time.

    Raises ConfigError, MissingRuleFile (the config names a rule file that is not there),
    PolicyError, StorageError, ClashingUsernames (a user named like a client's
    own name, from before names were checked) or ValueError (a broken JWKS file) when it cannot
    serve.
    """
    if config is None:
        config = load_config()
    require_rule_file(config.policies)
    clock = clock or SystemClock()
    app = _App("umaserver")  # the package: its templates, its static files, its logger
    app.request_class = wsgi_request.Request
    app.config.update(
        SECRET_KEY=config.secret_key,
        # Cookies signed under a key still listed in `secret_keys` keep verifying.
        SECRET_KEY_FALLBACKS=list(config.secret_keys[1:]),
        MAX_CONTENT_LENGTH=config.limits.max_body_bytes,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    logging.getLogger("umaserver").setLevel(logging.INFO)
    # `/metrics` and the counts behind it, when `[metrics] enabled` (prometheus_client only then),
    # before any thread starts: a multiprocess mode that cannot be turned on stops the build.
    metrics.init_app(app, config)

    opener: Opener | PostgreSQLOpener
    if is_postgresql(config.database):  # its version is checked, never changed (`init` does)
        # psycopg (the `postgresql` extra) is imported only here, with a PostgreSQL database.
        from .services.postgresql_opener import PostgreSQLOpener

        opener = PostgreSQLOpener(str(config.database), clock, config.postgresql)
    else:
        opener = Opener(Path(config.database), clock)
    opener.prepare_or_log()
    per_request.init_app(app, opener)
    weakref.finalize(app, opener.close_idle)  # the pooled connections end with the app

    verifiers = ConfiguredVerifiers(config)
    policies = PolicyStore(config.policies)
    install(
        app,
        Runtime(
            config=config,
            clock=clock,
            policies=policies,
            verifiers=verifiers,
            rpt_keys=secrets_at_rest.reissue_keys(config.secret_keys, "rpt"),
            csrf_keys=secrets_at_rest.reissue_keys(config.secret_keys, "csrf"),
            jwt_rpts=signing_keys.configured(config),
        ),
    )
    verifiers.start()
    # The key-fetching thread ends with the app (tests build many apps in one process).
    weakref.finalize(app, verifiers.stop)
    # The rule file is watched and parsed on a thread of its own: a request never waits for it.
    policies.start()
    weakref.finalize(app, policies.stop)
    # Expired tokens, tickets and claims are forgotten on a thread of their own, never in a request.
    pruning = PruneJob(
        opener,
        clock,
        config.maintenance.prune_interval,
        failure_memory=max(EXPIRED_MEMORY, config.signin.window + config.signin.lockout),
        event_memory=config.audit.keep_days * 24 * 3600,
    )
    pruning.start()
    weakref.finalize(app, pruning.stop)
    if isinstance(opener, Opener):
        # SQLite's write-ahead log is copied into the database file on a thread of its own too,
        # never by a request's commit.
        checkpoints = CheckpointJob(opener.checkpoint)
        checkpoints.start()
        weakref.finalize(app, checkpoints.stop)
    # What registrations point at is fetched and checked on a thread of its own (issue 12): a
    # request only queues a URI and reads what was found.
    fetching = FetchJob(opener, clock, config.fetch)
    running.install(app, fetching)
    fetching.start()
    weakref.finalize(app, fetching.stop)
    if config.mail is not None:
        # Notices are mailed on a thread of their own, never by a request (issue 25, item 4).
        mailing = MailSender(opener, clock, config.mail, config.issuer)
        app.extensions[MailSender.KEY] = mailing
        mailing.start()
        weakref.finalize(app, mailing.stop)

    error_responses.register_error_handlers(app)
    app.register_blueprint(health.bp)
    app.after_request(_no_store)
    token.init_app(app, config.lifetimes.access_token)
    revocation.init_app(app)
    for blueprint in (
        discovery.bp,
        token.bp,
        resource_sets.bp,
        permissions.bp,
        rpt.bp,
        authorization.bp,
        introspection.bp,
        openapi.bp,
        metadata.bp,
        revocation.bp,
        registration.bp,
        jwks.bp,
    ):
        app.register_blueprint(blueprint)
    if config.keycloak.realm is not None:
        # Keycloak's URL layout for one realm: a second face over the same services.
        app.register_blueprint(keycloak_realm.bp, url_prefix=f"/realms/{config.keycloak.realm}")
        # Keycloak's user-managed policy API on the realm face.
        app.register_blueprint(
            keycloak_policies.bp, url_prefix=f"/realms/{config.keycloak.realm}/authz/protection"
        )
        # Keycloak's resource registration on the realm face.
        app.register_blueprint(
            keycloak_resources.bp, url_prefix=f"/realms/{config.keycloak.realm}/authz/protection"
        )
    # The pages for people (home, sign-in): HTML, their own headers and error pages.
    pages.init_app(app)
    untrusted.init_app(app)
    pages.register(app, authorize.bp)
    pages.register(app, account.bp)
    # The owner's policy pages: each resource set's user_access_policy_uri.
    pages.register(app, policy.bp)
    # The owner's access history.
    pages.register(app, history.bp)
    # The owner's requests for access (asked with submit_request).
    pages.register(app, requests.bp)
    # Invitations to shares by e-mail: the invited person's page, the owner's buttons.
    pages.register(app, invitations.bp)
    # A person's notices (shares with them, requests, decisions).
    pages.register(app, notices.bp)
    # The requesting party claims endpoint, and signing in at external OpenID Connect providers
    # for it (this server their relying party).
    pages.register(app, rqp_claims.bp)
    pages.register(app, claims_interaction.bp)
    external_signin.init_app(app, config)
    pages.register(app, external_signin.bp)
    return app


class _App(Flask):
    """Flask, asking once per function whether it is a coroutine function: Flask asks again of
    every view and hook on every request (`ensure_sync`, which Flask documents for overriding),
    and none here is one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plain: set[Callable[..., Any]] = set()

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        if func in self._plain:
            return func
        found: Callable[..., Any] = super().ensure_sync(func)
        if found is func and len(self._plain) < 1024:  # views and hooks: a few dozen
            self._plain.add(func)
        return found


def _no_store(response: Response) -> Response:
    """API answers carry tokens and owners' data: no cache keeps them (RFC 6749 5.1). An answer
    that says how it may be cached (the configuration document, pages) keeps its own word. Every
    JSON answer, errors too, is JSON to a browser and nothing else (`nosniff`). Answers written
    by `error_responses.json_response` (and pages) carry their headers already."""
    headers = response.headers
    if "X-Content-Type-Options" in headers or not response.is_json:
        return response
    if "Cache-Control" not in headers:
        headers["Cache-Control"] = "no-store"
        headers["Pragma"] = "no-cache"
    headers["X-Content-Type-Options"] = "nosniff"
    return response
