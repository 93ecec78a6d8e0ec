"""Property-based tests: random kernels, forward against Python, gradients against
central differences.

A hypothesis strategy writes random kernels -- nested loops (up, strided, reversed),
in-bounds affine indices, nonlinear expressions, in-place updates and recurrences,
scalar accumulators, slices, statements repeated on their line (``s; s``), ``if``/``else``
on indices and on data, ``continue`` and ``break`` -- as Python source in a temporary
module (the engine reads the source).
To keep compiles few, each example is a batch: ``BATCH`` random kernels and one driver
kernel that calls them all (so the calls are inlined into one compiled module), each
random kernel on arguments of its own. Every random kernel is then checked on its own:
its arrays after the compiled driver against its plain-Python run, and the driver's
gradient restricted to its arguments against central differences of its Python loss.
The driver's arrays are consecutive views of one buffer with guard elements between
them (aliasing-free arguments that share a base): a write outside its argument fails.

Decisions on data could flip under the finite differences' perturbations: a shadow copy
of each kernel records how far every data condition is from its threshold, and kernels
with a condition closer than ``MARGIN`` are checked forward only.
"""
import importlib.util
import itertools
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from adjoint import value_and_grad
from adjoint import configure
from adjoint.options import options
from kernel_testing import (assert_arrays_close, assert_close_scalar, fd_atol,
                            fd_directional, inner)

BATCH = 10                  # random kernels per compiled module
EXAMPLES = 20               # hypothesis examples: BATCH * EXAMPLES kernels in all
MARGIN = 0.02               # data conditions closer than this: forward check only
ARRAYS = {"A": ("N", "M"), "B": ("N", "M"), "x": ("N",), "y": ("M",)}
FLOATS = ("A", "B", "x", "y", "s")
UNARY = ("np.tanh({})", "np.sin({})", "np.cos({})", "({}) / (1.0 + ({}) ** 2)",
         "np.sqrt(1.0 + ({}) ** 2)", "np.log(1.0 + ({}) ** 2)", "np.exp(-({}) ** 2)")
SLICES = ["x[1:] = x[1:] + 0.5 * np.tanh(x[:-1])",
          "y[:-1] -= 0.25 * y[1:] * s",
          "A[1:, :] += 0.5 * np.sin(A[:-1, :])",
          "B[:, 1:] = 0.5 * (B[:, 1:] + A[:, :-1] * y[1:])",
          "A *= 0.5 + 0.25 * np.tanh(B)",
          "x[:] = 0.1 * np.sum(A * B, axis=1) + x",
          "y += 0.1 * np.sum(np.cos(A), axis=0)",
          "B[::2, :] = np.cos(B[::2, :]) * x[::2, None]",
          "x[::-1] = 0.5 * x + 0.25 * x[::-1]",
          "acc += np.sum(np.tanh(A) * B) * 0.1"]
ROW_SLICES = ["A[{i}, :] = 0.5 * A[{i}, :] + 0.3 * np.tanh(B[{i}, :])",
              "B[{i}, 1:] += 0.5 * B[{i}, :-1] * y[1:]",
              "acc += 0.1 * np.sum(A[{i}] * y)"]


@dataclass
class Loop:
    var: str
    dim: str
    lo: int
    hi: int
    kind: str               # "up", "step2" or "down"
    body: list = field(default_factory=list)


@dataclass
class If:
    condition: str          # an index condition, or a data expression compared with 0
    on_data: bool
    body: list
    orelse: list


@dataclass
class Jump:
    word: str               # "break" or "continue"
    condition: str
    on_data: bool


