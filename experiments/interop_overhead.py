"""What calling a compiled kernel from JAX or PyTorch costs over the kernel itself
(issue 23's target: at most 50 us), on tiny kernels (8 elements) where that cost is all
there is.

    python experiments/interop_overhead.py [--rounds 7] [--calls 400]

For each kernel: the engine's own calls (forward ``k(x, a)``; ``value_and_grad``, the
differentiated call a framework's gradient runs), then the same through ``to_jax``
(eager and ``jax.jit``-ed) and ``to_torch`` (where PyTorch is installed). A framework's
gradient runs the forward and then that call, so its overhead is measured against the
sum of the two; PyTorch's forward+backward runs the differentiated call alone (its
forward is that call's forward sweep, its backward the reverse). Times are the best over
``--rounds`` rounds of the mean over ``--calls`` calls, the variants taking turns within
each round (so the machine's other load hits all of them); "over the engine's calls"
subtracts the engine calls a variant makes (a jit-ed ``grad`` and PyTorch's
forward+backward only the differentiated call: XLA drops the forward whose outputs it does
not use, PyTorch records in the forward). A pure-JAX version of each kernel is timed for
scale, and the floors: the frameworks' own mechanisms around callbacks that do nothing.
Results: experiments/results/interop.{json,md}.
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]   # the checkout: adjoint (its corpus too) and experiments

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import adjoint  # noqa: E402
from adjoint import float64, kernel, symbol, value_and_grad  # noqa: E402
from adjoint.interop.jax import to_jax  # noqa: E402
from experiments.bench_timing import load_average, machine  # noqa: E402

try:
    import torch
    from adjoint.interop.torch import to_torch
except ImportError:
    torch = None

jax.config.update("jax_enable_x64", True)
RESULTS = ROOT / "experiments" / "results"
N = symbol("N")


@kernel
def tiny_loss(x: float64[N], a: float) -> float:
    s = 0.0
    for i in range(N):
        s += a * x[i] * x[i]
    return s


@kernel
def tiny_step(x: float64[N], a: float) -> float:      # writes x: returns (loss, x)
    for i in range(1, N):
        x[i] = x[i] + a * x[i - 1]
    return np.sum(x * x)


def jax_loss(x, a):
    return jnp.sum(a * x * x)


def jax_step(x, a):
    def body(prev, xi):
        new = xi + a * prev
        return new, new
    _, rest = jax.lax.scan(body, x[0], x[1:])
    x = jnp.concatenate([x[:1], rest])
    return jnp.sum(x * x), x


KERNELS = {"tiny_loss": (tiny_loss, jax_loss), "tiny_step": (tiny_step, jax_step)}


def variants(k, pure):
    """{name: zero-argument function} for one kernel."""
    x, a = np.linspace(0.5, 1.0, 8), 0.3
    xj, aj = jnp.asarray(x), jnp.asarray(a)
    f = to_jax(k)
    loss = (lambda x, a: f(x, a)[0]) if k.__name__ == "tiny_step" else f
    pure_loss = (lambda x, a: pure(x, a)[0]) if k.__name__ == "tiny_step" else pure
    written = k.__name__ == "tiny_step"
    vg = value_and_grad(k, wrt=("x", "a"))
    fj, gj = jax.jit(f), jax.jit(jax.grad(loss, argnums=(0, 1)))
    vgj = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    ge = jax.grad(loss, argnums=(0, 1))
    pj, pg = jax.jit(pure), jax.jit(jax.grad(pure_loss, argnums=(0, 1)))
    pge = jax.grad(pure_loss, argnums=(0, 1))
    rj = raw_callback(k, a)
    block = jax.block_until_ready
    work = x.copy()
    out = {
        "engine forward": lambda: k(work, a),
        "engine value_and_grad": lambda: vg(x, a),
        "jax eager forward": lambda: block(f(xj, aj)),
        "jax jit forward": lambda: block(fj(xj, aj)),
        "jax eager grad": lambda: block(ge(xj, aj)),
        "jax jit grad": lambda: block(gj(xj, aj)),
        "jax jit value_and_grad": lambda: block(vgj(xj, aj)),
        "jax jit, callback calling the kernel": lambda: block(rj(xj)),
        "pure jax jit forward": lambda: block(pj(xj, aj)),
        "pure jax jit grad": lambda: block(pg(xj, aj)),
        "pure jax eager grad": lambda: block(pge(xj, aj)),
    }
    if torch is not None:
        t = to_torch(k)
        tloss = (lambda x, a: t(x, a)[0]) if written else t
        xt, at = torch.tensor(x), torch.tensor(a)

        def torch_grad():
            xg, ag = xt.clone().requires_grad_(), at.clone().requires_grad_()
            tloss(xg, ag).backward()
            return xg.grad, ag.grad
        out["torch forward"] = lambda: t(xt, at)
        out["torch forward+backward"] = torch_grad
    return out


def raw_callback(k, a):
    """A jit-ed JAX function whose callback calls ``k(x, a)`` directly (none of the
    interop's handling), returning its number: how much of the cost is XLA's callback
    path with the engine inside it."""
    from jax.extend.core import Primitive
    from jax.interpreters import mlir
    raw = Primitive(f"interop_overhead_raw_{k.__name__}")
    raw.multiple_results = True
    raw.def_abstract_eval(lambda *avals: [jax.core.ShapedArray((), np.float64)])

    def lower(ctx, *args):
        def call(x):
            value = k(np.array(x), a)
            return (np.asarray(value if np.ndim(value) == 0 else value[0]),)
        results, _, _ = mlir.emit_python_callback(
            ctx, call, None, list(args), ctx.avals_in, ctx.avals_out,
            has_side_effect=False, returns_token=False)
        return results
    mlir.register_lowering(raw, lower)
    return jax.jit(lambda x: raw.bind(x)[0])


def floors():
    """What the frameworks' own mechanisms cost around a callback that does nothing: a
    JAX primitive lowered through ``emit_python_callback`` (as to_jax's), jit-ed, with two
    operands and a scalar result; a ``torch.autograd.Function`` forward and
    forward+backward returning a number."""
    from jax.extend.core import Primitive
    from jax.interpreters import mlir
    empty = Primitive("interop_overhead_empty")
    empty.multiple_results = True
    empty.def_abstract_eval(lambda *avals: [jax.core.ShapedArray((), np.float64)])

    def lower(ctx, *args):
        results, _, _ = mlir.emit_python_callback(
            ctx, lambda *a: (np.zeros(()),), None, list(args), ctx.avals_in, ctx.avals_out,
            has_side_effect=False, returns_token=False)
        return results
    mlir.register_lowering(empty, lower)
    xj, aj = jnp.linspace(0.5, 1.0, 8), jnp.asarray(0.3)
    fj = jax.jit(lambda x, a: empty.bind(x, a)[0])
    out = {"jax jit, empty callback": lambda: jax.block_until_ready(fj(xj, aj))}
    if torch is not None:
        class Empty(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, a):
                return torch.from_numpy(np.zeros(()))

            @staticmethod
            def backward(ctx, g):
                return torch.from_numpy(np.zeros(8)), torch.from_numpy(np.zeros(()))
        xt, at = torch.linspace(0.5, 1.0, 8, dtype=torch.float64), torch.tensor(0.3).double()

        def empty_grad():
            xg, ag = xt.clone().requires_grad_(), at.clone().requires_grad_()
            Empty.apply(xg, ag).backward()
        out["torch Function forward, empty"] = lambda: Empty.apply(xt, at)
        out["torch Function forward+backward, empty"] = empty_grad
    return out


def measure(fns, rounds, calls):
    """{clock: {name: microseconds per call}}: best over rounds of the mean over ``calls``,
    in wall time and in this process's CPU time (all its threads). On a machine shared
    with other jobs the wall time also holds the waits for a core; the CPU time does not."""
    best = {"wall": {n: np.inf for n in fns}, "cpu": {n: np.inf for n in fns}}
    for fn in fns.values():
        fn()                                   # compile and warm up
    for _ in range(rounds):
        for name, fn in fns.items():
            n = calls if "eager grad" not in name else max(calls // 10, 5)
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                fn()
            w, c = time.perf_counter() - w0, time.process_time() - c0
            best["wall"][name] = min(best["wall"][name], w / n * 1e6)
            best["cpu"][name] = min(best["cpu"][name], c / n * 1e6)
    return best


def overheads(t):
    """Wrapper time minus what it runs in the engine, per wrapper variant. A jit-ed
    ``grad`` runs only the differentiated call: XLA drops the forward, whose outputs it
    does not use; ``value_and_grad``, and ``grad`` outside ``jit``, run both. PyTorch's
    forward+backward runs only the differentiated call (the forward sweep in ``forward``,
    the reverse in ``backward``)."""
    fwd, back = t["engine forward"], t["engine value_and_grad"]
    raw = "jax jit, callback calling the kernel"
    out = {raw: t[raw] - fwd,
           "jax eager forward": t["jax eager forward"] - fwd,
           "jax jit forward": t["jax jit forward"] - fwd,
           "jax eager grad": t["jax eager grad"] - fwd - back,
           "jax jit grad": t["jax jit grad"] - back,
           "jax jit value_and_grad": t["jax jit value_and_grad"] - fwd - back}
    if "torch forward" in t:
        out["torch forward"] = t["torch forward"] - fwd
        out["torch forward+backward"] = t["torch forward+backward"] - back
    return out


def report(rows, info, args):
    lines = ["# Calling compiled kernels from JAX and PyTorch: the cost over the kernel", "",
             f"Produced by `python experiments/interop_overhead.py --rounds {args.rounds} "
             f"--calls {args.calls}`: microseconds per call, best over rounds of the mean "
             "over the calls, every variant taking turns in each round; wall time and the "
             "process's CPU time (all threads). \"Over the engine\" subtracts the engine "
             "calls the variant makes (forward; value_and_grad's differentiated call; a "
             "jit-ed grad and torch's forward+backward only the latter: XLA drops the unused "
             "forward, torch's forward is the differentiated call's forward sweep).", "",
             "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    for name, row in rows.items():
        title = "what the frameworks' own mechanisms cost (empty callbacks)" \
            if name == "floors" else f"{name} (8 elements)"
        lines += ["", f"## {title}", "",
                  "| call | wall us | over the engine | CPU us | over the engine |",
                  "|---|---|---|---|---|"]
        for what in row["wall"]:
            cells = []
            for clock in ("wall", "cpu"):
                extra = row[f"{clock} overhead"].get(what)
                cells += [f"{row[clock][what]:.1f}", "" if extra is None else f"{extra:+.1f}"]
            lines.append(f"| {what} | " + " | ".join(cells) + " |")
    (RESULTS / "interop.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "interop.json").write_text(json.dumps({"machine": info, "kernels": rows},
                                                     indent=1) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=400)
    args = p.parse_args()
    info = machine(jax, adjoint.options)
    info["torch"] = getattr(torch, "__version__", None)
    rows = {}
    for name, (k, pure) in KERNELS.items():
        times = measure(variants(k, pure), args.rounds, args.calls)
        rows[name] = {**times, "wall overhead": overheads(times["wall"]),
                      "cpu overhead": overheads(times["cpu"])}
        for what in times["wall"]:
            print(f"{name:10s} {what:26s} wall {times['wall'][what]:9.1f} us  "
                  f"cpu {times['cpu'][what]:9.1f} us", flush=True)
    times = measure(floors(), args.rounds, args.calls)
    rows["floors"] = {**times, "wall overhead": {}, "cpu overhead": {}}
    for what in times["wall"]:
        print(f"{'floors':10s} {what:38s} wall {times['wall'][what]:9.1f} us  "
              f"cpu {times['cpu'][what]:9.1f} us", flush=True)
    info["load_average_at_end"] = load_average()
    report(rows, info, args)


if __name__ == "__main__":
    main()
