"""Neural closure of two-scale Lorenz-96, offline against online, and the pure-JAX peer.

    python experiments/closure.py                       # the recorded run (task=train_closure_long)
    python experiments/closure.py --task train_closure  # the task's defaults (well under a minute)

1. ``task=train_closure task.mode=all`` exactly as ``python run.py model=lorenz96_2scale
   task=train_closure_long`` runs it: the truth (K = 8, J = 32, F = 20, h = 1, b = c = 10,
   dt = 0.001), the hybrid (one-scale model plus a local network of two tanh layers,
   RK4 every 5 truth steps) with no closure, trained offline (regression on the
   diagnosed subgrid tendency) and online (through 10-step rollouts of the compiled
   hybrid, gradients from the engine), scored on the held-out truth.
2. Time per training step, in one run, on one core: the engine's forward rollout
   (``rollout_loss``) and training step (``value_and_grad`` to the weights), with the
   default options and with ``vector_math=True`` (exp/tanh vectorised), and the same
   hybrid in pure JAX (experiments/closure_jax.py: ``lax.scan`` over steps, ``vmap``
   over the minibatch, jitted, compiled ahead of time), on the same minibatch and
   weights, measured in turns (median of ``--repeat``); JAX's loss and gradient are
   checked against the engine's first. Skipped when JAX is not installed.

Writes experiments/results/closure.{json,md} and the task's plots as
experiments/results/closure_{rmse,statistics,loss}.png; the task's other files go to a
temporary folder unless --keep DIR is given.
"""
import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
# the timing sizes: the task's (K from the model), and a larger ring and longer rollouts
SIZES = [{"K": 8, "hidden": 16, "batch": 32, "rollout": 10},
         {"K": 40, "hidden": 16, "batch": 32, "rollout": 50}]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="train_closure_long",
                   help="task config: train_closure_long (recorded) or train_closure")
    p.add_argument("--repeat", type=int, default=30, help="timed calls of each step")
    p.add_argument("--keep", help="write the task's files here")
    p.add_argument("--no-write", action="store_true", help="do not write experiments/results")
    return p.parse_args(argv)


