"""Rematerialisation: temporaries a loop body fills every iteration from values the
reverse sweep holds anyway are re-run there, not recorded (adjoint/autodiff/remat.py).
Every gradient is checked against central finite differences."""
import numpy as np

from adjoint import float64, kernel, symbol
from adjoint.corpus.arrays import CASES_BY_NAME
from adjoint.sdfg.nodes import tasklets
from test_records import check_fd, pushed
from kernel_testing import rng_for

N = symbol("N")


def test_a_limiter_step_records_only_its_state():
    """minmod_advection: ``dq``, ``r`` and ``phi`` are refilled every step from ``q``;
    only ``q`` is pushed (it was four arrays per step)."""
    case = CASES_BY_NAME["minmod_advection"]
    args = case.make_args(rng_for("remat-minmod"))
    assert pushed(case.kernel, args, case.wrt) == ["q"]
    check_fd(case.kernel, args, case.wrt)


@kernel
def partly_recorded(u: float64[N], v: float64[N], c: float, T: int) -> float:
    for t in range(T):
        d = u[1:] - u[:-1]
        e = d * d
        v[1:] += c * e
        u[0] = u[0] * c
        u[1:] = u[1:] + 0.1 * v[1:]
    return np.sum(u * u) + np.sum(v * v)


def test_what_a_recomputation_reads_is_recorded():
    """Only ``u[0] = u[0] * c`` reads the ``u`` it overwrites, so only that write pushed
    ``u`` (the other updates are linear), and ``d``, ``e`` were pushed. Re-running them
    reads all of ``u`` as the step saw it: every write of ``u`` pushes, ``d``, ``e`` none."""
    rng = rng_for("remat-linear")
    args = (rng.standard_normal(9), rng.standard_normal(9), 0.3, 3)
    assert pushed(partly_recorded, args, ("u", "v", "c")) == ["u", "u"]
    check_fd(partly_recorded, args, ("u", "v", "c"))


@kernel
def linear_inputs(u: float64[N], v: float64[N], c: float, T: int) -> float:
    for t in range(T):
        d = u[1:] - u[:-1]
        e = d * d
        v[1:] += c * e
        u[1:] = u[1:] + 0.1 * v[1:]
    return np.sum(u * u) + np.sum(v * v)


def test_a_recomputation_that_would_add_a_record_is_not_made():
    """No partial reads ``u`` (its updates are linear): re-running ``d``, ``e`` would
    record ``u`` instead of them, and re-run them on top: ``u`` stays unrecorded."""
    rng = rng_for("remat-linear")
    args = (rng.standard_normal(9), rng.standard_normal(9), 0.3, 3)
    assert "u" not in pushed(linear_inputs, args, ("u", "v", "c"))
    check_fd(linear_inputs, args, ("u", "v", "c"))


@kernel
def input_changes_first(u: float64[N], v: float64[N], c: float, T: int) -> float:
    for t in range(T):
        d = u * u
        u[:] = u + 0.1 * v
        v += c * d * d
    return np.sum(u * u) + np.sum(v * v)


def test_a_temporary_whose_inputs_change_before_its_reader_is_recorded():
    """``u`` changes between ``d = u * u`` and ``d``'s reader: re-running ``d`` in the
    reverse would see the new ``u``. ``d`` stays recorded."""
    rng = rng_for("remat-changes")
    args = (rng.standard_normal(7), rng.standard_normal(7), 0.3, 3)
    assert "d" in pushed(input_changes_first, args, ("u", "v", "c"))
    check_fd(input_changes_first, args, ("u", "v", "c"))


@kernel
def double_buffer(u: float64[N], c: float, T: int) -> float:
    s = np.empty(2)
    s[0] = u[0] * u[0]
    for t in range(1, T):
        s[t % 2] = u[t] * u[t]
        u[t + 1] = u[t + 1] + c * s[t % 2] * s[(t + 1) % 2]
    return np.sum(u * u)


def test_a_temporary_also_written_before_its_loop_is_recorded():
    """``s[(t + 1) % 2]`` is the previous step's value (the first one written before
    the loop): re-running only this step's write would leave the wrong one there. A
    temporary is recomputed only when all its writers are in the loop's body and write
    elements that do not depend on the step."""
    rng = rng_for("remat-slot")
    args = (rng.standard_normal(7), 0.3, 5)
    assert "s" in pushed(double_buffer, args, ("u", "c"))
    check_fd(double_buffer, args, ("u", "c"))


