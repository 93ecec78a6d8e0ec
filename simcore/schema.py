"""The configuration schema: one dataclass per config group (types, defaults, allowed
values and what each key means).

A key declared with :func:`option` carries what it allows (an :class:`Allowed`) and one
line of help; ``simcore.validate`` checks every value against the first before a task
runs, ``simcore show`` prints the second. ``simcore.config`` registers the dataclasses
in Hydra's ConfigStore; model modules import ``ObsConfig`` and ``option`` from here
without pulling in Hydra.
"""
import copy
import math
from dataclasses import MISSING as NO_DEFAULT, dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING


class Allowed:
    """What a config value may be: ``test(value, section)`` (``section``: the config node
    holding the key, for rules about a sibling) and the words for it ("at least 1"), or
    a function of the section giving them."""

    def __init__(self, text, test):
        self.text, self.test = text, test

    def describe(self, section=None) -> str:
        return self.text(section) if callable(self.text) else self.text

    def __call__(self, value, section) -> bool:
        try:
            return bool(self.test(value, section))
        except (TypeError, ValueError, OverflowError):
            return False


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def at_least(low) -> Allowed:
    return Allowed(f"at least {low}", lambda v, _: _number(v) and v >= low)


def above(low) -> Allowed:
    return Allowed(f"above {low}", lambda v, _: _number(v) and v > low)


def one_of(*choices) -> Allowed:
    return Allowed(f"one of {', '.join(map(str, choices))}", lambda v, _: v in choices)


def some_of(*choices) -> Allowed:
    """A non-empty list of distinct ``choices``."""
    return Allowed(f"a list of one or more of {', '.join(choices)}",
                   lambda v, _: len(v) > 0 and len(set(v)) == len(v)
                   and all(c in choices for c in v))


def interval(low=-math.inf) -> Allowed:
    """``[lo, hi]`` with ``low <= lo < hi``, finite."""
    text = "[low, high] with low < high" + ("" if low == -math.inf else f", low >= {low}")
    return Allowed(text, lambda v, _: len(v) == 2 and all(map(_number, v))
                   and low <= v[0] < v[1])


def below(sibling: str) -> Allowed:
    """At least 0 and below the value of another key of the same section."""
    def text(s):
        return f"from 0 to {sibling} - 1" + ("" if s is None else f" = {s[sibling] - 1}")
    return Allowed(text, lambda v, s: _number(v) and 0 <= v < s[sibling])


def matrix(rows: int, cols: int) -> Allowed:
    return Allowed(f"a {rows} x {cols} list of lists of numbers",
                   lambda v, _: len(v) == rows and all(len(r) == cols and all(map(_number, r))
                                                       for r in v))


def size() -> Allowed:
    """A memory size the engine reads: bytes or "512MiB", "2GB"; finite and above 0."""
    def test(v, _):
        from adjoint.autodiff.plan import parse_bytes
        return parse_bytes(v) > 0
    return Allowed("a size such as 512MiB or 2GB (bytes, above 0)", test)


def optional(rule: Allowed) -> Allowed:
    return Allowed(lambda s: f"null or {rule.describe(s)}", lambda v, s: v is None or rule(v, s))


def option(default, allowed: Allowed = None, help: str = ""):
    """A dataclass field with its default, what it allows and what it means."""
    meta = {"allowed": allowed, "help": help}
    if isinstance(default, (list, dict)) or hasattr(default, "__dataclass_fields__"):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def field_default(f):
    """A dataclass field's default value (its factory's value for mutable ones)."""
    if f.default_factory is not NO_DEFAULT:
        return f.default_factory()
    return None if f.default is NO_DEFAULT else f.default


POSITIVE = above(0)
STEPS = at_least(1)


@dataclass
class ObsConfig:
    """Synthetic observations: every_k-th grid point, every_m-th step, noise sigma."""
    every_k: int = option(2, STEPS, "observe every k-th grid point along each axis "
                                    "(from k // 2)")
    every_m: int = option(1, STEPS, "observe after every m-th model step")
    sigma: float = option(0.01, POSITIVE, "observation error std (R = sigma^2 I), in the "
                                          "state's units")
    noise: bool = option(True, help="add N(0, sigma^2) noise to the synthetic observations")


@dataclass
class EngineConfig:
    """Engine settings (adjoint.options). None/0/"": the engine's own default."""
    memory_budget: Optional[str] = option(None, optional(size()),
                                          "what reverse mode may keep (store vs recompute), "
                                          "e.g. 512MiB; null: no limit")
    threads: int = option(0, at_least(0), "OpenMP threads; 0: the CPUs this process may "
                                          "use, 1 for small models")
    cache_dir: str = option("", help="compiled kernels; empty: $SIMCORE_CACHE_DIR, else "
                                     "~/.cache/simcore")
    cflags: Optional[List[str]] = option(None, help="C compiler flags; null: -O3 "
                                                    "-march=native ... (adjoint/options.py)")
    compiler: Optional[str] = option(None, help="C compiler; null: $CC, else cc")
    reassociate: bool = option(False, help="true: sums regrouped like -ffast-math (faster "
                                           "recurrences; results within rounding only)")
    vector_math: bool = option(False, help="true: exp, expm1, tanh as the engine's own, which "
                                           "vectorise (within 1-3 ulps, not bitwise Python's)")


