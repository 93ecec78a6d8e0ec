"""The only place that knows the order of the stages; every artefact is kept.

    [Python source] --frontend--> SDFG --validate--> --bounds--> proofs + runtime checks
    SDFG --autodiff--> recording forward + reverse sweep, or the tangent-linear SDFG
    SDFG(s) --codegen--> C source --runtime--> shared library loaded through cffi
"""
from dataclasses import dataclass

from .analysis.bounds import index_checks
from .analysis.parallel import parallelize
from .autodiff import Adjoint, differentiate, linearize
from .codegen import COUNTS, Layout, generate_module
from .frontend import parse
from .runtime import CompiledModule, build_module, load
from .runtime.blas import blas
from .sdfg import SDFG, validate


@dataclass(frozen=True)
class Forward:
    sdfg: SDFG
    checks: tuple          # IndexChecks evaluated once per distinct sizes
    layout: Layout
    source: str
    module: CompiledModule


@dataclass(frozen=True)
class Backward:
    adjoint: Adjoint
    layout: Layout
    source: str
    module: CompiledModule


def lower_forward(src, name, types) -> Forward:
    sdfg = validate(parse(src, name, types))                     # Python AST -> SDFG
    checks = tuple(index_checks(sdfg))                            # prove indices in bounds
    layout = Layout(sdfg.symbols, tuple(sdfg.containers.values()))
    return Forward(sdfg, checks, layout, *_build(layout, [sdfg], checks, (), name))


def _build(layout, entries, checks, counted, name):
    """(C source, loaded module) for the entry SDFGs: SDFG -> C -> shared library."""
    entries = [validate(parallelize(sdfg)) for sdfg in entries]     # mark parallel loops
    dgemm, libraries = blas() or (None, ())
    source = generate_module(layout, entries, checks, counted, dgemm)
    if dgemm not in source:
        libraries = ()
    return source, load(build_module(source, name, libraries), COUNTS * len(counted))


def lower_backward(forward: Forward, wrt, outputs) -> Backward:
    """Entry points 3r, 3r+1, 3r+2: forward, record and reverse of region r."""
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
    sdfg, varied = linearize(forward.sdfg, wrt)                  # SDFG -> tangent-linear SDFG
    validate(sdfg)
    layout = Layout(sdfg.symbols, tuple(sdfg.containers.values()))
    return Tangent(sdfg, varied, layout, *_build(layout, [sdfg], forward.checks, (),
                                                  sdfg.name + "_jvp"))
