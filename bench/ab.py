"""The regression gate: `make bench-ab [BASE=<commit>]` (`python bench/ab.py --help`).

An A/B on one machine of a base commit against this checkout (its working tree, uncommitted
changes included). The base's tree is exported with `git archive` into a temporary folder (no
worktree is registered, nothing is fetched); both sides run with this checkout's .venv, so their
requirements must be the same (when they differ it says so and stops). Each side runs in a process
of its own (bench/ab_side.py) with its own bench/run.py harness and its own code seeding its own
fresh database alike (10^3 resource sets, 1 rule: the main table's).

Every path of the main table (the bare route and umaserver's paths, waitress) at concurrency 1 and
8 is measured on both sides in turn, in rounds: each round starts fresh servers on both sides, and
for each path and concurrency measures one side and then the other, base first in the odd rounds
and head first in the even ones (a steady drift of the machine tilts neither). The verdict of a
path at a concurrency: in each round head's req/s over base's (measured back to back, so that a
slow spell of a shared machine slows both or shows in one round only), and the median of those
ratios: below 0.95 (head slower by more than 5%) it fails, faster is fine; a run with an
unexpected answer fails too. Exit status 1 when any fails. A path that only one side has (one
added since the base, or removed) is not measured: the table shows it as new or as absent from
head, and it decides nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/ab.py`: the checkout is not on sys.path
    sys.path.insert(0, str(ROOT))

from bench.run import BENCH, cores  # noqa: E402

TOLERANCE = 0.05  # head may be this much slower than base
CONCURRENCIES = (1, 8)
# What both sides must share to run on one .venv.
REQUIREMENTS = ("requirements.txt", "requirements-bench.txt")


@dataclass(frozen=True)
class Outcome:
    """One measured run of one side."""

    rps: float
    p99_ms: float
    failure: str | None


@dataclass(frozen=True)
class Verdict:
    ratio: float | None  # the median over the rounds of head's req/s over base's
    by_round: tuple[float, ...]  # head's req/s over base's, round by round
    passed: bool
    note: str  # why it failed ("" when it passed)


def verdict(
    base: Sequence[Outcome], head: Sequence[Outcome], tolerance: float = TOLERANCE
) -> Verdict:
    """Head against base at one path and concurrency, round by round: in each round head's req/s
    over base's, the two measured back to back (a slow spell of a shared machine slows both, or
    shows in that round only); the median of those ratios at least 1 - tolerance, and every run
    of both with the answers it expected."""
    for side, outcomes in (("head", head), ("base", base)):
        failed = next((o.failure for o in outcomes if o.failure), None)
        if failed:
            return Verdict(None, (), False, f"{side}: {failed}")
    if not base or len(base) != len(head):
        return Verdict(None, (), False, "not measured in the same rounds on both sides")
    if any(o.rps <= 0 for o in base):
        return Verdict(None, (), False, "base measured no requests")
    by_round = tuple(h.rps / b.rps for b, h in zip(base, head, strict=True))
    ratio = statistics.median(by_round)
    if ratio < 1 - tolerance:
        return Verdict(ratio, by_round, False, f"head slower by {1 - ratio:.1%}")
    return Verdict(ratio, by_round, True, "")


def alone_note(side: str) -> str:
    """The verdict column of a path that only `side` has: not compared, and no failure."""
    return "new (head only)" if side == "head" else "absent from head (base only)"


def table(
    paths: Sequence[str],
    outcomes: dict[tuple[str, str, int], list[Outcome]],
    concurrencies: Sequence[int] = CONCURRENCIES,
    alone: dict[str, str] | None = None,
) -> tuple[list[str], bool]:
    """The result per path and concurrency (req/s of each round on each side, their ratio in
    each round and its median, p99 medians, the verdict), and whether every one passed; then
    each path of `alone` (path -> the one side that has it), not compared: it passes or fails
    nothing."""
    alone = alone or {}

    def rounds(found: list[Outcome]) -> str:
        return " ".join("FAILED" if o.failure else f"{o.rps:,.0f}" for o in found)

    def p99(found: list[Outcome]) -> str:
        values = [o.p99_ms for o in found if not o.failure]
        return f"{statistics.median(values):.1f}" if values else ""

    width = max((len(path) for path in [*paths, *alone]), default=4)
    lines = [
        f"{'path':{width}}  {'c':>2}  {'base req/s by round':>20}  {'head req/s by round':>20}"
        f"  {'head/base by round':>18}  {'median':>6}  {'p99 base':>8}  {'p99 head':>8}  verdict"
    ]
    passed = True
    for path in paths:
        for concurrency in concurrencies:
            base = outcomes.get(("base", path, concurrency), [])
            head = outcomes.get(("head", path, concurrency), [])
            found = verdict(base, head)
            passed = passed and found.passed
            by_round = " ".join(f"{ratio:.2f}" for ratio in found.by_round)
            ratio = "" if found.ratio is None else f"{found.ratio:.3f}"
            shown = "PASS" if found.passed else f"FAIL ({found.note})"
            lines.append(
                f"{path:{width}}  {concurrency:>2}  {rounds(base):>20}  {rounds(head):>20}"
                f"  {by_round:>18}  {ratio:>6}  {p99(base):>8}  {p99(head):>8}  {shown}"
            )
    for path, side in alone.items():
        lines.append(
            f"{path:{width}}  {'-':>2}  {'':>20}  {'':>20}  {'':>18}  {'':>6}  {'':>8}  {'':>8}"
            f"  not compared: {alone_note(side)}"
        )
    return lines, passed


# -- git -----------------------------------------------------------------------------------------


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def resolve(revision: str) -> str:
    found = git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode != 0:
        sys.exit(f"{revision!r} is not a commit of this repository")
    return found.stdout.strip()


def default_base() -> tuple[str, str]:
    """Where this branch left main (its merge-base with main, or with origin/main); on main
    itself, or level with it, HEAD~1. The commit, and how it was chosen."""
    head = resolve("HEAD")
    for branch in ("main", "origin/main"):
        fork = git("merge-base", "HEAD", branch)
        if fork.returncode == 0 and fork.stdout.strip() != head:
            return fork.stdout.strip(), f"the merge-base of HEAD and {branch}"
    return resolve("HEAD~1"), "HEAD~1"


def export(commit: str, folder: Path) -> None:
    """The commit's tree into `folder` (git archive: no worktree registered, nothing fetched)."""
    folder.mkdir()
    archive = folder.with_suffix(".tar")
    done = git("archive", "--format=tar", "-o", str(archive), commit)
    if done.returncode != 0:
        sys.exit(f"git archive {commit} failed: {done.stderr}")
    subprocess.run(["tar", "-x", "-f", str(archive), "-C", str(folder)], check=True)
    archive.unlink()