@dataclass
class DeviceConfig:
    name: str = option("cpu", one_of("cpu", "cuda"), "where kernels run: cpu, or cuda "
                                                     "(nvcc and a GPU)")


def every_nth(what="iteration"):
    return option(1, STEPS, f"log every n-th {what}")


def plots():
    return option(True, help="write the plots (needs matplotlib: pip install -e \".[plot]\")")


@dataclass
class ForwardConfig:
    name: str = "forward"
    output_every: int = option(0, at_least(0), "also write the state every n steps; 0: "
                                               "the first and last state only")


@dataclass
class CalibrateConfig:
    name: str = "calibrate"
    max_iter: int = option(200, STEPS, "L-BFGS-B iterations at most")
    ftol: float = option(1e-12, at_least(0), "stop when the relative cost decrease is "
                                             "below this")
    gtol: float = option(1e-8, at_least(0), "stop when the projected gradient is below this")
    memory: int = option(30, STEPS, "L-BFGS-B corrections kept (maxcor)")
    perturbation: float = option(0.1, at_least(0), "first guess = truth * (1 + perturbation "
                                                   "* N(0,1)), unless the model has a "
                                                   "background")
    posterior_rank: int = option(20, at_least(0), "posterior std of the parameters: Lanczos "
                                                  "eigenpairs above 64 parameters (fewer: "
                                                  "exact); 0: none")
    log_every: int = every_nth()
    plot: bool = plots()


@dataclass
class GradcheckConfig:
    name: str = "gradcheck"
    eps: float = option(1e-2, POSITIVE, "first step of the Taylor test, relative to the "
                                        "point's scale")
    halvings: int = option(6, at_least(5), "eps, eps/2, ..., eps/2^halvings")
    slope_tol: float = option(0.1, POSITIVE, "pass when the fitted log-log slope is "
                                             "2 +- slope_tol")
    perturbation: float = option(0.1, at_least(0), "check at the truth * (1 + perturbation "
                                                   "* N(0,1)), as calibrate's first guess")
    dot_product: bool = option(True, help="also the dot-product test of the tangent-linear "
                                          "(jvp) against the adjoint (vjp)")
    dot_tol: float = option(1e-12, POSITIVE, "pass when the dot-product test's relative "
                                             "mismatch is at most this")
    wrt: List[str] = option(["parameters", "initial_state"],
                            some_of("parameters", "initial_state"),
                            "what the Taylor tests differentiate with respect to")


COMPILE_TASKS = ("forward", "calibrate", "gradcheck", "assimilate")


@dataclass
class CompileConfig:
    name: str = "compile"
    tasks: List[str] = option(list(COMPILE_TASKS), some_of(*COMPILE_TASKS),
                              "build the kernels these tasks use (forward, vjp, jvp)")


def up_to(sibling: str) -> Allowed:
    """From 1 to the value of another key of the same section."""
    def text(s):
        return f"from 1 to {sibling}" + ("" if s is None else f" = {s[sibling]}")
    return Allowed(text, lambda v, s: _number(v) and v == int(v) and 1 <= v <= s[sibling])


@dataclass
class AssimilateConfig:
    name: str = "assimilate"
    cycles: Optional[int] = option(100, optional(STEPS),
                                   "analysis cycles (windows); null: as many as obs.file's "
                                   "observation times fill")
    window: int = option(4, STEPS, "observation times per window (the window ends at the "
                                   "last; the first windows grow from the initial time)")
    shift: Optional[int] = option(None, optional(up_to("window")),
                                  "observation times the window advances per cycle; null: "
                                  "window (windows one after another)")
    newest_only: bool = option(True, help="true: each observation in the first window that "
                                          "reaches it only (DAPPER's Var4D); false: all of "
                                          "a window's observations in every window")
    method: str = option("lbfgs", one_of("lbfgs", "gauss_newton"),
                         "lbfgs: L-BFGS on the nonlinear J; gauss_newton: incremental "
                         "(tangent-linear + adjoint inner loops)")
    max_iter: int = option(100, STEPS, "L-BFGS iterations / CG iterations per outer loop, "
                                       "per cycle")
    outer_loops: int = option(10, STEPS, "gauss_newton: at most this many relinearisations "
                                         "per cycle")
    gtol: float = option(1e-3, POSITIVE, "stop when |grad J| / |grad J0| is below this")
    memory: int = option(10, STEPS, "L-BFGS corrections kept")
    b_covariance: str = option("gaussian", one_of("gaussian", "climatology"),
                               "B = b_std^2 times: gaussian, a Gaussian correlation of "
                               "b_length grid points (0: I); climatology, the covariance "
                               "of the truth run")
    b_std: Optional[float] = option(None, optional(POSITIVE),
                                    "background error std (sqrt of DAPPER's xB); null: the "
                                    "model's (climatology: 1)")
    b_length: Optional[float] = option(None, optional(at_least(0)),
                                       "its Gaussian correlation length in grid points; "
                                       "null: the model's")
    stations: int = option(0, at_least(0), "0: observe every model.obs.every_k-th grid "
                                           "point; n: n seeded random stations, interpolated")
    burn_in_time: Optional[float] = option(None, optional(at_least(0)),
                                           "model time after which the statistics are "
                                           "time-meaned; null: a fifth of the run")
    checkpoint_every: int = option(1, STEPS, "save the checkpoint every n-th cycle (and "
                                             "after the last)")
    log_every: int = every_nth("cycle")
    plot: bool = plots()


