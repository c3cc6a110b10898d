"""The benchmark: `make bench` (or `make bench QUICK=1`; `python bench/run.py --help`).

Real processes on loopback, loaded by wrk (Debian's package) with the Lua script
bench/wrk/request.lua, which checks every answer: a run with an unexpected status or body, a
socket error, or more requests than it had tickets for is reported as failed, never as fast.
The server (and the peer) run pinned to one core, wrk to another, where the machine has two.

1. The ceiling and every path, waitress: a bare Flask route returning a constant JSON object
   (bench/bare.py, on umaserver's own `make_server` and settings), then every path at 10^3
   resource sets and 1 rule, at concurrency 1, 8 and 64, each as a fraction of the bare route.
2. The same under gunicorn at concurrency 8 (the bare route too).
3. The peer: oidc-provider (tests/oidc_provider, pinned there) with one client and the same token
   lifetime, for token client_credentials and introspection: our throughput over its.
4. Growth at concurrency 8 (read, introspection, permission registration, the granted
   authorization request): 10^3, 10^5 and 10^6 resource sets over 10^3 owners (alice, the owner
   asked about, holds a tenth, at most 10^4), seeded through the storage contract; then at the
   largest size 100 and 10^4 rules for alice (file rules with selectors, 10 of them covering the
   set asked about), and 10^4 with 100 covering it.
5. Listing at each size of the growth runs: the resource set list of alice and of another owner,
   whose own sets differ from the database's size (is its cost linear in the owner's own sets
   only?).

Writes bench/results/latest.md (tables, machine, versions, config, commit), latest.json and
throughput.png (throughput against database size). QUICK=1 (or --quick) runs a small subset.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/run.py`: the checkout is not on sys.path
    sys.path.insert(0, str(ROOT))

from bench import seed, targets  # noqa: E402
from bench.plan import Plan, Result  # noqa: E402
from bench.report import write  # noqa: E402
from tests.flows import DOCTORS_MAY_VIEW, EMPLOYEE, HttpApi, endpoints  # noqa: E402

BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
LUA = BENCH / "wrk" / "request.lua"
PEER = ROOT / "tests" / "oidc_provider"
TICKET_LIFETIME = 7 * 24 * 3600  # tickets minted ahead of a run outlive it
# Tickets (and sets to delete) for a warm-up: at most this rate, per second of warm-up.
WARM_RATE = 3000
# UMA 2.0's grant at the token endpoint (the uma-ticket path).
UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"
# The token lifetime of both servers (config.example.toml's access_token).
TOKEN_LIFETIME = 3600
PEER_SECRET = "peer-secret-" + "0123456789abcdef" * 2

DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
NURSE = [{"type": EMPLOYEE, "value": {"role": ["nurse"]}}]
DEPARTMENT = [{"type": EMPLOYEE, "value": {"department": "radiology"}}]

# The benchmark's PostgreSQL: durable like the SQLite database (WAL, synchronous = NORMAL): fsync
# and full page writes on, commits not waiting for the WAL flush (a crash of the machine may lose
# the last commits, never corrupt; a crash of the server loses nothing).
POSTGRESQL = {
    "synchronous_commit": "off",
    "shared_buffers": "128MB",
    "max_connections": "200",
}

# The owner listed beside alice in the listing runs: one of the others (seed.owner_subs), holding
# about (sets - alice's) / 999 of them.
LIST_OTHER = "owner0001"


# -- the machine ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cores:
    server: str  # taskset's list for the servers ("" when not pinned)
    load: str  # for wrk
    note: str


def cores() -> Cores:
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2 or shutil.which("taskset") is None:
        return Cores("", "", f"not pinned ({len(available)} core(s) available, or no taskset)")
    server, load = available[0], available[-1]
    return Cores(str(server), str(load), f"server on core {server}, wrk on core {load} (taskset)")


def pinned(cpus: str, command: Sequence[str]) -> list[str]:
    return ["taskset", "-c", cpus, *command] if cpus else list(command)


def output(command: Sequence[str], cwd: Path = ROOT) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    return (done.stdout or done.stderr).strip()


def machine(plan: Plan, placement: Cores) -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    wrk = output(["wrk", "-v"]).splitlines()
    peer_version = "unknown"
    lock = PEER / "node_modules" / "oidc-provider" / "package.json"
    if lock.exists():
        peer_version = json.loads(lock.read_text())["version"]
    import gunicorn
    import waitress

    return {
        "cpu": model,
        "cores": str(os.cpu_count()),
        "pinning": placement.note,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "wrk": wrk[0] if wrk else "unknown",
        "node": output(["node", "--version"]),
        "oidc-provider": peer_version,
        "waitress": getattr(waitress, "__version__", None) or _dist_version("waitress"),
        "gunicorn": gunicorn.__version__,
        "postgresql": _postgres_version(),
        "psycopg": _dist_version("psycopg"),
        "commit": output(["git", "rev-parse", "HEAD"]),
        "commit_subject": output(["git", "log", "-1", "--format=%s"]),
        "dirty": "yes" if output(["git", "status", "--porcelain"]) else "no",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "plan": "quick" if plan.quick else "full",
    }


def _postgres_version() -> str:
    from tests.postgres_cluster import find_bindir

    bindir = find_bindir()
    return output([str(bindir / "postgres"), "--version"]) if bindir else "not installed"


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


# -- processes -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def peak_rss_mb(pid: int) -> float:
    """The sum of VmHWM (peak resident set) over the process tree, in MB."""
    total = 0
    for member in tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


class Server:
    """A process serving on loopback, ready once `probe` answers 200."""

    def __init__(self, name: str, command: list[str], probe: str, env: dict[str, str]) -> None:
        self.name = name
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=self.log,
            stderr=self.log,
            env={**os.environ, **env},
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                sys.exit(f"{name} exited with status {self.process.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(probe, timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                sys.exit(f"{name} did not answer {probe} within 60 seconds:\n{self.tail()}")
            time.sleep(0.1)

    def tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-3000:]

    def rss(self) -> float:
        return peak_rss_mb(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


# -- one measured run ----------------------------------------------------------------------------


@dataclass
class Spec:
    """One path: the request wrk sends, and the answer it must get."""

    name: str
    method: str
    path: str  # "{item}" is replaced by the request's item
    expect: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    body_match: str | None = None  # a Lua pattern
    items: Callable[[int], list[str]] | None = None  # makes `count` items
    once: bool = False  # each item serves one request (tickets, sets to delete)


class Runner:
    def __init__(self, plan: Plan, placement: Cores, folder: Path) -> None:
        self.plan = plan
        self.placement = placement
        self.folder = folder
        self.results: list[Result] = []

    def wrk(
        self, url: str, spec: Spec, concurrency: int, seconds: int, items: list[str]
    ) -> dict[str, Any]:
        threads = (
            1 if not self.placement.load else min(concurrency, len(self.placement.load.split(",")))
        )
        files = self.folder / "wrk"
        files.mkdir(exist_ok=True)
        (files / "headers").write_text("".join(f"{k}: {v}\n" for k, v in spec.headers.items()))
        (files / "body").write_text(spec.body or "")
        (files / "items").write_text("".join(item + "\n" for item in items))
        env = {
            "BENCH_METHOD": spec.method,
            "BENCH_PATH": spec.path,
            "BENCH_HEADERS": str(files / "headers"),
            "BENCH_BODY": str(files / "body") if spec.body is not None else "",
            "BENCH_ITEMS": str(files / "items") if items else "",
            "BENCH_ONCE": "1" if spec.once else "0",
            "BENCH_EXPECT": str(spec.expect),
            "BENCH_BODY_MATCH": spec.body_match or "",
            "BENCH_THREADS": str(threads),
        }
        command = pinned(
            self.placement.load,
            [
                "wrk",
                f"-t{threads}",
                f"-c{concurrency}",
                f"-d{seconds}s",
                "--timeout",
                "10s",
                "-s",
                str(LUA),
                url,
            ],
        )
        done = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **env}, timeout=seconds + 60
        )
        for line in done.stdout.splitlines():
            if line.startswith("BENCH-JSON "):
                found: dict[str, Any] = json.loads(line.removeprefix("BENCH-JSON "))
                return found
        sys.exit(f"wrk gave no result for {spec.name}:\n{done.stdout}\n{done.stderr}")

    def measure(
        self,
        server: Server,
        url: str,
        spec: Spec,
        concurrency: int,
        *,
        section: str,
        sets: int,
        rules: str,
    ) -> Result:
        warm_items: list[str] = []
        if spec.items is not None:
            warm_items = spec.items(
                max(200, math.ceil(WARM_RATE * self.plan.warmup)) if spec.once else 1000
            )
        warm = self.wrk(url, spec, concurrency, self.plan.warmup, warm_items)
        items = warm_items
        if spec.items is not None and spec.once:
            rate = warm["requests"] / max(warm["duration_us"] / 1e6, 0.001)
            items = spec.items(max(500, math.ceil(2 * rate * (self.plan.duration + 1))))
        run = self.wrk(url, spec, concurrency, self.plan.duration, items)
        seconds = run["duration_us"] / 1e6
        failure = None
        errors = {k: v for k, v in run["errors"].items() if v}
        if run["exhausted"]:
            failure = f"ran out of pre-minted items ({len(items)}) after {run['items_used']}"
        elif run["unexpected"]:
            failure = f"{run['unexpected']} unexpected answers, first: {run['first_unexpected']}"
        elif errors:
            failure = f"socket errors {errors}"
        elif run["expected"] == 0:
            failure = "no answers"
        latency = run["latency_us"]
        result = Result(
            section=section,
            server=server.name,
            path=spec.name,
            concurrency=concurrency,
            sets=sets,
            rules=rules,
            rps=round(run["requests"] / seconds, 1) if seconds else 0.0,
            p50_ms=latency["p50"] / 1000,
            p95_ms=latency["p95"] / 1000,
            p99_ms=latency["p99"] / 1000,
            requests=run["requests"],
            rss_mb=server.rss(),
            failure=failure,
        )
        self.results.append(result)
        shown = f"FAILED: {failure}" if failure else f"{result.rps:9.1f} rps"
        print(
            f"  {section:8} {server.name:18} {spec.name:38} c={concurrency:<3} {shown}"
            f"  p99 {result.p99_ms:.1f} ms  rss {result.rss_mb} MB",
            flush=True,
        )
        return result


# -- umaserver, its configuration and its paths --------------------------------------------------


def bench_config(
    folder: Path, port: int, database: str = "bench.db", name: str = "bench.toml"
) -> Path:
    """config.example.toml's settings, with this folder's database (or `database`, a PostgreSQL
    URL) and rules, a secret, and a long ticket lifetime (tickets are minted ahead of each run)."""
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    replacements = {
        'issuer = "http://127.0.0.1:8080"': f'issuer = "http://127.0.0.1:{port}"',
        'database = "umaserver.db"': f'database = "{database}"',
        'file = "policies.example.toml"': 'file = "policies.toml"',
        'secret_key = ""': f'secret_key = "{"bench-secret-" * 4}"',
        "ticket = 300": f"ticket = {TICKET_LIFETIME}",
        "port = 8080": f"port = {port}",
    }
    for old, new in replacements.items():
        assert text.count(old) == 1, f"config.example.toml no longer has {old!r}"
        text = text.replace(old, new)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def rules_text(count: int, covering: int) -> str:
    """`count` rules for alice: one granting view to doctors on the set asked about (by name),
    `covering - 1` more covering it that want another role, the rest each on another of her sets."""
    if count == 1:
        return DOCTORS_MAY_VIEW
    parts = []
    for index in range(count):
        if index == 0:
            rule_id, name, role = "doctors", "X-rays", "doctor"
        elif index < covering:
            rule_id, name, role = f"cover-{index}", "X-rays", f"specialist-{index}"
        else:
            rule_id, name, role = f"other-{index}", f"a{index}", "doctor"
        parts.append(
            f'[[rules]]\nid = "{rule_id}"\nowner = "alice"\nscopes = ["view"]\n'
            f'[rules.resource_sets]\nnames = ["{name}"]\n'
            f'[[rules.conditions]]\nclaim = "role"\ncontains = "{role}"\ntypes = ["{EMPLOYEE}"]\n'
        )
    return "\n".join(parts)


class Uma:
    """The benchmark's database, its parties, and umaserver's paths against it."""

    def __init__(self, folder: Path, config: Path, port: int, database: str | None = None) -> None:
        self.folder = folder
        self.config = config
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.store = seed.prepared(database or folder / "bench.db")
        self.parties = seed.make_parties(self.store, EMPLOYEE)
        self.seeded = 0
        self.rpt = ""
        self.update_pool: list[str] = []
        self.other_pat: str | None = None  # LIST_OTHER's PAT, made when first listed
        self.paths: dict[str, str] = {}

    def grow(self, total: int) -> None:
        started = time.monotonic()
        added = seed.grow(self.store, self.parties, self.seeded, total)
        self.seeded = total
        print(
            f"seeded {added} resource sets in {time.monotonic() - started:.1f} s ({total} in all)",
            flush=True,
        )
        self.alice_sets = seed.alice_sets(self.store, self.parties)

    def set_rules(self, count: int, covering: int) -> str:
        (self.folder / "policies.toml").write_text(rules_text(count, covering), encoding="utf-8")
        return "1" if count == 1 else f"{count} ({covering} covering)"

    def waitress(self) -> Server:
        return Server(
            "umaserver/waitress",
            pinned(
                cores().server,
                [sys.executable, "-m", "umaserver", "--config", str(self.config), "serve"],
            ),
            self.url + "/.well-known/uma-configuration",
            {"PYTHONUNBUFFERED": "1"},
        )

    def gunicorn(self, workers: int, threads: int, name: str = "umaserver/gunicorn") -> Server:
        return Server(
            name,
            pinned(
                cores().server,
                gunicorn_command(f"127.0.0.1:{self.port}", workers, threads, "app:app"),
            ),
            self.url + "/.well-known/uma-configuration",
            {"UMASERVER_CONFIG": str(self.config)},
        )

    def prepare_flow(self) -> None:
        """Against a running server: the paths from the configuration document, and the client's
        RPT with a permission in it (the RPT introspected, into which grants go)."""
        self.paths = endpoints(HttpApi(self.url))
        api = HttpApi(self.url)
        aat = {"Authorization": f"Bearer {self.parties.aat}"}
        reply = api.post(self.paths["rpt_endpoint"], headers=aat)
        assert reply.status == 200, reply.text
        self.rpt = reply.json["rpt"]
        ticket = seed.tickets(self.store, self.parties, 1, TICKET_LIFETIME)[0]
        reply = api.post(
            self.paths["authorization_request_endpoint"],
            json={"rpt": self.rpt, "ticket": ticket, "claims": DOCTOR},
            headers=aat,
        )
        assert reply.status == 201, reply.text
        if not self.update_pool:
            self.update_pool = seed.writer_sets(self.store, self.parties, 1000, "u")

    def list_specs(self) -> list[tuple[Spec, int]]:
        """The resource set list of alice and of LIST_OTHER (another owner at the same resource
        server, holding its share of the other sets), each with how many sets its answer holds."""
        parties = self.parties
        other = self.store.get_user_by_username(LIST_OTHER)
        assert other is not None, f"{LIST_OTHER} is made by seed.grow"
        if self.other_pat is None:
            self.other_pat = seed.pat_for(self.store, parties, other.sub)
        found = []
        for owner, sub, token in (
            ("alice", parties.alice, parties.pat),
            (LIST_OTHER, other.sub, self.other_pat),
        ):
            spec = self._list_spec(f"resource set list ({owner})", token)
            found.append((spec, len(self.store.list_resource_sets(sub, parties.rs_client))))
        return found

    def _list_spec(self, name: str, pat: str) -> Spec:
        """The resource set list of the owner of `pat` at the resource server."""
        sets = self.paths["resource_set_registration_endpoint"] + "/resource_set"
        return Spec(name, "GET", sets, 200, {"Authorization": f"Bearer {pat}"}, body_match=r"^%[")

    def specs(self) -> list[Spec]:
        parties = self.parties
        pat = {"Authorization": f"Bearer {parties.pat}"}
        writer = {"Authorization": f"Bearer {parties.writer_pat}"}
        aat = {"Authorization": f"Bearer {parties.aat}"}
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        as_json = {"Content-Type": "application/json"}
        basic = "Basic " + _b64(f"{parties.app_client}:{parties.app_secret}")
        sets = self.paths["resource_set_registration_endpoint"] + "/resource_set"
        active = '"active":%s*true'

        def tickets(count: int) -> list[str]:
            return seed.tickets(self.store, parties, count, TICKET_LIFETIME)

        def ask(claims: list[dict[str, Any]]) -> str:
            return json.dumps({"rpt": self.rpt, "ticket": "{item}", "claims": claims})

        def redeem(claims: list[dict[str, Any]]) -> str:
            """UMA 2.0's grant at /token for the ticket "{item}", with the one claim object
            `ask` would push sent as a claim token of its custom type (base64url of the JSON of
            its value)."""
            (claim,) = claims
            fixed = urllib.parse.urlencode(
                {
                    "claim_token": _b64url(json.dumps(claim["value"])),
                    "claim_token_format": claim["type"],
                }
            )
            return f"grant_type={urllib.parse.quote(UMA_TICKET, safe='')}&ticket={{item}}&{fixed}"

        description = json.dumps(seed.description("bench set"))
        return [
            Spec(
                "configuration document",
                "GET",
                "/.well-known/uma-configuration",
                200,
                body_match='"issuer"',
            ),
            Spec(
                "token (client_credentials)",
                "POST",
                self.paths["token_endpoint"],
                200,
                {"Authorization": basic, **form},
                "grant_type=client_credentials&scope=uma_authorization",
                '"access_token"',
            ),
            Spec(
                "introspection (RPT)",
                "POST",
                self.paths["introspection_endpoint"],
                200,
                {**pat, **form},
                f"token={self.rpt}",
                active + ".*permissions",
            ),
            Spec(
                "introspection (PAT)",
                "POST",
                self.paths["introspection_endpoint"],
                200,
                {**pat, **form},
                f"token={parties.pat}",
                active,
            ),
            Spec(
                "permission registration",
                "POST",
                self.paths["permission_registration_endpoint"],
                201,
                {**pat, **as_json},
                json.dumps({"resource_set_id": parties.target, "scopes": ["view"]}),
                '"ticket"',
            ),
            Spec(
                "authorization (granted)",
                "POST",
                self.paths["authorization_request_endpoint"],
                201,
                {**aat, **as_json},
                ask(DOCTOR),
                '"rpt"',
                tickets,
                once=True,
            ),
            Spec(
                "authorization (need_claims)",
                "POST",
                self.paths["authorization_request_endpoint"],
                403,
                {**aat, **as_json},
                ask(DEPARTMENT),
                '"need_claims"',
                tickets,
                once=True,
            ),
            Spec(
                "authorization (refused)",
                "POST",
                self.paths["authorization_request_endpoint"],
                403,
                {**aat, **as_json},
                ask(NURSE),
                '"not_authorized',
                tickets,
                once=True,
            ),
            Spec(
                "uma-ticket grant (granted)",
                "POST",
                self.paths["token_endpoint"],
                200,
                {"Authorization": basic, **form},
                redeem(DOCTOR),
                '"access_token"',
                tickets,
                once=True,
            ),
            Spec(
                "resource set create",
                "POST",
                sets,
                201,
                {**writer, **as_json},
                description,
                '"_id"',
            ),
            Spec(
                "resource set read",
                "GET",
                sets + "/{item}",
                200,
                pat,
                body_match='"_id"',
                items=lambda count: self.alice_sets,
            ),
            Spec(
                "resource set update",
                "PUT",
                sets + "/{item}",
                200,
                {**writer, **as_json},
                description,
                '"_id"',
                lambda count: self.update_pool,
            ),
            self._list_spec("resource set list", parties.pat),
            Spec(
                "resource set delete",
                "DELETE",
                sets + "/{item}",
                204,
                writer,
                items=lambda count: seed.writer_sets(self.store, parties, count, "d"),
                once=True,
            ),
        ]


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _b64url(text: str) -> str:
    """base64url without padding, as a custom claim type's claim token is written."""
    import base64

    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def gunicorn_command(bind: str, workers: int, threads: int, app: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        bind,
        "--workers",
        str(workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(threads),
        "--log-level",
        "warning",
        app,
    ]


def bare_waitress(config: Path, port: int) -> Server:
    return Server(
        "bare/waitress",
        pinned(
            cores().server,
            [sys.executable, str(BENCH / "bare.py"), "--config", str(config), "--port", str(port)],
        ),
        f"http://127.0.0.1:{port}/bare",
        {},
    )


def bare_gunicorn(port: int, workers: int, threads: int) -> Server:
    return Server(
        "bare/gunicorn",
        pinned(
            cores().server,
            gunicorn_command(f"127.0.0.1:{port}", workers, threads, "bench.bare:app"),
        ),
        f"http://127.0.0.1:{port}/bare",
        {},
    )


BARE = Spec("bare route (ceiling)", "GET", "/bare", 200, body_match='"hello"')
BARE_AGAIN = replace(BARE, name="bare route (ceiling), again after the paths")


# -- the peer ------------------------------------------------------------------------------------


def peer_server() -> tuple[Server, str]:
    port = free_port()
    config = {
        "port": port,
        "clients": [
            {
                "client_id": "peer-client",
                "client_secret": PEER_SECRET,
                "grant_types": ["client_credentials"],
                "response_types": [],
                "redirect_uris": [],
            }
        ],
        "accounts": [{"sub": "nobody", "login": "nobody", "password": PEER_SECRET}],
        "features": {"clientCredentials": True, "introspection": True},
        "ttl": {"ClientCredentials": TOKEN_LIFETIME, "AccessToken": TOKEN_LIFETIME},
        "log_requests": False,
    }
    url = f"http://127.0.0.1:{port}"
    server = Server(
        "oidc-provider",
        pinned(cores().server, ["node", str(PEER / "provider.mjs"), json.dumps(config)]),
        url + "/.well-known/openid-configuration",
        {"NODE_ENV": "production"},
    )
    return server, url


def peer_specs(url: str) -> list[Callable[[], Spec]]:
    """The peer's paths, each made just before it runs: the peer's in-memory store is an LRU of
    1,000 entries, so the token introspected is issued after the token runs, not before."""
    basic = {"Authorization": "Basic " + _b64(f"peer-client:{PEER_SECRET}")}
    form = {"Content-Type": "application/x-www-form-urlencoded"}

    def token() -> Spec:
        return Spec(
            "token (client_credentials)",
            "POST",
            "/token",
            200,
            {**basic, **form},
            "grant_type=client_credentials",
            '"access_token"',
        )

    def introspection() -> Spec:
        issued = HttpApi(url).post(
            "/token", data={"grant_type": "client_credentials"}, headers=basic
        )
        assert issued.status == 200, issued.text
        return Spec(
            "introspection (access token)",
            "POST",
            "/token/introspection",
            200,
            {**basic, **form},
            f"token={issued.json['access_token']}",
            '"active":%s*true',
        )

    return [token, introspection]


# -- the whole run -------------------------------------------------------------------------------


def check_tools() -> None:
    missing = [tool for tool in ("wrk", "node") if shutil.which(tool) is None]
    if missing:
        sys.exit(
            f"missing {', '.join(missing)}: `make bench` installs them (wrk from Debian, Node.js 20)"
        )
    if not (PEER / "node_modules" / "oidc-provider").exists():
        sys.exit(f"oidc-provider is not installed: run `make npm-deps` ({PEER})")
    try:
        import gunicorn  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as error:
        sys.exit(f"{error}: install requirements-bench.txt (`make bench` does)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        default=os.environ.get("QUICK", "") not in ("", "0"),
        help="a small subset, in under 2 minutes (also QUICK=1)",
    )
    parser.add_argument(
        "--duration", type=int, help="seconds of each measured run (default 5; quick 1)"
    )
    parser.add_argument("--warmup", type=int, help="seconds of warm-up before each (default 1)")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="where latest.md, latest.json and throughput.png go",
    )
    options = parser.parse_args(argv)
    check_tools()
    committed = targets.read_committed(ROOT)  # before this run overwrites latest.md
    plan = Plan.make(options.quick, options.duration, options.warmup)
    placement = cores()
    started = time.monotonic()
    about = machine(plan, placement)
    print(f"benchmark ({about['plan']}): {placement.note}", flush=True)
    with tempfile.TemporaryDirectory(prefix="umaserver-bench-") as name:
        folder = Path(name)
        port = free_port()
        config = bench_config(folder, port)
        runner = Runner(plan, placement, folder)
        uma = Uma(folder, config, port)
        uma.grow(plan.sizes[0])
        one_rule = uma.set_rules(1, 1)
        main_matrix(runner, uma, config, port, one_rule)
        gunicorn_side(runner, uma, port, one_rule)
        peer_side(runner)
        processes(runner, uma, folder, one_rule)
        growth(runner, uma, config, port, one_rule)
        config_text = config.read_text(encoding="utf-8")
        uma.store.close()
    about["elapsed"] = f"{time.monotonic() - started:.0f} s"
    write(options.out, plan, about, config_text, runner.results, committed)
    if committed is not None:
        baseline, where = committed
        rows = targets.versus_committed(runner.results, baseline)
        print("\n".join(targets.versus_lines(rows, baseline, where)), flush=True)
    print(f"wrote {options.out / 'latest.md'} in {about['elapsed']}", flush=True)
    failed = [result for result in runner.results if result.failure]
    if failed:
        print(f"{len(failed)} run(s) FAILED their answer check: see latest.md", file=sys.stderr)
        sys.exit(1)


