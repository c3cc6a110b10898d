"""The WSGI application, built from the file named by UMASERVER_CONFIG.

    UMASERVER_CONFIG=config.toml flask --app app run
    UMASERVER_CONFIG=config.toml waitress-serve app:app

`python -m umaserver serve` does the same with waitress and the settings of the file.
"""

from __future__ import annotations

from umaserver import create_app
from umaserver.config import load_config
from umaserver.serving import configure_logging, freeze_startup_objects

config = load_config()
configure_logging(config.logging.format)
app = create_app(config)
freeze_startup_objects()
