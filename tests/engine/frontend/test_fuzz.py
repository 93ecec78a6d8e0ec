"""Fuzzing the frontend: random mutations of valid kernels' source.

Each mutant (a token deleted, duplicated or swapped with its neighbour, a name replaced
by another name of the kernel, a number by a value of the wrong type, an operator by
another) that is still valid Python is compiled and, where it compiles, called. The
only acceptable failures are KernelSyntaxError with a file:line:col, and ArgumentError
or BoundsError when it is called -- never another exception, a C compiler error
(CompileError) or a hang. A mutant that compiles is also a kernel: its results must
equal the plain-Python run (when that runs), and an index Python rejects as out of
range must not run silently.

Deterministic (fixed seeds), and fast: the C compiler runs without optimisation.
"""
import ast
import copy
import importlib.util
import random
import re
import signal
import sys
import tempfile
import tokenize
import io
import warnings
from pathlib import Path

import numpy as np
import pytest

from adjoint import ArgumentError, BoundsError, KernelSyntaxError, float64, kernel, symbol
from adjoint import configure
from adjoint.options import options

MUTANTS_PER_SEED = 45
SECONDS_PER_MUTANT = 30          # far beyond what any mutant needs: a hang, not slowness

HEADER = '''\
import math
import numpy as np
from adjoint import float64, float32, kernel, symbol
N = symbol("N")
M = symbol("M")


@kernel
def helper_moments(x: float64[N]):
    m = np.mean(x)
    return m, np.sum((x - m) ** 2)


@kernel
def helper_scale(x, a: float):
    x *= a
    return a * 2.0


'''

SEEDS = {
    "seed_loops": ('''\
def seed_loops(A: float64[N, M], x: float64[N], w: float64[3], alpha: float, T: int) -> float:
    s = 0.0
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(M):
                A[i, j] = A[i, j] + alpha * (w[0] * A[i - 1, j] + w[1] * x[i] + w[2] * A[i + 1, j])
            if i % 2 == 0:
                x[i] -= 0.5 * np.tanh(A[i, 0])
            else:
                s += math.sqrt(1.0 + x[i] * x[i])
    return np.sum(A * A) + s
''', lambda rng: (rng.random((5, 4)), rng.random(5), rng.random(3), 0.3, 2), True),
    "seed_arrays": ('''\
def seed_arrays(u: float64[N], v: float64[N], c: float) -> float:
    lap = np.zeros_like(u)
    lap[1:-1] = u[2:] - 2.0 * u[1:-1] + u[:-2]
    v += c * lap
    u[1:] = u[:-1] + 0.1 * v[1:]
    m = v > 0.0
    u[m] *= 0.5
    return np.sum(u * u) + np.max(np.abs(v)) + np.mean(u[::2])
''', lambda rng: (rng.standard_normal(7), rng.standard_normal(7), 0.4), True),
    "seed_calls": ('''\
def seed_calls(A: float64[N, M], x: float64[N], a: float) -> float:
    m, v = helper_moments(x)
    r = 0.0
    for i in range(N):
        r += helper_scale(A[i], a)
    q = helper_scale(x[1:], 0.5 * a)
    return m + v + np.sum(A) + r * q
''', lambda rng: (rng.random((4, 3)), rng.random(4), 0.7), True),
    "seed_while": ('''\
def seed_while(x: float64[N], tol: float) -> float:
    n = 0.0
    while np.max(np.abs(x)) > tol:
        x *= 0.5
        n += 1.0
        if n > 10.0:
            break
    for i in range(N):
        if x[i] < 0.0:
            continue
        x[i] = x[i] ** 2
    return n + np.sum(x)
''', lambda rng: (rng.standard_normal(5), 0.1), False),       # mutants may loop forever
    "seed_returns": ('''\
def seed_returns(A: float64[N, M], b: float64[M]):
    B = A * b[None, :]
    B[B < 0.0] = 0.0
    col = np.sum(B, axis=0)
    A[:, 0] = col[0] - A.T[0, 1]
    return B.T, np.mean(col)
''', lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal(4)), True),
    "seed_triangular": ('''\
def seed_triangular(L: float64[N, N], b: float64[N], x: float64[N]) -> float:
    for i in range(N):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]
    for k in range(N - 1, -1, -2):
        m = N - 1 - k
        x[m] += 0.5 * x[k]
    return np.sum(x * x)
''', lambda rng: (rng.random((5, 5)) + 5.0 * np.eye(5), rng.random(5), np.zeros(5)), True),
}

