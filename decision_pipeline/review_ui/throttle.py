"""Sign-in throttling: a few wrong secrets per reviewer name and per client address, then a lock-out.

Why: every sign-in try costs ~0.1-0.2 s of scrypt CPU, so an unthrottled form lets anyone guess
secrets without end and, with a handful of parallel guessers, starve the server's threads of
the reviewers' page views (issue #33: 8 guessers took a signed-in page from 12 ms to 640 ms).

Rule (the numbers are ``ThrottleRules``'s defaults, the module constants below):
- a wrong secret is counted against its canonical reviewer name (known or not) and against its
  client address; the ``MAX_FAILURES``-th within ``WINDOW_S`` locks that key for ``LOCKOUT_S``;
- the lock is checked *before* the secret is hashed: a try on a locked key is answered at once
  (429 with Retry-After) with no scrypt work. Tries already in flight when a key locks still
  finish, so N parallel guessers get at most MAX_FAILURES - 1 + N hashes per lock-out (N is
  bounded by the server's 8 threads); counting a try before hashing it would close that gap but
  would also refuse six colleagues behind one address who sign in at the same moment;
- a successful sign-in clears its name's count (the address's stays);
- at most ``MAX_HASHING`` secrets are hashed at once, server-wide, so guessers spread over many
  addresses and names (which the per-key counts do not stop) cannot take every core from the
  pages. A try waits up to ``HASH_WAIT_S`` for a slot (colleagues signing in at the same moment
  all get in), except while someone is guessing (``MAX_FAILURES`` wrong secrets server-wide
  within ``WINDOW_S``): then a try that finds every slot busy is answered 429 (Retry-After: 1)
  at once, since a waiting try would hold one of the server's threads;
- the table is bounded (``MAX_TRACKED`` keys, 3.3 MiB when full): each new key sweeps up to
  ``SWEEP`` expired entries off the least-recently-touched end, and a full table drops its least
  recently touched key. An attacker with thousands of addresses can push a locked key out; from
  one address (the default: the app answers only 127.0.0.1) the per-address key holds.

All state is in memory: a restart forgets it (as it forgets the cookie key by default).
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

MAX_FAILURES = 5          # wrong secrets per name, and per client address, within the window...
WINDOW_S = 60.0           # ...of this many seconds; the next try is answered 429
LOCKOUT_S = 300.0         # how long a key stays locked after its MAX_FAILURES-th try
MAX_TRACKED = 10_000      # keys (names + addresses) remembered at most; 3.3 MiB when full (measured)
MAX_HASHING = 2           # secrets hashed at once, server-wide
HASH_WAIT_S = 2.0         # a try waits this long for a hashing slot, unless guessing is seen (then 429 at once)
SWEEP = 4                 # expired entries dropped per new entry (keeps the table's work constant)


@dataclass(frozen=True)
class ThrottleRules:
    """The throttle's numbers (UIConfig.throttle; app.config SIGNIN_* mirrors them)."""
    max_failures: int = MAX_FAILURES
    window_s: float = WINDOW_S
    lockout_s: float = LOCKOUT_S
    max_tracked: int = MAX_TRACKED
    max_hashing: int = MAX_HASHING
    hash_wait_s: float = HASH_WAIT_S


@dataclass(slots=True)
class _Entry:
    tries: list[float] = field(default_factory=list)   # wrong secrets inside the window (oldest first)
    locked_until: float = 0.0


class SignInThrottle:
    """Thread-safe counts of wrong secrets per key ("name:ada", "addr:127.0.0.1")."""

    def __init__(self, rules: ThrottleRules = ThrottleRules(), clock: Callable[[], float] = time.monotonic):
        self.rules = rules
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._hashing = threading.BoundedSemaphore(rules.max_hashing)
        self._recent: deque[float] = deque(maxlen=rules.max_failures)   # the latest wrong secrets, any key

    def __len__(self) -> int:
        return len(self._entries)

    def _fresh(self, key: str, now: float) -> _Entry | None:
        """The key's entry with tries outside the window dropped (None, and forgotten, when empty)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.locked_until and entry.locked_until <= now:     # a served lock-out starts afresh
            entry.tries.clear()
            entry.locked_until = 0.0
        cutoff = now - self.rules.window_s
        while entry.tries and entry.tries[0] <= cutoff:
            entry.tries.pop(0)
        if not entry.tries and not entry.locked_until:
            del self._entries[key]
            return None
        return entry

    def retry_after(self, keys: Iterable[str]) -> int | None:
        """Seconds until every one of `keys` may try again; None when none is locked (the sign-in
        may go on to hash the secret). Counts nothing: only a wrong secret is counted (`failed`)."""
        with self._lock:
            now = self._clock()
            waits = [e.locked_until - now for k in keys if (e := self._fresh(k, now)) and e.locked_until > now]
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, keys: Iterable[str]) -> None:
        """Count one wrong secret against every key; the MAX_FAILURES-th in the window locks the key."""
        with self._lock:
            now = self._clock()
            self._recent.append(now)
            for k in keys:
                entry = self._fresh(k, now) or self._insert(k, now)
                entry.tries.append(now)
                self._entries.move_to_end(k)
                if len(entry.tries) >= self.rules.max_failures:
                    entry.locked_until = max(entry.locked_until, now + self.rules.lockout_s)

    def succeeded(self, name_key: str) -> None:
        """A right secret: forget the name's wrong tries (the address's stay counted)."""
        with self._lock:
            self._entries.pop(name_key, None)

    def under_attack(self) -> bool:
        """True while MAX_FAILURES wrong secrets (any names, any addresses) fell within the window."""
        with self._lock:
            recent = list(self._recent)
        return len(recent) == self.rules.max_failures and recent[0] > self._clock() - self.rules.window_s

    @contextlib.contextmanager
    def hashing_slot(self) -> Iterator[bool]:
        """One of the MAX_HASHING slots to hash a secret in, waited for up to HASH_WAIT_S (not at all
        while someone is guessing); False when none came free."""
        if self.under_attack():
            held = self._hashing.acquire(blocking=False)
        else:
            held = self._hashing.acquire(timeout=self.rules.hash_wait_s)
        try:
            yield held
        finally:
            if held:
                self._hashing.release()

    def _insert(self, key: str, now: float) -> _Entry:
        """A new entry. The least recently touched entries are at the front: a few expired ones are
        dropped on every insert (constant work), and when the table is full the oldest goes."""
        for _ in range(SWEEP):
            oldest = next(iter(self._entries), None)
            if oldest is None or self._fresh(oldest, now) is not None:
                break
        while len(self._entries) >= self.rules.max_tracked:
            self._entries.popitem(last=False)
        entry = self._entries[key] = _Entry()
        return entry