def main_matrix(runner: Runner, uma: Uma, config: Path, port: int, rules: str) -> None:
    """The bare route, every path, then the bare route again: a fraction is of the mean of its
    two runs, so that a machine slowing (or speeding up) over the minutes of the table does not
    tilt every fraction."""
    plan = runner.plan

    def ceiling(spec: Spec) -> None:
        with serving(bare_waitress(config, port)) as bare:
            for concurrency in plan.concurrencies:
                runner.measure(
                    bare,
                    f"http://127.0.0.1:{port}",
                    spec,
                    concurrency,
                    section="main",
                    sets=0,
                    rules="-",
                )

    ceiling(BARE)
    with serving(uma.waitress()) as server:
        uma.prepare_flow()
        for spec in uma.specs():
            for concurrency in plan.concurrencies:
                runner.measure(
                    server,
                    uma.url,
                    spec,
                    concurrency,
                    section="main",
                    sets=plan.sizes[0],
                    rules=rules,
                )
    ceiling(BARE_AGAIN)


def gunicorn_side(runner: Runner, uma: Uma, port: int, rules: str) -> None:
    plan = runner.plan
    workers, threads = plan.gunicorn_workers, 8
    with serving(bare_gunicorn(port, workers, threads)) as bare:
        runner.measure(
            bare, f"http://127.0.0.1:{port}", BARE, 8, section="gunicorn", sets=0, rules="-"
        )
    with serving(uma.gunicorn(workers, threads)) as server:
        uma.prepare_flow()
        for spec in uma.specs():
            if plan.gunicorn_paths is None or spec.name in plan.gunicorn_paths:
                runner.measure(
                    server, uma.url, spec, 8, section="gunicorn", sets=plan.sizes[0], rules=rules
                )


