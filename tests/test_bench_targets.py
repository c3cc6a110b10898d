"""The benchmark's targets (bench/targets.py): reading the committed run, and the checks."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import targets

COMMITTED = """# Benchmark results

## Machine

|  |  |
| --- | --- |
| cpu | Intel(R) Xeon(R) Processor |
| commit | `bf3c0284abc67a31b6bf6da0b8fb5e7266b411a2` |

## Every path, waitress (10^3 resource sets, 1 rule)

Fraction: of the bare route.

| path | concurrency | req/s | fraction | target | p50 | p95 | p99 | peak RSS MB |
| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |
| bare route (ceiling) | 1 | 5,232 |  |  | 0.2 | 0.2 | 0.3 | 77.5 |
| token (client_credentials) | 1 | 1,496 | 0.29 | p99 <= 1.92 ms: met | 0.6 | 0.8 | 1.6 | 81.3 |
| token (client_credentials) | 8 | 1,478 | 0.27 | fraction >= 0.24: met | 4.5 | 12.3 | 24.3 | 82.7 |
| resource set read | 1 | FAILED (3 unexpected answers, first: 500) | | | 0.4 | 0.4 | 0.5 | 89.2 |

## Growth (waitress, concurrency 8)

| sets | rules | path | req/s | fraction | vs 10^3 | p50 | p95 | p99 | peak RSS MB |
| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| 1,000 | 1 | resource set read | 2,847 | 0.50 | 1.00 | 2.4 | 6.0 | 10.7 | 88.1 |
"""


@dataclass
class Run:
    path: str
    concurrency: int
    rps: float = 1000.0
    p99_ms: float = 1.0
    fraction: float | None = None
    failure: str | None = None
    section: str = "main"
    sets: int = 1_000
    rules: str = "1"


def test_the_main_table_and_commit_are_read_by_their_headers() -> None:
    committed = targets.parse_committed(COMMITTED)
    assert committed.commit == "bf3c0284abc67a31b6bf6da0b8fb5e7266b411a2"
    assert committed.short == "bf3c028"
    assert committed.main[("token (client_credentials)", 1)] == targets.Figures(1496.0, 0.29, 1.6)
    assert committed.main[("token (client_credentials)", 8)] == targets.Figures(1478.0, 0.27, 24.3)
    assert committed.main[("bare route (ceiling)", 1)] == targets.Figures(5232.0, None, 0.3)
    # A failed run has no figures; the growth table's rows are not the main table's.
    assert committed.main[("resource set read", 1)] == targets.Figures(None, None, None)
    assert len(committed.main) == 4


def test_a_table_without_the_target_column_reads_the_same() -> None:
    """As the committed latest.md of bf3c028 has it (columns are found by their headers)."""
    older = """## Every path, waitress (10^3 resource sets, 1 rule)