class Generator:
    """Draws one random kernel body; ``scope`` lists the enclosing loops."""

    def __init__(self, draw):
        self.draw, self.names = draw, itertools.count()

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def block(self, scope, depth, count):
        count = min(count, 1) if depth >= 2 else count
        return [self.statement(scope, depth) for _ in range(count)]

    def statement(self, scope, depth):
        kinds = ["assign"] * 4 + ["acc", "twice"]
        if depth < 2:
            kinds += ["loop"] * 4
        if depth < 3:
            kinds += ["if"]
        if depth == 0:
            kinds += ["slice", "time"]
        if any(loop.dim == "N" for loop in scope):
            kinds += ["row"]
        if scope:
            kinds += ["jump"]
        kind = self.pick(kinds)
        return getattr(self, "_" + kind)(scope, depth)

    def _loop(self, scope, depth):
        loop = Loop(f"i{next(self.names)}", self.pick(["N", "M"]), self.integer(0, 2),
                    self.integer(0, 2), self.pick(["up", "up", "step2", "down"]))
        loop.body = self.block(scope + [loop], depth + 1, self.integer(1, 3))
        return loop

    def _time(self, scope, depth):
        loop = Loop("t", "T", 0, 0, "time")
        loop.body = self.block(scope, depth + 1, self.integer(1, 2))
        return loop

    def _assign(self, scope, depth):
        name = self.array(scope)
        target = f"{name}[{', '.join(self.index(d, scope) for d in ARRAYS[name])}]"
        op = self.pick(["=", "+=", "-=", "*="])
        value = self.expr(scope, self.integer(1, 2))
        if op == "*=":
            value = f"0.5 + 0.25 * np.tanh({value})"
        return f"{target} {op} {value}"

    def _acc(self, scope, depth):
        return f"acc {self.pick(['+=', '-='])} 0.1 * {self.expr(scope, 1)}"

    def _twice(self, scope, depth):
        """A statement written twice on one line: two statements equal in text, line and
        operands, which passes must keep apart. Mostly a nonlinear update of its target,
        whose reverse needs the target as each one found it."""
        name = self.array(scope)
        target = f"{name}[{', '.join(self.index(d, scope) for d in ARRAYS[name])}]"
        statement = self.pick([f"{target} = np.tanh({target}) * {self.expr(scope, 1)}",
                               f"acc = np.sin(acc) + {self.expr(scope, 1)}",
                               self._assign(scope, depth)] +
                              (["x[:] = np.tanh(x) * (0.5 + x)"] if depth == 0 else []))
        return f"{statement}; {statement}"

    def _slice(self, scope, depth):
        return self.pick(SLICES)

    def _row(self, scope, depth):
        var = self.pick([loop.var for loop in scope if loop.dim == "N"])
        return self.pick(ROW_SLICES).format(i=var)

    def _if(self, scope, depth):
        on_data = self.draw(st.booleans())
        condition = self.expr(scope, 1) if on_data else self.index_condition(scope)
        body = self.block(scope, depth + 1, self.integer(1, 2))
        orelse = self.block(scope, depth + 1, 1) if self.draw(st.booleans()) else []
        return If(condition, on_data, body, orelse)

    def _jump(self, scope, depth):
        word = self.pick(["break", "continue"])
        on_data = word == "break" and self.draw(st.booleans())
        condition = f"{self.expr(scope, 1)} - 0.8" if on_data else self.index_condition(scope)
        return Jump(word, condition, on_data)

    def index_condition(self, scope):
        loops = [loop for loop in scope if loop.kind != "time"]
        if not loops:
            return "T > 1"
        i = self.pick(loops).var
        j = self.pick(loops).var
        return self.pick([f"{i} % 2 == 0", f"{i} < {j}", f"{i} > N // 2", f"{i} % 3 == 1"])

    def array(self, scope):
        """An array name, mostly one that the enclosing loops can index."""
        dims = {loop.dim for loop in scope}
        covered = [a for a, shape in ARRAYS.items() if set(shape) & dims]
        return self.pick(covered if covered and self.integer(0, 3) else list(ARRAYS))

    def index(self, dim, scope):
        """An index of a dimension of size ``dim``, in bounds for every iteration."""
        loops = [loop for loop in scope if loop.dim == dim]
        if loops and self.integer(0, 4):
            loop = self.pick(loops)
            offset = self.integer(-loop.lo, loop.hi)
            return loop.var if offset == 0 else f"{loop.var} {'+-'[offset < 0]} {abs(offset)}"
        c = self.integer(0, 2)
        return self.pick([str(c), f"{dim} - {c + 1}"])

    def expr(self, scope, depth):
        kinds = ["read"] * 4 + ["s", "const"]
        if depth > 0:
            kinds += ["binary"] * 3 + ["unary"] * 2
        kind = self.pick(kinds)
        if kind == "read":
            name = self.array(scope)
            return f"{name}[{', '.join(self.index(d, scope) for d in ARRAYS[name])}]"
        if kind == "s":
            return self.pick(["s", "acc"])
        if kind == "const":
            return self.pick(["0.5", "1.5", "0.25", "2.0"])
        if kind == "unary":
            inner_ = self.expr(scope, depth - 1)
            return self.pick(UNARY).format(inner_, inner_)
        a, b = self.expr(scope, depth - 1), self.expr(scope, depth - 1)
        return f"({a} {self.pick(['+', '-', '*'])} {b})"


