"""The only place that knows the order of the stages; every artefact is kept.

    [Python source] --frontend--> SDFG --validate--> --loop products as BLAS--> --fuse maps-->
                    --bounds--> proofs + runtime checks
    SDFG --autodiff--> recording forward + reverse sweep, or the tangent-linear SDFG
    SDFG(s) --schedule--> loops, maps, branches with their decisions (threads, tape slots,
                          SIMD sums; GPU kernels)
            --codegen--> C or CUDA source (printing the decisions) --runtime--> shared
                          library loaded through cffi

Each stage's artefacts are also kept on disk (runtime/artefacts.py), keyed by the
kernel's fingerprint and the ``Target``, so a warm start skips every stage but loading the
library. The target (device, compiler and flags, BLAS, reassociation) is passed to every
stage that depends on it; no stage reads the engine's options.
"""
from dataclasses import dataclass, replace

from .analysis.blas import paired, products
from .analysis.bounds import index_checks
from .analysis.contraction import contract
from .analysis.fusion import fuse
from .autodiff import Adjoint, differentiate, linearize
from .autodiff.reverse import adjoint_name
from .codegen import COUNTS, Layout, generate_module, translation_units
from .codegen.printer import vector_math
from .frontend import fingerprint, holds, parse
from .runtime import CompiledModule, build_module, load
from .schedule import schedule
from .runtime.build import Toolchain
from .runtime.artefacts import add_variant, cached, digest, variants
from .options import Target
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
    target: Target = None  # what it was built for; its derivatives are built for the same
    key: str = ""          # what derived artefacts are cached under


@dataclass(frozen=True)
class Backward:
    adjoint: Adjoint
    layout: Layout
    source: str
    module: CompiledModule


def lower_forward(src, name, types, target: Target, sizes=None) -> Forward:
    """The forward for ``types``, lowered at the call's ``sizes`` (symbol name -> value)
    where the types leave a decision open (``SDFG.decisions``). Its artefact is cached
    under the types and those decisions; the decisions met before are on disk
    (``variants``), so a warm start finds its entry without lowering."""
    base = digest(target, "forward", fingerprint(src), name, sorted(types.items(), key=str))
    known = [d for d in variants(base) if holds(d, sizes or {})] if sizes else [()]
    if known:
        key = digest(target, base, known[0])
        return cached(key, Forward, _staged(target, _lower_forward, src, name, types, sizes,
                                            target, key))
    sdfg = _staged(target, parse, src, name, types, sizes)()
    add_variant(base, sdfg.decisions)
    key = digest(target, base, sdfg.decisions)
    return cached(key, Forward, _staged(target, _lower_forward, src, name, types, sizes,
                                        target, key, sdfg))


def _staged(target, stage, *args):
    """``stage(*args)`` to run with floating-point values built and printed as the target
    says (``reassociate``, sdfg/arithmetic.py; ``vector_math``, codegen/printer.py)."""
    def run():
        with reassociating(target.reassociate), vector_math(target.vector_math):
            return stage(*args)
    return run


def _library(target):
    """The linked Library (runtime/blas.py) when the target calls BLAS/LAPACK, else None."""
    return blas() if target.device == "cpu" and target.blas else None


def _lower_forward(src, name, types, sizes, target, key, sdfg=None):
    sdfg = validate(sdfg or parse(src, name, types, sizes))       # Python AST -> SDFG
    if _library(target):                # without BLAS a MatMul is a serial loop nest
        sdfg = validate(products(sdfg))                           # loop nests -> MatMul
    sdfg = validate(fuse(sdfg))
    checks = tuple(index_checks(sdfg))                            # prove indices in bounds
    # temporaries within one point of a map -> its scalars (the differentiated SDFG
    # stays whole: reverse mode contracts its own entries)
    entries, containers, _ = _contracted([sdfg], sdfg.containers, _kept(sdfg), target)
    layout = Layout(sdfg.symbols, tuple(containers.values()))
    return Forward(sdfg, checks, layout, *_build(layout, entries, checks, (), name, target),
                   target, key)


