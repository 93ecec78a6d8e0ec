"""Build many kernels' modules at once, one process per kernel, into the compile cache.

nvcc takes seconds per module and the GPU checks need hundreds (every corpus kernel's
forward, reverse-mode and tangent module, on the GPU and on the CPU), so they are built
in parallel first; the checks then load them from the cache. A job names a
``CorpusCase`` by module (in its ``CASES`` list or ``EXTRA`` dict: ``adjoint.corpus.loops``,
or a test's or experiment's module, importable from the caller's ``sys.path``) and case
name, so that fresh processes can find it.
"""
import concurrent.futures
import importlib
import multiprocessing
import os
import sys
import time


def _build(job):
    """In a fresh process: lower and build the case's modules for one device."""
    path, module, name, device, n, tangent = job
    sys.path[:0] = [p for p in path if p not in sys.path]
    import adjoint
    from adjoint.frontend import RESULT
    from adjoint.corpus import rng_for
    if device == "cuda-emulated":
        adjoint.configure(device="cuda", cuda_emulation=True)
    else:
        adjoint.configure(device=device)
    mod = importlib.import_module(module)
    cases = list(getattr(mod, "CASES", [])) + list(getattr(mod, "EXTRA", {}).values())
    case = {c.name: c for c in cases}[name]
    rng = rng_for(name)
    args = case.make_args(rng, n=n) if n else case.make_args(rng)
    start = time.perf_counter()
    spec = case.kernel.specialize(args)
    spec.backward(case.wrt, {RESULT})
    if tangent:
        spec.tangent(case.wrt)
    return name, device, time.perf_counter() - start


def build_all(jobs, workers=None, log=print):
    """Build every job's modules ((module, case name, device, n or None, tangent) each;
    device 'cpu', 'cuda' or 'cuda-emulated')
    in ``workers`` processes; returns the seconds it took. The processes inherit the
    environment (SIMCORE_CACHE_DIR), so the cache they fill is this process's."""
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    path = list(sys.path)           # the callers' modules (a test's, an experiment's)
    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")      # no CUDA state crosses a fork
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(_build, (path,) + tuple(job)) for job in jobs]
        for f in concurrent.futures.as_completed(futures):
            f.result()
    elapsed = time.perf_counter() - start
    log(f"built {len(jobs)} kernels' modules in {elapsed:.0f} s ({workers} processes)")
    return elapsed
