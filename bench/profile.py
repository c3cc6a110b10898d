"""Where a path's time goes: `python bench/profile.py [PATH ...] [--requests N] [--html DIR]`.

Builds the benchmark's database and config (10^3 resource sets, 1 rule), then calls the WSGI app
in-process, as waitress would (one environ per request, the body read from a stream), for each
path of the benchmark: prints the mean time per request, and with --profile the pyinstrument
profile of it (text; --html DIR writes one HTML page per path). Runs in one process on one thread:
the figures are the app's own work, without the socket and waitress parts that the bare route also
pays.
"""

from __future__ import annotations

import argparse
import io
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import run, seed  # noqa: E402
from umaserver import create_app  # noqa: E402
from umaserver.config import load_config  # noqa: E402


def environ_for(spec: run.Spec, item: str | None, host: str) -> dict[str, Any]:
    path = spec.path.replace("{item}", item or "")
    query = ""
    if "?" in path:
        path, query = path.split("?", 1)
    body = (spec.body or "").replace("{item}", item or "").encode("utf-8")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": spec.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": host.rsplit(":", 1)[1],
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "CONTENT_LENGTH": str(len(body)),
    }
    for name, value in (spec.headers or {}).items():
        key = name.upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = value
        else:
            environ["HTTP_" + key] = value
    return environ


def caller(app: Any, spec: run.Spec, items: Iterator[str | None], host: str) -> Callable[[], None]:
    def call() -> None:
        statuses: list[str] = []
        environ = environ_for(spec, next(items), host)
        chunks = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
        body = b"".join(chunks)
        if hasattr(chunks, "close"):
            chunks.close()
        if not statuses[0].startswith(str(spec.expect)):
            raise SystemExit(f"{spec.name}: {statuses[0]} {body[:300]!r}")

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="*", help="names of paths (substrings); all by default")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5, help="the best round is reported")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--html", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        port = 8765
        config_path = run.bench_config(folder, port)
        uma = run.Uma(folder, config_path, port)
        uma.set_rules(1, 1)
        uma.grow(1000)
        app = create_app(load_config(config_path))
        host = f"127.0.0.1:{port}"
        _prepare_in_process(uma, app, host)
        for spec in uma.specs():
            if args.paths and not any(name in spec.name for name in args.paths):
                continue
            count = args.requests * 3 + 10
            items: list[str | None] = [None] if spec.items is None else list(spec.items(count))
            pool = _cycle(items, spec.once)
            call = caller(app, spec, pool, host)
            for _ in range(min(200, args.requests // 5)):
                call()
            best = math.inf
            for _ in range(args.rounds):
                started = time.process_time()
                for _ in range(args.requests // args.rounds):
                    call()
                best = min(best, (time.process_time() - started) / (args.requests // args.rounds))
            print(f"{spec.name:32} {best * 1e6:8.0f} us/request (CPU, best of {args.rounds})")
            if args.profile or args.html:
                _profile(call, spec, args.requests, args.html)


def _profile(call: Callable[[], None], spec: run.Spec, requests: int, html: Path | None) -> None:
    """`requests` calls under pyinstrument: the lines of at least 2% as text, or an HTML page."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0002)
    started = time.perf_counter()
    profiler.start()
    for _ in range(requests):
        call()
    profiler.stop()
    print(f"profiled: {(time.perf_counter() - started) / requests * 1e6:.0f} us/request")
    if html is None:
        print(_significant(profiler.output_text(unicode=False, color=False, show_all=True)))
        return
    html.mkdir(parents=True, exist_ok=True)
    page = html / (spec.name.replace(" ", "_").replace("/", "") + ".html")
    page.write_text(profiler.output_html(), encoding="utf-8")


def _significant(text: str, share: float = 0.02) -> str:
    """The profile's lines that took at least `share` of the whole."""
    timed = []
    for line in text.splitlines():
        found = re.search(r"(\d+\.\d{4}) ", line)
        if found:
            timed.append((float(found[1]), line))
    if not timed:
        return text
    total = timed[0][0]
    kept = [line for seconds, line in timed if seconds >= share * total]
    return "\n".join(kept)


def _cycle(items: list[str | None], once: bool) -> Iterator[str | None]:
    if once:
        yield from items
        raise SystemExit("ran out of items")
    while True:
        yield from items


def _prepare_in_process(uma: run.Uma, app: Any, host: str) -> None:
    """`Uma.prepare_flow` against the in-process app (the paths, the RPT with a permission)."""
    client = app.test_client()
    uma.paths = client.get("/.well-known/uma-configuration").get_json()
    uma.paths = {
        key: value.split(host, 1)[-1] for key, value in uma.paths.items() if isinstance(value, str)
    }
    aat = {"Authorization": f"Bearer {uma.parties.aat}"}
    reply = client.post(uma.paths["rpt_endpoint"], headers=aat)
    assert reply.status_code == 200, reply.get_data(as_text=True)
    uma.rpt = reply.get_json()["rpt"]
    ticket = seed.tickets(uma.store, uma.parties, 1, run.TICKET_LIFETIME)[0]
    reply = client.post(
        uma.paths["authorization_request_endpoint"],
        json={"rpt": uma.rpt, "ticket": ticket, "claims": run.DOCTOR},
        headers=aat,
    )
    assert reply.status_code == 201, reply.get_data(as_text=True)
    uma.update_pool = seed.writer_sets(uma.store, uma.parties, 1000, "u")


if __name__ == "__main__":
    main()
