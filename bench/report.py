"""Writing the benchmark's results: latest.md (the tables, the machine, the config, the commit),
latest.json (every run) and throughput.png (throughput against database size)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from bench import targets
from bench.plan import GROWTH_PATHS, Plan, Result
from bench.targets import row as _row

# Our path -> the peer's path it is compared with.
PEER_PAIRS = {
    "token (client_credentials)": "token (client_credentials)",
    "introspection (PAT)": "introspection (access token)",
    "introspection (RPT)": "introspection (access token)",
}


def _bare(
    results: Sequence[Result], server: str, concurrency: int, section: str = "main"
) -> float | None:
    """The bare route's throughput on `server` at `concurrency` in one section of the run: the
    mean of its runs there (the main table measures it before and after the paths, the growth
    section at its start), so that the machine's drift over the run does not tilt fractions."""
    found = [
        result.rps
        for result in results
        if result.server == server
        and result.section == section
        and result.concurrency == concurrency
        and result.path.startswith("bare route")
        and result.failure is None
        and result.rps
    ]
    return sum(found) / len(found) if found else None


def _fill_fractions(results: Sequence[Result]) -> None:
    for result in results:
        if result.section in ("peer", "processes") or result.path.startswith("bare route"):
            continue
        kind = "bare/" + result.server.split("/", 1)[1]
        bare = _bare(results, kind, result.concurrency, result.section) or _bare(
            results, kind, result.concurrency
        )
        if bare is not None and result.failure is None:
            result.fraction = round(result.rps / bare, 3)


def _rps(result: Result) -> str:
    return f"FAILED ({result.failure})" if result.failure else f"{result.rps:,.0f}"


def _fraction(result: Result) -> str:
    return "" if result.fraction is None else f"{result.fraction:.2f}"


def _ms(value: float) -> str:
    return f"{value:.1f}"


def _processes_table(results: Sequence[Result]) -> list[str]:
    """Throughput by backend and number of server processes, one row per path and backend."""
    counts = sorted({int(r.server.rsplit("x", 1)[1]) for r in results})
    lines = [
        "",
        "## Server processes on SQLite and on PostgreSQL (concurrency 8)",
        "",
        "gunicorn with 1, 2 and 4 worker processes (gthread, 8 threads each), all pinned to the "
        "server's core, on the SQLite database and on a PostgreSQL cluster started for the run "
        "(pinned to the same core: its work is the server's, as SQLite's is; durable like SQLite "
        "in WAL with `synchronous = NORMAL`: fsync on, commits not waiting for the WAL flush), "
        "seeded alike. On 2 cores with wrk on the other, more processes share one core: the "
        "figures show what each process model costs, not how it scales on more cores. RSS: the "
        "sum over the server's processes (PostgreSQL's not counted).",
        "",
        _row(
            ["path", "database"]
            + [f"{n} process{'es' if n > 1 else ''} req/s" for n in counts]
            + [f"p99 ({counts[-1]})", f"RSS MB ({counts[-1]})"]
        ),
        _row(["---", "---"] + ["---:"] * (len(counts) + 2)),
    ]
    paths = list(dict.fromkeys(r.path for r in results))
    for path in paths:
        for backend in ("sqlite", "postgresql"):
            found = {
                int(r.server.rsplit("x", 1)[1]): r
                for r in results
                if r.path == path and r.server.startswith(f"umaserver/{backend} ")
            }
            if not found:
                continue
            last = found.get(counts[-1])
            lines.append(
                _row(
                    [path, "SQLite" if backend == "sqlite" else "PostgreSQL"]
                    + [_rps(found[n]) if n in found else "" for n in counts]
                    + [_ms(last.p99_ms) if last else "", str(last.rss_mb) if last else ""]
                )
            )
    return lines


