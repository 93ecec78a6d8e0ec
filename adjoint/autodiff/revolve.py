"""Binomial checkpointing (revolve) for reversing a loop with few snapshots.

With ``s`` snapshot slots (the one at the loop's entry included) and at most ``r``
re-executions of any iteration, ``beta(s, r) = C(s + r, s)`` iterations can be
reversed; splitting at the binomial point keeps both halves within their budgets.
The schedule is a list of actions the runtime executes:

    ("advance", a, b)   run iterations a..b-1 forward, without recording
    ("snapshot", k)     save the loop state (at iteration k)
    ("restore", k)      load the state saved at k
    ("free", k)         drop the snapshot at k
    ("reverse", k)      record iteration k, then run its reverse sweep
"""
import functools
from math import comb

MAX_SNAPSHOTS = 256     # keeps the schedule's recursion shallow (depth <= s + r)


def beta(s, r):
    return comb(s + r, s)


def schedule(n, s):
    """Actions reversing iterations 0..n-1, given memory at the state of iteration 0
    and a snapshot of it; at most ``s`` snapshots are held at once."""
    if n < 1:
        return []
    if not 1 <= s <= MAX_SNAPSHOTS:
        raise ValueError(f"revolve takes 1 to {MAX_SNAPSHOTS} snapshots (the loop's entry "
                         f"state included), not {s}")
    out = []
    _reverse(0, n, s, out, at_lo=True)
    return out


def _reverse(lo, hi, s, out, at_lo):
    """Reverse iterations lo..hi-1; the first part of every split is handled by the loop
    (not by recursion), so the depth stays below ``s``."""
    while hi - lo > 1 and s > 1:
        mid = lo + _split(hi - lo, s)
        if not at_lo:
            out.append(("restore", lo))
        out.append(("advance", lo, mid))
        out.append(("snapshot", mid))
        _reverse(mid, hi, s - 1, out, at_lo=True)
        out.append(("free", mid))
        hi, at_lo = mid, False
    for k in range(hi - 1, lo - 1, -1):         # one slot left (or one iteration)
        if not at_lo:
            out.append(("restore", lo))
        at_lo = False
        if k > lo:
            out.append(("advance", lo, k))
        out.append(("reverse", k))


def _split(n, s):
    """Iterations before the snapshot that halves a reversal of ``n`` with ``s`` slots."""
    r = 1
    while beta(s, r) < n:
        r += 1
    return n - min(beta(s - 1, r), n - 1)


@functools.lru_cache(maxsize=None)
def costs(n, s):
    """(iterations re-executed, snapshots taken, restores) of :func:`schedule`, from its
    recursion without building it (memoised: the planner asks for many ``s``)."""
    advanced = saved = restored = 0
    while n > 1 and s > 1:
        first = _split(n, s)
        a, b, c = costs(n - first, s - 1)
        advanced, saved, restored = advanced + first + a, saved + 1 + b, restored + 1 + c
        n = first
    if n > 1:                                   # one slot: quadratic
        advanced, restored = advanced + n * (n - 1) // 2, restored + n - 1
    return advanced, saved, restored


def advances(n, s):
    """Iterations re-executed (without recording) by :func:`schedule`."""
    return costs(n, s)[0]


def peak_snapshots(n, s):
    """Most snapshots held at once, the entry's included."""
    held = peak = 1
    for action in schedule(n, s):
        if action[0] == "snapshot":
            held += 1
            peak = max(peak, held)
        elif action[0] == "free":
            held -= 1
    return peak