@kernel
def costly_temporary(u: float64[N], v: float64[N], c: float, T: int) -> float:
    for t in range(T):
        d = np.exp(u)
        v += c * d * d
        u[:] = u + 0.1 * v
    return np.sum(u * u) + np.sum(v * v)


def test_a_costly_temporary_is_recorded():
    """``np.exp`` costs more than a tape round trip: ``d`` is pushed, not re-run."""
    rng = rng_for("remat-costly")
    args = (0.1 * rng.standard_normal(7), rng.standard_normal(7), 0.3, 3)
    assert "d" in pushed(costly_temporary, args, ("u", "v", "c"))
    check_fd(costly_temporary, args, ("u", "v", "c"))


@kernel
def pointwise_chain(a: float64[N], b: float64[N], c: float) -> float:
    s = c * c                        # a scalar written before the map
    t1 = a * b + s
    t2 = np.sqrt(t1 * t1 + 1.0)
    t3 = np.log(t2) * a
    return np.sum(t3 * t2)


def _gradient_shapes(k, args, wrt):
    bwd = k.specialize(args).backward(frozenset(wrt), frozenset({"__return"}))
    return {c.name: c.shape for c in bwd.layout.containers}


def test_a_fused_maps_temporaries_are_recomputed_at_each_point():
    """Every partial reads ``t1``..``t3`` (log and sqrt included): each point of the
    reverse map re-runs their tasklets, so the gradient module holds them as scalars of
    the point instead of whole arrays written by the forward and read back."""
    rng = rng_for("remat-points")
    args = (rng.random(11) + 0.5, rng.random(11) + 0.5, 0.7)
    check_fd(pointwise_chain, args, ("a", "b", "c"))
    shapes = _gradient_shapes(pointwise_chain, args, ("a", "b", "c"))
    assert all(shapes[t] == () for t in ("t1", "t2", "t3")), shapes
    assert pushed(pointwise_chain, args, ("a", "b", "c")) == []


@kernel
def map_overwrites_an_input(a: float64[N], b: float64[N]) -> float:
    t = np.sin(a) * b
    a[:] = a * t                     # the map writes what t's writer reads
    return np.sum(a * a)


def test_a_temporary_whose_input_the_map_overwrites_is_not_recomputed():
    """Re-running ``t = sin(a) * b`` after ``a[:] = a * t`` would read the new ``a``."""
    rng = rng_for("remat-points-overwrite")
    args = (rng.random(9) + 0.5, rng.random(9) + 0.5)
    check_fd(map_overwrites_an_input, args, ("a", "b"))
    assert _gradient_shapes(map_overwrites_an_input, args, ("a", "b"))["t"] != ()


@kernel
def stencil_temporary(a: float64[N], b: float64[N]) -> float:
    d = a[1:] - a[:-1]               # a read at two elements per point
    return np.sum(d * d * b[1:])


def test_a_stencil_map_is_left_to_the_gather():
    """The reverse of a map reading ``a`` at two elements scatters into ``a``'s adjoint,
    and autodiff/gather rewrites it tasklet by tasklet into gathers; a re-run tasklet
    among them would keep it a scatter, so ``d`` is read back, not recomputed (the
    pointwise chain re-runs ``t1``'s writer once)."""
    rng = rng_for("remat-points-stencil")
    args = (rng.random(12) + 0.5, rng.random(12) + 0.5)
    check_fd(stencil_temporary, args, ("a", "b"))
    assert _reverse_writes(stencil_temporary, args, ("a", "b"), "d") == 0
    assert _reverse_writes(pointwise_chain, (args[0], args[1], 0.7), ("a", "b", "c"), "t1") == 1


def _reverse_writes(k, args, wrt, name):
    """How many tasklets of the reverse sweep write ``name`` (re-runs of its writer)."""
    adj = k.specialize(args).backward(frozenset(wrt), frozenset({"__return"})).adjoint
    return sum(any(m.data == name for m, _ in t.outputs)
               for r in adj.regions for t, _, _ in tasklets(r.reverse.body))
