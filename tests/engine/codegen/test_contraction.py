"""Array contraction (analysis/contraction.py): temporaries that live within one point of
one fused map become private scalars of its body, in the forward module and in the
gradient's entries; results stay bitwise NumPy's, gradients agree with central
differences."""
import re

import numpy as np
import pytest

from adjoint import float64, kernel, symbol, vjp
from adjoint.autodiff.reverse import adjoint_name
from adjoint.sdfg.nodes import MapScope, walk

from kernel_testing import check_vjp_and_jvp, copy_args, rng_for

N = symbol("N")


@kernel
def named(a: float64[N], b: float64[N]):
    t1 = a * b
    t2 = np.sqrt(t1 * t1 + 1.0)
    t3 = t2 * a
    return t3 + t2 * t2              # sqrt is correctly rounded: bitwise NumPy's


@kernel
def kept_whole(a: float64[N], b: float64[N], c: float64[N]) -> float:
    t = a * b                        # read at a neighbour: stays an array
    u = a + b                        # read after a sum: stays an array
    c[1:] = t[:-1] + u[1:]
    return np.sum(c) + np.sum(u)


def _args(n=7):
    rng = rng_for("contraction")
    return rng.random(n) + 0.5, rng.random(n) + 0.5


def _private(sdfg):
    return {name for n, _ in walk(sdfg.body) if isinstance(n, MapScope) for name in n.private}


def test_forward_temporaries_become_scalars_bitwise():
    a, b = _args()
    assert np.array_equal(named(a, b), named.py_func(a, b))
    spec = named.specialize((a, b))
    shapes = {c.name: c.shape for c in spec.forward.layout.containers}
    assert all(shapes[t] == () for t in ("t1", "t2", "t3"))
    assert spec.sdfg.containers["t1"].shape != ()     # the differentiated SDFG stays whole
    source = spec.forward.source
    assert source.count("v_t1[") == source.count("v_t1[0]") > 0     # no array index


def test_reads_at_neighbours_or_outside_the_map_keep_the_array():
    a, b = _args()
    c = np.zeros(7)
    want_c = c.copy()
    assert kept_whole(a, b, c) == kept_whole.py_func(a, b, want_c)
    assert np.array_equal(c, want_c)
    shapes = {x.name: x.shape for x in kept_whole.specialize((a, b, c)).forward.layout.containers}
    assert shapes["t"] != () and shapes["u"] != ()


def test_gradient_contracts_the_adjoints_and_agrees_with_differences():
    a, b = _args()
    named(a, b)                      # the forward's contracted shapes, then the gradient's
    check_vjp_and_jvp(named, named.py_func, (a, b), rng_for("contraction vjp"))
    spec = named.specialize((a, b))
    (bwd,) = spec._backward.values()
    private = set().union(*(_private(r.reverse) for r in bwd.adjoint.regions))
    assert {adjoint_name(t) for t in ("t1", "t2", "t3")} <= private
    shapes = {c.name: c.shape for c in bwd.layout.containers}
    assert shapes[adjoint_name("t1")] == () and shapes[adjoint_name("a")] != ()


def test_gradient_of_kept_arrays_agrees_with_differences():
    a, b = _args()
    check_vjp_and_jvp(kept_whole, kept_whole.py_func, (a, b, np.zeros(7)),
                      rng_for("contraction kept"))


def test_large_sizes_run_on_threads_with_own_copies():
    rng = rng_for("contraction large")
    a, b = rng.random(100_000) + 0.5, rng.random(100_000) + 0.5
    assert np.array_equal(named(a, b), named.py_func(a, b))
    outs, pullback = vjp(named, *copy_args((a, b)))
    g = pullback({"return": np.ones(100_000)})
    t1 = a * b
    t2 = np.sqrt(t1 * t1 + 1.0)
    want = t2 + (a + 2.0 * t2) * t1 / t2 * b
    assert np.allclose(g["a"], want, rtol=1e-12, atol=0)


@kernel
def summed(a: float64[N], b: float64[N], p: float64[1]) -> float:
    t = a * b + p                    # p broadcast: its adjoint sums over the points
    return np.sum(t * t)


def test_temporaries_of_a_map_that_sums_become_scalars_and_the_sum_stays_simd():
    a, b = _args(40)
    p = np.array([0.25])
    assert summed(a, b, p) == pytest.approx(summed.py_func(a, b, p), rel=1e-14)
    spec = summed.specialize((a, b, p))
    assert {c.name: c.shape for c in spec.forward.layout.containers}["t"] == ()
    # the loop owning the scalar adds in the vector's lanes
    assert re.search(r"#pragma omp simd reduction\(\+:\w+\)\s*for \([^{]*\{\s*double sc_own_t",
                     spec.forward.source)
    check_vjp_and_jvp(summed, summed.py_func, (a, b, p), rng_for("contraction summed"))
    (bwd,) = spec._backward.values()
    private = set().union(*(_private(r.reverse) for r in bwd.adjoint.regions))
    assert adjoint_name("t") in private       # beside the sum into p's adjoint
