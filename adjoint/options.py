"""Engine settings: one object that Hydra fills in ``run.py`` and users can set directly."""
import os
from dataclasses import dataclass, field, fields


@dataclass
class Options:
    """``compiler``/``cflags``: how generated C is built; ``cache_dir``: where modules are
    kept (default: ``$SIMCORE_CACHE_DIR``, else ``~/.cache/simcore``); ``device``: 'cpu' or
    'cuda' (``nvcc``/``cuda_flags``/``cuda_arch`` build the CUDA; ``cuda_emulation`` runs
    the generated CUDA as C++ on the CPU, for testing the code generator without a GPU);
    ``tape_limit_bytes``: the most tape a recording forward may grow to (while loops);
    ``memory_budget``/``memory_policy``: how reverse mode keeps forward values
    (see autodiff/plan.py)."""
    compiler: str = field(default_factory=lambda: os.environ.get("CC", "cc"))
    # -ffp-contract=off: no fused multiply-adds, so that the forward, recording and tangent
    # entry points (different code around the same expressions) round identically.
    # -fno-split-loops: the code splits its loops where it pays (gathered stencil adjoints);
    # GCC splitting the thin edges that test which terms apply doubles compile time.
    # -fno-trapping-math: the generated code never reads the floating-point exception flags,
    # so GCC may compute both sides of a select; without it, and without AVX-512's masks,
    # GCC 12 left loops with a ?: or && scalar (a masked mean over 400k points 20x slower
    # than NumPy on AVX2). Values do not change: same bits on nan, inf and subnormals.
    cflags: tuple = ("-O3", "-march=native", "-std=c99", "-ffp-contract=off", "-fno-math-errno",
                     "-fno-trapping-math", "-fno-split-loops", "-fopenmp")
    threads: int = 0                    # OpenMP threads for parallel loops (0: all cores)
    cache_dir: str = ""
    device: str = "cpu"
    tape_limit_bytes: int = 4 * 2**30
    memory_budget: object = None        # bytes, "512MiB", or None (no limit: store all)
    memory_policy: str = "ilp"          # ilp, store_all, recompute_all, revolve
    revolve_snapshots: int = 0          # snapshots for memory_policy="revolve"
    blas: bool = True                   # matrix products through OpenBLAS when installed
    # False: values as Python computes them (docs/kernel-language.md); True: sums may be
    # regrouped and constants folded, like -ffast-math (faster recurrences such as
    # Gauss-Seidel's; equal to rounding for finite values without cancellation only)
    reassociate: bool = False
    # True: exp, expm1 and tanh are the engine's own (codegen/helpers.py: VECTOR_MATH),
    # which vectorise, within 1-3 ulps of the C library's and the same bits on every
    # machine; False: the C library's, bitwise Python's math (docs/architecture.md)
    vector_math: bool = False
    nvcc: str = field(default_factory=lambda: os.environ.get("NVCC", "nvcc"))
    cuda_flags: tuple = ("-O3", "--fmad=false")    # no fused multiply-adds, as cflags
    cuda_arch: str = ""                 # e.g. "sm_90"; "": the compute capability of the GPU
    cuda_emulation: bool = False        # device="cuda" runs on the CPU (tests, no GPU needed)


options = Options()


@dataclass(frozen=True)
class Target:
    """What the generated code is built for: the options that change a compiled module.
    Every cache of compiled code keys on it (a kernel's specialisations in process, the
    artefacts on disk), so a change of any of them gives new modules; threads, memory
    and cache settings change no code and are not in it."""
    device: str
    compiler: str
    cflags: tuple
    blas: bool
    reassociate: bool = False
    vector_math: bool = False
    cuda: tuple = ()        # (nvcc, cuda_flags, cuda_arch, cuda_emulation) on device="cuda"


def target() -> Target:
    """The Target of the current options: one object per distinct options (a kernel's
    call cache compares it by identity on every call; building one took 0.8 us)."""
    key = (options.device, options.compiler, options.cflags, options.blas, options.reassociate,
           options.vector_math, options.nvcc, options.cuda_flags, options.cuda_arch,
           options.cuda_emulation)
    try:
        return _targets[key]
    except KeyError:
        return _targets.setdefault(key, _target())
    except TypeError:               # an option set to a list: not a key, built each time
        return _target()


def _target():
    cuda = (options.nvcc, tuple(options.cuda_flags), options.cuda_arch,
            bool(options.cuda_emulation)) if options.device != "cpu" else ()
    return Target(options.device, options.compiler, tuple(options.cflags), bool(options.blas),
                  bool(options.reassociate), bool(options.vector_math), cuda)


_targets = {}


def set_options(**changes):
    """Change engine options (``adjoint.configure`` also checks that a CUDA target is
    usable); returns the values they had."""
    known = {f.name for f in fields(Options)}
    for key, value in changes.items():
        if key not in known:
            raise TypeError(f"unknown engine option {key!r}; known: {sorted(known)}")
        if key == "device" and value not in DEVICES:
            raise ValueError(f"device {value!r} is not available; this build supports "
                             f"{', '.join(map(repr, DEVICES))}")
    saved = {key: getattr(options, key) for key in changes}
    for key, value in changes.items():
        setattr(options, key, tuple(value) if key in ("cflags", "cuda_flags") else value)
    return saved


DEVICES = ("cpu", "cuda")
CUDA_SETTINGS = {"device", "nvcc", "cuda_emulation"}