| path | concurrency | req/s | fraction | p50 | p95 | p99 | peak RSS MB |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| token (client_credentials) | 1 | 1,496 | 0.29 | 0.6 | 0.8 | 1.6 | 81.3 |
"""
    assert targets.parse_committed(older).main == {
        ("token (client_credentials)", 1): targets.Figures(1496.0, 0.29, 1.6)
    }


def test_no_main_table_gives_no_figures() -> None:
    assert targets.parse_committed("# Benchmark results\n").main == {}


def test_the_committed_run_is_the_one_git_holds_not_the_one_a_run_wrote(tmp_path: Path) -> None:
    results = tmp_path / targets.COMMITTED
    results.parent.mkdir(parents=True)
    results.write_text(COMMITTED, encoding="utf-8")
    # Outside a git checkout: the file itself.
    found = targets.read_committed(tmp_path)
    assert found is not None and found[1] == str(results)
    git = [
        "git",
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@example.com",
        "-C",
        str(tmp_path),
    ]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "results"], check=True)
    results.write_text(COMMITTED.replace("1,496", "9,999"), encoding="utf-8")  # a later run's
    found = targets.read_committed(tmp_path)
    assert found is not None
    committed, where = found
    assert where == f"{targets.COMMITTED} at HEAD"
    assert committed.main[("token (client_credentials)", 1)].rps == 1496.0


def test_no_committed_run() -> None:
    assert targets.read_committed(Path("/nonexistent-umaserver-checkout")) is None


@pytest.mark.parametrize(
    ("path", "concurrency", "fraction", "cell"),
    [
        ("resource set read", 8, 0.45, "fraction >= 0.45: met"),
        ("resource set read", 8, 0.449, "fraction >= 0.45: MISSED"),
        ("authorization (refused)", 8, 0.15, "fraction >= 0.15: met"),
        ("uma-ticket grant (granted)", 8, 0.15, "fraction >= 0.15: met"),
        ("uma-ticket grant (granted)", 8, 0.149, "fraction >= 0.15: MISSED"),
        ("configuration document", 8, 0.79, "fraction >= 0.8: MISSED"),
        ("resource set read", 64, 0.2, ""),  # floors are at concurrency 8 only
        ("bare route (ceiling)", 8, None, ""),
        ("resource set read", 8, None, ""),  # no bare route to divide by
    ],
)
def test_floors(path: str, concurrency: int, fraction: float | None, cell: str) -> None:
    assert targets.target_cell(Run(path, concurrency, fraction=fraction), None) == cell


def test_a_failed_run_misses_its_target() -> None:
    failed = Run("resource set read", 8, failure="3 unexpected answers")
    assert targets.target_cell(failed, None) == "fraction >= 0.45: MISSED"
    committed = targets.parse_committed(COMMITTED)
    failed = Run("token (client_credentials)", 1, p99_ms=0.1, failure="socket errors")
    assert targets.target_cell(failed, committed) == "p99 <= 1.92 ms: MISSED"
    failed = growth(1.0)
    failed.failure = "ran out of pre-minted items"
    assert targets.growth_check([failed]) == targets.Check("p99 < 40 ms", False)


@pytest.mark.parametrize(
    ("p99", "cell"),
    [(1.92, "p99 <= 1.92 ms: met"), (1.93, "p99 <= 1.92 ms: MISSED"), (0.5, "p99 <= 1.92 ms: met")],
)
def test_p99_at_concurrency_1_against_the_committed_run(p99: float, cell: str) -> None:
    committed = targets.parse_committed(COMMITTED)
    assert targets.target_cell(Run("token (client_credentials)", 1, p99_ms=p99), committed) == cell
    # Not without a committed figure (none, or its run failed), nor at another concurrency.
    assert targets.target_cell(Run("token (client_credentials)", 1, p99_ms=p99), None) == ""
    assert targets.p99_check(Run("token (client_credentials)", 8, p99_ms=p99), committed) is None
    assert targets.p99_check(Run("resource set read", 1, p99_ms=p99), committed) is None


def growth(p99: float, rules: str = "10000 (10 covering)", sets: int = 1_000_000) -> Run:
    return Run("authorization (granted)", 8, p99_ms=p99, section="growth", sets=sets, rules=rules)


def test_the_growth_target() -> None:
    assert targets.growth_check([growth(39.9)]) == targets.Check("p99 < 40 ms", True)
    assert targets.growth_check([growth(40.0)]) == targets.Check("p99 < 40 ms", False)
    # Only the 10-covering case at 10^6 sets has the target.
    assert targets.growth_check([growth(80.0, "10000 (100 covering)")]) is None
    assert targets.growth_check([growth(80.0, sets=100_000)]) is None


def test_the_summary_counts_checks_and_names_what_missed() -> None:
    committed = targets.parse_committed(COMMITTED)
    results = [
        Run("token (client_credentials)", 1, p99_ms=2.5),
        Run("token (client_credentials)", 8, fraction=0.3),
        Run("resource set read", 8, fraction=0.4),
        growth(30.5),
        growth(37.6, "10000 (100 covering)"),
    ]
    text = "\n".join(targets.summary(results, committed, "here", quick=False))
    assert "| 1 of 2 met | no |" in text  # the floors
    assert "| 0 of 1 met | no |" in text  # p99
    assert "| 30.5 ms | yes |" in text
    assert "| 37.6 ms |  |" in text
    assert "Missed: token (client_credentials) c=1; resource set read c=8." in text


def test_a_quick_run_says_what_it_did_not_measure() -> None:
    results = [Run("token (client_credentials)", 8, fraction=0.3)]
    committed = targets.parse_committed(COMMITTED)
    text = "\n".join(targets.summary(results, committed, "here", quick=True))
    assert "| 1 of 1 met | yes |" in text
    assert "not measured (QUICK=1 runs concurrency 8 only)" in text
    assert "not measured (QUICK=1 grows to fewer sets)" in text
    assert "Missed" not in text


def test_against_the_committed_run() -> None:
    committed = targets.parse_committed(COMMITTED)
    rows = targets.versus_committed(
        [
            Run("token (client_credentials)", 8, rps=1330.2, p99_ms=20.0),
            Run("token (client_credentials)", 64, rps=1300.0),  # not in the committed table
            Run("resource set read", 1, failure="no answers"),
            growth(30.0),  # not the main table
        ],
        committed,
    )
    assert [(row.path, row.concurrency) for row in rows] == [
        ("token (client_credentials)", 8),
        ("token (client_credentials)", 64),
        ("resource set read", 1),
    ]
    assert rows[0].ratio == pytest.approx(0.9)
    assert rows[1].ratio is None and rows[2].ratio is None
    text = "\n".join(targets.versus_lines(rows, committed, "here"))
    assert "1,330     1,478   0.90" in text
    assert "median ratio 0.90" in text


def test_a_path_the_committed_run_does_not_have_shows_as_new() -> None:
    """A path added since the committed run (the uma-ticket grant, after bf3c028): new in both the
    terminal's lines and the report's table, without a ratio or a p99 target; a path the committed
    run has but failed is not new."""
    committed = targets.parse_committed(COMMITTED)
    added = "uma-ticket grant (granted)"
    results = [
        Run(added, 1, rps=900.0, p99_ms=1.4),
        Run(added, 8, rps=1000.0, p99_ms=9.0, fraction=0.2),
        Run("resource set read", 1, rps=2000.0, p99_ms=0.6),  # its committed run failed
        Run("token (client_credentials)", 8, rps=1330.2, p99_ms=20.0),
    ]
    rows = targets.versus_committed(results, committed)
    assert [(row.path, row.concurrency, row.new) for row in rows] == [
        (added, 1, True),
        (added, 8, True),
        ("resource set read", 1, False),
        ("token (client_credentials)", 8, False),
    ]
    assert rows[0].ratio is None and rows[0].committed_rps is None
    lines = targets.versus_lines(rows, committed, "here")
    assert lines[2].split() == [*added.split(), "1", "900", "new", "1.4"]
    assert lines[4].split() == ["resource", "set", "read", "1", "2,000", "0.6"]
    assert lines[-1] == "  median ratio 0.90"  # of the rows that have a committed figure
    table = targets.versus_table(rows, committed, "here")
    assert f"| {added} | 8 | 1,000 | new |  | 9.0 |  |" in table
    assert "| resource set read | 1 | 2,000 |  |  | 0.6 |  |" in table
    # Its targets: the floor, and no p99 check without a committed p99.
    assert targets.target_cell(results[0], committed) == ""
    assert targets.target_cell(results[1], committed) == "fraction >= 0.15: met"
    text = "\n".join(targets.summary(results, committed, "here", quick=False))
    assert "| 1 of 1 met | yes |" in text  # the floors: the new path's


def test_keycloak_sizing_beside_ours() -> None:
    text = "\n".join(targets.keycloak_lines(1478.0, True, 89.6))
    assert "| client-credentials grants/s per core | 120 | 1,478 | 12.3 |" in text
    assert "| the same, 150% headroom left for peaks | 48 | 591 |  |" in text
    assert "| memory, MB | 1,250 (base, per pod) | 89.6 (peak RSS) | 0.07 |" in text
    unpinned = "\n".join(targets.keycloak_lines(1478.0, False, 89.6))
    assert "| client-credentials grants/s per core | 120 |  |  |" in unpinned
