"""Runner over a user's NPBench checkout: each NumPy kernel, unchanged, compiled by the engine.

    python experiments/npbench.py PATH                      # every kernel in PATH/bench_info
    python experiments/npbench.py PATH --kernels adi,gemm   # some (--update: merge them into
                                                            # the existing results)
    python experiments/npbench.py PATH --commit f2d7f27     # when PATH is not a git checkout

NPBench's code stays in PATH (licences and honesty: nothing of it is copied here). Per kernel
``bench_info/<name>.json``, in a subprocess of its own (``--timeout`` seconds: a crash or a
hang is recorded as "crashed"/"timeout" and the runner goes on):

1. inputs: the initialiser (``<module>.py``) at NPBench's preset ``--preset`` (S), passed
   in NPBench's ``input_args`` order, numbers as given; float32 arrays (the deep-learning
   kernels') become float64, so that finite differences mean something;
2. forward: ``adjoint.kernel(f)`` of the unannotated ``<module>_numpy.py`` function (the
   engine specialises on the arguments) on copies of the inputs, against ``f`` itself on
   other copies: every array argument afterwards and the return value, max |got - want| /
   max |want| within NPBench's relative tolerance (its ``norm_error``, default 1e-5);
3. gradient, for kernels with float inputs (arrays or numbers) and float outputs:
   ``adjoint.vjp`` with random cotangents for every written array and the return value;
   <pullback(cot), d> against the central difference of L(x) = <cot, F(x)>, F the ORIGINAL
   function, along two random directions d over every float input (each scaled by its
   input's RMS, so a step h perturbs every input by about h relative); h = 1e-6, then 1e-5,
   1e-7 and 1e-8 where the first misses (a wrong gradient misses at every h); within GRAD_RTOL.
   Where every step misses: again in long double with smaller steps if the original
   computes in it (WIDE), else "unverified" if the error is within UNVERIFIED times the
   differences' own (their change when h halves) and that is above GRAD_RTOL, else WRONG.
   An original that makes float32 arrays (the deep-learning kernels) is differenced as its
   float64 twin (``float64_twin``): its own differences would be float32 rounding noise;
4. times, the process pinned to one core (experiments/bench_timing.py): NumPy, the
   engine's forward and its gradient (vjp + pullback: forward and reverse sweeps), best of
   ``--repeats`` calls taking turns on fresh copies; compile = first call minus steady
   call, with a fresh cache (the first calls may use every core the runner started with).

Failures are classified by exception type and the first line of its message (with its
``file:line`` for the engine's located errors), so that the tables say why a kernel fails;
a result that differs from NumPy without an error is "WRONG". Writes
``experiments/results/npbench.{json,md}`` (``--out``), with the NPBench commit (``git -C
PATH rev-parse HEAD``, else ``--commit``, else "unknown") and the machine.
"""
import argparse
import importlib.util
import inspect
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from experiments import npbench_report  # noqa: E402
from experiments.bench_timing import (best_of_each, copies, every_core, machine,  # noqa: E402
                                      run_on_one_core, timed)

RESULTS = ROOT / "experiments" / "results"
RECURSION_LIMIT = 20_000     # as experiments/bench.py: the planner recurses on long loops
FWD_RTOL = 1e-5              # NPBench's default norm_error (npbench/infrastructure/utilities.py)
GRAD_RTOL = 1e-5
# Finite-difference steps, relative to each input's RMS; 1e-8 for badly conditioned
# kernels (cholesky at S: condition number ~2e6, where 1e-7 still misses by 3e-5 while
# the complex-step derivative agrees with the engine's to 1e-13); 1e-4 last for kernels
# whose terms cancel (Veros' gsw_dHdT: rounding makes 1e-6 miss by 2e-5, 1e-4 is within
# 6e-7 of the complex-step derivative, which agrees with the engine's to 5e-11).
STEPS = (1e-6, 1e-5, 1e-7, 1e-8, 1e-4)
DIRECTIONS = 2
# Where float64's central differences miss at every step: again in long double, with
# smaller steps, where the original computes in it (nbody at S: a close encounter makes
# the loss so curved along a random direction that differences converge only below
# h = 1e-12, where float64's are rounding noise; long double's at 1e-13 agree with the
# engine's gradient to 2e-7); else the check is "unverified" when the error is within
# UNVERIFIED times the differences' own measured error, itself above the tolerance
# (cholesky2's matrix: condition number 2.4e9).
WIDE = "central differences of the original in long double (float64's miss at every step)"
WIDE_STEPS = (1e-10, 1e-11, 1e-12, 1e-13, 1e-14)
UNVERIFIED = 2.0