WRONG_VALUES = ['"text"', "None", "True", "[1, 2]", "(1, 2)", "1j", "2.5", "0", "-1", "N",
                "x", "np", "math.pi", "...", "b'x'", "{}", "1e308", "-0.0", "7", "2 ** 80",
                "12345678901234567890123", "0.0", "N // 0", "(-1.0) ** 0.5", "N / 2"]
OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "<", ">", "==", "(", ")", "[", "]", ":",
             ",", ".", "@", "&", "|", "~", "not", "and", "=", "+=", "lambda"]


NAMES = ["np", "math", "range", "len", "print", "kernel", "helper_scale", "helper_moments",
         "float64", "N", "M", "abs", "min", "max", "float", "int", "sum", "i", "x", "A", "__x"]
CALLEES = ["len", "abs", "float", "int", "str", "print", "np.sum", "np.dot", "helper_scale",
           "helper_moments", "range", "max", "min", "np.zeros", "sorted", "np.sin", "A.sum",
           "math.floor", "np.linalg.norm", "np.where", "np.max", "x.copy", "np.arange"]
STATEMENTS = ["del x", "global N", "x = y = 1.0", "a, b = 1.0, 2.0", "import os", "assert N",
              "raise ValueError()", "print(N)", "x: int = 3", "A[0] @= A", "pass",
              "for i, j in zip(A, A):\n    pass", "with open('f') as f:\n    pass",
              "try:\n    pass\nexcept Exception:\n    pass", "return", "return 1.0, A",
              "yield N", "s = lambda q: q", "s = [q for q in range(N)]", "s = f'{N}'",
              "N = 3", "range = 2", "np = 1", "A.x = 1.0", "A[0:1] = A", "A[...] = 1.0",
              "s = A.T @ A", "s = A[A]", "s = not A", "s = A if N else A", "s = {1: 2}",
              "if A:\n    pass", "for i in A:\n    pass", "for i in range(N, 0):\n    pass",
              "def inner(q):\n    return q", "class C:\n    pass", "s = (yield)",
              "s = x[::N]", "s = x[None, None, None]", "s = x[1, 2, 3]", "s = x.shape",
              "s = len(N)", "s = np.zeros((N, -1))", "s = np.empty(A)"]
BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult,
          ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift]
CMPOPS = [ast.Lt, ast.Gt, ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn, ast.LtE]


class Hang(Exception):
    pass


def mutate(source, rng):
    """One random mutation of ``source``: of its tokens or of its syntax tree."""
    return (mutate_tokens if rng.random() < 0.4 else mutate_tree)(source, rng)


def mutate_tree(source, rng):
    """One random change of the syntax tree; the result is Python that parses."""
    tree = ast.parse(source)
    fn = tree.body[0]
    nodes = list(ast.walk(fn))
    exprs = [n for n in nodes if isinstance(n, ast.expr)]
    blocks = [n.body for n in nodes if isinstance(getattr(n, "body", None), list)] + \
        [n.orelse for n in nodes if getattr(n, "orelse", None)]
    kind = rng.choice(["name", "constant", "subtree", "delete", "duplicate", "operator",
                       "call", "subscript", "arguments", "statement"])
    pick = lambda kinds: [n for n in nodes if isinstance(n, kinds)]  # noqa: E731
    if kind == "name" and pick(ast.Name):
        rng.choice(pick(ast.Name)).id = rng.choice(NAMES + [n.id for n in pick(ast.Name)])
    elif kind == "constant" and pick(ast.Constant):
        _replace(fn, rng.choice(pick(ast.Constant)), _expr(rng.choice(WRONG_VALUES)))
    elif kind == "subtree" and exprs:
        _replace(fn, rng.choice(exprs), copy.deepcopy(rng.choice(exprs)))
    elif kind == "delete":
        body = rng.choice(blocks)
        del body[rng.randrange(len(body))]
        if not body:
            body.append(ast.Pass())
    elif kind == "duplicate":
        body = rng.choice(blocks)
        k = rng.randrange(len(body))
        body.insert(k, copy.deepcopy(body[k]))
    elif kind == "operator":
        for n in rng.sample(nodes, len(nodes)):
            if isinstance(n, (ast.BinOp, ast.AugAssign)):
                n.op = rng.choice(BINOPS)()
                break
            if isinstance(n, ast.Compare):
                n.ops[0] = rng.choice(CMPOPS)()
                break
            if isinstance(n, ast.UnaryOp):
                n.op = rng.choice([ast.Not, ast.Invert, ast.UAdd, ast.USub])()
                break
    elif kind == "call" and exprs:
        target = rng.choice(exprs)
        _replace(fn, target, ast.Call(_expr(rng.choice(CALLEES)), [copy.deepcopy(target)], []))
    elif kind == "subscript" and pick(ast.Subscript):
        node = rng.choice(pick(ast.Subscript))
        item = rng.choice(["i, j, k", "1:N:i", "...", "None", "A", "x > 0.0", "::-1", "-N",
                           "N", "1.5", "'a'", "i:", "[0, 1]", "0, ::2", "i, None"])
        node.slice = ast.parse(f"_[{item}]", mode="eval").body.slice
    elif kind == "arguments" and pick(ast.Call):
        call = rng.choice(pick(ast.Call))
        if call.args and rng.random() < 0.5:
            del call.args[rng.randrange(len(call.args))]
        elif rng.random() < 0.5:
            call.args.append(copy.deepcopy(rng.choice(exprs)))
        else:
            call.keywords.append(ast.keyword(rng.choice(["axis", "a", "foo", "x", "keepdims"]),
                                             _expr(rng.choice(["0", "1", "True", "A"]))))
    else:
        body = rng.choice(blocks)
        body.insert(rng.randrange(len(body) + 1), ast.parse(rng.choice(STATEMENTS)).body[0])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _expr(text):
    return ast.parse(text, mode="eval").body


