"""task=forward: run the model once; write state.nc and summary.json."""
import logging
import time

import numpy as np
import xarray as xr

from ..chain import advance
from ..io import write_json, write_netcdf
from ..state import arrays, parameter_dataset, state_dataset
from ..terminal import progress

log = logging.getLogger("simcore")


def output_steps(total: int, every: int) -> list:
    """Steps at which the state is written: 0, every, 2*every, ..., total."""
    if every <= 0:
        return [0, total]
    return sorted(set(range(0, total, every)) | {total})


def forward(run) -> dict:
    model, cfg = run.model, run.cfg.task
    params = model.truth()
    ds = state_dataset(model, model.initial_state())
    state = arrays(ds, [v.name for v in model.variables()])   # views of ds: updated in place
    steps = output_steps(model.steps, int(cfg.output_every))
    frames, returned, done = [{n: a.copy() for n, a in state.items()}], None, 0
    t0 = time.perf_counter()
    model.kernel.specialize(model.kernel_args(state, params, 1))   # compile (or load) first
    compile_s, t0 = time.perf_counter() - t0, time.perf_counter()
    with progress(model.steps, "forward", "step", leave=False) as bar:
        piece = -(-model.steps // 100) if bar.live else model.steps   # the bar moves by 1 %
        for k, target in enumerate(steps[1:], 1):
            while done < target:             # steps continue in place: pieces change nothing
                chunk = min(piece, target - done)
                returned = advance(model, state, params, chunk)
                bar.update(chunk)
                done += chunk
            frames.append({n: a.copy() for n, a in state.items()})
            log.info("forward: step %d/%d (%d/%d outputs)", done, model.steps, k,
                     len(steps) - 1)
    seconds = time.perf_counter() - t0
    dt = model.time().dt
    stacked = {n: np.stack([f[n] for f in frames]) for n in state}
    out = xr.merge([state_dataset(model, stacked, time=np.array(steps) * dt),
                    parameter_dataset(model, params)])
    write_netcdf(out, run.path("state.nc"), run.attrs(f"{model.name}: forward run"))
    summary = {**run.header(), "steps": model.steps, "output_steps": steps,
               "kernel_return": returned, "kernel_seconds": seconds, "compile_seconds": compile_s,
               "state": {n: _stats(a) for n, a in state.items()},
               "outputs": ["state.nc", "summary.json"], "wall_time_s": run.elapsed()}
    write_json(summary, run.path("summary.json"))
    log.info("forward: %d steps in %.4f s (+ %.2f s to compile or load the kernel); wrote %s",
             model.steps, seconds, compile_s, run.path("state.nc"))
    return summary


def _stats(a):
    return {"min": float(a.min()), "max": float(a.max()), "mean": float(a.mean())}
