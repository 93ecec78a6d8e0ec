"""Forward mode (jvp): the dot-product test against reverse mode, and finite differences."""
import numpy as np
import pytest

from adjoint import ArgumentError, jvp, vjp
from adjoint.corpus.loops import CASES, CASES_BY_NAME
from kernel_testing import (arg_names, assert_untouched, fd_directional, random_direction,
                            rng_for, run_reference, snapshot)


def _inner(a, b):
    return float(np.sum(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)))


@pytest.mark.parametrize("case", [c for c in CASES if not c.float32], ids=lambda c: c.name)
def test_dot_product_test(case):
    """<J dx, dy> == <dx, J^T dy> to 1e-12: tangent-linear and adjoint are transposes."""
    rng = rng_for(case.name, salt="dot")
    args = case.make_args(rng)
    names = arg_names(case.kernel)
    value = dict(zip(names, args))
    saved = snapshot(args)
    dx = {n: random_direction(rng, value[n]) for n in case.wrt}
    outs, dots = jvp(case.kernel, args, dx)
    assert_untouched(args, saved, "jvp")
    dy = {n: random_direction(rng, v) for n, v in outs.items()}
    _, pullback = vjp(case.kernel, *args)
    back = pullback(dy)
    lhs = sum(_inner(dots[n], dy[n]) for n in outs)
    rhs = sum(_inner(dx[n], back[n]) for n in case.wrt)
    assert abs(lhs - rhs) <= 1e-12 * max(abs(lhs), abs(rhs), 1.0), (lhs, rhs)


@pytest.mark.parametrize("name", ["forced_chain", "jacobi2d", "lorenz96_sweep"])
def test_jvp_matches_finite_differences(name):
    case = CASES_BY_NAME.get(name) or pytest.skip(f"no corpus case {name}")
    rng = rng_for(name, salt="jvp")
    args = case.make_args(rng)
    names = arg_names(case.kernel)
    index_of = {n: k for k, n in enumerate(names)}
    dx = {n: random_direction(rng, args[index_of[n]]) for n in case.wrt}
    outs, dots = jvp(case.kernel, args, dx)
    ret, _ = run_reference(case.kernel, args)
    assert outs["return"] == pytest.approx(ret, rel=1e-12)
    f = lambda a: run_reference(case.kernel, a)[0]   # noqa: E731
    want = fd_directional(f, args, index_of, dx)
    assert dots["return"] == pytest.approx(want, rel=1e-6, abs=1e-9)


def test_jvp_rejects_unknown_and_misshapen_tangents():
    case = CASES[0]
    args = case.make_args(rng_for(case.name))
    with pytest.raises(ArgumentError, match="nope"):
        jvp(case.kernel, args, {"nope": 1.0})
    name = next(n for n, a in zip(arg_names(case.kernel), args) if isinstance(a, np.ndarray))
    with pytest.raises(ArgumentError, match=name):
        jvp(case.kernel, args, {name: np.zeros(3)})