# The AD set: the 37 NPBench kernels DaCe AD (arXiv 2509.02197) is run on in DaCe's own
# repository: the NPBench tests with a gradient test, i.e. the files under tests/npbench/
# of github.com/spcl/dace (commit ed66880, 2026-08) marked @pytest.mark.autodiff. (The
# paper's benchmark table itself could not be read here; its count, 37, is the same.)
AD_SET = frozenset("""
    adi atax bicg cavity_flow cholesky conv2d_bias correlation covariance deriche doitgen
    durbin fdtd_2d gemm gemver gesummv go_fast gramschmidt hdiff heat_3d jacobi_1d jacobi_2d
    k2mm k3mm lenet lu ludcmp mlp mvt resnet seidel_2d softmax symm syr2k syrk trisolv trmm
    vadv""".split())


# ------------------------------------------------------------------------ the checkout

def bench_names(path):
    infos = sorted((pathlib.Path(path) / "bench_info").glob("*.json"))
    if not infos:
        sys.exit(f"{path}: no bench_info/*.json; give the root of an NPBench checkout")
    return [p.stem for p in infos]


def bench_info(path, name):
    return json.loads((pathlib.Path(path) / "bench_info" / f"{name}.json").read_text())["benchmark"]


def npbench_commit(path, given):
    """The checkout's commit: git's when PATH is the top of a git work tree (not a folder
    inside another repository), else ``given``, else "unknown"."""
    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        if pathlib.Path(git("rev-parse", "--show-toplevel")).resolve() != \
                pathlib.Path(path).resolve():
            return given or "unknown"
        dirty = " (with local changes)" if git("status", "--porcelain") else ""
        return git("rev-parse", "HEAD") + dirty
    except (OSError, subprocess.CalledProcessError):
        return given or "unknown"


def import_file(path, name):
    """The module at ``path`` (NPBench's folders are no packages one could import by name)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module           # inspect.getsource finds the kernel's source through it
    spec.loader.exec_module(module)
    return module


def load(path, info, preset):
    """(NumPy function, its parameters' names, the inputs in NPBench's order, the names of
    those cast from float32 to float64)."""
    folder = pathlib.Path(path) / "npbench" / "benchmarks" / info["relative_path"]
    mod = info["module_name"]
    numpy_module = import_file(folder / f"{mod}_numpy.py", f"npbench_{mod}_numpy")
    func = getattr(numpy_module, info["func_name"])
    data = dict(info["parameters"][preset])
    init = info.get("init")
    if init:
        made = getattr(import_file(folder / f"{mod}.py", f"npbench_{mod}"), init["func_name"])(
            *[data[a] for a in init["input_args"]])
        made = made if len(init["output_args"]) > 1 else (made,)
        data.update(zip(init["output_args"], made))
    values = [data[a] for a in info["input_args"]]
    names = list(inspect.signature(func).parameters)[:len(values)]   # vjp's names for them
    cast = [n for n, v in zip(names, values) if getattr(v, "dtype", None) == np.float32]
    args = tuple(v.astype(np.float64) if n in cast else v for n, v in zip(names, values))
    return func, names, args, cast


NOTES = "## Notes"        # from this heading on, npbench.md is written by hand (kept)
# Inputs a kernel reads only in comparisons (bin edges, masks): the output is piecewise
# constant in them, their derivative zero almost everywhere, and central differences see
# the jumps where a step moves a point across an edge. Held fixed in the gradient check.
HELD = {"azimint_naive": ("radius",), "azimint_hist": ("radius",)}
TWIN = ("central differences of the original's float64 twin (its module's np.float32 read "
        "as np.float64): the original's own are float32 rounding noise")


def float64_twin(func):
    """``func`` and the functions of its module it calls, over a ``np`` whose float32 is
    float64: the same arithmetic in double, a reference for finite differences."""
    np64 = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    np64.float32 = np.float64
    namespace = dict(func.__globals__, np=np64)
    for name, value in list(namespace.items()):
        if isinstance(value, types.FunctionType) and value.__module__ == func.__module__:
            namespace[name] = types.FunctionType(value.__code__, namespace, value.__name__,
                                                 value.__defaults__, value.__closure__)
    return namespace[func.__name__]


# ---------------------------------------------------------------------- comparisons

def flat(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def rel_error(got, want):
    """max |got - want| / max |want| over the elements that differ (equal non-finite
    values agree, as NumPy's results have them); inf for other shapes or non-finite
    values in one place only."""
    if got is None or want is None:
        return 0.0 if got is None and want is None else math.inf
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or not (np.issubdtype(got.dtype, np.number)
                                       or got.dtype == bool):
        return math.inf
    kind = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(want) else np.float64
    got, want = got.astype(kind), want.astype(kind)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if same.all():
        return 0.0
    if not (np.isfinite(got[~same]).all() and np.isfinite(want[~same]).all()):
        return math.inf
    finite = want[np.isfinite(want)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    err = float(np.max(np.abs(got[~same] - want[~same])))
    return err / scale if scale > 0 else err


def forward_error(got, got_args, ref, ref_args):
    """The largest relative error over the return value(s) and every array argument."""
    rets = flat(got), flat(ref)
    if len(rets[0]) != len(rets[1]):
        return math.inf
    pairs = list(zip(*rets)) + [(g, w) for g, w in zip(got_args, ref_args)
                                if isinstance(w, np.ndarray)]
    return max((rel_error(g, w) for g, w in pairs), default=0.0)


def is_float(v):
    if isinstance(v, np.ndarray):
        return v.dtype.kind == "f"
    return isinstance(v, (float, np.floating))


def float_outputs(names, args, ref, ref_args, declared=()):
    """The original's float outputs as vjp names them: {argument it changed or NPBench
    declares an output (``output_args``; a stencil may leave its input unchanged) |
    "return" | "returnK": final value}."""
    outs = {n: w for n, a, w in zip(names, args, ref_args) if is_float(w)
            and (n in declared or not np.array_equal(a, w, equal_nan=True))}
    rets = flat(ref)
    keys = ["return"] if not isinstance(ref, (tuple, list)) else \
        [f"return{k}" for k in range(len(rets))]
    outs.update({k: r for k, r in zip(keys, rets) if is_float(r)})
    return outs


# ---------------------------------------------------------------------- the gradient

def output(key, ret, after, names):
    """An output of a call as vjp names it: an argument's final value, "return", "returnK"."""
    if key in names:
        return after[names.index(key)]
    return ret if key == "return" else flat(ret)[int(key[len("return"):])]