# ---- rendering ------------------------------------------------------------------------------
def render(body, shadow, indent="    "):
    """Source lines; the shadow wraps every data condition in _gap() to record its margin."""
    lines = []
    for stmt in body:
        if isinstance(stmt, str):
            lines.append(indent + stmt)
        elif isinstance(stmt, Loop):
            lines.append(indent + f"for {stmt.var} in {_range(stmt)}:")
            lines += render(stmt.body, shadow, indent + "    ")
        elif isinstance(stmt, If):
            lines.append(indent + f"if {_condition(stmt.condition, stmt.on_data, shadow)}:")
            lines += render(stmt.body, shadow, indent + "    ")
            if stmt.orelse:
                lines.append(indent + "else:")
                lines += render(stmt.orelse, shadow, indent + "    ")
        else:
            lines.append(indent + f"if {_condition(stmt.condition, stmt.on_data, shadow)}:")
            lines.append(indent + f"    {stmt.word}")
    return lines


def _range(loop):
    if loop.kind == "time":
        return "range(T)"
    stop = f"{loop.dim} - {loop.hi}" if loop.hi else loop.dim
    if loop.kind == "up":
        return f"range({loop.lo}, {stop})"
    if loop.kind == "step2":
        return f"range({loop.lo}, {stop}, 2)"
    return f"range({loop.dim} - {loop.hi + 1}, {loop.lo - 1}, -1)"


def _condition(condition, on_data, shadow):
    if not on_data:
        return condition
    return f"_gap({condition}) > 0.0" if shadow else f"{condition} > 0.0"


SIGNATURE = "A: float64[N, M], B: float64[N, M], x: float64[N], y: float64[M], s: float, T: int"
RETURN = "    return np.sum(A * B) + np.sum(x) * np.sum(y * y) + acc * s"


def module_source(bodies):
    out = ["import numpy as np", "from adjoint import float64, kernel, symbol",
           'N = symbol("N")', 'M = symbol("M")', ""]
    for k, body in enumerate(bodies):
        out += ["", "@kernel", f"def g{k}({SIGNATURE}) -> float:", "    acc = 0.0"]
        out += render(body, shadow=False) + [RETURN, ""]
    params = ", ".join(f"{a}{k}: {t}" for k in range(len(bodies))
                       for a, t in zip(FLOATS, ("float64[N, M]", "float64[N, M]",
                                                "float64[N]", "float64[M]", "float")))
    out += ["", "@kernel", f"def batch({params}, T: int) -> float:"]
    out += [f"    l{k} = g{k}({', '.join(f'{a}{k}' for a in FLOATS)}, T)"
            for k in range(len(bodies))]
    out += ["    return " + " + ".join(f"l{k}" for k in range(len(bodies))), ""]
    return "\n".join(out)


def shadow_source(bodies):
    out = ["import numpy as np", "N = M = 0", "GAPS = []", "",
           "def _gap(v):", "    GAPS.append(abs(v))", "    return v", ""]
    for k, body in enumerate(bodies):
        out += ["", f"def h{k}(A, B, x, y, s, T):", "    acc = 0.0"]
        out += render(body, shadow=True) + [RETURN, ""]
    return "\n".join(out)


_folder = Path(tempfile.mkdtemp(prefix="simcore-property-"))
_count = itertools.count()


def load(source, stem):
    name = f"{stem}_{next(_count)}"
    path = _folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@st.composite
def batches(draw):
    bodies = [Generator(draw).block([], 0, draw(st.integers(1, 3))) for _ in range(BATCH)]
    sizes = (draw(st.integers(3, 6)), draw(st.integers(3, 6)))
    return bodies, sizes, draw(st.integers(1, 2)), draw(st.integers(0, 2 ** 32 - 1))