def write(
    out: Path,
    plan: Plan,
    about: dict[str, str],
    config: str,
    results: list[Result],
    committed: tuple[targets.Committed, str] | None = None,
) -> None:
    """`committed`: the committed run and where it was read (targets.read_committed), which the
    p99 targets and the comparison are against."""
    out.mkdir(parents=True, exist_ok=True)
    _fill_fractions(results)
    (out / "latest.json").write_text(
        json.dumps(
            {"machine": about, "plan": asdict(plan), "results": [asdict(r) for r in results]},
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    chart = _chart(out / "throughput.png", results)
    lines = [
        "# Benchmark results",
        "",
        f"Written by `make bench{' QUICK=1' if plan.quick else ''}` on {about['date']} "
        f"in {about['elapsed']}"
        + (
            " (a small subset with short runs: it checks the harness, not the speed)"
            if plan.quick
            else ""
        )
        + f". Each run: {plan.warmup:g} s warm-up, then "
        f"{plan.duration:g} s measured by wrk (bench/wrk/request.lua), every answer checked "
        "(status and body); a run with any unexpected answer or socket error shows FAILED, "
        "never a rate. Latencies in ms; peak RSS is the server's process tree (VmHWM) so far.",
        "",
        "## Machine",
        "",
        _row(["", ""]),
        _row(["---", "---"]),
    ]
    for key in (
        "cpu",
        "cores",
        "pinning",
        "kernel",
        "python",
        "sqlite",
        "waitress",
        "gunicorn",
        "postgresql",
        "psycopg",
        "wrk",
        "node",
        "oidc-provider",
        "commit",
        "commit_subject",
        "dirty",
    ):
        lines.append(_row([key, f"`{about[key]}`" if key == "commit" else about[key]]))
    main = [r for r in results if r.section == "main"]
    lines += [
        "",
        "## Every path, waitress (10^3 resource sets, 1 rule)",
        "",
        "Fraction: of the bare route (a constant JSON object from a bare Flask route on the same "
        "`make_server` and settings) at the same concurrency, in the same run: the mean of its "
        "two runs, before the paths and again after them (their difference is the machine's "
        "drift over the table). Target: the floor of the fraction at concurrency "
        f"{targets.FLOOR_CONCURRENCY}, and p99 at concurrency {targets.P99_CONCURRENCY} at most "
        f"{targets.P99_FACTOR:g} times the committed run's (see Targets).",
        "",
        _row(
            [
                "path",
                "concurrency",
                "req/s",
                "fraction",
                "target",
                "p50",
                "p95",
                "p99",
                "peak RSS MB",
            ]
        ),
        _row(["---", "---:", "---:", "---:", "---", "---:", "---:", "---:", "---:"]),
    ]
    baseline, where = committed if committed else (None, "")
    for r in main:
        lines.append(
            _row(
                [
                    r.path,
                    str(r.concurrency),
                    _rps(r),
                    _fraction(r),
                    targets.target_cell(r, baseline),
                    _ms(r.p50_ms),
                    _ms(r.p95_ms),
                    _ms(r.p99_ms),
                    str(r.rss_mb),
                ]
            )
        )
    lines += targets.summary(results, baseline, where, plan.quick)
    if baseline is not None:
        lines += targets.versus_table(targets.versus_committed(results, baseline), baseline, where)
    guni = [r for r in results if r.section == "gunicorn"]
    if guni:
        waitress8 = {r.path: r for r in main if r.concurrency == 8}
        workers = plan.gunicorn_workers
        lines += [
            "",
            "## Waitress and gunicorn side by side (concurrency 8)",
            "",
            f"gunicorn: {workers} worker processes (gthread, 8 threads each) and its master, "
            "pinned to the server's core like waitress; its RSS is the sum over all of them. On 2 "
            "cores with wrk on one, several processes show overhead, not scaling: they share one "
            "core; the figures say what a process model costs there, not what it gains on more "
            "cores. Fraction: of the bare route under gunicorn.",
            "",
            _row(
                [
                    "path",
                    "waitress req/s",
                    "fraction",
                    "gunicorn req/s",
                    "fraction",
                    "gunicorn p99",
                    "gunicorn RSS MB",
                ]
            ),
            _row(["---", "---:", "---:", "---:", "---:", "---:", "---:"]),
        ]
        for r in guni:
            w = waitress8.get(r.path)
            lines.append(
                _row(
                    [
                        r.path,
                        _rps(w) if w else "",
                        _fraction(w) if w else "",
                        _rps(r),
                        _fraction(r),
                        _ms(r.p99_ms),
                        str(r.rss_mb),
                    ]
                )
            )
    processes = [r for r in results if r.section == "processes"]
    if processes:
        lines += _processes_table(processes)
    lines += ["", "## Peers (reported without a target)"]
    peer = [r for r in results if r.section == "peer"]
    if peer:
        lines += [
            "",
            "### oidc-provider (measured)",
            "",
            f"oidc-provider {about['oidc-provider']} on Node.js {about['node']} "
            "(tests/oidc_provider/provider.mjs), one client with client_credentials, the same token "
            "lifetime, introspection on, pinned to the server's core. The peer keeps its tokens in "
            "memory (its development adapter: an LRU of 1,000 entries, lost at exit); ours are "
            "durable (SQLite, committed before the answer).",
            "",
            _row(
                [
                    "our path",
                    "concurrency",
                    "ours req/s",
                    "peer path",
                    "peer req/s",
                    "ours / peer",
                    "peer p99",
                    "peer RSS MB",
                ]
            ),
            _row(["---", "---:", "---:", "---", "---:", "---:", "---:", "---:"]),
        ]
        for ours in main:
            theirs_name = PEER_PAIRS.get(ours.path)
            if theirs_name is None:
                continue
            for theirs in peer:
                if theirs.path == theirs_name and theirs.concurrency == ours.concurrency:
                    ratio = (
                        f"{ours.rps / theirs.rps:.2f}"
                        if not ours.failure and not theirs.failure and theirs.rps
                        else ""
                    )
                    lines.append(
                        _row(
                            [
                                ours.path,
                                str(ours.concurrency),
                                _rps(ours),
                                theirs.path,
                                _rps(theirs),
                                ratio,
                                _ms(theirs.p99_ms),
                                str(theirs.rss_mb),
                            ]
                        )
                    )
    token = next(
        (
            r
            for r in main
            if r.path == "token (client_credentials)" and r.concurrency == 8 and not r.failure
        ),
        None,
    )
    served = [r.rss_mb for r in main if r.server == "umaserver/waitress"]
    lines += targets.keycloak_lines(
        token.rps if token else None,
        about["pinning"].startswith("server on core"),
        max(served) if served else None,
    )
    growth_rows = [
        r for r in results if r.section == "growth" and not r.path.startswith("bare route")
    ]
    smallest = min((r.sets for r in growth_rows), default=0)
    base = {r.path: r for r in growth_rows if r.sets == smallest and r.rules == "1"}
    if growth_rows:
        lines += [
            "",
            "## Growth (waitress, concurrency 8)",
            "",
            "Resource sets over 10^3 owners; alice, the owner asked about, holds a tenth of them, "
            'at most 10^4. Rules: file rules for alice with selectors (by name); "covering" ones '
            "cover the set asked about. The section measures its own baseline first, minutes "
            "after the main table (a shared machine drifts): fraction is of the bare route at "
            "concurrency 8 measured at its start, and vs 10^3 is this throughput over the "
            "section's own at 10^3 sets and 1 rule.",
            "",
            _row(
                [
                    "sets",
                    "rules",
                    "path",
                    "req/s",
                    "fraction",
                    "vs 10^3",
                    "p50",
                    "p95",
                    "p99",
                    "peak RSS MB",
                ]
            ),
            _row(["---:", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]),
        ]
        bare8 = _bare(results, "bare/waitress", 8, "growth") or _bare(results, "bare/waitress", 8)
        for r in growth_rows:
            fraction = f"{r.rps / bare8:.2f}" if bare8 and not r.failure else ""
            first = base.get(r.path)
            versus = (
                f"{r.rps / first.rps:.2f}"
                if first and not first.failure and not r.failure and first.rps
                else ""
            )
            lines.append(
                _row(
                    [
                        f"{r.sets:,}",
                        r.rules,
                        r.path,
                        _rps(r),
                        fraction,
                        versus,
                        _ms(r.p50_ms),
                        _ms(r.p95_ms),
                        _ms(r.p99_ms),
                        str(r.rss_mb),
                    ]
                )
            )
    if chart:
        lines += ["", f"![throughput against database size]({chart})"]
    lines += _listing(results)
    failed = [r for r in results if r.failure]
    lines += [
        "",
        "## Answer checks",
        "",
        f"{len(results) - len(failed)} of {len(results)} runs got only the answers they expected."
        + (
            ""
            if not failed
            else " Failed: "
            + "; ".join(
                f"{r.section} {r.server} {r.path} c={r.concurrency}: {r.failure}" for r in failed
            )
        ),
        "",
        "## Config",
        "",
        "config.example.toml's settings, with the benchmark's database, rule file, secret and a "
        "long ticket lifetime (tickets are minted ahead of each run):",
        "",
        "```toml",
        config.rstrip(),
        "```",
        "",
    ]
    (out / "latest.md").write_text("\n".join(lines), encoding="utf-8")


def _listing(results: Sequence[Result]) -> list[str]:
    """The list runs of the growth section: the time of a list request against the sets its answer
    holds, with the least-squares line through them, and the same owner's list at two database
    sizes side by side."""
    rows = sorted(
        (r for r in results if r.section == "list" and r.failure is None and r.rps and r.listed),
        key=lambda r: (r.listed or 0, r.sets),
    )
    if not rows:
        return []
    # The server's one core is busy at concurrency 8: a request's cost is 1 / throughput.
    points = [(float(r.listed or 0), 1e6 / r.rps) for r in rows]
    slope, intercept = _line(points)
    lines = [
        "",
        "## Listing: linear in the owner's own sets only (waitress, concurrency 8)",
        "",
        "The resource set list of alice and of another owner (at the same resource server) at "
        "each size of the growth runs, 1 rule. Cost: the server's time per request, 1 / "
        "throughput (its one core is busy at concurrency 8). Fit: the least-squares line "
        f"through every row, {intercept:,.0f} us + {slope:.2f} us per listed set; vs fit is the "
        "cost over the line's.",
        "",
        _row(
            ["sets in the database", "list of", "sets listed", "req/s", "cost us", "vs fit", "p99"]
        ),
        _row(["---:", "---", "---:", "---:", "---:", "---:", "---:"]),
    ]
    for r, (listed, cost) in zip(rows, points, strict=True):
        fitted = intercept + slope * listed
        lines.append(
            _row(
                [
                    f"{r.sets:,}",
                    r.path.removeprefix("resource set list (").removesuffix(")"),
                    f"{r.listed:,}",
                    _rps(r),
                    f"{cost:,.0f}",
                    f"{cost / fitted:.2f}" if fitted > 0 else "",
                    _ms(r.p99_ms),
                ]
            )
        )
    same: dict[tuple[str, int | None], list[Result]] = {}
    for r in rows:
        same.setdefault((r.path, r.listed), []).append(r)
    for (path, count), found in sorted(same.items(), key=lambda item: str(item[0])):
        if len(found) > 1:
            small, large = min(found, key=lambda r: r.sets), max(found, key=lambda r: r.sets)
            lines += [
                "",
                f"The same {count:,} sets listed ({path}) with {small.sets:,} and with "
                f"{large.sets:,} sets in the database: {large.rps / small.rps:.2f}x the "
                "throughput.",
            ]
    return lines


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through `points`."""
    count = len(points)
    mean_x = sum(x for x, _ in points) / count
    mean_y = sum(y for _, y in points) / count
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0, mean_y
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return slope, mean_y - slope * mean_x


def _chart(path: Path, results: Sequence[Result]) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    drawn = False
    for name in GROWTH_PATHS:
        points = sorted(
            (r.sets, r.rps)
            for r in results
            if r.path == name
            and r.failure is None
            and r.rules == "1"
            and r.server == "umaserver/waitress"
            and r.section == "growth"
        )
        if not points:
            continue
        (line,) = axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        drawn = True
        for r in results:
            if r.section == "growth" and r.path == name and r.rules != "1" and r.failure is None:
                axes.scatter([r.sets], [r.rps], marker="x", color=line.get_color())
    if not drawn:
        plt.close(figure)
        return None
    axes.set_xscale("log")
    axes.set_xlabel("resource sets in the database")
    axes.set_ylabel("requests per second (concurrency 8)")
    axes.set_title(
        "umaserver (waitress): throughput against database size\n(x: more rules for the owner asked about)"
    )
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path.name
