"""Engine settings: one object that Hydra fills in ``run.py`` and users can set directly."""
import os
from dataclasses import dataclass, field, fields


@dataclass
class Options:
    """``compiler``/``cflags``: how generated C is built; ``cache_dir``: where modules are
    kept (default: ``$SIMCORE_CACHE_DIR``, else ``~/.cache/simcore``); ``device``: 'cpu';
    ``tape_limit_bytes``: the most tape a recording forward may grow to (while loops);
    ``memory_budget``/``memory_policy``: how reverse mode keeps forward values
    (see autodiff/plan.py)."""
    compiler: str = field(default_factory=lambda: os.environ.get("CC", "cc"))
    # -ffp-contract=fast: fused multiply-adds, which strict -std=c99 would turn off
    cflags: tuple = ("-O3", "-march=native", "-std=c99", "-ffp-contract=fast", "-fno-math-errno",
                     "-fopenmp")
    threads: int = 0                    # OpenMP threads for parallel loops (0: all cores)
    cache_dir: str = ""
    device: str = "cpu"
    tape_limit_bytes: int = 4 * 2**30
    memory_budget: object = None        # bytes, "512MiB", or None (no limit: store all)
    memory_policy: str = "ilp"          # ilp, store_all, recompute_all, revolve
    revolve_snapshots: int = 0          # snapshots for memory_policy="revolve"
    blas: bool = True                   # matrix products through OpenBLAS when installed


options = Options()


def configure(**changes):
    """Change engine options: ``adjoint.configure(cflags=("-O2",), cache_dir="/scratch/k")``."""
    known = {f.name for f in fields(Options)}
    for key, value in changes.items():
        if key not in known:
            raise TypeError(f"unknown engine option {key!r}; known: {sorted(known)}")
        if key == "device" and value != "cpu":
            raise ValueError(f"device {value!r} is not available; this build supports 'cpu'")
        setattr(options, key, tuple(value) if key == "cflags" else value)
    return options