# ---- the property -----------------------------------------------------------------------
CHECKED = {"forward": 0, "gradient": 0}


def check_batch(bodies, sizes, steps, seed):
    module = load(module_source(bodies), "generated")
    shadow = load(shadow_source(bodies), "shadow")
    shadow.N, shadow.M = sizes
    rng = np.random.default_rng(seed)
    n, m = sizes
    per_kernel = [(0.5 * rng.standard_normal((n, m)), 0.5 * rng.standard_normal((n, m)),
                   0.5 * rng.standard_normal(n), 0.5 * rng.standard_normal(m),
                   0.5 + 0.5 * rng.random()) for _ in bodies]
    flat = [a for args in per_kernel for a in args] + [steps]
    work, guards = packed(flat)
    total = module.batch(*work)
    assert guards(), "a kernel wrote outside its arguments"
    want_total = 0.0
    for k, args in enumerate(per_kernel):
        g = getattr(module, f"g{k}")
        ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        want = g.py_func(*ref, steps)
        want_total += want
        for a, got, w in zip(FLOATS, work[5 * k: 5 * k + 4], ref[:4]):
            assert_arrays_close(got, w, 1e-10, what=f"kernel g{k}: {a}\n{_listing(module, k)}")
        CHECKED["forward"] += 1
    assert_close_scalar(total, want_total, 1e-10, what="batch loss")

    wrt = tuple(f"{a}{k}" for k in range(len(bodies)) for a in FLOATS)
    _, grads = value_and_grad(module.batch, wrt=wrt)(*flat)
    for k, args in enumerate(per_kernel):
        shadow.GAPS.clear()
        getattr(shadow, f"h{k}")(*[a.copy() if isinstance(a, np.ndarray) else a
                                   for a in args], steps)
        if shadow.GAPS and min(shadow.GAPS) < MARGIN:
            continue                        # a decision within reach of the differences
        g = getattr(module, f"g{k}")
        loss = lambda a: g.py_func(*[v.copy() if isinstance(v, np.ndarray) else v  # noqa
                                     for v in a], steps)
        directions = {a: (rng.standard_normal(np.shape(v)) if isinstance(v, np.ndarray)
                          else float(rng.standard_normal())) for a, v in zip(FLOATS, args)}
        want = fd_directional(loss, args, {a: i for i, a in enumerate(FLOATS)}, directions)
        got = sum(inner(grads[5 * k + i], directions[a]) for i, a in enumerate(FLOATS))
        assert_close_scalar(got, want, 1e-6, fd_atol(loss(args)),
                            what=f"kernel g{k}: directional derivative\n{_listing(module, k)}")
        CHECKED["gradient"] += 1


GUARD, SENTINEL = 3, -7.25e300


def packed(values):
    """Copies of the arrays among ``values`` as consecutive views of one buffer (distinct
    arguments that share a base, the way a caller's slices do), each between GUARD
    elements holding SENTINEL; and a function telling whether those are still intact."""
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    base = np.full(sum(a.size for a in arrays) + GUARD * (len(arrays) + 1), SENTINEL)
    out, gaps, at = [], [slice(0, GUARD)], GUARD
    for v in values:
        if not isinstance(v, np.ndarray):
            out.append(v)
            continue
        view = base[at:at + v.size].reshape(v.shape)
        view[...] = v
        out.append(view)
        at += v.size
        gaps.append(slice(at, at + GUARD))
        at += GUARD
    return out, lambda: all(np.all(base[g] == SENTINEL) for g in gaps)


def _listing(module, k):
    import inspect
    return textwrap.indent(inspect.getsource(getattr(module, f"g{k}").__wrapped__), "  ")


# No shrinking: every step would compile again; a failure prints the kernel's source.
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(batches())
def _property(batch):
    check_batch(*batch)


def test_random_kernels_forward_and_gradient():
    saved = options.cflags
    configure(cflags=("-O0", "-std=c99", "-fopenmp"))     # correctness, not speed: fast cc
    try:
        _property()
    finally:
        configure(cflags=saved)
    assert CHECKED["forward"] >= 200, CHECKED
    assert CHECKED["gradient"] >= 0.8 * CHECKED["forward"], CHECKED