def _replace(root, old, new):
    """Put ``new`` where ``old`` is in the tree."""
    for parent in ast.walk(root):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(v is old for v in value):
                value[[k for k, v in enumerate(value) if v is old][0]] = new
                return


def mutate_tokens(source, rng):
    """One random token-level mutation of ``source``."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER)]
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def span(t):
        return starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1]

    k = rng.randrange(len(tokens))
    a, b = span(tokens[k])
    kind = rng.choice(["delete", "duplicate", "swap", "name", "value", "operator"])
    if kind == "delete":
        return source[:a] + source[b:]
    if kind == "duplicate":
        return source[:b] + " " + source[a:b] + source[b:]
    if kind == "swap" and k + 1 < len(tokens):
        c, d = span(tokens[k + 1])
        return source[:a] + source[c:d] + source[b:c] + source[a:b] + source[d:]
    if kind == "name":
        names = sorted({t.string for t in tokens if t.type == tokenize.NAME})
        return source[:a] + rng.choice(names) + source[b:]
    if kind == "value":
        return source[:a] + rng.choice(WRONG_VALUES) + source[b:]
    return source[:a] + rng.choice(OPERATORS) + source[b:]


def load(text, folder, name):
    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _alarm(signum, frame):
    raise Hang()


def run_mutant(module, name, make_args, execute, rng):
    """The mutant's outcome: "rejected", "called" or "skipped"; raises on a bad outcome."""
    func = getattr(module, name, None)
    if not callable(func) or getattr(func, "__module__", None) != module.__name__:
        return "skipped"
    args = make_args(rng)
    try:
        k = kernel(func)
        if execute:
            got_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            got = k(*got_args)
        else:
            k.specialize(args)
            return "compiled"
    except KernelSyntaxError as exc:
        assert re.match(r".+:\d+:\d+: ", str(exc)) and exc.line > 0, \
            f"KernelSyntaxError without a location: {exc}"
        return "rejected"
    except (ArgumentError, BoundsError):
        return "rejected"
    compare_with_python(func, args, got, got_args)
    return "called"


def compare_with_python(func, args, got, got_args):
    """A mutant that compiled and ran is a kernel: it must compute what Python does."""
    ref_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with np.errstate(all="ignore"):
        try:
            want = kernel(func).py_func(*ref_args)
        except IndexError as exc:
            raise AssertionError(f"Python raises IndexError ({exc}); the kernel ran") from None
        except Exception:
            return                          # not a valid program in Python either
    values = _flat(got) + [a for a in got_args if isinstance(a, np.ndarray)]
    wanted = _flat(want) + [a for a in ref_args if isinstance(a, np.ndarray)]
    assert len(values) == len(wanted)
    for g, w in zip(values, wanted):
        w = np.asarray(w, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        if not np.all(np.isfinite(w)) or g.shape != w.shape:
            continue
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9 * scale)


def _flat(value):
    if value is None:
        return []
    if isinstance(value, tuple):
        return [v for v in value if not isinstance(v, (bool, str))]
    return [value]


