"""Store or recompute: choose, per candidate region, how the reverse sweep gets the
forward values it needs, so that peak memory stays under a budget at least cost.

Candidates are the top-level regions of a kernel, in forward order. Each has options:

- ``store``: keep the region's tape from the forward sweep until its reverse;
- ``recompute``: keep a snapshot of the region's inputs, re-run the region (recording)
  just before its reverse;
- ``revolve(s)`` (counted loops): binomial checkpointing with ``s`` loop-state snapshots
  and one iteration's tape at a time.

An option holds ``held`` bytes from the forward sweep until the region's reverse and
needs ``during`` bytes while it runs; its ``cost`` is the forward work it repeats.
The reverse sweep frees regions as it goes (``reusable=False``), so the peak is the
largest of: the end of the forward sweep, and each region's reverse with the regions
before it still held. A pullback that may run again (``vjp``) keeps everything, so
``reusable=True`` holds all of it throughout. The choice is an ILP (pulp, CBC).
"""
import functools
import itertools
import logging
import os
import time
from dataclasses import dataclass, field

import pulp

from ..errors import AdjointError
from .revolve import MAX_SNAPSHOTS, costs

log = logging.getLogger("adjoint.plan")


@dataclass(frozen=True)
class Candidate:
    name: str
    tape_bytes: int             # all the region records
    snapshot_bytes: int         # its inputs, to re-run it from its entry
    cost: float                 # forward work of the whole region
    trips: int = 0              # counted loop: iterations (revolve applies when >= 2)
    state_bytes: int = 0        # counted loop: the state its iterations carry
    iteration_tape_bytes: int = 0


@dataclass(frozen=True)
class Option:
    kind: str                   # 'store', 'recompute' or 'revolve'
    held: int
    during: int
    cost: float
    snapshots: int = 0

    def __str__(self):
        return f"revolve({self.snapshots})" if self.kind == "revolve" else self.kind


@dataclass(frozen=True)
class Plan:
    choices: tuple              # one Option per candidate
    peak_bytes: int
    recompute_cost: float
    policy: str
    solve_seconds: float = 0.0
    candidates: tuple = field(default=(), repr=False)

    def describe(self):
        lines = [f"plan ({self.policy}): predicted peak {_fmt(self.peak_bytes)}, "
                 f"recomputed work {self.recompute_cost:.3g}"
                 + (f", solved in {1e3 * self.solve_seconds:.1f} ms" if self.solve_seconds else "")]
        for c, o in zip(self.candidates, self.choices):
            lines.append(f"  {c.name}: {o} (held {_fmt(o.held)}, during reverse {_fmt(o.during)})")
        return "\n".join(lines)


def options_for(c: Candidate):
    opts = [Option("store", c.tape_bytes, c.tape_bytes, 0.0),
            Option("recompute", c.snapshot_bytes, c.snapshot_bytes + c.tape_bytes, c.cost)]
    if c.trips >= 2 and c.state_bytes > 0:
        per_iteration = c.cost / c.trips
        copy = c.state_bytes / 8            # work of saving or restoring the loop state
        for s in snapshot_counts(c.trips):
            repeats, saves, restores = costs(c.trips, s)
            during = c.snapshot_bytes + (s - 1) * c.state_bytes + c.iteration_tape_bytes
            opts.append(Option("revolve", c.snapshot_bytes, during,
                               per_iteration * (repeats + c.trips) + copy * (saves + restores),
                               s))
    return opts


def snapshot_counts(trips):
    """The snapshot counts the planner considers: 1, 2, 3, 4, 6, 8, 12, ... (steps of
    1.5x or 4/3x), below the trip count and at most MAX_SNAPSHOTS."""
    counts, s = [], 1
    while s < min(trips, MAX_SNAPSHOTS + 1):
        counts.append(s)
        s = s + 1 if s < 4 else (s * 3) // 2 if s % 2 == 0 else (s * 4) // 3
    return counts


def peak(candidates, choices, base, reusable):
    """Peak bytes of a choice of options (the ILP's constraints, evaluated directly)."""
    held = [o.held for o in choices]
    if reusable:
        total = base + sum(held)
        return max([total] + [total - o.held + o.during for o in choices])
    points = [base + sum(held)]
    points += [base + sum(held[:j]) + choices[j].during for j in range(len(choices))]
    return max(points)


def solve(candidates, base, budget, reusable=False, policy="ilp", snapshots=None):
    """The cheapest options that fit ``budget`` bytes (None: store everything)."""
    candidates = tuple(candidates)
    menus = [options_for(c) for c in candidates]
    start = time.perf_counter()
    if policy == "store_all" or (policy == "ilp" and budget is None):
        choices = tuple(m[0] for m in menus)
    elif policy == "recompute_all":
        choices = tuple(m[1] for m in menus)
    elif policy == "revolve":
        choices = tuple(_revolve_choice(m, c, snapshots) for m, c in zip(menus, candidates))
    elif policy == "ilp":
        choices = _ilp(menus, base, budget, reusable)
    else:
        raise ValueError(f"unknown memory policy {policy!r}; use 'ilp', 'store_all', "
                         "'recompute_all' or 'revolve'")
    elapsed = time.perf_counter() - start
    plan = Plan(choices, peak(candidates, choices, base, reusable),
                sum(o.cost for o in choices), policy, elapsed, candidates)
    if budget is not None and plan.peak_bytes > budget:
        raise AdjointError(f"the {policy} plan needs {_fmt(plan.peak_bytes)}, over the memory "
                           f"budget of {_fmt(budget)}")
    log.info("store/recompute plan for %d candidates in %.1f ms", len(candidates), 1e3 * elapsed)
    return plan