def _kept(sdfg, adjoints=()):
    """What the sweeps read or seed from outside the entry points: arguments, returned
    values and (``adjoints``: their names) their adjoints."""
    kept = {a.name for a in sdfg.arguments} | set(sdfg.returns)
    return frozenset(kept | {adjoint_name(n) for n in kept if adjoint_name(n) in adjoints})


def _contracted(entries, containers, kept, target):
    """analysis.contraction on the CPU (CUDA's kernels keep their temporaries)."""
    if target.device != "cpu":
        return [validate(e) for e in entries], dict(containers), frozenset()
    entries, containers, names = contract(entries, containers, kept)
    return [validate(e) for e in entries], containers, names


def _build(layout, entries, checks, counted, name, target):
    """(C source, loaded module) for the entry SDFGs: SDFG -> C -> shared library
    (device='cuda': SDFG -> CUDA -> nvcc, runtime/cuda.py)."""
    if target.device == "cpu":          # two products reading one matrix: one pass
        entries = [validate(paired(sdfg)) for sdfg in entries]
    entries = [validate(schedule(sdfg, target.device)) for sdfg in entries]  # how each runs
    if target.device == "cuda":
        return build_cuda(layout, entries, checks, counted, name, target)
    library = _library(target)
    source = generate_module(layout, entries, checks, counted, library)
    libraries = library.flags if library and library.used(source) else ()
    path = build_module(source, name, libraries, Toolchain(target.compiler, target.cflags),
                        parts=translation_units(source))
    return source, load(path, COUNTS * len(counted))


def lower_backward(forward: Forward, wrt, outputs) -> Backward:
    """Entry points 3r, 3r+1, 3r+2: forward, record and reverse of region r."""
    target = forward.target
    return cached(digest(target, "backward", forward.key, sorted(wrt), sorted(outputs)),
                  Backward, _staged(target, _lower_backward, forward, wrt, outputs))


def _lower_backward(forward, wrt, outputs):
    adj = differentiate(forward.sdfg, wrt, outputs, forward.target.device)  # reverse mode
    entries = [s for r in adj.regions for s in (r.forward, r.record, r.reverse)]
    entries, containers, names = _contracted(entries, adj.containers,
                                             _kept(forward.sdfg, adj.containers),
                                             forward.target)
    regions = tuple(replace(r, forward=f, record=c, reverse=v) for r, (f, c, v) in
                    zip(adj.regions, zip(entries[0::3], entries[1::3], entries[2::3])))
    adj = replace(adj, regions=regions, containers=containers, assigned_first={
        n: box for n, box in adj.assigned_first.items() if n not in names})
    layout = Layout(forward.sdfg.symbols, tuple(containers.values()))
    counted = [r.record for r in adj.regions]
    return Backward(adj, layout, *_build(layout, entries, forward.checks, counted,
                                         forward.sdfg.name + "_grad", forward.target))


@dataclass(frozen=True)
class Tangent:
    sdfg: SDFG
    varied: frozenset
    layout: Layout
    source: str
    module: CompiledModule


def lower_tangent(forward: Forward, wrt) -> Tangent:
    target = forward.target
    return cached(digest(target, "tangent", forward.key, sorted(wrt)), Tangent,
                  _staged(target, _lower_tangent, forward, wrt))


def _lower_tangent(forward, wrt):
    sdfg, varied = linearize(forward.sdfg, wrt)                  # SDFG -> tangent-linear SDFG
    validate(sdfg)
    layout = Layout(sdfg.symbols, tuple(sdfg.containers.values()))
    return Tangent(sdfg, varied, layout, *_build(layout, [sdfg], forward.checks, (),
                                                  sdfg.name + "_jvp", forward.target))
