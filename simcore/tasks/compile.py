"""task=compile: build every kernel a configuration needs into the compile cache.

Batch jobs then only load compiled modules: compute nodes need no compiler, and a
thousand array tasks starting at once do not each wait on the compile lock. The kernels
are built through the same calls the tasks make (one step of the model's kernel on its
initial state), so the cache keys are exactly the ones the tasks will look up:

    forward   the model's kernel                   (every task)
    vjp       its adjoint w.r.t. every float argument (calibrate, gradcheck, assimilate)
    jvp       its tangent-linear model w.r.t. the parameters and the state (gradcheck's
              dot-product test) and w.r.t. the state alone (4D-Var's inner loops)

Modules depend on the engine settings (``engine.cflags``, ``engine.compiler``) and,
with ``-march=native`` flags, on the CPU: run it with the jobs' settings, on the kind of
node the jobs run on (a first Slurm job the array depends on), or choose portable
flags. Writes summary.json: every module with its cache path and whether this run
compiled it or found it.
"""
import logging
import time

import numpy as np

from adjoint import jvp, vjp
from adjoint.api import Kernel
from adjoint.frontend import RESULT
from adjoint.runtime.build import cache_dir

from ..errors import ConfigError
from ..io import write_json
from ..state import copy_state

log = logging.getLogger("simcore")

# What each task builds: "forward", "vjp", and tangents by what they vary.
NEEDS = {
    "forward": ("forward",),
    "calibrate": ("forward", "vjp"),
    "gradcheck": ("forward", "vjp", "jvp:parameters+state"),
    "assimilate": ("forward", "vjp", "jvp:state"),
}


def needed(tasks) -> list:
    """The kinds of module ``tasks`` use, in a fixed order, each once."""
    unknown = sorted(set(tasks) - set(NEEDS))
    if unknown:
        raise ConfigError(f"task.tasks: no kernels known for {unknown}; known: "
                          f"{', '.join(NEEDS)}")
    kinds = [k for t in tasks for k in NEEDS[t]]
    return sorted(set(kinds), key=kinds.index)


def compile_kernels(run) -> dict:
    model = run.model
    kinds = needed(list(run.cfg.task.tasks))
    folder = cache_dir()
    log.info("compile: %s for %s into %s", ", ".join(kinds), ", ".join(run.cfg.task.tasks),
             folder)
    # A fresh Kernel: the model's own one memoises what it compiled earlier in this
    # process, under the engine options of that time (another cache_dir, other flags).
    fresh = Kernel(model.kernel.__wrapped__)
    modules = []
    for kind in kinds:
        before = set(folder.glob("*.so"))
        start = time.perf_counter()
        paths = BUILD[kind.split(":")[0]](model, fresh, kind)
        seconds = time.perf_counter() - start
        for path in paths:
            compiled = path not in before
            modules.append({"kind": kind, "module": path.name, "path": str(path),
                            "compiled": compiled, "seconds": seconds})
            log.info("compile: %-22s %s (%s, %.2f s)", kind, path.name,
                     "compiled" if compiled else "already cached", seconds)
    summary = {**run.header(), "cache_dir": str(folder), "tasks": list(run.cfg.task.tasks),
               "modules": modules, "compiled": sum(m["compiled"] for m in modules),
               "outputs": ["summary.json"], "wall_time_s": run.elapsed()}
    write_json(summary, run.path("summary.json"))
    log.info("compile: %d modules ready (%d compiled now) in %.2f s", len(modules),
             summary["compiled"], summary["wall_time_s"])
    return summary


def _args(model):
    """The kernel's arguments for one step from the initial state at the truth."""
    return model.kernel_args(copy_state(model.initial_state()), model.truth(), 1)


def _forward(model, kernel, kind):
    spec = kernel.specialize(_args(model))
    return [spec.forward.module.path]


def _vjp(model, kernel, kind):
    args = _args(model)
    vjp(kernel, *args)                             # as Twin calls it
    spec = kernel.specialize(args)
    outputs = set(spec.written_arrays) | ({RESULT} if spec.sdfg.result else set())
    return [spec.backward(spec.floating, outputs).module.path]   # the one vjp just built


def _jvp(model, kernel, kind):
    args = _args(model)
    state = [v.name for v in model.variables()]
    names = state if kind == "jvp:state" else [p.name for p in model.parameters()] + state
    values = dict(zip(_argument_names(model), args))
    jvp(kernel, args, {n: np.zeros_like(np.asarray(values[n], dtype=float)) for n in names})
    spec = kernel.specialize(args)
    return [spec.tangent(names).module.path]


def _argument_names(model):
    import inspect
    return list(inspect.signature(model.kernel.py_func).parameters)


BUILD = {"forward": _forward, "vjp": _vjp, "jvp": _jvp}