def one_core():
    """The engine and JAX on one core of those this process may use."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false").strip()
    return cpus[0]


def run_task(task, outdir):
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("adjoint").setLevel(logging.WARNING)
    from simcore.config import compose
    from simcore.tasks import run_task as run
    cfg = compose(["model=lorenz96_2scale", f"task={task}", "engine.threads=1"])
    return cfg, run(cfg, outdir, argv=["run.py", "model=lorenz96_2scale", f"task={task}"])


def batch(size, seed=0):
    """Weights and a minibatch of the given sizes (random, on the attractor's scale)."""
    from simcore.models.lorenz96_hybrid import init_weights
    rng = np.random.default_rng(seed)
    w = init_weights(size["hidden"], rng)
    X0 = 3.6 + 5.0 * rng.standard_normal((size["batch"], size["K"]))
    Xt = 3.6 + 5.0 * rng.standard_normal((size["batch"], size["rollout"], size["K"]))
    return w, X0, Xt


def timing(size, repeat, scales=(3.6, 5.0, -5.0, 3.0), F=20.0, dt=0.005) -> dict:
    """Forward rollout and training step of the engine (with the default options, and
    with VECTOR) and of JAX, all in turns."""
    import adjoint
    from adjoint import value_and_grad
    from simcore.models.lorenz96_hybrid import WEIGHTS, rollout_loss
    w, X0, Xt = batch(size)
    args = (X0, Xt, *(w[n] for n in WEIGHTS), *scales, F, dt)
    step = value_and_grad(rollout_loss, WEIGHTS)
    builds = {"engine": {"vector_math": False}, "vector": {"vector_math": True}}
    out = {**size, "steps_per_call": size["batch"] * size["rollout"]}
    calls, results = {}, {}
    for name, settings in builds.items():
        adjoint.configure(**settings)
        results[name] = step(*args)
        calls[f"{name}_forward"] = (settings, lambda: rollout_loss(*args))
        calls[f"{name}_step"] = (settings, lambda: step(*args))
    adjoint.configure(**builds["engine"])
    loss, grads = results["engine"]
    out["vector_loss_rel_diff"] = abs(results["vector"][0] - loss) / abs(loss)
    out["vector_grad_rel_diff"] = max(float(np.max(np.abs(g - h)) / np.max(np.abs(g)))
                                      for g, h in zip(grads, results["vector"][1]))
    try:
        from experiments import closure_jax
    except ImportError as exc:
        out["jax"] = f"skipped: {exc}"
    else:
        import jax
        fns, jargs = closure_jax.compiled(w, X0, Xt, scales, F, dt)
        jloss, jgrad = fns["step"](*jargs)
        out["jax_version"] = jax.__version__
        out["jax_loss_rel_diff"] = abs(float(jloss) - loss) / abs(loss)
        out["jax_grad_rel_diff"] = max(float(np.max(np.abs(np.asarray(jgrad[n]) - g)))
                                       / float(np.max(np.abs(g))) for n, g in zip(WEIGHTS, grads))
        calls["jax_forward"] = (None, lambda: fns["forward"](*jargs).block_until_ready())
        calls["jax_step"] = (None, lambda: jax.block_until_ready(fns["step"](*jargs)))
    seconds = {k: [] for k in calls}
    for _ in range(repeat + 1):                       # the first round warms up
        for k, (settings, f) in calls.items():
            if settings is not None:
                adjoint.configure(**settings)
            t0 = time.perf_counter()
            f()
            seconds[k].append(time.perf_counter() - t0)
    adjoint.configure(**builds["engine"])
    out.update({f"{k}_s": float(np.median(v[1:])) for k, v in seconds.items()})
    for name in builds:
        out[f"{name}_step_over_forward"] = out[f"{name}_step_s"] / out[f"{name}_forward_s"]
        if "jax_step_s" in out:
            out[f"jax_step_over_{name}_step"] = out["jax_step_s"] / out[f"{name}_step_s"]
    return out


def markdown(record) -> str:
    s, sc = record["summary"], record["summary"]["scores"]
    leads = list(next(iter(sc.values()))["rmse"])
    lines = [f"# Neural closure of two-scale Lorenz-96: offline vs online ({record['date']})",
             "", f"`python experiments/closure.py --task {record['task']}` on {record['host']}"
             f" (one core), commit {record['commit']}; {record['wall_s']:.0f} s.", "",
             f"Truth K = 8, J = 32, F = 20, h = 1, b = c = 10, dt = 0.001; hybrid step "
             f"{s['hybrid_dt']:g}, {s['parameters']} weights (two tanh layers of "
             f"{record['config']['hidden']}); {s['train_states']} training states, "
             f"{s['test_states']} held out. Online: {record['config']['online_iters']} Adam "
             f"steps of {record['config']['batch']} rollouts of {record['config']['rollout']} "
             f"steps; offline: {record['config']['offline_iters']} steps of "
             f"{record['config']['batch']} states. {record['config']['forecasts']} forecasts "
             f"from held-out states. VPT: the first lead time at which RMSE / the truth's std "
             f"({s['climatological_std']:.3f}) exceeds {s['vpt_threshold']:g} (mean over the "
             f"forecasts). Long run: the hybrid over the whole held-out segment from its "
             f"first state; the histogram distance is Hellinger's (0: equal).", "",
             "| closure | " + " | ".join(f"RMSE @{t}" for t in leads)
             + " | VPT mean | VPT median | mean | std | histogram dist. | ACF RMSE |",
             "|---" * (len(leads) + 7) + "|"]
    for m, v in sc.items():
        lines.append(f"| {m} | " + " | ".join(f"{v['rmse'][t]:.3f}" for t in leads)
                     + f" | {v['vpt_mean']:.3f} | {v['vpt_median']:.3f} | {v['mean']:.3f} | "
                       f"{v['std']:.3f} | {v['hellinger']:.3f} | {v['acf_rmse']:.3f} |")
    lines.append("| truth | " + " | ".join("" for _ in leads)
                 + f" | | | {s['truth']['mean']:.3f} | {s['truth']['std']:.3f} | | |")
    lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in record["plots"]), "",
              "## Time per training step (one core, median of "
              f"{record['repeat']} calls in turns)", "",
              "A training step is the forward rollout and the gradient of its loss to the "
              "weights (`value_and_grad`); JAX's loss and gradient equal the engine's to "
              + ", ".join(f"{t['jax_grad_rel_diff']:.0e}" for t in record["timing"]
                          if "jax_grad_rel_diff" in t)
              + " (relative). vector: the engine with `vector_math=True` (exp and tanh as "
              "its own vectorised functions, within 3 ulps of the C library's; the loss moves "
              "by " + ", ".join(f"{t['vector_loss_rel_diff']:.0e}" for t in record["timing"])
              + ", the gradient by "
              + ", ".join(f"{t['vector_grad_rel_diff']:.0e}" for t in record["timing"])
              + " relative).", "",
              "| K | hidden | batch | rollout | engine forward (ms) | engine step (ms) | "
              "step / forward | vector forward | vector step | step / forward | JAX forward | "
              "JAX step | JAX step / engine step | JAX step / vector step |",
              "|---" * 14 + "|"]
    for t in record["timing"]:
        ms = lambda k: f"{1e3 * t[k]:.2f}" if k in t else t.get("jax", "")   # noqa: E731
        lines.append(f"| {t['K']} | {t['hidden']} | {t['batch']} | {t['rollout']} | "
                     f"{ms('engine_forward_s')} | {ms('engine_step_s')} | "
                     f"{t['engine_step_over_forward']:.2f} | {ms('vector_forward_s')} | "
                     f"{ms('vector_step_s')} | {t['vector_step_over_forward']:.2f} | "
                     f"{ms('jax_forward_s')} | {ms('jax_step_s')} | "
                     f"{t.get('jax_step_over_engine_step', float('nan')):.2f} | "
                     f"{t.get('jax_step_over_vector_step', float('nan')):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    opts = parse(argv)
    core = one_core()
    sys.path.insert(0, str(ROOT))
    from simcore.io import git_commit
    commit = git_commit()                # before this run rewrites the recorded results
    t0 = time.perf_counter()
    outdir = Path(opts.keep) if opts.keep else Path(tempfile.mkdtemp(prefix="closure_"))
    cfg, summary = run_task(opts.task, outdir)
    plots = []
    if not opts.no_write:
        for name in ("rmse", "statistics", "loss"):
            if (outdir / f"{name}.png").exists():
                dest = RESULTS / f"closure_{name}.png"
                shutil.copyfile(outdir / f"{name}.png", dest)
                plots.append(str(dest.relative_to(ROOT)))
    times = [timing(size, opts.repeat) for size in SIZES]
    from omegaconf import OmegaConf
    record = {"date": datetime.date.today().isoformat(), "task": opts.task,
              "host": f"{platform.processor() or platform.machine()}, core {core}",
              "commit": commit, "config": OmegaConf.to_container(cfg.task),
              "summary": summary, "timing": times, "repeat": opts.repeat, "plots": plots,
              "wall_s": time.perf_counter() - t0}
    text = markdown(record)
    print(text)
    if not opts.no_write:
        from simcore.io import write_json
        write_json(record, RESULTS / "closure.json")
        (RESULTS / "closure.md").write_text(text)
    if not opts.keep:
        shutil.rmtree(outdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
