"""Runtime safety (issue #19): pullbacks independent of what the caller does afterwards,
read-only arrays, int arguments beyond int64, a damaged compile cache, stale
temporaries, and options that change the code giving new modules."""
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cffi
import numpy as np
import pytest

import adjoint
from adjoint import ArgumentError, float64, grad, int64, jvp, kernel, options, symbol, vjp
from adjoint.runtime import build
from adjoint.runtime.blas import blas

N = symbol("N")
ROOT = Path(__file__).resolve().parents[3]


@kernel
def scaled(A: float64[N], w: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(N):
            A[i] = A[i] * w[i] + 0.1 * A[i] * A[i]
    return np.sum(A * A)


@kernel
def shifted(A: float64[N], c: float64[N], idx: int64[N]) -> float:
    """The reverse sweep reads ``A`` (restored) and ``idx``, never ``c``."""
    for i in range(N):
        A[i] = A[i] * A[i] + c[idx[i]]
    return np.sum(A * A)


def _args(n=8):
    return np.linspace(0.1, 0.5, n), np.linspace(0.9, 1.1, n)


# ---- vjp: the pullback is the derivative at the call's values ------------------------------
def test_a_pullback_ignores_later_changes_to_the_arguments():
    A, w = _args()
    want = vjp(scaled, A.copy(), w.copy(), 3)[1]({"return": 1.0, "A": np.ones(8)})
    outs, pullback = vjp(scaled, A, w, 3)
    A *= 0.9                                    # the caller changes what it passed
    w *= 1.01
    got = pullback({"return": 1.0, "A": np.ones(8)})
    for name in ("A", "w"):
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_allclose(w, np.linspace(0.9, 1.1, 8) * 1.01)     # not restored


@pytest.mark.parametrize("policy", ["store_all", "recompute_all"])
def test_a_pullback_copies_only_what_it_reads(policy):
    A, c = _args()
    idx = np.arange(8)[::-1].copy()
    want = vjp(shifted, A.copy(), c.copy(), idx.copy(), policy=policy)[1]({"return": 1.0})
    outs, pullback = vjp(shifted, A, c, idx, policy=policy)
    state = shifted.specialize((A, c, idx)).last_sweep.state
    if options.device == "cpu":                 # on the GPU every argument is copied
        # recomputing re-runs the forward from a snapshot, which reads c; storing does not
        assert (state["c"] is c) == (policy == "store_all")
        assert state["idx"] is not idx
    c += 1.0
    idx[:] = 0
    got = pullback({"return": 1.0})
    for name in ("A", "c"):
        np.testing.assert_array_equal(got[name], want[name])


# ---- read-only arrays ---------------------------------------------------------------------
def test_a_read_only_array_the_kernel_writes_is_refused():
    data = np.linspace(0.1, 0.5, 8).tobytes()
    A = np.frombuffer(data, dtype=np.float64)
    with pytest.raises(ArgumentError, match=r"'A' is read-only.*scaled\(\) writes it"):
        scaled(A, _args()[1], 2)
    assert A.tobytes() == data == np.linspace(0.1, 0.5, 8).tobytes()


def test_a_read_only_memmap_the_kernel_writes_is_refused(tmp_path):
    path = tmp_path / "A.bin"
    _args()[0].tofile(path)
    A = np.memmap(path, dtype=np.float64, mode="r", shape=(8,))
    with pytest.raises(ArgumentError, match="'A' is read-only"):
        scaled(A, _args()[1], 2)
    np.testing.assert_array_equal(np.fromfile(path), _args()[0])


def test_read_only_arrays_that_are_only_read_are_fine(tmp_path):
    A, w = _args()
    path = tmp_path / "w.bin"
    w.tofile(path)
    for frozen in (np.frombuffer(w.tobytes()), np.memmap(path, np.float64, "r", shape=(8,))):
        assert scaled(A.copy(), frozen, 3) == pytest.approx(scaled.py_func(A.copy(), w, 3),
                                                           rel=1e-12)


def test_derivatives_take_read_only_inputs_they_copy():
    A, w = _args()
    frozen = np.frombuffer(A.tobytes())
    want = grad(scaled, wrt=("A", "w"))(A, w, 3)
    got = grad(scaled, wrt=("A", "w"))(frozen, w, 3)
    for g, h in zip(got, want):
        np.testing.assert_array_equal(g, h)
    pulled = vjp(scaled, frozen, w, 3)[1]({"return": 1.0})
    np.testing.assert_array_equal(pulled["A"], want[0])
    dots = jvp(scaled, (frozen, w, 3), {"A": np.ones(8)})[1]
    assert np.isfinite(dots["return"])


@kernel
def product(C: float64[N, N], A: float64[N, N], B: float64[N, N]) -> float:
    for i in range(N):
        for j in range(N):
            for k in range(N):
                C[i, j] += A[i, k] * B[k, j]
    return np.sum(C * C)


def test_an_array_a_matrix_product_writes_counts_as_written():
    """With BLAS the loops are one MatMul node, whose output is written too."""
    rng = np.random.default_rng(0)
    A, B = rng.random((4, 4)), rng.random((4, 4))
    assert product.specialize((A, A, B)).written_arrays == ["C"]
    with pytest.raises(ArgumentError, match="'C' is read-only"):
        product(np.frombuffer(np.zeros(16).tobytes()).reshape(4, 4), A, B)
    C = np.zeros((4, 4))
    grad(product, wrt="A")(C, A, B)
    assert not C.any()                          # the caller's C is not the sweep's


# ---- int arguments beyond int64 ----------------------------------------------------------
@pytest.mark.parametrize("T", [2**63, -2**63 - 1, np.uint64(2**63)])
def test_an_int_beyond_int64_is_an_argument_error(T):
    with pytest.raises(ArgumentError, match=r"argument 'T' gives T=-?\d+, outside the int64"):
        scaled(*_args(), T)


def test_an_int_too_large_for_a_float_argument_is_an_argument_error():
    @kernel
    def scale(A: float64[N], s: float) -> float:
        return np.sum(s * A)
    with pytest.raises(ArgumentError, match="'s' = 1000.* too large for a float64"):
        scale(_args()[0], 10**400)


# ---- options that change the code give new modules -----------------------------------------
def _other_compiler():
    for name in ("gcc", "cc", "clang"):
        if name != options.compiler and _identity(name) not in (None, _identity(options.compiler)):
            return name
    return None


def _identity(compiler):
    try:
        return build._run_version(compiler)
    except adjoint.CompileError:
        return None


ON_CPU = options.device == "cpu"       # (pytest --device=cuda...: C options change no code)
CHANGES = {
    "cflags": lambda: ON_CPU and dict(cflags=tuple(options.cflags) + ("-fno-inline",)),
    "compiler": lambda: ON_CPU and _other_compiler() and dict(compiler=_other_compiler()),
    "blas": lambda: ON_CPU and blas() and dict(blas=False),
    "device": lambda: dict(device="cuda", cuda_emulation=True) if ON_CPU else
    dict(device="cpu"),
}


@pytest.mark.parametrize("option", CHANGES)
def test_an_option_that_changes_the_code_gives_a_new_module(option, monkeypatch):
    change = CHANGES[option]()
    if not change:
        pytest.skip(f"no other {option} here")
    if change.get("cuda_emulation") and not shutil.which(os.environ.get("CXX", "c++")):
        pytest.skip("no C++ compiler for the CUDA emulation")
    k = kernel(product.__wrapped__)
    rng = np.random.default_rng(1)
    A, B = rng.random((5, 5)), rng.random((5, 5))
    C = rng.random((5, 5))
    want = product.py_func(C.copy(), A, B)
    assert k(C.copy(), A, B) == pytest.approx(want, rel=1e-12)
    before = k.specialize((C, A, B)).forward.module.path
    for name in change:                         # restored after the test
        monkeypatch.setattr(options, name, getattr(options, name))
    adjoint.configure(**change)
    assert k(C.copy(), A, B) == pytest.approx(want, rel=1e-12)
    assert k.specialize((C, A, B)).forward.module.path != before


# ---- the compile cache: damaged files are rebuilt, never loaded ------------------------------
ANSWER = "int sc_answer(void) { return %d; }\n"


def _answer(path):
    ffi = cffi.FFI()
    ffi.cdef("int sc_answer(void);")
    return ffi.dlopen(str(path)).sc_answer()


def test_a_damaged_library_is_compiled_again(tmp_path, monkeypatch, caplog):
    """build_module only finds the path: nothing here is loaded before the end."""
    monkeypatch.setattr(options, "cache_dir", str(tmp_path))
    one, two = (build.build_module(ANSWER % k, "answer") for k in (1, 2))
    size, whole = one.stat().st_size, one.read_bytes()
    with open(one, "r+b") as handle:            # truncated in place
        handle.truncate(size // 2)
    assert "bytes, not the" in build.damage(one)
    two.write_bytes(whole)                      # one library in another's place
    assert "sha256" in build.damage(two)
    with caplog.at_level("WARNING", logger="adjoint.runtime"):
        assert build.build_module(ANSWER % 1, "answer") == one
        assert build.build_module(ANSWER % 2, "answer") == two
    assert caplog.text.count("compiling it again") == 2
    assert one.stat().st_size == size and build.damage(one) is None is build.damage(two)
    assert (_answer(one), _answer(two)) == (1, 2)


def test_a_library_swapped_with_its_record_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setattr(options, "cache_dir", str(tmp_path))
    one, two = (build.build_module(ANSWER % k, "answer") for k in (3, 4))
    for suffix in ("", ".sum"):
        a, b = Path(f"{one}{suffix}"), Path(f"{two}{suffix}")
        a_bytes = a.read_bytes()
        a.write_bytes(b.read_bytes())
        b.write_bytes(a_bytes)
    assert build.damage(one) == f"is recorded as {two.name}"
    assert build.build_module(ANSWER % 3, "answer") == one and _answer(one) == 3


def test_stale_temporaries_are_removed_by_the_next_build(tmp_path, monkeypatch):
    monkeypatch.setattr(options, "cache_dir", str(tmp_path))
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True)
    dead, host = int(finished.stdout), build._hostname()
    stale = [f"k.tmp-{host}-{dead}-0.c", f"k.tmp-{host}-{dead}-0.o",
             f"k.so.tmp-{host}-{dead}-x1y2.so", "k.so.tmp-elsewhere-7-x3.so"]
    kept = [f"k.tmp-{host}-{os.getpid()}-1.o", f"k.tmp-{host}-1-1.o",      # alive: pid 1
            "k.so.tmp-elsewhere-7-x4.so", "k.1.c"]       # another host's, recent; not a temporary
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    old = time.time() - 2 * 3600
    os.utime(tmp_path / stale[-1], (old, old))
    build.build_module(ANSWER % 5, "answer")
    left = {p.name for p in tmp_path.iterdir()}
    assert not left & set(stale) and set(kept) <= left


KERNELS = textwrap.dedent('''
    import numpy as np
    from adjoint import float64, kernel, symbol
    N = symbol("N")

    @kernel
    def smooth_damage(A: float64[N], p: float) -> float:
        for i in range(1, N - 1):
            A[i] = p * A[i] + 0.5 * (A[i - 1] + A[i + 1])
        return np.sum(A * A)

    @kernel
    def decay_damage(A: float64[N], p: float) -> float:
        for i in range(N):
            A[i] = A[i] * np.exp(-p * A[i])
        return np.sum(A)
''')

RUN = textwrap.dedent('''
    import json, logging, sys
    import numpy as np
    logging.basicConfig(level=logging.WARNING)
    import adjoint.pipeline as pipeline
    from adjoint.runtime import build
    if sys.argv[1] == "warm":
        def refuse(*args, **kwargs):
            raise AssertionError("the warm process parsed, generated or compiled code")
        pipeline.parse = pipeline.generate_module = pipeline.differentiate = refuse
        build._compile = build._compile_parallel = refuse
    from kern import decay_damage, smooth_damage
    from adjoint import grad
    A = np.linspace(0.1, 0.9, 9)
    out, paths = [], []
    for k in (smooth_damage, decay_damage):
        out += [k(A.copy(), 0.3), list(grad(k, wrt="A")(A, 0.3))]
        spec = k.specialize((A, 0.3))
        paths += [str(spec.forward.module.path),
                  str(next(iter(spec._backward.values())).module.path)]
    print(json.dumps({"results": out, "modules": paths}))
''')


def _run(tmp_path, mode):
    env = {**os.environ, "SIMCORE_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    out = subprocess.run([sys.executable, "-c", RUN, mode], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"rc={out.returncode}\n{out.stderr[-3000:]}"  # -7: SIGBUS
    return json.loads(out.stdout), out.stderr


def _swap(a, b):
    a_bytes = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(a_bytes)


def test_a_damaged_cache_is_rebuilt_with_correct_results(tmp_path):
    (tmp_path / "kern.py").write_text(KERNELS)
    cold, _ = _run(tmp_path, "cold")
    f1, b1, f2, b2 = map(Path, cold["modules"])

    with open(f1, "r+b") as handle:              # half a library: SIGBUS if it were loaded
        handle.truncate(f1.stat().st_size // 2)
    _swap(f2, b2)                                # two libraries in each other's place
    data = bytearray(b1.read_bytes())            # one byte changed, same size
    data[len(data) // 2] ^= 0xFF
    b1.write_bytes(bytes(data))
    after, log = _run(tmp_path, "cold")
    assert after["results"] == cold["results"]
    assert log.count("compiling it again") == 4, log
    assert all(build.damage(p) is None for p in (f1, b1, f2, b2))

    entries = sorted((tmp_path / "cache").glob("*.artefact"))
    assert len(entries) == 4
    kinds = {p: type(pickle.loads(p.read_bytes())[0]).__name__ for p in entries}
    forward = next(p for p in entries if kinds[p] == "Forward")
    backward = next(p for p in entries if kinds[p] == "Backward")
    others = [p for p in entries if p not in (forward, backward)]
    build.seal(forward, backward.read_bytes())   # a sound entry of the wrong type
    forward.write_bytes(backward.read_bytes())
    backward.write_bytes(b"")                    # empty
    others[0].write_bytes(os.urandom(4000))      # garbage
    others[1].write_bytes(others[1].read_bytes()[:100])     # truncated
    after, log = _run(tmp_path, "cold")
    assert after["results"] == cold["results"]
    assert log.count("building it again") == 4, log
    assert "holds a Backward, not a Forward" in log

    warm, _ = _run(tmp_path, "warm")             # everything rebuilt and sealed again
    assert warm == cold
    assert not [p.name for p in (tmp_path / "cache").iterdir() if ".tmp-" in p.name]