@pytest.fixture(scope="module")
def quick_compiler():
    saved = options.cflags
    configure(cflags=("-O0", "-std=c99", "-fopenmp"))
    yield
    configure(cflags=saved)


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_seed_is_a_valid_kernel(seed_name, tmp_path, quick_compiler):
    source, make_args, execute = SEEDS[seed_name]
    module = load(HEADER + source, tmp_path, f"fuzz_{seed_name}_seed")
    outcome = run_mutant(module, seed_name, make_args, execute, np.random.default_rng(0))
    assert outcome in ("called", "compiled")


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_mutants_fail_only_with_located_errors(seed_name, tmp_path, quick_compiler):
    source, make_args, execute = SEEDS[seed_name]
    rng = random.Random(f"fuzz/{seed_name}")
    outcomes = {}
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for k in range(MUTANTS_PER_SEED):
            text = mutate(source, rng)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")         # Python's own SyntaxWarnings
                    compile(HEADER + text, "<mutant>", "exec")
                    module = load(HEADER + text, tmp_path, f"fuzz_{seed_name}_{k}")
            except Exception:
                outcomes["not python"] = outcomes.get("not python", 0) + 1
                continue                    # Python itself rejects it: not the engine's
            signal.alarm(SECONDS_PER_MUTANT)
            try:
                outcome = run_mutant(module, seed_name, make_args, execute,
                                     np.random.default_rng(k))
            except Hang:
                pytest.fail(f"mutant {k} hangs:\n{text}")
            except Exception as exc:
                raise AssertionError(f"mutant {k} raised {type(exc).__name__}: {exc}\n"
                                     f"{text}") from exc
            finally:
                signal.alarm(0)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert outcomes.get("rejected", 0) > 0, outcomes


# ---- what the fuzzer found (each crashed, or ran wrongly, before the fix) ---------------------
N = symbol("N")


def string_return_annotation(x: float64[N]) -> "text":      # was: NameError  # noqa: F821
    return np.sum(x)


def numpy_annotation(x: np.ones(2)) -> float:                # was: ValueError (truth value)
    return 1.0


def mean_over_nothing(A: float64[N, 0]) -> float:           # was: CompileError ('zoo')
    return np.mean(np.sum(A, axis=0))


def divides_by_zero(x: float64[N]) -> float:                # was: CompileError ('zoo')
    return x[0] / 0.0


def complex_power(x: float64[N]) -> float:                  # was: CompileError ('I')
    return x[0] + (-1.0) ** 0.5


def compared_with_complex(x: float64[N]) -> float:         # was: TypeError (sympy)
    x[x < (-1.0) ** 0.5] = 0.0
    return np.sum(x)


def zero_over_zero(x: float64[N]) -> float:                 # was: ZeroDivisionError (mpmath)
    return x[0] + 0.0 / 0.0


def integer_division_by_zero(x: float64[N]) -> float:       # was: the process died (SIGILL)
    return x[N // 0]


def loop_variable_divisor(x: float64[N]) -> float:          # could divide by zero in C
    s = 0.0
    for i in range(N):
        for j in range(N):
            s += x[i % j]
    return s


def huge_integer(x: float64[N]) -> float:                   # was: silently 0.0 (C truncates)
    return x[0] * 2 ** 1000


def size_divided_by_zero(x: float64[N // 0]) -> float:      # was: CompileError ('zoo')
    return x[0]


@pytest.mark.parametrize("func", [string_return_annotation, numpy_annotation,
                                  mean_over_nothing, divides_by_zero,
                                  complex_power, compared_with_complex, zero_over_zero,
                                  integer_division_by_zero,
                                  loop_variable_divisor, huge_integer, size_divided_by_zero],
                         ids=lambda f: f.__name__)
def test_found_by_fuzzing(func):
    args = (np.ones((3, 0)),) if func is mean_over_nothing else (np.ones(3),)
    with pytest.raises(KernelSyntaxError) as info:
        kernel(func)(*args)
    assert re.match(rf".*{re.escape(Path(__file__).name)}:\d+:\d+: ", str(info.value))


def size_divisor(x: float64[N], k: int) -> float:
    return x[0] * (N % (k - 1))


def test_divisor_of_sizes_checked_per_call():                # was: the process died (SIGFPE)
    k = kernel(size_divisor)
    assert k(np.ones(3), 3) == 1.0
    with pytest.raises(BoundsError, match="divisor"):
        k(np.ones(3), 1)
