"""A signed-in reviewer's page latency while 8 parallel guessers send wrong secrets (issue #33:
"8 parallel guessers push a signed-in reviewer's page from 12 ms to 640 ms"). A measurement, not a
test (pytest does not collect it): the real app in a subprocess, as tests/review_ui/live_server.py runs it.

    .venv/bin/python -m tests.review_ui.bench_guessers [--seconds 15] [--spread] [--tree DIR]

--spread: each guess from another loopback address and name (what the per-key throttle cannot stop);
--tree: the PYTHONPATH whose decision_pipeline is served (a checkout of an older commit, to compare).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests.review_ui.live_server import Client, live_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--spread", action="store_true")
    ap.add_argument("--tree", help="PYTHONPATH of the app to serve [this checkout]")
    args = ap.parse_args()
    tree = str(Path(args.tree).resolve()) if args.tree else None
    with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp), ("ben",), tree) as server:
        reviewer = Client(server, "127.0.0.2")
        assert reviewer.sign_in("ben").status == 302

        def page_ms() -> float:
            t = time.perf_counter()
            assert reviewer.get("/queue").status == 200
            return (time.perf_counter() - t) * 1000
        quiet = [page_ms() for _ in range(20)]
        stop, codes = time.monotonic() + args.seconds, []

        def guess(i: int) -> None:
            n = 0
            while time.monotonic() < stop:
                source = f"127.0.{1 + i}.{1 + n % 250}" if args.spread else "127.0.0.40"
                g = Client(server, source)
                g.get("/login")
                codes.append(g.sign_in(f"t{i}x{n}", "wrong").status)
                n += 1
        threads = [threading.Thread(target=guess, args=(i,)) for i in range(8)]
        [t.start() for t in threads]
        busy = []
        while any(t.is_alive() for t in threads):
            busy.append(page_ms())
        [t.join() for t in threads]
    busy.sort()
    print(f"{'spread' if args.spread else 'one address'}: quiet median {statistics.median(quiet):.0f} ms; "
          f"under 8 guessers median {statistics.median(busy):.0f} ms, p90 {busy[int(0.9 * (len(busy) - 1))]:.0f} ms, "
          f"max {busy[-1]:.0f} ms ({len(busy)} pages); {len(codes)} guesses: {codes.count(400)} hashed (400), "
          f"{codes.count(429)} answered 429")


if __name__ == "__main__":
    main()
