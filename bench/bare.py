"""The ceiling: a bare Flask route returning a constant JSON object, on the same stack.

    python bench/bare.py --config CONFIG --port PORT     # waitress, by umaserver's `make_server`
    gunicorn bench.bare:app                              # the same app under gunicorn

Served with the settings of CONFIG's [server] and [limits] (threads, connection limit, timeouts,
body limit), exactly as `python -m umaserver serve` serves umaserver.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from flask import Flask, Response

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/bare.py`: the checkout is not on sys.path
    sys.path.insert(0, str(ROOT))

# About the size of umaserver's small answers.
BODY = json.dumps({"hello": "world", "active": True, "scope": "view print"}).encode("utf-8")

app = Flask("bare")


@app.get("/bare")
def bare() -> Response:
    return Response(BODY, status=200, content_type="application/json")


def main() -> None:
    from umaserver.config import load_config
    from umaserver.serving import freeze_startup_objects, make_server

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args()
    config = load_config(options.config)
    settings = replace(config.server, port=options.port)
    server = make_server(app, config.limits.max_body_bytes, settings)
    print(json.dumps({"listening": f"http://{server.effective_host}:{server.effective_port}"}))
    sys.stdout.flush()
    freeze_startup_objects()  # as `python -m umaserver serve` does
    server.run()


if __name__ == "__main__":
    main()
