"""The rest of the corpus (corpus_more): forward against the kernels run as plain Python,
and the gradient of the sum of every output -- each written array summed, plus the
returned loss -- against central finite differences of the reference, in float64.
"""
import numpy as np
import pytest

from adjoint import vjp
from adjoint.corpus.loops import CASES as LOOP_CASES
from adjoint.corpus.arrays import CASES as ARRAY_CASES
from adjoint.corpus.more import CASES
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar, copy_args,
                            fd_atol, fd_directional, inner, random_direction, rng_for,
                            run_reference)


def test_the_corpus_has_at_least_40_kernels():
    names = [c.name for c in LOOP_CASES + ARRAY_CASES + CASES]
    assert len(set(names)) == len(names) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_matches_python(case):
    args = case.make_args(rng_for(case.name))
    want, want_args = run_reference(case.kernel, args)
    got_args = copy_args(args)
    got = case.kernel(*got_args)
    assert_close_scalar(float(got), want, 1e-11, what=f"{case.name}: return value")
    names = arg_names(case.kernel)
    for name, a, g, w in zip(names, args, got_args, want_args):
        if isinstance(a, np.ndarray):
            assert_arrays_close(g, w, 1e-11, what=f"{case.name}: array {name!r}")
    for name in case.writes:         # the comparison covers real updates
        k = names.index(name)
        assert not np.array_equal(want_args[k], args[k]), f"{name} not written by py_func"


def sum_of_outputs(case):
    """phi(args) = sum of every written array + the returned value, from the reference."""
    names = arg_names(case.kernel)

    def phi(args):
        ret, final = run_reference(case.kernel, args)
        return ret + sum(float(np.sum(final[names.index(w)])) for w in case.writes)
    return phi


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_of_the_outputs_matches_finite_differences(case):
    rng = rng_for(case.name, salt="outputs")
    args = case.make_args(rng)
    outs, pullback = vjp(case.kernel, *args)
    cot = {w: np.ones_like(outs[w]) for w in case.writes}
    cot["return"] = 1.0
    back = pullback(cot)
    index_of = {n: k for k, n in enumerate(arg_names(case.kernel))}
    phi = sum_of_outputs(case)
    atol = fd_atol(phi(args))
    for name in case.wrt:
        d = random_direction(rng, args[index_of[name]])
        want = fd_directional(phi, args, index_of, {name: d})
        assert_close_scalar(inner(back[name], d), want, 1e-6, atol,
                            what=f"{case.name}: <d(sum of outputs)/d{name}, d>")