def loss(func, args, cot, names):
    """(L, sum of |terms|) with L = <cot, F(args)>, F the original run on copies of args;
    L in the precision of F's outputs (long double ones: WIDE)."""
    after = copies(args)
    ret = func(*after)
    terms = [np.asarray(c) * np.asarray(output(k, ret, after, names)) for k, c in cot.items()]
    return sum(np.sum(t) for t in terms), sum(float(np.sum(np.abs(t))) for t in terms)


def direction(args, rng):
    """A random direction over the float inputs, each scaled by its input's RMS."""
    def one(a):
        if not is_float(a):
            return None
        rms = float(np.sqrt(np.mean(np.square(a)))) if np.size(a) else 0.0
        rms = rms if rms > 0 and math.isfinite(rms) else 1.0
        return rng.standard_normal(np.shape(a)) * rms if isinstance(a, np.ndarray) \
            else float(rng.standard_normal()) * rms
    return [one(a) for a in args]


def shifted(args, d, h):
    return tuple(a if e is None else a + h * e if isinstance(a, (np.ndarray, np.longdouble))
                 else float(a + h * e) for a, e in zip(args, d))


def directional_error(func, args, names, cot, grads, d, steps=STEPS):
    """(relative error of <grads, d> against central differences of the original at the
    best of ``steps``, stopping at the first within GRAD_RTOL; the differences' own relative
    noise at that step where none is within, else 0)."""
    ad = sum(float(np.sum(np.asarray(grads[n]) * e)) for n, e in zip(names, d)
             if e is not None and n in grads)
    best, refused = (math.inf, None), None
    for h in steps:
        try:
            fd, size = central_difference(func, args, names, cot, d, h)
        except np.linalg.LinAlgError as exc:   # the original fails there (cholesky2's
            refused = exc                      # barely definite matrix): try the next step
            continue
        noise = np.finfo(np.asarray(fd).dtype).eps / 2 * size / h   # an ulp of L through 1/h
        err = float(abs(ad - fd) / max(abs(ad), abs(fd), noise / GRAD_RTOL, 1e-300))
        best = min(best, (err, h))
        if err <= GRAD_RTOL:
            return err, 0.0
    if best[0] == math.inf and refused is not None:
        raise RuntimeError(f"the original raises at every finite-difference step: {refused}")
    return best[0], fd_noise(func, args, names, cot, d, best[1])


