"""What a model declares: its dimensions, state variables, parameters and kernel.

A model is a small class: static facts (name, kernel, config dataclass) as class
attributes, everything that depends on the configuration (grid sizes, truth values)
as methods. ``simcore`` does the rest: xarray I/O, observations, costs, gradients.

    @register
    class Seidel(Model):
        name, Config, kernel = "seidel", SeidelConfig, seidel2d
        tiny = {"n": 8, "steps": 4}    # a run of well under a second (the tests use it)
        def dims(self): ...            # [Dim(...)]: grid and parameter dimensions
        def variables(self): ...       # [Variable(...)]: the state the kernel advances
        def parameters(self): ...      # [Parameter(...)]: what calibrate estimates
        def initial_state(self): ...   # {variable name: ndarray}
        def kernel_args(self, state, params, nsteps): ...   # the kernel's argument tuple

State variables and parameters are named like the kernel arguments that hold them,
so the engine's ``vjp`` cotangents map straight back onto them.
"""
import copy
import inspect
from dataclasses import dataclass, field
from typing import ClassVar, Optional

import numpy as np

from .errors import ConfigError, ModelError


@dataclass(frozen=True)
class Dim:
    """One dimension with its coordinate ``start + spacing * arange(size)`` and CF attrs."""
    name: str
    size: int
    units: str = "1"
    long_name: str = ""
    axis: Optional[str] = None          # CF axis: "X", "Y", "Z", "T" (grid dims only)
    spacing: float = 1.0
    start: float = 0.0

    def values(self) -> np.ndarray:
        return self.start + self.spacing * np.arange(self.size, dtype=np.float64)

    def attrs(self) -> dict:
        attrs = {"units": self.units, "long_name": self.long_name or self.name}
        if self.axis:
            attrs["axis"] = self.axis
        return attrs


@dataclass(frozen=True)
class Variable:
    """A state variable: one float64 array over ``dims`` that the kernel updates."""
    name: str
    dims: tuple
    units: str
    long_name: str
    standard_name: Optional[str] = None
    observed: bool = True               # part of the observation operator H

    def attrs(self) -> dict:
        attrs = {"units": self.units, "long_name": self.long_name}
        if self.standard_name:
            attrs["standard_name"] = self.standard_name
        return attrs


@dataclass
class Parameter:
    """A parameter calibrate can estimate.

    ``value`` is the truth of twin experiments; ``background`` the prior mean p_b (and
    first guess) when the model has one, otherwise calibrate perturbs the truth.
    ``prior_std`` is sigma_b of the prior term (None: no prior term);
    ``smoothness_std``, for fields, the prior std of differences between neighbours.
    """
    name: str
    dims: tuple
    value: np.ndarray
    units: str
    long_name: str
    bounds: Optional[tuple] = None
    prior_std: Optional[float] = None
    background: Optional[np.ndarray] = None
    smoothness_std: Optional[float] = None

    def __post_init__(self):
        self.value = np.require(np.asarray(self.value, dtype=np.float64), requirements="C")
        if self.background is not None:
            self.background = np.broadcast_to(
                np.asarray(self.background, dtype=np.float64), self.value.shape).copy()
        if self.value.ndim != len(self.dims):
            raise ModelError(f"parameter {self.name!r}: value has {self.value.ndim} "
                             f"dimensions but dims={self.dims}")

    def attrs(self) -> dict:
        attrs = {"units": self.units, "long_name": self.long_name}
        if self.bounds is not None:
            attrs["valid_min"], attrs["valid_max"] = map(float, self.bounds)
        if self.prior_std is not None:
            attrs["prior_std"] = float(self.prior_std)
        return attrs


@dataclass(frozen=True)
class TimeAxis:
    """The model's time: ``dt`` per kernel step, in ``units``."""
    dt: float = 1.0
    units: str = "1"
    long_name: str = "time step"


