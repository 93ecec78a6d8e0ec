"""The only place that knows the order of the stages; every artefact is kept.

    [Python source] --frontend--> SDFG --validate--> --loop products as BLAS--> --fuse maps-->
                    --bounds--> proofs + runtime checks
    SDFG --autodiff--> recording forward + reverse sweep, or the tangent-linear SDFG
    SDFG(s) --codegen--> C source --runtime--> shared library loaded through cffi

Each stage's artefacts are also kept on disk (runtime/artefacts.py), keyed by the
kernel's fingerprint, so a warm start skips every stage but loading the library.
"""
from dataclasses import dataclass

from .analysis.blas import products
from .analysis.bounds import index_checks
from .analysis.fusion import fuse
from .analysis.parallel import parallelize
from .autodiff import Adjoint, differentiate, linearize
from .codegen import COUNTS, Layout, generate_module, translation_units
from .frontend import fingerprint, parse
from .runtime import CompiledModule, build_module, load
from .runtime.artefacts import cached, digest
from .options import options
from .runtime.blas import blas
from .runtime.cuda import build_cuda
from .sdfg import SDFG, validate
from .sdfg.arithmetic import reassociating


@dataclass(frozen=True)
class Forward:
    sdfg: SDFG
    checks: tuple          # IndexChecks evaluated once per distinct sizes
    layout: Layout
    source: str
    module: CompiledModule
    key: str = ""          # what derived artefacts are cached under


@dataclass(frozen=True)
class Backward:
    adjoint: Adjoint
    layout: Layout
    source: str
    module: CompiledModule


def lower_forward(src, name, types) -> Forward:
    key = digest("forward", fingerprint(src), name, sorted(types.items(), key=str))
    return cached(key, Forward, _staged(_lower_forward, src, name, types, key))


def _staged(stage, *args):
    """``stage(*args)`` to run with floating-point values built and printed as the option
    ``reassociate`` says (sdfg/arithmetic.py)."""
    def run():
        with reassociating(options.reassociate):
            return stage(*args)
    return run


def _lower_forward(src, name, types, key):
    sdfg = validate(parse(src, name, types))                      # Python AST -> SDFG
    if options.device == "cpu" and blas():      # without BLAS a MatMul is a serial loop nest
        sdfg = validate(products(sdfg))                           # loop nests -> MatMul
    sdfg = validate(fuse(sdfg))
    checks = tuple(index_checks(sdfg))                            # prove indices in bounds
    layout = Layout(sdfg.symbols, tuple(sdfg.containers.values()))
    return Forward(sdfg, checks, layout, *_build(layout, [sdfg], checks, (), name), key)


def _build(layout, entries, checks, counted, name):
    """(C source, loaded module) for the entry SDFGs: SDFG -> C -> shared library
    (device='cuda': SDFG -> CUDA -> nvcc, runtime/cuda.py)."""
    if options.device == "cuda":
        return build_cuda(layout, entries, checks, counted, name)
    entries = [validate(parallelize(sdfg)) for sdfg in entries]     # mark parallel loops
    library = blas()
    source = generate_module(layout, entries, checks, counted, library)
    libraries = library.flags if library and library.used(source) else ()
    path = build_module(source, name, libraries, parts=translation_units(source))
    return source, load(path, COUNTS * len(counted))


def lower_backward(forward: Forward, wrt, outputs) -> Backward:
    """Entry points 3r, 3r+1, 3r+2: forward, record and reverse of region r."""
    return cached(digest("backward", forward.key, sorted(wrt), sorted(outputs)), Backward,
                  _staged(_lower_backward, forward, wrt, outputs))


def _lower_backward(forward, wrt, outputs):
    adj = differentiate(forward.sdfg, wrt, outputs)               # SDFG -> reverse-mode SDFGs
    entries = [s for r in adj.regions for s in (r.forward, r.record, r.reverse)]
    for sdfg in entries:
        validate(sdfg)
    layout = Layout(forward.sdfg.symbols, tuple(adj.containers.values()))
    counted = [r.record for r in adj.regions]
    return Backward(adj, layout, *_build(layout, entries, forward.checks, counted,
                                         forward.sdfg.name + "_grad"))


@dataclass(frozen=True)
class Tangent:
    sdfg: SDFG
    varied: frozenset
    layout: Layout
    source: str
    module: CompiledModule


def lower_tangent(forward: Forward, wrt) -> Tangent:
    return cached(digest("tangent", forward.key, sorted(wrt)), Tangent,
                  _staged(_lower_tangent, forward, wrt))


def _lower_tangent(forward, wrt):
    sdfg, varied = linearize(forward.sdfg, wrt)                  # SDFG -> tangent-linear SDFG
    validate(sdfg)
    layout = Layout(sdfg.symbols, tuple(sdfg.containers.values()))
    return Tangent(sdfg, varied, layout, *_build(layout, [sdfg], forward.checks, (),
                                                  sdfg.name + "_jvp"))
