"""Store or recompute within a memory budget: the ILP, revolve, and bitwise-equal
gradients under every policy with the engine's measured peak within the budget."""
import itertools
import random

import numpy as np
import pytest

from adjoint import AdjointError, grad, vjp
from adjoint.autodiff.plan import (Candidate, brute_force, least_memory, options_for,
                                   parse_bytes, solve)
from adjoint.autodiff.revolve import advances, peak_snapshots, schedule
from adjoint.corpus.planning import burgers, random_problem


def _burgers_args(n=24, T=1000):
    x = np.linspace(0, 2 * np.pi, n)
    return np.sin(x) + 0.5, np.zeros(n), 1.0, 0.1, T


# ---- the ILP against brute force ---------------------------------------------------
@pytest.mark.parametrize("n,loops,reusable", [(12, False, False), (12, False, True),
                                              (5, True, False), (5, True, True)])
def test_ilp_equals_brute_force(n, loops, reusable):
    rng = random.Random(n * 7 + loops + 3 * reusable)
    for trial in range(6):
        cands = random_problem(rng, n, loops)
        least = least_memory([options_for(c) for c in cands], 1000, reusable)
        budget = least + rng.randrange(0, 8000)
        best = brute_force(cands, 1000, budget, reusable)
        plan = solve(cands, 1000, budget, reusable)
        assert plan.recompute_cost == pytest.approx(best[0], abs=1e-6)
        assert plan.peak_bytes <= budget


def test_least_memory_is_the_brute_force_minimum():
    rng = random.Random(5)
    cands = random_problem(rng, 6, True)
    menus = [options_for(c) for c in cands]
    from adjoint.autodiff.plan import peak
    want = min(peak(cands, choice, 100, False) for choice in itertools.product(*menus))
    assert least_memory(menus, 100, False) == want


def test_infeasible_budget_states_the_least_memory():
    cands = [Candidate("a", 1000, 500, 1.0), Candidate("b", 2000, 300, 1.0)]
    with pytest.raises(AdjointError, match="needs at least 2.4 KiB"):
        solve(cands, 0, 1000)


# ---- revolve ------------------------------------------------------------------------
@pytest.mark.parametrize("n,s", [(1, 1), (7, 1), (10, 2), (37, 3), (100, 4), (250, 6)])
def test_revolve_schedule_reverses_every_step_from_its_state(n, s):
    """Simulate: memory holds an iteration index; snapshots hold indices."""
    memory, saved, held, peak_held, reversed_ = 0, {0: 0}, 1, 1, []
    for action in schedule(n, s):
        kind = action[0]
        if kind == "advance":
            assert memory == action[1]
            memory = action[2]
        elif kind == "snapshot":
            saved[action[1]] = memory
            held += 1
            peak_held = max(peak_held, held)
        elif kind == "restore":
            memory = saved[action[1]]
        elif kind == "free":
            del saved[action[1]]
            held -= 1
        else:
            assert memory == action[1], "reversing a step from the wrong state"
            reversed_.append(action[1])
            memory = None                       # the reverse sweep leaves memory undefined
    assert reversed_ == list(range(n - 1, -1, -1))
    assert peak_held <= s == peak_snapshots(n, s) or n == 1 or peak_held <= s


def test_revolve_cost_is_binomial():
    assert advances(10, 1) == 45                    # quadratic with one snapshot
    assert advances(100, 100) <= 100 * 2            # plenty of snapshots: near linear


# ---- the engine under budgets -------------------------------------------------------
def _gradient(**plan):
    g = grad(burgers, wrt=("u", "nu", "dt"), **plan)
    out = g(*_burgers_args())
    return out, burgers.specializations[0].last_sweep


def test_gradients_are_bitwise_identical_under_every_policy_and_budget():
    reference, sweep = _gradient(policy="store_all")
    store_peak = sweep.ledger.peak
    floor = least_memory([options_for(c) for c in sweep.plan.candidates],
                         sweep.ledger.peak - sum(o.held for o in sweep.plan.choices), False)
    runs = [dict(policy="recompute_all"), dict(policy="revolve", snapshots=1),
            dict(policy="revolve", snapshots=7)]
    runs += [dict(memory_budget=int(floor + f * (store_peak - floor)))
             for f in (0.0, 0.05, 0.1, 0.5, 1.0)]
    for plan in runs:
        grads, sweep = _gradient(**plan)
        for got, want in zip(grads, reference):
            assert np.array_equal(got, want), plan          # bitwise
        if "memory_budget" in plan:
            assert sweep.ledger.peak <= plan["memory_budget"], (plan, sweep.ledger.peak)
            assert sweep.plan.peak_bytes <= plan["memory_budget"]


def test_small_budget_checkpoints_the_time_loop():
    _, sweep = _gradient(policy="store_all")
    store_peak = sweep.ledger.peak
    _, sweep = _gradient(memory_budget=store_peak // 10)
    kinds = [o.kind for o in sweep.plan.choices]
    assert "revolve" in kinds
    assert sweep.ledger.peak <= store_peak // 10
    assert "revolve(" in burgers.explain()


def test_budget_below_the_minimum_raises_with_the_minimum():
    with pytest.raises(AdjointError, match="needs at least"):
        _gradient(memory_budget=64)


def test_vjp_with_recomputation_can_pull_back_twice():
    args = _burgers_args(T=50)
    _, pull_ref = vjp(burgers, *args, policy="store_all")
    _, pull = vjp(burgers, *args, policy="revolve", snapshots=3)
    cot = {"return": 1.0, "u": np.linspace(0, 1, args[0].size)}
    first, second, ref = pull(cot), pull(cot), pull_ref(cot)
    for name in ("u", "v", "nu", "dt"):
        assert np.array_equal(first[name], ref[name])
        assert np.array_equal(second[name], ref[name])


@pytest.mark.parametrize("text,value", [("512MiB", 512 * 2**20), ("2GB", 2 * 10**9),
                                        ("1e6", 10**6), (1234, 1234), (None, None)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


def test_parse_bytes_rejects_nonsense():
    with pytest.raises(ValueError, match="512MiB"):
        parse_bytes("lots")


@pytest.mark.parametrize("n,s", [(10, 2), (37, 3), (100, 4), (1000, 9)])
def test_revolve_costs_count_the_schedule(n, s):
    from adjoint.autodiff.revolve import costs
    actions = schedule(n, s)
    assert costs(n, s) == (sum(a[2] - a[1] for a in actions if a[0] == "advance"),
                           sum(a[0] == "snapshot" for a in actions),
                           sum(a[0] == "restore" for a in actions))


def test_long_loops_plan_and_checkpoint(monkeypatch):
    """Thousands of steps: the planner never builds deep recursions; the engine-wide
    revolve_snapshots option is honoured."""
    from adjoint import options
    args = _burgers_args(n=6, T=3000)
    reference = grad(burgers, wrt="u", policy="store_all")(*args)
    monkeypatch.setattr(options, "memory_policy", "revolve")
    monkeypatch.setattr(options, "revolve_snapshots", 12)
    got = grad(burgers, wrt="u")(*args)
    sweep = burgers.specializations[0].last_sweep
    assert [str(o) for o in sweep.plan.choices][0] == "revolve(12)"
    assert np.array_equal(got, reference)