def central_difference(func, args, names, cot, d, h):
    """((L(x + h d) - L(x - h d)) / 2h, sum of |terms| of L)."""
    (up, size), (down, _) = loss(func, shifted(args, d, h), cot, names), \
        loss(func, shifted(args, d, -h), cot, names)
    return (up - down) / (2 * h), size


def fd_noise(func, args, names, cot, d, h):
    """How far the central difference at step h is from the derivative, estimated: its
    change when h halves, relative to it (3/4 of its truncation error, and rounding
    noise, which is different at every step). Large where the original is badly
    conditioned (cholesky2 at S: condition number 2.4e9)."""
    (fd, _), (half, _) = (central_difference(func, args, names, cot, d, s) for s in (h, h / 2))
    return float(abs(fd - half) / max(abs(fd), 1e-300))


def long_double(func, args):
    """``args`` with the float ones in long double, where this platform's long double is
    wider than double and the original computes in it (some of its float outputs are long
    double: nbody's energies go into float64 arrays it makes); else None."""
    if np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        return None
    wide = tuple(a.astype(np.longdouble) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                 else np.longdouble(a) if isinstance(a, float) else a for a in args)
    try:
        after = copies(wide)
        ret = func(*after)
    except Exception:           # np.linalg refuses long double
        return None
    outs = [v for v in flat(ret) + list(after) if is_float(v)]
    return wide if any(np.asarray(v).dtype == np.longdouble for v in outs) else None


def verdict(err, noise):
    """ok within GRAD_RTOL; "unverified" where the differences' own noise is above the
    tolerance and the error within UNVERIFIED times it (the reference cannot tell);
    else WRONG."""
    if err <= GRAD_RTOL:
        return "ok"
    return "unverified" if GRAD_RTOL < noise and err <= UNVERIFIED * noise else "WRONG"


def cotangents(outs, rng):
    return {k: (rng.standard_normal(np.shape(v)) if isinstance(v, np.ndarray) else
                float(rng.standard_normal())) for k, v in sorted(outs.items())}


# ------------------------------------------------------------------ one kernel (child)

def failure(exc, path):
    """{"type", "message", "where"}: the first line of the message (NPBench's path made
    relative) and the innermost frame in the engine."""
    text = str(exc).strip().splitlines()
    message = (text[0] if text else "").replace(str(pathlib.Path(path).resolve()) + os.sep, "")
    engine = [f for f in traceback.extract_tb(exc.__traceback__)
              if pathlib.Path(f.filename).resolve().is_relative_to(ROOT / "adjoint")]
    where = f"{pathlib.Path(engine[-1].filename).relative_to(ROOT)}:{engine[-1].lineno}" \
        if engine else None
    return {"type": type(exc).__name__, "message": message[:400], "where": where}


