"""Generated code is safe to build and to stop (issue #19, items 9 and 10).

* No name the user chose reaches the C or CUDA source but through
  ``codegen.printer.spelling``: sizes named like C keywords, unicode, 10,000 characters
  or a ``#define`` that ran a shell command compute what the Python function computes,
  and the source's identifiers are the engine's or spelled names.
* Ctrl-C (SIGINT) stops a compiled loop that would never end with KeyboardInterrupt, and
  the next call computes the right result; a call on another thread keeps running.
  These run in a subprocess, so that a failure cannot hang the suite.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from adjoint import float64, grad, kernel, symbol
from adjoint.codegen import Layout
from adjoint.codegen.c import INTERRUPTS, PREAMBLE, THREADS
from adjoint.codegen.cuda import API, cuda_source, launch_plan
from adjoint.codegen.cuda_preamble import preamble
from adjoint.codegen.printer import CPrinter, identifier, spelling
from adjoint.errors import AdjointError, KernelSyntaxError
from adjoint.frontend import parse, read_source, type_of_value
from adjoint.sdfg import validate

ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = 'M\n#define sqrt(x) ({ system("touch @MARK@"); 1.0; })\n'
SIZES = ["int", "restrict", "main", "\u03b1", "x" * 10_000, PAYLOAD, "a*/b ??/", ""]
LONG = "L" * 10_000         # an argument name: any Python identifier is one
# Fragments of the hostile names that must not appear in any generated source.
FRAGMENTS = ["system", "#define sqrt", "\u03b1", "*/b", "??/", "x" * 64, "L" * 64]

# The kernel: C keywords and an engine prefix as argument, local and loop variable names,
# a size check (the arrays' sizes are not known to agree), a while loop.
SOURCE = '''
import numpy as np
import sympy as sp
from adjoint import float64, kernel

S = [sp.Symbol(name, integer=True, nonnegative=True) for name in NAMES]


@kernel
def main(int: float64[S[0], S[1]], restrict: float64[S[2], S[3]],
         LONG: float64[S[4], S[5]], sc_run: float64[S[6], S[7]]) -> float:
    auto = 0.0
    for register in range(int.shape[0]):
        for goto in range(int.shape[1]):
            restrict[register, goto] = np.sqrt(int[register, goto]) * LONG[register, goto]
            auto += restrict[register, goto] * sc_run[register, goto]
    while auto > 10.0:
        auto = auto * 0.5
    return auto
'''


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(the kernel, the marker file the payload would create)."""
    folder = tmp_path_factory.mktemp("hostile")
    mark = folder / "pwned"
    names = [n.replace("@MARK@", str(mark)) for n in SIZES]
    path = folder / "hostile_kernel.py"
    path.write_text(f"NAMES = {names!r}\n" + SOURCE.replace("LONG", LONG), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("hostile_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main, mark


def _args():
    rng = np.random.default_rng(9)
    return [rng.random((3, 4)) + 0.5 for _ in range(4)]


def _copy(args):
    return [a.copy() for a in args]


def test_hostile_names_compute_what_python_computes(hostile):
    main, mark = hostile
    args = _args()
    got, want = _copy(args), _copy(args)
    assert main(*got) == pytest.approx(main.py_func(*want), rel=1e-12)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    g = grad(main, wrt="int")(*_copy(args))
    h = 1e-6
    for k in [(0, 0), (1, 2), (2, 3)]:
        up, down = _copy(args), _copy(args)
        up[0][k] += h
        down[0][k] -= h
        fd = (main.py_func(*up) - main.py_func(*down)) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-6)
    assert not mark.exists()


def _code(source):
    """The source without comments and string literals."""
    return re.sub(r'/\*.*?\*/|"(?:\\.|[^"\\])*"', " ", source, flags=re.S)


def _tokens(text):
    return set(re.findall(r"[A-Za-z_]\w*", _code(text)))


# The engine's words: its fixed text (preambles, helpers) and the C it writes around them.
FIXED = _tokens(PREAMBLE + INTERRUPTS + THREADS + API + preamble(False) + preamble(True)) | set(
    "break case switch return for if else const static void int double float char unsigned "
    "sizeof restrict extern struct typedef volatile while inline long int8_t schedule simd "
    "reduction single sqrt pow data syms tape cap st red sms dev which flags".split()) | {
    f for f in CPrinter({}).known_functions.values() if isinstance(f, str)}   # libm
# Identifiers made of a prefix and a name: <prefix><spelling(name)>, the name the user's
# or the engine's (``__...``, connectors ``c_in0``, temporaries ``c_t0``), or a digest.
GENERATED = re.compile(r"(?:k|n)?(?:v|n|i|c)_(.*)|sc_(?:sum|part|own)_(.*)")
ENGINE_PART = re.compile(r"__\w*|(?:in|t|d|old|flag)\d+|g|pushed|0[0-9a-f]{20}")


def _foreign(source, names):
    """Identifiers of ``source`` that are neither the engine's nor generated from one of
    ``names`` (the user's) by printer.identifier."""
    spelled = {spelling(n) for n in names}
    foreign = set()
    for token in _tokens(source):
        m = GENERATED.fullmatch(token)
        if m:
            rest = m.group(1) if m.group(1) is not None else m.group(2)
            if rest in spelled or ENGINE_PART.fullmatch(rest):
                continue
        elif token in FIXED or re.fullmatch(r"sc_\w+|omp_\w+", token):
            continue
        foreign.add(token)
    return foreign


def _short_ascii(source):
    return source.isascii() and all(len(t) <= 80 for t in _tokens(source))


def _names(mark):
    """Every name the kernel's author chose."""
    return [n.replace("@MARK@", str(mark)) for n in SIZES] + [
        "main", "int", "restrict", LONG, "sc_run", "auto", "register", "goto"]


def test_no_user_string_reaches_the_c_source(hostile):
    main, mark = hostile
    main(*_args())
    grad(main, wrt="int")(*_args())
    spec, names = main.specializations[0], _names(mark)
    for source in (spec.forward.source, spec.backward(("int",), {"__return"}).source):
        assert not any(f in source for f in FRAGMENTS)
        assert _short_ascii(source)
        assert not _foreign(source, names), _foreign(source, names)
        assert identifier("v_", "restrict") in source and identifier("v_", LONG) in source
        assert re.search(r"\bn_0[0-9a-f]{20}\b", source)        # the payload, spelled


def test_no_user_string_reaches_the_cuda_source(hostile):
    """The CUDA module (not built: only its text), launch plan comment included."""
    (main, mark), names, args = hostile, _names(hostile[1]), _args()
    types = {n: main._declared[n] or type_of_value(n, v) for n, v in zip(main._declared, args)}
    sdfg = validate(parse(read_source(main.__wrapped__), main.__name__, types))
    source = cuda_source(Layout(sdfg.symbols, tuple(sdfg.containers.values())), [sdfg], ())
    assert not any(f in source for f in FRAGMENTS) and _short_ascii(source)
    assert not _foreign(source, names), _foreign(source, names)
    plan = "\n".join(launch_plan(source))
    assert plan.startswith("entry 0 (main):")


def test_spellings_are_identifiers_apart_from_each_other():
    for name in ["N", "n_N", "__k0", "int", "a" * 64]:
        assert spelling(name) == name
    odd = ["a" * 65, "\u03b1", "", "0", "x y", "a\nb", "\udcff", PAYLOAD]
    spelled = [spelling(n) for n in odd]
    assert all(re.fullmatch(r"0[0-9a-f]{20}", s) for s in spelled)
    assert len(set(spelled)) == len(odd) and spelled == [spelling(n) for n in odd]


def test_names_of_the_engine_and_functions_are_refused_as_sizes():
    N = symbol("N")
    engine = sp.Symbol("__k0", integer=True)      # equal to a segment bound's symbol

    def f(x: float64[engine]) -> float:
        return np.sum(x)

    with pytest.raises(KernelSyntaxError, match="size '__k0' starts with '__'"):
        kernel(f)
    call = sp.Function("system", integer=True, nonnegative=True)(N)

    @kernel
    def g(x: float64[N], y: float64[N, call]) -> float:
        return np.sum(x) + y[1, 0]              # at 1 * system(N): a name in the C

    with pytest.raises(AdjointError, match="cannot generate C for the function"):
        g(np.ones(3), np.ones((3, 3)))

    twin = sp.Symbol("N", integer=True)           # not symbol("N"): another symbol

    @kernel
    def h(x: float64[N], y: float64[twin]) -> float:
        return np.sum(x) + np.sum(y)

    with pytest.raises(AdjointError, match="sizes named 'N' are different symbols"):
        h(np.ones(3), np.ones(3))


# ---- Ctrl-C ------------------------------------------------------------------------------------
SCRIPT = r'''
import json, os, signal, sys, threading, time
import numpy as np
from adjoint import float64, grad, kernel, options, symbol
N, M = symbol("N"), symbol("M")


@kernel
def countdown(x: float64[N]) -> float:
    while x[0] > 0.0:
        x[0] = x[0] - 1.0
        x[1] = x[1] + 2.0
    return x[1]


@kernel
def energy(x: float64[N], y: float64[M]) -> float:
    s = 0.0
    while x[0] > 0.0:
        x[0] = x[0] - 1.0
        for i in range(M):
            s += y[i] * y[i]
    return s


@kernel
def scaled_energy(x: float64[N], y: float64[M]) -> float:
    for i in range(M):          # a region before the while loop's: one C call runs both
        y[i] = 2.0 * y[i]
    return energy(x, y)


@kernel
def relax(u: float64[N], tol: float) -> float:
    r = np.zeros_like(u)
    r[1:-1] = 1.0
    while np.max(np.abs(r)) > tol:
        u[1:-1] += 0.4 * r[1:-1]
        r[1:-1] = 0.5 * (u[:-2] + u[2:]) - u[1:-1]
    return np.sum(u * u)


def interrupted(run, delay=0.3):
    """Seconds from SIGINT, sent ``delay`` seconds into ``run()``, to the KeyboardInterrupt
    it raised there; None when ``run()`` returned."""
    sent = []
    timer = threading.Timer(delay, lambda: sent.append(time.perf_counter()) or
                            os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        run()
    except KeyboardInterrupt:
        return time.perf_counter() - sent[0]
    try:                            # the SIGINT still to come
        timer.join()
        time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    return None


out = {}
inf = float("inf")
if sys.argv[1] == "cpu":        # each kernel compiled first: SIGINT comes in the loop
    out["forward_before"] = countdown(np.array([5.0, 0.0]))
    out["forward"] = interrupted(lambda: countdown(np.array([inf, 0.0])))
    x, want = np.array([5.0, 0.0]), np.array([5.0, 0.0])
    out["forward_after"] = [countdown(x), x.tolist()]
    out["forward_want"] = [countdown.py_func(want), want.tolist()]
    y = np.linspace(0.5, 1.5, 50)
    g = grad(energy, wrt="y")
    out["gradient_before"] = g(np.array([3.0]), y).tolist()
    out["gradient"] = interrupted(lambda: g(np.array([inf]), y))
    out["gradient_after"] = g(np.array([3.0]), y).tolist()
    from adjoint.runtime.module import CompiledModule
    batches, runs = [], CompiledModule.runs
    CompiledModule.runs = lambda self, *a: batches.append(a[0].size) or runs(self, *a)
    g = grad(scaled_energy, wrt="y")
    out["regions_before"] = g(np.array([3.0]), y).tolist()
    out["regions"] = interrupted(lambda: g(np.array([inf]), y))
    out["regions_after"] = g(np.array([3.0]), y).tolist()
    out["batches"] = batches
    # a call on another thread takes no handler: SIGINT goes to the main thread
    x, done = np.array([3e8, 0.0]), []
    worker = threading.Thread(target=lambda: done.append(countdown(x)))
    worker.start()
    wait = lambda: [time.sleep(0.01) for _ in iter(worker.is_alive, False)]  # not join():
    out["main_thread"] = interrupted(wait, 0.05)    # interrupted, it may forget the thread
    wait()
    out["worker"] = done + x.tolist()
else:                       # CUDA emulated: the host loop around kernels polls
    options.device, options.cuda_emulation = "cuda", True
    u, want = np.zeros(16), np.zeros(16)
    relax(np.zeros(16), 1e-3)
    out["host_loop"] = interrupted(lambda: relax(np.zeros(16), -1.0))
    out["host_loop_after"] = [relax(u, 1e-3), u.tolist()]
    out["host_loop_want"] = [float(relax.py_func(want, 1e-3)), want.tolist()]
print(json.dumps(out))
'''


def _run(device, cache_dir, folder):
    script = folder / "interrupt_me.py"        # kernels live in files
    script.write_text(SCRIPT)
    env = {**os.environ, "SIMCORE_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), device], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_ctrl_c_stops_compiled_loops(cache_dir, tmp_path):
    out = _run("cpu", cache_dir, tmp_path)
    assert out["forward"] is not None           # else the loop never ends: the timeout
    assert out["forward_before"] == 10.0 and out["forward_after"] == out["forward_want"]
    assert out["gradient"] is not None
    y = np.linspace(0.5, 1.5, 50)
    for g in (out["gradient_before"], out["gradient_after"]):     # s = 3 sum y^2
        np.testing.assert_allclose(g, 6.0 * y, rtol=1e-12)
    assert out["regions"] is not None           # several regions' entries in one C call
    assert len(out["batches"]) >= 5 and min(out["batches"]) >= 2    # and tape restarts
    for g in (out["regions_before"], out["regions_after"]):       # s = 12 sum y^2
        np.testing.assert_allclose(g, 24.0 * y, rtol=1e-12)
    assert out["main_thread"] is not None
    assert out["worker"] == [6e8, 0.0, 6e8]


def test_ctrl_c_stops_the_host_loop_of_cuda_code(cache_dir, tmp_path):
    out = _run("cuda-emulated", cache_dir, tmp_path)
    assert out["host_loop"] is not None
    (value, u), (want_value, want) = out["host_loop_after"], out["host_loop_want"]
    assert value == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(u, want, rtol=1e-12, atol=1e-15)