def peer_side(runner: Runner) -> None:
    server, url = peer_server()
    with serving(server):
        for make in peer_specs(url):
            spec = make()
            for concurrency in runner.plan.peer_concurrencies:
                runner.measure(server, url, spec, concurrency, section="peer", sets=0, rules="-")


def processes(runner: Runner, uma: Uma, folder: Path, rules: str) -> None:
    """The process paths with 1, 2 and 4 gunicorn workers (8 threads each) on the SQLite database,
    then on a PostgreSQL cluster started for the run (pinned with the server: the database's work
    is the server's, as SQLite's is), seeded alike."""
    plan = runner.plan

    def measure(on: Uma, backend: str) -> None:
        for count in plan.process_counts:
            name = f"umaserver/{backend} x{count}"
            with serving(on.gunicorn(count, 8, name)) as server:
                on.prepare_flow()
                for spec in on.specs():
                    if spec.name in plan.process_paths:
                        runner.measure(
                            server,
                            on.url,
                            spec,
                            8,
                            section="processes",
                            sets=on.seeded,
                            rules=rules,
                        )

    measure(uma, "sqlite")
    from tests.postgres_cluster import ClusterError, start_cluster, stop_cluster

    try:
        cluster, postgres = start_cluster(POSTGRESQL, runner.placement.server)
    except ClusterError as error:
        sys.exit(f"{error} (`make bench` installs it)")
    try:
        url = cluster.new_database()
        config = bench_config(folder, uma.port, url, "bench-postgresql.toml")
        on = Uma(folder, config, uma.port, url)
        on.grow(plan.sizes[0])
        measure(on, "postgresql")
        on.store.close()
    finally:
        stop_cluster(cluster, postgres)