class Child:
    """Measures one kernel, saving its record after every stage (so that the parent still
    knows how far it got when this process crashes or hangs)."""

    def __init__(self, opts, name):
        self.opts, self.name = opts, name
        self.rng = np.random.default_rng(zlib.crc32(f"npbench/{name}".encode()))
        self.rec = {"name": name, "set": "AD" if name in AD_SET else "other", "stage": "load"}

    def save(self, stage=None):
        if stage:
            self.rec["stage"] = stage
        tmp = self.opts.record + ".tmp"
        pathlib.Path(tmp).write_text(json.dumps(self.rec, default=_json_default))
        os.replace(tmp, self.opts.record)

    def run(self):
        import adjoint
        adjoint.configure(threads=1)
        self.adjoint, path = adjoint, self.opts.path
        info = bench_info(path, self.name)
        self.tol = float(info.get("norm_error", FWD_RTOL))
        self.rec.update(module=f"{info['relative_path']}/{info['module_name']}_numpy.py",
                        func=info["func_name"], params=info["parameters"][self.opts.preset])
        self.save()
        try:
            self.func, self.names, self.args, cast = load(path, info, self.opts.preset)
        except Exception as exc:
            return self.finish(forward="load error", error=failure(exc, path))
        self.rec["float32_cast_to_float64"] = cast
        self.measure(info["output_args"])

    def measure(self, declared):
        """From loaded ``func``, ``names`` and ``args`` on: the original's run, the engine's
        forward, its gradient and the times (``declared``: arguments that are outputs even
        where the original leaves them unchanged)."""
        self.rec["float_inputs"] = [n for n, a in zip(self.names, self.args) if is_float(a)]
        self.save("numpy")
        try:
            self.ref_args = copies(self.args)
            self.ref = self.func(*self.ref_args)
        except Exception as exc:
            return self.finish(forward="numpy error", error=failure(exc, self.opts.path))
        self.expected = float_outputs(self.names, self.args, self.ref, self.ref_args, declared)
        self.rec["differentiable"] = bool(self.rec["float_inputs"] and self.expected)
        if not self.forward():
            return self.finish()
        timed_fns = [self.func, self.kernel]
        if self.gradient():
            timed_fns.append(self.grad_call)
        self.save("timing")
        self.timing(timed_fns)
        return self.finish()

    def finish(self, **fields):
        self.rec.update(fields)
        self.rec.pop("stage", None)
        self.save()

    def forward(self):
        """Run the engine's forward once (compiling it); False when it raised."""
        self.save("forward")
        got_args = copies(self.args)
        try:
            self.kernel = self.adjoint.kernel(self.func)
            with every_core():
                got, self.first_fwd, _ = timed(self.kernel, *got_args)
        except Exception as exc:
            self.rec.update(forward="error", error=failure(exc, self.opts.path))
            return False
        err = forward_error(got, got_args, self.ref, self.ref_args)
        self.rec.update(forward="ok" if err <= self.tol else "WRONG", forward_error=err,
                        forward_tol=self.tol)
        return True

    def gradient(self):
        """vjp against finite differences of the original; True when it ran."""
        if not self.rec["differentiable"]:
            self.rec["gradient"] = "n/a"
            return False
        self.save("gradient")
        try:
            with every_core():
                grads, self.first_grad = self.first_gradient(self.expected)
        except Exception as exc:
            self.rec.update(gradient="error", grad_error=failure(exc, self.opts.path))
            return False
        self.rec["outputs"] = sorted(self.cot)
        self.rec["missing_cotangents"] = [n for n in self.rec["float_inputs"] if n not in grads]
        reference = self.func
        if "float32" in inspect.getsource(inspect.getmodule(self.func)):
            # float32 temporaries (the deep-learning kernels' np.empty(..., np.float32)):
            # the original's central differences are rounding noise at every step
            reference = float64_twin(self.func)
            self.rec["gradient_reference"] = TWIN
        self.save("finite differences")
        directions = [self.direction() for _ in range(DIRECTIONS)]
        checks = [directional_error(reference, self.args, self.names, self.cot, grads, d)
                  for d in directions]
        wide = long_double(reference, self.args) \
            if max(checks)[0] > GRAD_RTOL else None
        if wide is not None:
            self.rec.update(gradient_reference=WIDE, float64_fd_error=max(checks)[0])
            checks = [directional_error(reference, wide, self.names, self.cot, grads, d,
                                        WIDE_STEPS) for d in directions]
        err, noise = max(c[0] for c in checks), max(c[1] for c in checks)
        self.rec.update(gradient=verdict(err, noise), gradient_error=err)
        if noise:
            self.rec["fd_noise"] = noise
        return True

    def direction(self):
        """A random direction of the gradient check (None: an input held fixed, HELD)."""
        held = HELD.get(self.name, ())
        if held:
            self.rec["gradient_held"] = list(held)
        return [None if n in held else e
                for n, e in zip(self.names, direction(self.args, self.rng))]

    def first_gradient(self, expected):
        """(cotangents of the inputs, seconds) of the first vjp + pullback, which compiles;
        random cotangents for the engine's float outputs and the original's."""
        t0 = time.perf_counter()
        outs, pullback = self.adjoint.vjp(self.kernel, *copies(self.args))
        self.cot = cotangents({**expected, **{k: v for k, v in outs.items() if is_float(v)}},
                              self.rng)
        grads = pullback(self.cot)
        return grads, time.perf_counter() - t0

    def grad_call(self, *args):
        """The gradient as a user pays for it: vjp (forward sweep) and the pullback."""
        return self.adjoint.vjp(self.kernel, *args)[1](self.cot)

    def timing(self, fns):
        t = best_of_each(fns, lambda: copies(self.args), self.opts.repeats, self.opts.budget)
        times = {"numpy": t[0], "engine_fwd": t[1]}
        times["compile_fwd"] = max(self.first_fwd - t[1]["wall"], 0.0)
        if len(t) > 2:
            times["engine_grad"] = t[2]
            times["compile_grad"] = max(self.first_grad - t[2]["wall"], 0.0)
        self.rec["times"] = times


