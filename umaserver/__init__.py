"""umaserver: a UMA authorization server.

`create_app` is the one way the server is built: by tests, by `app.py` (waitress, `flask --app app`)
and by the command line alike.
"""

from __future__ import annotations

import logging

from flask import Flask

from . import db, discovery, error_responses, oauth, resource_sets
from .config import Config, load_config

__all__ = ["create_app"]


def create_app(config: Config | None = None) -> Flask:
    """Build the app from `config`, or from the file named by UMASERVER_CONFIG."""
    if config is None:
        config = load_config()
    app = Flask(__name__)
    app.config.update(
        UMA=config,
        SECRET_KEY=config.secret_key,
        MAX_CONTENT_LENGTH=config.limits.max_body_bytes,
        JSON_SORT_KEYS=False,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    logging.getLogger("umaserver").setLevel(logging.INFO)

    db.init_app(app)
    error_responses.register_error_handlers(app)
    oauth.init_app(app)
    for blueprint in (discovery.bp, oauth.bp, resource_sets.bp):
        app.register_blueprint(blueprint)
    return app
