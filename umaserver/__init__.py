"""umaserver: a UMA authorization server.

`create_app` is the one way the server is built: by tests, by `app.py` (waitress, `flask --app app`)
and by the command line alike.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field

from flask import Flask

from . import error_responses, secrets_at_rest
from .api import (
    authorization,
    discovery,
    introspection,
    permissions,
    resource_sets,
    rpt,
    token,
)
from .claims.verifiers import ConfiguredVerifiers
from .config import Config, load_config
from .policy.store import PolicyStore
from .storage import sqlite as db

__all__ = ["create_app"]


@dataclass(frozen=True)
class Services:
    """What the blueprints share beyond the database: the owners' rules, the claim verifiers, and
    the key that makes RPTs from their seeds."""

    policies: PolicyStore
    verifiers: ConfiguredVerifiers
    rpt_key: bytes = field(repr=False)


def create_app(config: Config | None = None) -> Flask:
    """Build the app from `config`, or from the file named by UMASERVER_CONFIG.

    Raises ConfigError, PolicyError or ValueError (a broken JWKS file) when it cannot serve.
    """
    if config is None:
        config = load_config()
    app = Flask(__name__)
    app.config.update(
        UMA=config,
        SECRET_KEY=config.secret_key,
        MAX_CONTENT_LENGTH=config.limits.max_body_bytes,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    logging.getLogger("umaserver").setLevel(logging.INFO)

    verifiers = ConfiguredVerifiers(config)
    app.extensions["uma"] = Services(
        PolicyStore(config.policies),
        verifiers,
        secrets_at_rest.reissue_key(config.secret_key, "rpt"),
    )
    verifiers.start()
    # The key-fetching thread ends with the app (tests build many apps in one process).
    weakref.finalize(app, verifiers.stop)

    db.init_app(app)
    error_responses.register_error_handlers(app)
    token.init_app(app)
    for blueprint in (
        discovery.bp,
        token.bp,
        resource_sets.bp,
        permissions.bp,
        rpt.bp,
        authorization.bp,
        introspection.bp,
    ):
        app.register_blueprint(blueprint)
    return app
