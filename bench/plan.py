"""What a run of the benchmark measures (`Plan`: the full plan or QUICK's subset) and what each
measured run gave (`Result`): shared by bench/run.py, which measures, and bench/report.py, which
writes the results."""

from __future__ import annotations

from dataclasses import dataclass

# Measured with 1, 2 and 4 server processes on SQLite and on PostgreSQL.
PROCESS_PATHS = (
    "resource set read",
    "token (client_credentials)",
    "permission registration",
    "authorization (granted)",
)

# Paths, in the order of the tables; GROWTH_PATHS are measured at every database size and rule count.
GROWTH_PATHS = (
    "resource set read",
    "introspection (RPT)",
    "permission registration",
    "authorization (granted)",
)


@dataclass(frozen=True)
class Plan:
    quick: bool
    duration: int  # seconds of each measured run (wrk takes whole seconds)
    warmup: int  # seconds of the warm-up before it
    concurrencies: tuple[int, ...]
    gunicorn_paths: tuple[str, ...] | None  # None: every path
    peer_concurrencies: tuple[int, ...]
    sizes: tuple[int, ...]  # resource sets of the growth runs (the first is the main matrix's)
    # (rules for alice, how many of them cover the set asked about), at the largest size
    rule_counts: tuple[tuple[int, int], ...]
    gunicorn_workers: int
    # Server processes (gunicorn workers) on SQLite and on PostgreSQL, and the paths measured so
    process_counts: tuple[int, ...]
    process_paths: tuple[str, ...]
    growth_paths: tuple[str, ...] = GROWTH_PATHS

    @staticmethod
    def make(quick: bool, duration: int | None, warmup: int | None) -> Plan:
        if quick:
            return Plan(
                quick=True,
                duration=duration or 1,
                warmup=warmup or 1,
                concurrencies=(8,),
                gunicorn_paths=("configuration document", "resource set read"),
                peer_concurrencies=(8,),
                sizes=(1_000, 10_000),
                rule_counts=((100, 10),),
                gunicorn_workers=2,
                process_counts=(2,),
                process_paths=("resource set read",),
                growth_paths=("resource set read", "authorization (granted)"),
            )
        return Plan(
            quick=False,
            duration=duration or 5,
            warmup=warmup or 1,
            concurrencies=(1, 8, 64),
            gunicorn_paths=None,
            peer_concurrencies=(1, 8, 64),
            sizes=(1_000, 100_000, 1_000_000),
            rule_counts=((100, 10), (10_000, 10), (10_000, 100)),
            gunicorn_workers=2,
            process_counts=(1, 2, 4),
            process_paths=PROCESS_PATHS,
        )


@dataclass
class Result:
    section: str
    server: str
    path: str
    concurrency: int
    sets: int
    rules: str
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    requests: int
    rss_mb: float
    failure: str | None
    fraction: float | None = None
    listed: int | None = None  # the list path: how many sets its answer holds
