"""Veros' ocean routines as pyhpc-benchmarks keeps them, compiled unchanged, against their
published JAX versions: forward and the gradient of a scalar loss, at three sizes.

    python experiments/bench_veros.py --pyhpc PATH [--sizes 4096,65536,262144]

PATH is a checkout of github.com/dionhaefner/pyhpc-benchmarks. Its NumPy functions
(benchmarks/<name>/<stem>_numpy.py) are handed to ``adjoint.kernel`` as they are, its JAX
functions (<stem>_jax.py) jitted as they are, and the inputs are its own
``generate_inputs(size)``; nothing of the checkout is copied here. A sibling of bench.py
rather than a part of it: bench.py's kernels are the corpus's, with ports written here,
sizes S/M and extrapolated JAX times; here the functions, their JAX versions and the
sizes all come from the checkout.

Per function and size:
  - NumPy forward, engine forward (checked against NumPy), JAX forward (``jax.jit``,
    float64), each the best wall time of a few calls on one core (the process is pinned
    to one, and XLA to one thread, as in bench.py; compiles may use every core);
  - the loss L = sum_k <W_k, output_k>, W_k fixed random arrays (seed 0), over the
    function's outputs: the engine's gradient (``adjoint.vjp`` and the pullback with the
    cotangents W_k, w.r.t. every float argument) against ``jax.jit(jax.grad(L))`` over
    the same arguments; the two gradients must agree (max |engine - JAX| / max |JAX| per
    argument within GRAD_RTOL);
  - ratios: NumPy / engine and JAX / engine forward, JAX / engine gradient (above 1: the
    engine is faster), and each one's gradient / forward.
A function the engine does not compile gets a row with its error.

Writes experiments/results/veros.{json,md} with the checkout's commit.
"""
import argparse
import importlib
import json
import math
import os
import pathlib
import sys
import time
import traceback
from dataclasses import dataclass

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from experiments.bench_timing import (best_of_each, copies, every_core, machine,  # noqa: E402
                                      rel_error, run_on_one_core, timed)
from experiments.npbench import npbench_commit  # noqa: E402

RESULTS = ROOT / "experiments" / "results"
SIZES = (4096, 65536, 262144)        # pyhpc's own sizes are powers of 2 up to 2^24
FWD_RTOL = 1e-9                      # engine forward vs NumPy
GRAD_RTOL = 1e-7                     # engine gradient vs JAX's
XLA_ONE_THREAD = " --xla_cpu_multi_thread_eigen=false"


@dataclass(frozen=True)
class Case:
    name: str          # the table's row
    package: str       # benchmarks.<package>: holds generate_inputs
    stem: str          # <stem>_numpy.py, <stem>_jax.py
    func: str          # the function in both
    outputs: tuple     # the engine's vjp keys of the outputs, in the JAX version's order


CASES = (
    Case("eos.gsw_dHdT", "equation_of_state", "eos", "gsw_dHdT", ("return",)),
    Case("isoneutral_diffusion_pre", "isoneutral_mixing", "isoneutral",
         "isoneutral_diffusion_pre", ("K_11", "K_22", "K_33", "Ai_ez", "Ai_nz", "Ai_bx",
                                      "Ai_by")),
    Case("tke.integrate_tke", "turbulent_kinetic_energy", "tke", "integrate_tke",
         ("return0", "return1", "return2")),
)


def numpy_outputs(case, names, args, ret):
    """The outputs of the NumPy function after a call: its return value or its arrays."""
    def one(key):
        if key == "return":
            return ret
        if key.startswith("return"):
            return ret[int(key[6:])]
        return args[names.index(key)]
    return [np.asarray(one(k)) for k in case.outputs]