def _revolve_choice(menu, candidate, snapshots):
    """revolve(snapshots) exactly for a checkpointable loop; other regions store."""
    if candidate.trips < 2 or candidate.state_bytes <= 0:
        return menu[0]
    s = max(1, min(snapshots or 1, candidate.trips - 1, MAX_SNAPSHOTS))
    repeats, saves, restores = costs(candidate.trips, s)
    per_iteration = candidate.cost / candidate.trips
    during = candidate.snapshot_bytes + (s - 1) * candidate.state_bytes + \
        candidate.iteration_tape_bytes
    return Option("revolve", candidate.snapshot_bytes, during,
                  per_iteration * (repeats + candidate.trips)
                  + candidate.state_bytes / 8 * (saves + restores), s)


def _ilp(menus, base, budget, reusable):
    prob = pulp.LpProblem("store_or_recompute", pulp.LpMinimize)
    x = _choice_variables(prob, menus)
    prob += pulp.lpSum(o.cost * v for m, xs in zip(menus, x) for o, v in zip(m, xs)) \
        + 1e-9 * pulp.lpSum(o.held * v for m, xs in zip(menus, x) for o, v in zip(m, xs))
    for lhs in _memory_terms(prob, menus, x, reusable):
        prob += base + lhs <= budget
    status = prob.solve(_solver())
    if pulp.LpStatus[status] != "Optimal":
        least = least_memory(menus, base, reusable)
        raise AdjointError(f"no store/recompute plan fits the memory budget of {_fmt(budget)}; "
                           f"this program needs at least {_fmt(least)}")
    return tuple(m[max(range(len(xs)), key=lambda k: xs[k].value())]
                 for m, xs in zip(menus, x))


def _memory_terms(prob, menus, x, reusable):
    """Linear expressions whose maximum is the peak (see the module docstring). Held
    bytes and running totals are variables, so the model grows linearly with the
    number of candidates."""
    held = _defined(prob, "held", [pulp.lpSum(o.held * v for o, v in zip(m, xs))
                                   for m, xs in zip(menus, x)])
    during = [pulp.lpSum(o.during * v for o, v in zip(m, xs)) for m, xs in zip(menus, x)]
    before = [prob.add_variable("before_0", lowBound=0)]     # held by earlier candidates
    prob += before[0] == 0
    for j, h in enumerate(held):
        before.append(prob.add_variable(f"before_{j + 1}", lowBound=0))
        prob += before[j + 1] == before[j] + h
    total = before[-1]
    if reusable:
        return [total] + [total - h + d for h, d in zip(held, during)]
    return [total] + [before[j] + during[j] for j in range(len(menus))]


def _defined(prob, name, expressions):
    out = []
    for k, e in enumerate(expressions):
        v = prob.add_variable(f"{name}_{k}", lowBound=0)
        prob += v == e
        out.append(v)
    return out


def least_memory(menus, base, reusable):
    """The smallest peak any choice of options reaches (an ILP minimising the peak)."""
    prob = pulp.LpProblem("least_memory", pulp.LpMinimize)
    x = _choice_variables(prob, menus)
    top = prob.add_variable("peak", lowBound=0)
    prob += top
    for lhs in _memory_terms(prob, menus, x, reusable):
        prob += base + lhs <= top
    prob.solve(_solver())
    return int(round(top.value()))


def _choice_variables(prob, menus):
    """One binary per option of each candidate, with exactly one option chosen."""
    x = [[prob.add_variable(f"x_{i}_{k}", cat="Binary") for k in range(len(m))]
         for i, m in enumerate(menus)]
    for xs in x:
        prob += pulp.lpSum(xs) == 1
    return x


def _solver():
    """CBC: the one pulp[cbc] installs, else the copy older pulp releases bundle. Cutting
    planes are off: on these small models they cost more than they save (same optima)."""
    coin = pulp.COIN_CMD(msg=False, path=_cbc_binary(), cuts=False)
    return coin if coin.available() else pulp.PULP_CBC_CMD(msg=False, cuts=False)


@functools.lru_cache(maxsize=1)
def _cbc_binary():
    """pulp[cbc]'s native binary: the ``cbc`` on PATH is a Python console script that
    starts an interpreter only to exec it (~40 ms of every solve). None: pulp's default."""
    try:
        import cbcbox
        path = cbcbox.cbc_bin_path()
    except Exception:       # not installed, or an unusable CBCBOX_BUILD
        return None
    return path if os.access(path, os.X_OK) else None


def brute_force(candidates, base, budget, reusable=False):
    """Cheapest fitting choice by enumeration (the reference the tests hold the ILP to)."""
    menus = [options_for(c) for c in candidates]
    best = None
    for choice in itertools.product(*menus):
        if peak(candidates, choice, base, reusable) <= budget:
            cost = sum(o.cost for o in choice)
            if best is None or cost < best[0] - 1e-9:
                best = (cost, choice)
    return best


def parse_bytes(value):
    """``512MiB``, ``2 GB``, ``1e9`` or an int -> bytes; None stays None."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    text = str(value).strip().replace(" ", "")
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "KB": 10**3, "MB": 10**6,
             "GB": 10**9, "TB": 10**12, "B": 1}
    for unit, scale in units.items():
        if text.upper().endswith(unit):
            try:
                return int(float(text[:-len(unit)]) * scale)
            except ValueError:
                break
    try:
        return int(float(text))
    except ValueError:
        raise ValueError(f"memory budget {value!r}: write bytes or a size like '512MiB' "
                         "or '2GB'") from None


def _fmt(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
