"""The regression gate's verdict (bench/ab.py): head against base round by round, within 5%."""

from __future__ import annotations

from typing import Any

import pytest

from bench.ab import Outcome, Verdict, interleave, table, verdict


def runs(*rates: float) -> list[Outcome]:
    return [Outcome(rate, 1.0, None) for rate in rates]


@pytest.mark.parametrize(
    ("base", "head", "passed"),
    [
        ((1000, 1000, 1000), (950, 950, 950), True),  # 5% slower: within
        ((1000, 1000, 1000), (949, 949, 949), False),
        ((1000, 1000, 1000), (1500, 1400, 1600), True),  # faster is fine
        # A slow spell that hits one round of one side does not decide (a run of this gate on a
        # busy machine: the medians of each side, 3,270 over 3,928, would have failed it).
        ((3928, 4009, 1136), (3888, 3270, 2177), True),
        ((1000, 1000, 1000), (1000, 900, 900), False),  # slower in two rounds of three
        ((1000, 500, 2000), (940, 470, 1900), False),  # 6%, 6%, 5% slower, the machine varying
    ],
)
def test_the_median_of_the_rounds_ratios(
    base: tuple[float, ...], head: tuple[float, ...], passed: bool
) -> None:
    found = verdict(runs(*base), runs(*head))
    assert found.passed is passed
    assert len(found.by_round) == len(base)
    assert (found.note == "") is passed


def test_the_note_says_by_how_much() -> None:
    assert verdict(runs(1000), runs(900)) == Verdict(0.9, (0.9,), False, "head slower by 10.0%")


def test_a_failed_run_fails_whichever_side() -> None:
    failed = [Outcome(0.0, 0.0, "3 unexpected answers, first: 500")]
    assert verdict(runs(1000, 1000), runs(2000) + failed) == Verdict(
        None, (), False, "head: 3 unexpected answers, first: 500"
    )
    assert verdict(failed, runs(1000)).passed is False
    assert verdict([], runs(1000)).passed is False
    assert verdict(runs(1000, 1000), runs(1000)).passed is False


def test_the_table_fails_when_one_path_fails() -> None:
    outcomes = {
        ("base", "token", 1): runs(1000, 1010, 990),
        ("head", "token", 1): runs(1000, 1005, 995),
        ("base", "token", 8): runs(1000, 1010, 990),
        ("head", "token", 8): runs(800, 805, 795),
    }
    lines, passed = table(["token"], outcomes)
    assert passed is False
    assert lines[1].endswith("PASS")
    assert "1,000 1,010 990" in lines[1]
    assert "1.00 1.00 1.01" in lines[1]
    assert lines[2].endswith("FAIL (head slower by 20.0%)")
    del outcomes[("head", "token", 8)], outcomes[("base", "token", 8)]
    assert table(["token"], outcomes, (1,))[1] is True


NEW = "uma-ticket grant (granted)"


def test_a_path_on_one_side_only_is_shown_not_compared() -> None:
    """The uma-ticket grant against a base that predates it: new, and it passes or fails nothing;
    a path that head no longer has shows as absent."""
    outcomes = {
        ("base", "token", 8): runs(1000, 1010, 990),
        ("head", "token", 8): runs(1000, 1005, 995),
        ("head", NEW, 8): runs(500, 500, 500),  # measured on head alone: never compared
    }
    alone = {NEW: "head", "gone": "base"}
    lines, passed = table(["token"], outcomes, (8,), alone)
    assert passed is True
    assert len(lines) == 4
    assert lines[1].startswith("token") and lines[1].endswith("PASS")
    assert lines[2].startswith(NEW) and lines[2].endswith("not compared: new (head only)")
    assert lines[3].startswith("gone") and lines[3].endswith(
        "not compared: absent from head (base only)"
    )
    assert "500" not in lines[2]
    # A failure elsewhere still fails the gate.
    outcomes[("head", "token", 8)] = runs(800, 800, 800)
    assert table(["token"], outcomes, (8,), alone)[1] is False


class FakeSide:
    """A side of the A/B that offers `paths` and measures each at `rps` (bench/ab_side.py's
    protocol); asked to measure a path it does not have, it fails the test."""

    def __init__(self, name: str, paths: list[str], rps: float) -> None:
        self.name = name
        self.paths = paths
        self.rps = rps
        self.measured: list[tuple[str, int]] = []

    def ask(self, **command: Any) -> dict[str, Any]:
        if command["op"] == "start":
            return {"paths": list(self.paths)}
        if command["op"] == "measure":
            assert command["path"] in self.paths, f"{self.name} has no {command['path']}"
            self.measured.append((command["path"], command["concurrency"]))
            return {"rps": self.rps, "p99_ms": 1.0, "failure": None}
        return {}


def test_the_rounds_measure_only_the_paths_both_sides_have() -> None:
    base = FakeSide("base", ["bare", "token", "gone"], 1000.0)
    head = FakeSide("head", ["bare", "token", NEW], 990.0)
    paths, alone, outcomes = interleave(base, head, 3, (1, 8))
    assert paths == ["bare", "token"]
    assert alone == {NEW: "head", "gone": "base"}
    assert (
        sorted(set(base.measured))
        == sorted(set(head.measured))
        == [
            ("bare", 1),
            ("bare", 8),
            ("token", 1),
            ("token", 8),
        ]
    )
    assert len(head.measured) == 3 * 4
    lines, passed = table(paths, outcomes, (1, 8), alone)
    assert passed is True
    assert [line.split("  ")[0] for line in lines[1:]] == [
        "bare",
        "bare",
        "token",
        "token",
        NEW,
        "gone",
    ]