def each_up_to(sibling: str) -> Allowed:
    """A non-empty list of numbers above 0 and at most another key's value."""
    def text(s):
        return f"a list of numbers above 0 and at most {sibling}" + \
            ("" if s is None else f" = {s[sibling]}")
    return Allowed(text, lambda v, s: len(v) > 0 and all(_number(x) and 0 < x <= s[sibling]
                                                         for x in v))


@dataclass
class TrainClosureConfig:
    name: str = "train_closure"
    mode: str = option("all", one_of("none", "offline", "online", "all"),
                       "offline: fit the closure to the truth's subgrid tendencies; online: "
                       "through rollouts of the hybrid model; all: both; every run also "
                       "scores the hybrid with no closure (none)")
    hidden: int = option(16, STEPS, "units in each of the network's two tanh layers")
    substeps: int = option(5, STEPS, "the hybrid's time step, in truth steps (model.dt)")
    train_time: float = option(20.0, POSITIVE, "model time of the truth's training segment")
    test_time: float = option(20.0, POSITIVE, "model time of the held-out segment "
                                              "(forecasts, long-run statistics)")
    offline_iters: int = option(2000, at_least(0), "offline: Adam iterations")
    online_iters: int = option(300, at_least(0), "online: Adam iterations")
    batch: int = option(32, STEPS, "minibatch: training states (offline), rollouts (online)")
    rollout: int = option(10, STEPS, "online: hybrid steps per rollout")
    lr: float = option(1e-3, POSITIVE, "Adam's learning rate")
    online_init: str = option("random", one_of("random", "offline"),
                              "online training starts from the seeded random weights (as "
                              "offline does) or from offline's result")
    forecasts: int = option(50, STEPS, "forecasts from held-out truth states")
    forecast_time: float = option(2.0, POSITIVE, "model time of each forecast")
    leads: List[float] = option([0.1, 0.2, 0.5, 1.0, 2.0], each_up_to("forecast_time"),
                                "lead times of summary.json's forecast RMSE")
    vpt_threshold: float = option(0.5, POSITIVE, "valid prediction time: the first time "
                                                 "RMSE / the truth's std exceeds this")
    acf_time: float = option(2.0, POSITIVE, "autocorrelation up to this lag (model time)")
    bins: int = option(50, at_least(2), "histogram bins")
    log_every: int = option(100, STEPS, "log every n-th Adam iteration")
    plot: bool = plots()


@dataclass
class ObsFileConfig:
    file: Optional[str] = option(None, help="an observation file (docs/framework.md): "
                                            "calibrate and assimilate read it instead of "
                                            "observing a twin truth")


@dataclass
class BackgroundFileConfig:
    file: Optional[str] = option(None, help="a state file: assimilate's first background "
                                            "(its state at time 0); null: the twin's draw, "
                                            "or the model's initial state")


@dataclass
class TruthFileConfig:
    file: Optional[str] = option(None, help="a state file: the truth assimilate scores "
                                            "against (and B's climatology)")


@dataclass
class Config:
    model: Any = MISSING
    task: Any = MISSING
    device: DeviceConfig = field(default_factory=DeviceConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    obs: ObsFileConfig = field(default_factory=ObsFileConfig)
    background: BackgroundFileConfig = field(default_factory=BackgroundFileConfig)
    truth: TruthFileConfig = field(default_factory=TruthFileConfig)
    seed: int = option(0, at_least(0), "seeds the initial state, the noise, the first guess "
                                       "and the checks")
    resume: bool = option(False, help="continue from this configuration's checkpoint, if any")
    checkpoint_dir: str = option("checkpoints", Allowed("a folder name (not empty)",
                                                        lambda v, _: bool(str(v).strip())),
                                 "where resumable tasks keep their state")


TASK_SCHEMAS = {"forward": ForwardConfig, "calibrate": CalibrateConfig,
                "gradcheck": GradcheckConfig, "assimilate": AssimilateConfig,
                "compile": CompileConfig, "train_closure": TrainClosureConfig}
# tasks that run on some models only (every other task runs on every model)
TASK_MODELS = {"train_closure": ("lorenz96_2scale",)}


def runs_on(task: str, model: str) -> bool:
    return model in TASK_MODELS.get(task, (model,))
