"""One side of the regression gate's A/B (bench/ab.py): `python bench/ab_side.py --root DIR`.

The checkout at DIR serves and is measured by its own bench/run.py (its Uma, Runner, paths and wrk
script), on a fresh database that its own code initialises and seeds (10^3 resource sets, 1 rule:
the main table's): DIR goes first on sys.path, so the base commit's side runs the base's code and
this checkout's side this checkout's, whatever their schemas. bench/ab.py drives it over stdin, one
JSON object a line, and reads one JSON line on stdout for each; what the harness prints on the way
goes to stderr:

- {"op": "start"}: the server and the bare route start -> {"paths": [path names]};
- {"op": "measure", "path": P, "concurrency": C} -> {"rps": ..., "p99_ms": ..., "failure": ...};
- {"op": "stop"}: both stop -> {}.

At the end of stdin it stops what still runs and removes its folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

# The main table's database: 10^3 resource sets (run.Plan's first size), 1 rule.
MAIN_SETS = 1_000


@dataclass(frozen=True)
class Lengths:
    """What run.Runner reads of its plan: the lengths of a run (seconds)."""

    duration: int
    warmup: int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, required=True, help="the checkout measured")
    parser.add_argument("--duration", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    options = parser.parse_args()
    # The side's checkout instead of this script's folder: its bench, tests and umaserver.
    sys.path[0] = str(options.root.resolve())
    # Answers go to the pipe ab.py reads; anything else written to stdout, by this process or a
    # child it starts, to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    from bench import run

    def answer(value: dict[str, Any]) -> None:
        answers.write(json.dumps(value) + "\n")
        answers.flush()

    with tempfile.TemporaryDirectory(prefix="umaserver-ab-") as name:
        folder = Path(name)
        port = run.free_port()
        config = run.bench_config(folder, port)
        runner = run.Runner(
            cast(Any, Lengths(options.duration, options.warmup)), run.cores(), folder
        )
        uma = run.Uma(folder, config, port)
        uma.grow(MAIN_SETS)
        rules = uma.set_rules(1, 1)
        servers: list[run.Server] = []
        specs: dict[str, tuple[run.Spec, run.Server, str]] = {}
        try:
            for line in sys.stdin:
                command = json.loads(line)
                if command["op"] == "start":
                    server = uma.waitress()
                    servers.append(server)
                    uma.prepare_flow()
                    bare_port = run.free_port()
                    bare = run.bare_waitress(config, bare_port)
                    servers.append(bare)
                    specs = {run.BARE.name: (run.BARE, bare, f"http://127.0.0.1:{bare_port}")}
                    for spec in uma.specs():
                        specs[spec.name] = (spec, server, uma.url)
                    answer({"paths": list(specs)})
                elif command["op"] == "measure":
                    spec, server, url = specs[command["path"]]
                    result = runner.measure(
                        server,
                        url,
                        spec,
                        command["concurrency"],
                        section="ab",
                        sets=MAIN_SETS,
                        rules=rules,
                    )
                    answer({"rps": result.rps, "p99_ms": result.p99_ms, "failure": result.failure})
                elif command["op"] == "stop":
                    while servers:
                        servers.pop().stop()
                    answer({})
                else:
                    sys.exit(f"unknown command {command!r}")
        finally:
            for server in servers:
                server.stop()
            uma.store.close()


if __name__ == "__main__":
    main()
