"""Benchmarks against a real server: `make bench` (or `python bench/run.py --help`).

Starts `python -m umaserver serve` on a free loopback port with a throwaway config, provisions a
resource server, a client and a rule, then measures with concurrent HTTP clients:

- permission registrations (ticket issuing),
- authorization requests that are granted (each with its own ticket, into the client's one RPT),
- authorization requests without claims, answered need_claims,
- resource set reads.

Prints one JSON document: requests per second and latency percentiles for each. The load is bounded
in count and time and goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
# The rule file is the tests' own (tests/flows.py, which needs only `requests`): run as
# `python bench/run.py`, this script's folder is on sys.path, not the checkout's.
sys.path.insert(0, str(ROOT))
from tests.flows import DOCTORS_MAY_VIEW, EMPLOYEE  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def command(config: Path, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "umaserver", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


def measure(name: str, count: int, concurrency: int, one: Callable[[int], int]) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def run(index: int) -> None:
        started = time.perf_counter()
        status = one(index)
        elapsed = time.perf_counter() - started
        with lock:
            latencies.append(elapsed)
            statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(run, range(count)))
    total = time.perf_counter() - started
    latencies.sort()
    return {
        "name": name,
        "requests": count,
        "concurrency": concurrency,
        "seconds": round(total, 3),
        "requests_per_second": round(count / total, 1),
        "latency_ms": {
            "p50": round(statistics.median(latencies) * 1000, 2),
            "p95": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 2),
            "max": round(latencies[-1] * 1000, 2),
        },
        "statuses": statuses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="simultaneous clients")
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        config = Path(folder) / "bench.toml"
        (Path(folder) / "policies.toml").write_text(DOCTORS_MAY_VIEW, encoding="utf-8")
        config.write_text(
            f'issuer = "{url}"\ndatabase = "bench.db"\npolicies = "policies.toml"\n'
            f'secret_key = "{"b" * 40}"\n[lifetimes]\nticket = 3600\n',
            encoding="utf-8",
        )
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "umaserver",
                "--config",
                str(config),
                "serve",
                "--port",
                str(port),
                "--threads",
                str(options.threads),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            for _ in range(300):
                if server.poll() is not None:
                    sys.exit(f"the server exited with status {server.returncode}")
                try:
                    requests.get(url + "/.well-known/uma-configuration", timeout=1)
                    break
                except requests.ConnectionError:
                    time.sleep(0.05)
            else:
                sys.exit("the server did not answer within 15 seconds")
            results = run_all(url, config, options.requests, options.concurrency)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(
        json.dumps(
            {
                "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                "threads": options.threads,
                "results": results,
            },
            indent=2,
        )
    )


def run_all(url: str, config: Path, count: int, concurrency: int) -> list[dict[str, Any]]:
    rs = command(config, "client", "create", "--name", "bench RS")
    app = command(config, "client", "create", "--name", "bench app", "--push-claims", EMPLOYEE)
    command(config, "user", "create", "alice")
    command(config, "user", "create", "bob")
    pat = command(
        config,
        "token",
        "issue",
        "--client",
        rs["client_id"],
        "--user",
        "alice",
        "--scope",
        "uma_protection",
    )["access_token"]
    aat = command(
        config,
        "token",
        "issue",
        "--client",
        app["client_id"],
        "--user",
        "bob",
        "--scope",
        "uma_authorization",
    )["access_token"]
    local = threading.local()

    def session(token: str) -> requests.Session:
        key = f"s{token[-6:]}"
        if not hasattr(local, key):
            http = requests.Session()
            http.headers["Authorization"] = f"Bearer {token}"
            setattr(local, key, http)
        found: requests.Session = getattr(local, key)
        return found

    rs_id = requests.post(
        url + "/rs/resource_set",
        json={"name": "X-rays", "scopes": ["view"]},
        headers={"Authorization": f"Bearer {pat}"},
        timeout=10,
    ).json()["_id"]
    tickets: list[str] = []

    def register(_: int) -> int:
        response = session(pat).post(
            url + "/permission", json={"resource_set_id": rs_id, "scopes": ["view"]}, timeout=30
        )
        tickets.append(response.json()["ticket"])
        return response.status_code

    doctor = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
    # The client holds one RPT and sends it each time, as a client does: grants go into it.
    rpt = session(aat).post(url + "/rpt", timeout=30).json()["rpt"]

    def authorize(index: int) -> int:
        return (
            session(aat)
            .post(
                url + "/rpt_authorization",
                json={"rpt": rpt, "ticket": tickets[index], "claims": doctor},
                timeout=30,
            )
            .status_code
        )

    def ask_without_claims(index: int) -> int:
        # need_claims: the ticket stays open, so each request uses its own.
        return (
            session(aat)
            .post(
                url + "/rpt_authorization",
                json={"rpt": rpt, "ticket": tickets[count + index]},
                timeout=30,
            )
            .status_code
        )

    def read(_: int) -> int:
        return session(pat).get(f"{url}/rs/resource_set/{rs_id}", timeout=30).status_code

    return [
        measure("permission registration", 2 * count, concurrency, register),
        measure("authorization request (granted)", count, concurrency, authorize),
        measure("authorization request (need_claims)", count, concurrency, ask_without_claims),
        measure("resource set read", count, concurrency, read),
    ]


if __name__ == "__main__":
    main()
