"""The sign-in throttle's rules on a clock the test moves (no sleeping for the lock-out): the count
per key, the window, the lock-out and its end, what a right secret clears, the bounded table, and
the server-wide cap on hashes at once. Over real HTTP: test_signin_http.py."""
from __future__ import annotations

import threading
import time
import tracemalloc

import pytest

from decision_pipeline.review_ui import throttle as th
from decision_pipeline.review_ui.throttle import SignInThrottle, ThrottleRules


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def clock() -> Clock:
    return Clock()


def _fail(t: SignInThrottle, n: int, *keys: str) -> None:
    for _ in range(n):
        t.failed(keys or ("name:ada", "addr:1"))


def test_the_defaults_are_five_in_a_minute_then_five_minutes():
    r = ThrottleRules()
    assert (r.max_failures, r.window_s, r.lockout_s) == (th.MAX_FAILURES, th.WINDOW_S, th.LOCKOUT_S) == (5, 60, 300)


def test_five_wrong_secrets_lock_the_name_and_the_address_until_the_lockout_ends(clock):
    t = SignInThrottle(clock=clock)
    _fail(t, 4)
    assert t.retry_after(["name:ada", "addr:1"]) is None
    _fail(t, 1)
    assert t.retry_after(["name:ada"]) == 300 and t.retry_after(["addr:1"]) == 300
    assert t.retry_after(["name:ben", "addr:2"]) is None
    clock.t += 299.5
    assert t.retry_after(["name:ada"]) == 1                  # rounded up, never 0
    clock.t += 0.5
    assert t.retry_after(["name:ada", "addr:1"]) is None     # served: starts afresh...
    _fail(t, 4)
    assert t.retry_after(["name:ada"]) is None               # ...with a full allowance again


def test_wrong_secrets_spread_wider_than_the_window_never_lock(clock):
    t = SignInThrottle(clock=clock)
    for _ in range(20):
        _fail(t, 1)
        clock.t += 16.0                                      # 5 of them span 64 s: never 5 in one 60 s window
        assert t.retry_after(["name:ada", "addr:1"]) is None


def test_a_right_secret_clears_the_name_not_the_address(clock):
    t = SignInThrottle(clock=clock)
    _fail(t, 4)
    t.succeeded("name:ada")
    _fail(t, 1, "name:ada")
    assert t.retry_after(["name:ada"]) is None
    _fail(t, 1, "addr:1")                                    # the address's 4 + 1
    assert t.retry_after(["addr:1"]) == 300


def test_the_table_is_bounded_and_expired_keys_are_dropped(clock):
    t = SignInThrottle(ThrottleRules(max_tracked=100), clock=clock)
    for i in range(1000):
        t.failed([f"addr:{i}"])
    assert len(t) == 100
    clock.t += 61                                            # every count has left the window
    for i in range(30):
        t.failed([f"name:n{i}"])
    assert len(t) == 30                                      # each insert swept SWEEP expired entries
    t.failed(["name:ada"] * 5)                               # a locked key outlives the window...
    clock.t += 61
    for i in range(200):
        t.failed([f"addr:x{i}"])
    assert len(t) == 100                                     # ...but not a full table


def test_a_full_table_stays_small():
    """MAX_TRACKED keys, each with the most wrong secrets it can hold, in a few megabytes."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        t = SignInThrottle()
        for i in range(th.MAX_TRACKED):
            t.failed([f"addr:10.{i // 65536}.{i // 256 % 256}.{i % 256}"] * th.MAX_FAILURES)
        used = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert len(t) == th.MAX_TRACKED and used < 4 * 2**20, used
    print(f"\n{th.MAX_TRACKED} keys x {th.MAX_FAILURES} tries: {used / 2**20:.1f} MiB")


def test_hashes_at_once_are_capped_and_guessing_stops_the_wait(clock):
    t = SignInThrottle(ThrottleRules(max_hashing=2, hash_wait_s=0.3), clock=clock)
    with t.hashing_slot() as a, t.hashing_slot() as b:
        assert a and b
        start = time.monotonic()
        with t.hashing_slot() as c:                          # nobody guessing: waits for a slot...
            assert not c and time.monotonic() - start >= 0.25   # ...and none comes free here
        _fail(t, 5, "name:x")                                # now someone is guessing
        assert t.under_attack()
        start = time.monotonic()
        with t.hashing_slot() as c:
            assert not c and time.monotonic() - start < 0.2  # refused at once, no thread held waiting
    with t.hashing_slot() as c:
        assert c                                             # slots come back
    clock.t += 61
    assert not t.under_attack()


def test_colleagues_signing_in_at_once_all_get_a_slot(clock):
    """Without recent wrong secrets, a burst larger than the cap waits its turn instead of being refused."""
    t = SignInThrottle(ThrottleRules(max_hashing=2, hash_wait_s=5.0), clock=clock)
    got, barrier = [], threading.Barrier(6)

    def sign_in() -> None:
        barrier.wait()
        with t.hashing_slot() as slot:
            time.sleep(0.1)                                  # the hash
            got.append(slot)
    threads = [threading.Thread(target=sign_in) for _ in range(6)]
    [x.start() for x in threads]
    [x.join() for x in threads]
    assert got == [True] * 6