# -- the sides -----------------------------------------------------------------------------------


class Side:
    """A checkout served and measured by bench/ab_side.py in a process of its own."""

    def __init__(self, name: str, root: Path, log: Path, duration: int, warmup: int) -> None:
        self.name = name
        self.log: IO[str] = log.open("w+", encoding="utf-8")
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "ab_side.py"),
                "--root",
                str(root),
                "--duration",
                str(duration),
                "--warmup",
                str(warmup),
            ],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # then it has stopped: said below
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.log.seek(0)
            sys.exit(
                f"the {self.name} side stopped (status {self.process.returncode}) at {command}; "
                f"the end of its log:\n{self.log.read()[-3000:]}"
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Asked(Protocol):
    """What interleave asks of a side (Side, or a stand-in)."""

    name: str

    def ask(self, **command: Any) -> dict[str, Any]: ...


def interleave(
    base: Asked, head: Asked, rounds: int, concurrencies: Sequence[int]
) -> tuple[list[str], dict[str, str], dict[tuple[str, str, int], list[Outcome]]]:
    """The rounds: fresh servers on both sides each round, each path and concurrency measured on
    one side then the other, base first in odd rounds, head first in even ones. Only the paths
    both sides have are measured; the others are returned apart (path -> the side that has it),
    in head's order and then base's."""
    outcomes: dict[tuple[str, str, int], list[Outcome]] = {}
    paths: list[str] = []
    alone: dict[str, str] = {}
    for number in range(1, rounds + 1):
        order = (base, head) if number % 2 else (head, base)
        offered = {side.name: side.ask(op="start")["paths"] for side in order}
        paths = [path for path in offered["head"] if path in offered["base"]]
        alone = {
            path: name for name in ("head", "base") for path in offered[name] if path not in paths
        }
        if number == 1:
            for name in ("head", "base"):
                only = [path for path, side in alone.items() if side == name]
                if only:
                    print(f"{alone_note(name)}, not compared: {', '.join(only)}", flush=True)
        for path in paths:
            for concurrency in concurrencies:
                shown = []
                for side in order:
                    got = side.ask(op="measure", path=path, concurrency=concurrency)
                    outcome = Outcome(got["rps"], got["p99_ms"], got["failure"])
                    outcomes.setdefault((side.name, path, concurrency), []).append(outcome)
                    shown.append(
                        f"{side.name} "
                        + (
                            f"FAILED: {outcome.failure}"
                            if outcome.failure
                            else f"{outcome.rps:,.0f}"
                        )
                    )
                print(
                    f"  round {number}/{rounds}  {path:38} c={concurrency:<2} {'  '.join(shown)}",
                    flush=True,
                )
        for side in order:
            side.ask(op="stop")
    return paths, alone, outcomes


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--base",
        help="the commit compared with this checkout (default: where this branch left main; "
        "on main, HEAD~1)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides (default 3)")
    parser.add_argument(
        "--duration", type=int, default=2, help="seconds of each measured run (default 2)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="seconds of warm-up (default 1)")
    options = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        sys.exit("missing wrk: `make bench-ab` installs it (Debian's package)")
    if options.base:
        base, chosen = resolve(options.base), options.base
    else:
        base, chosen = default_base()
    differ = git("diff", "--quiet", base, "--", *REQUIREMENTS)
    if differ.returncode != 0:
        sys.exit(
            f"the requirements differ between {base[:7]} and this checkout "
            f"(git diff {base[:7]} -- {' '.join(REQUIREMENTS)}): both sides run on this "
            ".venv, so the A/B needs the same ones; stopping"
        )
    head = resolve("HEAD")
    dirty = " with uncommitted changes" if git("status", "--porcelain").stdout.strip() else ""
    print(
        f"A/B: base {base[:7]} ({chosen}) against this checkout ({head[:7]}{dirty}); "
        f"{options.rounds} rounds of {options.warmup} s warm-up and {options.duration} s runs; "
        f"{cores().note}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="umaserver-ab-") as name:
        folder = Path(name)
        export(base, folder / "base")
        sides = [
            Side(side, root, folder / f"{side}.log", options.duration, options.warmup)
            for side, root in (("base", folder / "base"), ("head", ROOT))
        ]
        try:
            paths, alone, outcomes = interleave(sides[0], sides[1], options.rounds, CONCURRENCIES)
        finally:
            for side in sides:
                side.close()
    lines, passed = table(paths, outcomes, CONCURRENCIES, alone)
    print(
        f"\nbase {base[:7]} against head {head[:7]}{dirty}: req/s of each round, head's over "
        f"base's in each round and their median (at least {1 - TOLERANCE:g} to pass), p99 "
        "medians in ms",
        flush=True,
    )
    print("\n".join(lines), flush=True)
    if not passed:
        print("FAILED: a path is slower than the base by more than 5%, or failed", file=sys.stderr)
        sys.exit(1)
    print(
        f"PASS: every path within {TOLERANCE:.0%} of the base or faster"
        + (f" ({len(alone)} on one side only, not compared)" if alone else ""),
        flush=True,
    )


if __name__ == "__main__":
    main()