def growth(runner: Runner, uma: Uma, config: Path, port: int, one_rule: str) -> None:
    """The growth paths at each size and rule count. The section measures its own baseline first
    (the bare route, and the paths at the smallest size): compared with the main table's, taken
    minutes earlier, a shared machine's drift would show as growth."""
    plan = runner.plan

    def measure_growth(sets: int, rules: str) -> None:
        with serving(uma.waitress()) as server:
            uma.prepare_flow()
            for spec in uma.specs():
                if spec.name in plan.growth_paths:
                    runner.measure(
                        server, uma.url, spec, 8, section="growth", sets=sets, rules=rules
                    )
            if rules == one_rule:
                for spec, listed in uma.list_specs():
                    result = runner.measure(
                        server, uma.url, spec, 8, section="list", sets=sets, rules=rules
                    )
                    result.listed = listed

    with serving(bare_waitress(config, port)) as bare:
        runner.measure(
            bare, f"http://127.0.0.1:{port}", BARE, 8, section="growth", sets=0, rules="-"
        )
    measure_growth(plan.sizes[0], one_rule)
    for size in plan.sizes[1:]:
        uma.grow(size)
        measure_growth(size, one_rule)
    for count, covering in plan.rule_counts:
        rules = uma.set_rules(count, covering)
        measure_growth(plan.sizes[-1], rules)
    uma.set_rules(1, 1)


if __name__ == "__main__":
    main()