# ------------------------------------------------------------------------- the runner

def run_child(opts, name, tmp):
    """One kernel's record from a subprocess: what it saved, or how far it got."""
    record = os.path.join(tmp, f"{name}.json")
    cmd = [sys.executable, __file__, opts.path, "--child", name, "--record", record,
           "--preset", opts.preset, "--repeats", str(opts.repeats), "--budget", str(opts.budget)]
    return run_recorded(cmd, record, opts.timeout,
                        {"name": name, "set": "AD" if name in AD_SET else "other"})


def run_recorded(cmd, record, timeout, first):
    """The record the child ``cmd`` saved at ``record`` (``first`` where it saved none), with
    its crash or timeout (after ``timeout`` seconds) and the stage it was in."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)    # its compilers die with it on a timeout
    try:
        log, _ = proc.communicate(timeout=timeout)
        outcome = None if proc.returncode == 0 else f"crashed (exit {proc.returncode})"
        if proc.returncode < 0:
            outcome = f"crashed ({signal.Signals(-proc.returncode).name})"
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log, _ = proc.communicate()
        outcome = f"timeout ({timeout:g} s)"
    rec = json.loads(pathlib.Path(record).read_text()) if os.path.exists(record) else \
        {**first, "stage": "start"}
    if outcome:
        stage = rec.pop("stage", "?")
        rec.update(crash={"outcome": outcome, "stage": stage, "log_tail": (log or "")[-1500:]})
        key = "forward" if stage in ("load", "numpy", "forward", "start") else "gradient"
        if stage == "timing":
            rec["times_note"] = outcome
        else:
            rec[key] = outcome.split(" ")[0]
    return rec


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="root of an NPBench checkout (holds bench_info/ and npbench/)")
    ap.add_argument("--kernels", default="", help="comma-separated bench_info names (default all)")
    ap.add_argument("--commit", default="", help="NPBench's commit when PATH is not a git checkout")
    ap.add_argument("--preset", default="S", help="NPBench size preset (default S)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per kernel (default 120)")
    ap.add_argument("--repeats", type=int, default=5, help="best of this many calls (default 5)")
    ap.add_argument("--budget", type=float, default=2.0,
                    help="seconds of calls per function after which repeats stop (default 2)")
    ap.add_argument("--out", default=str(RESULTS), help="results folder")
    ap.add_argument("--update", action="store_true",
                    help="replace only these kernels' records in an existing npbench.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--record", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main():
    opts = parse()
    run_on_one_core()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    if opts.child:
        Child(opts, opts.child).run()
        return 0
    names = bench_names(opts.path)
    chosen = opts.kernels.split(",") if opts.kernels else names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        sys.exit(f"unknown kernels {unknown}; {opts.path}/bench_info has {', '.join(names)}")
    import adjoint
    adjoint.configure(threads=1)
    info = {k: v for k, v in machine(None, adjoint.options).items() if k != "jax"}
    info.update(npbench_commit=npbench_commit(opts.path, opts.commit), preset=opts.preset,
                timeout_s=opts.timeout, repeats=opts.repeats, budget_s=opts.budget,
                fwd_rtol=FWD_RTOL, grad_rtol=GRAD_RTOL, fd_steps=STEPS, directions=DIRECTIONS)
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    records, start = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="npbench_") as tmp:
        os.environ["SIMCORE_CACHE_DIR"] = os.path.join(tmp, "cache")    # cold compiles
        for name in chosen:
            records.append(run_child(opts, name, tmp))
            print(npbench_report.one_line(records[-1]), flush=True)
    info["run_wall_s"] = round(time.perf_counter() - start, 1)
    if opts.update and (out / "npbench.json").exists():
        old = json.loads((out / "npbench.json").read_text())
        records += [r for r in old["kernels"] if r["name"] not in chosen]
        info["reruns"] = old["machine"].get("reruns", []) + [{"kernels": chosen,
                                                              "date": info["date"]}]
        info = {**old["machine"], "reruns": info["reruns"]}
    records.sort(key=lambda r: r["name"])
    (out / "npbench.json").write_text(json.dumps({"machine": info, "kernels": records},
                                                 indent=1, default=_json_default))
    md, path = npbench_report.markdown(info, records), out / "npbench.md"
    notes = path.read_text().partition(NOTES)[1:] if path.exists() else ("", "")
    path.write_text(md + "".join(notes))
    print(md)
    return 0


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(type(v))


if __name__ == "__main__":
    sys.exit(main())