class Bench:
    def __init__(self, opts, adjoint, jax):
        self.opts, self.adjoint, self.jax = opts, adjoint, jax
        self.kernels = {}

    def case(self, case):
        pkg = importlib.import_module(f"benchmarks.{case.package}")
        original = getattr(importlib.import_module(f"benchmarks.{case.package}."
                                                   f"{case.stem}_numpy"), case.func)
        ported = getattr(importlib.import_module(f"benchmarks.{case.package}."
                                                 f"{case.stem}_jax"), case.func)
        rec = {"name": case.name, "module": f"benchmarks/{case.package}/{case.stem}_numpy.py",
               "sizes": {}}
        for size in self.opts.sizes:
            try:
                rec["sizes"][str(size)] = self.size(case, pkg, original, ported, size)
            except Exception as exc:         # the row says why; the others still run
                text = (str(exc).strip().splitlines() or [""])[0].replace(
                    str(pathlib.Path(self.opts.pyhpc).resolve()) + os.sep, "")
                rec["sizes"][str(size)] = {"error": f"{type(exc).__name__}: {text[:300]}",
                                           "where": _engine_frame(exc)}
            print(one_line(case.name, size, rec["sizes"][str(size)]), flush=True)
        return rec

    def size(self, case, pkg, original, ported, size):
        import inspect
        args = pkg.generate_inputs(size)
        names = list(inspect.signature(original).parameters)
        out = {"shape": list(np.shape(args[0]))}
        want_args = copies(args)
        want = numpy_outputs(case, names, want_args, original(*want_args))
        k = self.kernels.get(case.name) or self.kernels.setdefault(
            case.name, self.adjoint.kernel(original))
        got_args = copies(args)
        with every_core():
            ret, first_fwd, _ = timed(k, *got_args)
        got = numpy_outputs(case, names, got_args, ret)
        out["fwd_error_vs_numpy"] = max(rel_error(g, w) for g, w in zip(got, want))
        rng = np.random.default_rng(0)
        weights = [rng.standard_normal(w.shape) for w in want]
        cot = dict(zip(case.outputs, weights))

        def engine_grad(*a):
            return self.adjoint.vjp(k, *a)[1](cot)
        with every_core():
            grads, first_grad, _ = timed(engine_grad, *copies(args))
        floats = [j for j, a in enumerate(args) if a.dtype.kind == "f"]
        jx = self.jax_functions(ported, args, floats, weights)
        jgrads = [np.asarray(g) for g in jx["grad"](*jx["args"])]
        ours = [np.asarray(grads.get(names[j], np.zeros_like(args[j]))) for j in floats]
        # JAX's gradient is nan where a step's zero derivative meets an infinite one in
        # one expression (tke's sqrt(max(0, tke)) at tke < 0: 0 * inf); the engine's is 0
        # there. Compared where JAX's is finite; the engine's must be finite everywhere.
        out["grad_nonfinite"] = {"engine": sum(int(np.sum(~np.isfinite(g))) for g in ours),
                                 "jax": sum(int(np.sum(~np.isfinite(g))) for g in jgrads)}
        errors = {names[j]: rel_error(g[np.isfinite(h)], h[np.isfinite(h)]) if
                  np.all(np.isfinite(g)) else math.inf for j, g, h in zip(floats, ours, jgrads)}
        out["grad_error_vs_jax"] = max(errors.values())
        out["grad_error_vs_jax_by_argument"] = errors
        jfwd = [np.asarray(v) for v in _tuple(jx["fwd"](*jx["args"]))]
        out["jax_fwd_error_vs_numpy"] = max(rel_error(g, w) for g, w in zip(jfwd, want))
        out["ok"] = bool(out["fwd_error_vs_numpy"] <= FWD_RTOL and
                         out["grad_error_vs_jax"] <= GRAD_RTOL)
        block = self.jax.block_until_ready
        t = best_of_each([original, k, engine_grad], lambda: copies(args), self.opts.repeats,
                         self.opts.budget)
        tj = best_of_each([lambda: block(jx["fwd"](*jx["args"])),
                           lambda: block(jx["grad"](*jx["args"]))], lambda: (),
                          self.opts.repeats, self.opts.budget)
        ms = {"numpy_fwd": t[0], "engine_fwd": t[1], "engine_grad": t[2],
              "jax_fwd": tj[0], "jax_grad": tj[1]}
        out["ms"] = {n: v["wall"] * 1e3 for n, v in ms.items()}
        out["cpu_ms"] = {n: v["cpu"] * 1e3 for n, v in ms.items()}     # median: a cross-check
        out["calls"] = {n: v["calls"] for n, v in ms.items()}
        out["compile_s"] = {"engine_fwd": max(first_fwd - t[1]["wall"], 0.0),
                            "engine_grad": max(first_grad - t[2]["wall"], 0.0),
                            "jax_fwd": jx["compile_fwd"], "jax_grad": jx["compile_grad"]}
        m = out["ms"]
        out["ratios"] = {"numpy/engine fwd": m["numpy_fwd"] / m["engine_fwd"],
                         "jax/engine fwd": m["jax_fwd"] / m["engine_fwd"],
                         "jax/engine grad": m["jax_grad"] / m["engine_grad"],
                         "engine grad/fwd": m["engine_grad"] / m["engine_fwd"],
                         "jax grad/fwd": m["jax_grad"] / m["jax_fwd"]}
        return out

    def jax_functions(self, ported, args, floats, weights):
        """The JAX version jitted, and jit(grad) of the loss over the float arguments, both
        compiled ahead of time for these arguments (integer ones fixed)."""
        jax, jnp = self.jax, self.jax.numpy
        fixed = {j: jnp.asarray(a) for j, a in enumerate(args) if j not in floats}
        ws = [jnp.asarray(w) for w in weights]

        def full(dyn):
            it = iter(dyn)
            return [fixed[j] if j in fixed else next(it) for j in range(len(args))]

        def forward(*dyn):
            return ported(*full(dyn))

        def loss(*dyn):
            return sum(jnp.sum(w * o) for w, o in zip(ws, _tuple(forward(*dyn))))
        dyn = [jnp.asarray(args[j]) for j in floats]
        out = {"args": dyn}
        t0 = time.perf_counter()
        out["fwd"] = jax.jit(forward).lower(*dyn).compile()
        out["compile_fwd"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        out["grad"] = jax.jit(jax.grad(loss, argnums=tuple(range(len(dyn))))).lower(
            *dyn).compile()
        out["compile_grad"] = time.perf_counter() - t0
        return out


def _tuple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def _engine_frame(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if pathlib.Path(f.filename).resolve().is_relative_to(ROOT / "adjoint")]
    return f"{pathlib.Path(frames[-1].filename).relative_to(ROOT)}:{frames[-1].lineno}" \
        if frames else None


def one_line(name, size, r):
    if "error" in r:
        return f"{name} {size}: {r['error']}"
    m, q = r["ms"], r["ratios"]
    return (f"{name} {size} {tuple(r['shape'])}: fwd numpy {m['numpy_fwd']:.3g} engine "
            f"{m['engine_fwd']:.3g} jax {m['jax_fwd']:.3g} ms; grad engine "
            f"{m['engine_grad']:.3g} jax {m['jax_grad']:.3g} ms; jax/engine grad "
            f"{q['jax/engine grad']:.2f}; errors fwd {r['fwd_error_vs_numpy']:.1e} grad vs "
            f"jax {r['grad_error_vs_jax']:.1e}")


def markdown(info, records):
    lines = ["# Veros' routines (pyhpc-benchmarks) against their JAX versions", "",
             f"- checkout: {info['pyhpc']} at `{info['pyhpc_commit']}`",
             f"- machine: {info['cpu']}, one core (the process pinned, XLA on one thread); "
             f"load average at start {info['load_average_at_start']}",
             f"- numpy {info['numpy']}, jax {info['jax']} (float64), best of up to "
             f"{info['repeats']} calls within {info['budget_s']} s",
             f"- `python experiments/bench_veros.py --pyhpc PATH --sizes "
             f"{','.join(map(str, info['sizes']))}`", "",
             "Loss: sum over the outputs of <W, output>, W fixed random arrays; gradients "
             "w.r.t. every float argument. Engine gradient: `adjoint.vjp` and its pullback "
             "(forward sweep included), JAX: `jax.jit(jax.grad(loss))`. Times: best wall time; "
             "the CPU-time ratio (medians) is a cross-check on a shared machine. Ratios above 1: the "
             f"engine is faster. ok: forward within {FWD_RTOL:g} of NumPy and gradient within "
             f"{GRAD_RTOL:g} of JAX's (max |diff| / max |JAX| per argument, over the entries "
             "where JAX's is finite; the engine's must be finite everywhere). nan: the "
             "gradient's non-finite entries, engine / JAX.", "",
             "| function | size | shape | NumPy fwd ms | engine fwd ms | JAX fwd ms | "
             "engine grad ms | JAX grad ms | NumPy/engine fwd | JAX/engine fwd | "
             "JAX/engine grad | JAX/engine grad, CPU time | engine grad/fwd | JAX grad/fwd | "
             "fwd err | grad err vs JAX | nan | ok | compile s engine fwd/grad, JAX fwd/grad |",
             "|" + "---|" * 19]
    for rec in records:
        for size, r in rec["sizes"].items():
            if "error" in r:
                lines.append(f"| {rec['name']} | {size} | - |" + " - |" * 15 +
                             f" error: {r['error'].replace('|', '/')} |")
                continue
            m, q, c = r["ms"], r["ratios"], r["compile_s"]
            cpu = f"{r['cpu_ms']['jax_grad'] / r['cpu_ms']['engine_grad']:.2f}" \
                if "cpu_ms" in r else "-"
            lines.append(
                f"| {rec['name']} | {size} | {'x'.join(map(str, r['shape']))} | "
                f"{m['numpy_fwd']:.3g} | {m['engine_fwd']:.3g} | {m['jax_fwd']:.3g} | "
                f"{m['engine_grad']:.3g} | {m['jax_grad']:.3g} | {q['numpy/engine fwd']:.2f} | "
                f"{q['jax/engine fwd']:.2f} | {q['jax/engine grad']:.2f} | {cpu} | "
                f"{q['engine grad/fwd']:.2f} | {q['jax grad/fwd']:.2f} | "
                f"{r['fwd_error_vs_numpy']:.1e} | {r['grad_error_vs_jax']:.1e} | "
                f"{r['grad_nonfinite']['engine']} / {r['grad_nonfinite']['jax']} | "
                f"{'ok' if r['ok'] else 'WRONG'} | {c['engine_fwd']:.1f} / "
                f"{c['engine_grad']:.1f}, {c['jax_fwd']:.1f} / {c['jax_grad']:.1f} |")
    return "\n".join(lines) + "\n"


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pyhpc", required=True, help="a checkout of pyhpc-benchmarks")
    ap.add_argument("--commit", default="", help="its commit when PATH is not a git work tree")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated generate_inputs sizes")
    ap.add_argument("--cases", default="", help="comma-separated names (default all)")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many calls")
    ap.add_argument("--budget", type=float, default=2.0,
                    help="seconds of calls per function after which repeats stop")
    ap.add_argument("--out", default=str(RESULTS), help="results folder")
    opts = ap.parse_args(argv)
    opts.sizes = [int(s) for s in opts.sizes.split(",")]
    return opts


def main():
    opts = parse()
    run_on_one_core()
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + XLA_ONE_THREAD).strip()
    import jax
    jax.config.update("jax_enable_x64", True)
    import adjoint
    sys.path.insert(0, str(pathlib.Path(opts.pyhpc).resolve()))
    cases = [c for c in CASES if not opts.cases or c.name in opts.cases.split(",")]
    info = machine(jax, adjoint.options)
    info.update(pyhpc=opts.pyhpc, pyhpc_commit=npbench_commit(opts.pyhpc, opts.commit),
                sizes=opts.sizes, repeats=opts.repeats, budget_s=opts.budget)
    bench = Bench(opts, adjoint, jax)
    records = [bench.case(c) for c in cases]
    info["load_average_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "veros.json").write_text(json.dumps({"machine": info, "functions": records},
                                               indent=1, default=_json_default))
    md = markdown(info, records)
    (out / "veros.md").write_text(md)
    print(md)
    ok = all(r.get("ok", False) for rec in records for r in rec["sizes"].values()
             if "error" not in r)
    return 0 if ok else 1


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    raise TypeError(type(v))


if __name__ == "__main__":
    sys.exit(main())
