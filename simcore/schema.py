"""The configuration schema: one dataclass per config group (types and defaults).

``simcore.config`` registers them in Hydra's ConfigStore; model modules import
``ObsConfig`` from here without pulling in Hydra.
"""
from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING


@dataclass
class ObsConfig:
    """Synthetic observations: every_k-th grid point, every_m-th step, noise sigma."""
    every_k: int = 2
    every_m: int = 1
    sigma: float = 0.01
    noise: bool = True


@dataclass
class EngineConfig:
    """Engine settings (adjoint.options). None/0/"": the engine's own default."""
    memory_budget: Optional[str] = None     # e.g. "512MiB": store vs recompute in reverse mode
    threads: int = 0                        # 0: all cores (OMP_NUM_THREADS when > 0)
    cache_dir: str = ""                     # "": $SIMCORE_CACHE_DIR or ~/.cache/simcore
    cflags: Optional[List[str]] = None      # None: the engine default (-O3 -march=native ...)
    compiler: Optional[str] = None          # None: $CC or cc
    reassociate: bool = False               # True: sums regrouped like -ffast-math (faster
    #                                         recurrences; results within rounding only)


@dataclass
class DeviceConfig:
    name: str = "cpu"


@dataclass
class ForwardConfig:
    name: str = "forward"
    output_every: int = 0                   # write the state every n steps; 0: first and last


@dataclass
class CalibrateConfig:
    name: str = "calibrate"
    max_iter: int = 200
    ftol: float = 1e-12                     # scipy L-BFGS-B ftol (relative cost decrease)
    gtol: float = 1e-8                      # scipy L-BFGS-B gtol (projected gradient)
    memory: int = 30                        # L-BFGS-B maxcor: corrections kept
    perturbation: float = 0.1               # relative std of the first guess around the truth
    log_every: int = 1
    plot: bool = True


@dataclass
class GradcheckConfig:
    name: str = "gradcheck"
    eps: float = 1e-2                       # first step, relative to the point's scale
    halvings: int = 6                       # eps, eps/2, ... (at least 5)
    slope_tol: float = 0.1                  # pass when |slope - 2| <= slope_tol
    perturbation: float = 0.1               # check at the truth * (1 + perturbation * N(0,1))
    dot_product: bool = True                # also the tangent/adjoint dot-product test
    dot_tol: float = 1e-12                  # pass when the relative mismatch <= dot_tol
    wrt: List[str] = field(default_factory=lambda: ["parameters", "initial_state"])


@dataclass
class CompileConfig:
    name: str = "compile"
    # build the kernels these tasks use (forward; vjp: the adjoint; jvp: tangent-linear)
    tasks: List[str] = field(default_factory=lambda: ["forward", "calibrate", "gradcheck",
                                                      "assimilate"])


@dataclass
class AssimilateConfig:
    name: str = "assimilate"
    cycles: int = 100                       # analysis cycles (windows), one after another
    window: int = 4                         # observation times per window (obs.every_m apart)
    method: str = "lbfgs"                   # lbfgs (full nonlinear J) | gauss_newton (incremental)
    max_iter: int = 100                     # L-BFGS iterations / CG iterations per outer loop
    outer_loops: int = 10                   # gauss_newton: at most this many relinearisations
    gtol: float = 1e-3                      # stop when |grad J| / |grad J0| < gtol
    memory: int = 10                        # L-BFGS corrections kept
    b_std: Optional[float] = None           # background error std; null: the model's
    b_length: Optional[float] = None        # its correlation length [grid points]; null: model's
    stations: int = 0                       # 0: grid (obs.every_k); n: n interpolated stations
    burn_in: int = 20                       # cycles left out of the time-mean RMSE
    log_every: int = 1                      # log every n-th cycle
    plot: bool = True


@dataclass
class Config:
    model: Any = MISSING
    task: Any = MISSING
    device: DeviceConfig = field(default_factory=DeviceConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    seed: int = 0
    resume: bool = False                    # continue from this config's checkpoint, if any
    checkpoint_dir: str = "checkpoints"     # where resumable tasks keep their state


TASK_SCHEMAS = {"forward": ForwardConfig, "calibrate": CalibrateConfig,
                "gradcheck": GradcheckConfig, "assimilate": AssimilateConfig}
TASK_SCHEMAS["compile"] = CompileConfig


def unknown_keys(node, schema, prefix="") -> list:
    """Keys of the config ``node`` that its ``schema`` dataclass does not declare.

    Hydra rejects misspelt keys except ones forced in with ``+key=value``; tasks call
    this so that those fail too instead of being silently ignored.
    """
    import dataclasses
    declared = {f.name: f for f in dataclasses.fields(schema)}
    out = []
    for key in node:
        if key not in declared:
            out.append(prefix + str(key))
            continue
        sub = _dataclass_of(declared[key])
        if sub is not None and hasattr(node[key], "keys"):
            out += unknown_keys(node[key], sub, f"{prefix}{key}.")
    return out


def _dataclass_of(f):
    import dataclasses
    if dataclasses.is_dataclass(f.type):
        return f.type
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return type(value)
    return None