class Model:
    """Base class of every model; see the module docstring for what to define."""
    name: ClassVar[str] = ""
    Config: ClassVar[type] = None       # structured config dataclass (Hydra group model/)
    kernel: ClassVar = None             # an adjoint.kernel advancing the state nsteps steps
    description: ClassVar[str] = ""
    # Config values (dotted keys: "obs.every_m") for a run of well under a second: the
    # framework's tests run every task on every registered model with them.
    tiny: ClassVar[dict] = {}

    def __init__(self, cfg=None, seed: int = 0):
        self.cfg = cfg if cfg is not None else self.Config()
        self.seed = seed
        self._check()

    # ---- to define in a model --------------------------------------------------------
    def dims(self) -> list:
        raise NotImplementedError

    def variables(self) -> list:
        raise NotImplementedError

    def parameters(self) -> list:
        raise NotImplementedError

    def initial_state(self) -> dict:
        raise NotImplementedError

    def kernel_args(self, state: dict, params: dict, nsteps: int) -> tuple:
        raise NotImplementedError

    def time(self) -> TimeAxis:
        return TimeAxis()

    def periodic(self) -> tuple:
        """Names of the periodic dimensions (a ring: lorenz96's x). Data assimilation
        measures correlation distances and interpolates around them."""
        return ()

    def background_error(self) -> tuple:
        """(std, correlation length in grid points) of the background error B that
        task=assimilate assumes unless ``task.b_std``/``task.b_length`` are set. The
        default: a tenth of the initial state's RMS, correlated over 2 grid points."""
        x = np.concatenate([np.ravel(a) for a in self.initial_state().values()])
        rms = float(np.sqrt(np.mean(x * x))) if x.size else 0.0
        return (0.1 * rms if rms > 0 else 1.0), 2.0

    @property
    def steps(self) -> int:
        """Total number of kernel steps of one run (the model config's ``steps``)."""
        return int(self.cfg.steps)

    # ---- derived -----------------------------------------------------------------------
    def dim(self, name) -> Dim:
        for d in self.dims():
            if d.name == name:
                return d
        raise ModelError(f"model {self.name!r} has no dimension {name!r}; "
                         f"dimensions: {[d.name for d in self.dims()]}")

    def shape(self, dims) -> tuple:
        return tuple(self.dim(d).size for d in dims)

    def truth(self) -> dict:
        return {p.name: p.value.copy() for p in self.parameters()}

    def rng(self, purpose: int) -> np.random.Generator:
        """A generator for one purpose (0 initial state, 1 noise, 2 first guess, 3 checks)."""
        return np.random.default_rng([int(self.seed), purpose])

    def _check(self):
        """The config's values are allowed (simcore.schema); the declarations agree with
        each other and with the kernel's arguments."""
        from .validate import check_section
        problems = check_section(self.cfg, self.Config, "model.") if self.Config else []
        if problems:
            raise ConfigError("\n".join(problems))
        if self.kernel is None:
            raise ModelError(f"model {self.name!r} declares no kernel")
        args = set(inspect.signature(self.kernel.py_func).parameters)
        for item in [*self.variables(), *self.parameters()]:
            if item.name not in args:
                raise ModelError(f"model {self.name!r}: {item.name!r} is not an argument of "
                                 f"kernel {self.kernel.__name__}{sorted(args)}; name state "
                                 "variables and parameters like the kernel arguments")
            for d in item.dims:
                self.dim(d)
        for p in self.parameters():
            if p.value.shape != self.shape(p.dims):
                raise ModelError(f"parameter {p.name!r} has shape {p.value.shape}, its dims "
                                 f"{p.dims} give {self.shape(p.dims)}")

    def __repr__(self):
        return f"<simcore model {self.name!r}>"


def field_of(default):
    """A dataclass field whose default is a (mutable) copy of ``default``."""
    return field(default_factory=lambda: copy.deepcopy(default))
