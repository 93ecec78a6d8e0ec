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
from math import comb


def beta(s, r):
    return comb(s + r, s)


def schedule(n, s):
    """Actions reversing iterations 0..n-1, given memory at the state of iteration 0
    and a snapshot of it; at most ``s`` snapshots are held at once."""
    if n < 1:
        return []
    if s < 1:
        raise ValueError("revolve needs at least one snapshot (the loop's entry state)")
    out = []
    _reverse(0, n, s, out, at_lo=True)
    return out


def _reverse(lo, hi, s, out, at_lo):
    n = hi - lo
    if n == 1:
        if not at_lo:
            out.append(("restore", lo))
        out.append(("reverse", lo))
        return
    if s == 1:
        for k in range(hi - 1, lo - 1, -1):
            if not at_lo:
                out.append(("restore", lo))
            at_lo = False
            if k > lo:
                out.append(("advance", lo, k))
            out.append(("reverse", k))
        return
    r = 1
    while beta(s, r) < n:
        r += 1
    second = min(beta(s - 1, r), n - 1)
    mid = hi - second
    if not at_lo:
        out.append(("restore", lo))
    out.append(("advance", lo, mid))
    out.append(("snapshot", mid))
    _reverse(mid, hi, s - 1, out, at_lo=True)
    out.append(("free", mid))
    _reverse(lo, mid, s, out, at_lo=False)


def advances(n, s):
    """Iterations re-executed (without recording) by :func:`schedule`."""
    return sum(a[2] - a[1] for a in schedule(n, s) if a[0] == "advance")


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
