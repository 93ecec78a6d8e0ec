"""Runner over checkouts of public scientific code: plain NumPy functions, unchanged, compiled
by the engine (issue #20, deliverable 3: code of the kind the field writes, beyond NPBench).

    python experiments/realcode.py --checkout dapper=PATH --checkout pyhpc=PATH ...
    python experiments/realcode.py --checkout ... --cases Lorenz96.dxdt,evolve  # some
                                                   # (--update: merge them into the results)
    python experiments/realcode.py --checkout dapper=PATH --commit dapper=SHA   # not a git tree
    python experiments/realcode.py --list          # the cases and where they come from

A checkout is a copy of one of the repositories in COLLECTIONS (``git clone URL PATH``); the
functions' code is imported from it at run time and nothing of it is copied here (licences
and honesty). What this file holds is ours: which functions to try (CASES: module, the
function as a user would hand it to ``adjoint.kernel``, and how to build its inputs: shapes,
dtypes, value ranges, which arguments are integers, from a seed per case). Where a
checkout's modules import packages the engine does not need (matplotlib, DAPPER's tools),
install them somewhere and give ``--pythonpath DIR`` (appended to ``sys.path``; matplotlib
runs headless; benchpress' modules need pkg_resources, from setuptools < 81). A module
that parses its command line when imported gets the case's ``argv``. Cases of
collections without a ``--checkout`` are left out.

Per case, in a subprocess of its own (``--timeout`` seconds), as experiments/npbench.py
measures an NPBench kernel (its Child does the work): forward against the original on
copies of the inputs (every array argument afterwards and the return value, relative
error within FWD_RTOL); for float inputs and float outputs, ``adjoint.vjp`` with random
cotangents against central differences of the ORIGINAL along random directions; times on
one core. Failures are classified by exception and message; a result that differs without
an error is "WRONG". Writes ``realcode.{json,md}`` to ``--out`` (experiments/results),
with each checkout's commit and the machine; the markdown's hand-written section (from
NOTES on) is kept when the runner rewrites the file.
"""
import argparse
import dataclasses
import importlib
import inspect
import json
import os
import pathlib
import re
import sys
import tempfile
import time
import zlib
from typing import Callable

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from experiments import npbench, npbench_report  # noqa: E402
from experiments.bench_timing import machine, run_on_one_core  # noqa: E402

RESULTS = ROOT / "experiments" / "results"
NOTES = "## Notes"        # from this heading on, realcode.md is written by hand

COLLECTIONS = {
    "dapper": ("https://github.com/nansencenter/DAPPER",
               "data-assimilation toy models (`dapper/mods`): tendencies, steps, tangent-linear "
               "models"),
    "pyhpc": ("https://github.com/dionhaefner/pyhpc-benchmarks",
              "ocean-model routines of Veros in plain NumPy: equation of state, isoneutral "
              "mixing, turbulent kinetic energy"),
    "pythran": ("https://github.com/serge-sans-paille/numpy-benchmarks",
                "NumPy kernels gathered from Q&A sites, books and papers: PDE, image, "
                "particles, statistics"),
    "finitevolume": ("https://github.com/pmocz/finitevolume-python",
                     "compressible Euler equations, finite volumes on a periodic grid "
                     "(`np.roll`)"),
    "sph": ("https://github.com/pmocz/sph-python", "smoothed-particle hydrodynamics of a star"),
    "shallowwater": ("https://github.com/dionhaefner/shallow-water",
                     "shallow-water model on an Arakawa C grid (teaching code)"),
    "nbody": ("https://github.com/pmocz/nbody-python",
              "gravitational N-body: all-pairs accelerations and energies"),
    "mhd": ("https://github.com/pmocz/constrainedtransport-python",
            "ideal magnetohydrodynamics, finite volumes with constrained transport "
            "(`np.roll`, face-centred fields)"),
    "springs": ("https://github.com/pmocz/springnetwork-python",
                "a network of springs: scatter-adds over index arrays, reflecting walls"),
    "pic": ("https://github.com/pmocz/pic-python",
            "1-D particle-in-cell plasma: cloud-in-cell deposits (np.bincount), a sparse "
            "Poisson solve"),
    "filterpy": ("https://github.com/rlabbe/filterpy",
                 "Kalman filtering: predict/update steps, the RTS smoother, the unscented "
                 "transform, Gaussian statistics"),
    "benchpress": ("https://github.com/bh107/benchpress",
                   "Bohrium's NumPy benchmarks: Rosenbrock, Black-Scholes, Gaussian "
                   "elimination, LU, magnetic field extrapolation, a sea-ice model"),
}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str             # the table's row
    checkout: str         # a key of COLLECTIONS
    module: str           # dotted, importable with the checkout on sys.path
    func: str             # evaluated in the module's namespace: what a user hands to kernel()
    inputs: Callable      # numpy Generator -> the arguments
    outputs: tuple = ()   # arguments that are outputs although the original may not change them
    no_gradient: str = ""  # why the gradient is not checked
    held: tuple = ()       # (inputs the gradient check does not move, why)
    argv: tuple = ()       # the command line a module parses when it is imported


# ------------------------------------------------------------------------ the inputs

def normal(r, *shape, loc=0.0, scale=1.0):
    return loc + scale * r.standard_normal(shape)


def uniform(r, lo, hi, *shape):
    return r.uniform(lo, hi, shape)


def mask(r, *shape):
    """A land/water mask as the ocean codes keep it: 0.0 / 1.0, mostly water."""
    return (r.random(shape) < 0.8).astype(np.float64)


OCEAN = (12, 10, 5)       # nx, ny, nz: the routines work inside a halo of two cells


def spacing(r, n):
    return uniform(r, 0.5, 1.5, n)


def isoneutral_inputs(r):
    """A stably stratified ocean without land, where the function is smooth: the slopes
    -drho/dx / min(0, drho/dz) are ~1e-3, where the taper varies. (Random masks and
    temperatures put the slopes' 1e-20 regulariser in the denominator, derivatives of
    1e20 that JAX's gradient shares and central differences cannot follow.)"""
    nx, ny, nz = OCEAN
    warmer_up = 10.0 + 2.0 * np.arange(nz)[:, None]                # k counts upwards
    return (*(np.ones(OCEAN) for _ in range(4)),                   # maskT, maskU, maskV, maskW
            spacing(r, nx), spacing(r, nx), spacing(r, ny), spacing(r, ny),  # dxt dxu dyt dyu
            spacing(r, nz), spacing(r, nz),                        # dzt, dzw
            uniform(r, 0.5, 1.0, ny), uniform(r, 0.5, 1.0, ny),    # cost, cosu
            normal(r, *OCEAN, 3, loc=35.0, scale=1e-3),            # salt
            warmer_up + normal(r, *OCEAN, 3, scale=1e-3),          # temp
            -np.cumsum(spacing(r, nz)),                            # zt
            uniform(r, 0.5, 1.5, *OCEAN), *(normal(r, *OCEAN) for _ in range(3)),  # K_iso, K_ii
            *(np.zeros((*OCEAN, 2, 2)) for _ in range(4)))         # Ai_ez, Ai_nz, Ai_bx, Ai_by


def tke_inputs(r):
    nx, ny, nz = OCEAN
    return (*(normal(r, *OCEAN, 3) for _ in range(3)),             # u, v, w
            *(mask(r, *OCEAN) for _ in range(3)),                  # maskU, maskV, maskW
            spacing(r, nx), spacing(r, nx), spacing(r, ny), spacing(r, ny),
            spacing(r, nz), spacing(r, nz), uniform(r, 0.5, 1.0, ny), uniform(r, 0.5, 1.0, ny),
            r.integers(0, nz, (nx, ny)),                           # kbot (int64)
            uniform(r, 0.5, 1.5, *OCEAN), uniform(r, 0.5, 1.5, *OCEAN),   # kappaM, mxl
            normal(r, *OCEAN), normal(r, nx, ny),                  # forc, forc_tke_surface
            uniform(r, 0.5, 1.5, *OCEAN, 3), normal(r, *OCEAN, 3))  # tke, dtke


def superbee_inputs(r):
    nx, ny, nz = OCEAN
    return (*(np.zeros(OCEAN) for _ in range(3)),                  # adv_fe, adv_fn, adv_ft
            normal(r, *OCEAN), *(normal(r, *OCEAN) for _ in range(3)),   # var, u, v, w
            mask(r, *OCEAN), spacing(r, nx), spacing(r, ny), spacing(r, nz),
            uniform(r, 0.5, 1.0, ny), uniform(r, 0.5, 1.0, ny), 1.0)


def tridiagonal(r):
    shape = (4, 4, 6)
    return (uniform(r, 0, 1, *shape), uniform(r, 3, 4, *shape), uniform(r, 0, 1, *shape),
            normal(r, *shape))


def masspoints(r, count=64):
    """wave()'s string of mass points, slightly displaced: positions now and before."""
    x = np.arange(count) * 1200.0 / count
    pos = np.stack([x, np.full(count, 200.0)], axis=1) + normal(r, count, 2, scale=0.1)
    return np.stack([pos, pos + normal(r, count, 2, scale=0.01)])


def euler_state(r, n=32):
    """rho, vx, vy, P of a perturbed Kelvin-Helmholtz state, cell size and gamma."""
    return (uniform(r, 1.0, 2.0, n, n), normal(r, n, n, scale=0.5),
            normal(r, n, n, scale=0.5), uniform(r, 2.0, 3.0, n, n))


def conserved(r, n=32, gamma=5 / 3):
    rho, vx, vy, P = euler_state(r, n)
    vol = (1.0 / n) ** 2
    return (rho * vol, rho * vx * vol, rho * vy * vol,
            (P / (gamma - 1) + 0.5 * rho * (vx ** 2 + vy ** 2)) * vol, gamma, vol)


def faces(r, n=32):
    left, right = euler_state(r, n), euler_state(r, n)
    return tuple(v for pair in zip(left, right) for v in pair) + (5 / 3,)


def stars(r, n=50):
    return normal(r, n, 3), normal(r, n, 3, scale=0.1)


def mhd_state(r, n=16):
    """rho, vx, vy, P (total pressure, above the magnetic 0.5 B^2) and cell-centred Bx, By."""
    return (uniform(r, 1.0, 2.0, n, n), normal(r, n, n, scale=0.5), normal(r, n, n, scale=0.5),
            uniform(r, 2.0, 3.0, n, n), normal(r, n, n, scale=0.5), normal(r, n, n, scale=0.5))


def mhd_faces(r, n=16):
    left, right = mhd_state(r, n), mhd_state(r, n)
    return tuple(v for pair in zip(left, right) for v in pair) + (5 / 3,)


def springs(r, rows=5, cols=4):
    """A grid of nodes joined to their right and lower neighbours: positions, velocities,
    the springs' end nodes (int64) and rest lengths slightly off the actual ones."""
    pos = np.stack(np.meshgrid(np.arange(cols), np.arange(rows)), -1).reshape(-1, 2) * 1.0
    pos += normal(r, rows * cols, 2, scale=0.05)
    node = np.arange(rows * cols).reshape(rows, cols)
    ci = np.concatenate([node[:, :-1].ravel(), node[:-1, :].ravel()])
    cj = np.concatenate([node[:, 1:].ravel(), node[1:, :].ravel()])
    return (pos, normal(r, rows * cols, 2), ci, cj, uniform(r, 0.9, 1.1, len(ci)),
            40.0, -0.1)


def sea(r, nl=6, nw=5):
    """wisp's four layers of sea water on an nl x nw grid: salinity, density, depths, ice
    cover, ice export, ice growth (either sign)."""
    return (uniform(r, 30, 36, nl, nw, 4), uniform(r, 1020, 1030, nl, nw, 4),
            uniform(r, 10, 100, 4), uniform(r, 0.1, 0.9, nl, nw), 0.5, normal(r, nl, nw))


def sea_heat(r, nl=6, nw=5):
    """temp()'s inputs: temperatures, density, depths, mass, heat capacity, ice cover,
    season (winter), ice thickness, ice export."""
    return (uniform(r, -1.5, 4, nl, nw, 4), uniform(r, 1020, 1030, nl, nw, 4),
            uniform(r, 10, 100, 4), uniform(r, 1e4, 1e5, nl, nw, 4),
            uniform(r, 3900, 4100, nl, nw, 4), uniform(r, 0.1, 0.9, nl, nw), 0,
            uniform(r, 0.2, 2.0, nl, nw), 0.5)


def plasma(r, count=200, cells=16, box=50.0):
    """Particle positions, the mesh, and getAcc's periodic gradient and Laplacian as the
    script builds them (SciPy CSR matrices)."""
    import scipy.sparse as sparse
    dx, e = box / cells, np.ones(cells)
    G = sparse.lil_matrix(sparse.spdiags(np.vstack((-e, e)), [-1, 1], cells, cells))
    G[0, cells - 1], G[cells - 1, 0] = -1, 1
    L = sparse.lil_matrix(sparse.spdiags(np.vstack((e, -2 * e, e)), [-1, 0, 1], cells, cells))
    L[0, cells - 1], L[cells - 1, 0] = 1, 1
    return (uniform(r, 0, box, count, 1), cells, box, 1.0, sparse.csr_matrix(G / (2 * dx)),
            sparse.csr_matrix(L / dx ** 2))


def spd(r, n, *batch):
    """Symmetric positive definite matrices (covariances)."""
    a = normal(r, *batch, n, n, scale=0.5)
    return a @ np.swapaxes(a, -1, -2) + np.eye(n)


def kalman_update(r):
    """x, P, z, R, H of a constant-velocity model in 2-D observed in position."""
    H = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    return normal(r, 4), spd(r, 4), normal(r, 2), spd(r, 2), H


def smoother(r, n=6):
    return normal(r, n, 4), spd(r, 4, n), np.eye(4) + normal(r, n, 4, 4, scale=0.1), spd(r, 4, n)


def sigma_points(r, n=3):
    """Julier's 2n + 1 sigma points of N(mu, P) with kappa = 3 - n: points and weights."""
    mu, L, kappa = normal(r, n), np.linalg.cholesky(spd(r, n)), 3.0 - n
    spread = np.sqrt(n + kappa) * L.T
    sigmas = np.vstack([mu, mu + spread, mu - spread])
    w = np.full(2 * n + 1, 0.5 / (n + kappa))
    w[0] = kappa / (n + kappa)
    return sigmas, w, w.copy(), spd(r, n)


def dominant(r, n=12):
    """A diagonally dominant matrix: elimination without pivoting stays well conditioned."""
    return uniform(r, 0, 1, n, n) + n * np.eye(n)


# ------------------------------------------------------------------------- the cases

D, P, T = "dapper", "pyhpc", "pythran"
FLOAT32 = "the original computes in float32: its central differences are noise"
BENCH = ("1*1",)           # benchpress' Benchmark reads a size from the command line
MASKS = ("0/1 land masks: the original jumps where one leaves 0 (the superbee limiter's "
         "where(|rj| < eps, eps, rj) divides by rj = difference * mask)")
CASES = [
    # DAPPER: toy models of data assimilation (module constants, tuple unpacking, np.roll,
    # helpers, closures, methods of a model object, rk4 over a lambda). Single states: on
    # 1-D arrays the `ens_compatible` decorator (x.T in, .T out, for ensembles) is a no-op
    Case("Lorenz63.dxdt", D, "dapper.mods.Lorenz63", "dxdt",
         lambda r: (normal(r, 3, scale=5.0) + [0.0, 0.0, 25.0],)),
    Case("Lorenz96.dxdt", D, "dapper.mods.Lorenz96", "dxdt",
         lambda r: (normal(r, 40, loc=8.0, scale=2.0),)),
    Case("Lorenz96.step", D, "dapper.mods.Lorenz96", "step",
         lambda r: (normal(r, 40, loc=8.0, scale=2.0), 0.0, 0.05)),
    Case("Lorenz96.d2x_dtdx", D, "dapper.mods.Lorenz96.extras", "d2x_dtdx",
         lambda r: (normal(r, 40, loc=8.0, scale=2.0),)),
    Case("LorenzUV.dxdt", D, "dapper.mods.LorenzUV", "model_instance().dxdt",
         lambda r: (normal(r, 8 * 33, scale=2.0),)),
    Case("VL20.dxdt", D, "dapper.mods.VL20", "model_instance().dxdt",
         lambda r: (normal(r, 36, scale=2.0),)),
    Case("LotkaVolterra.dxdt", D, "dapper.mods.LotkaVolterra", "dxdt",
         lambda r: (uniform(r, 0.1, 0.5, 4),)),
    Case("LotkaVolterra.d2x_dtdx", D, "dapper.mods.LotkaVolterra", "d2x_dtdx",
         lambda r: (uniform(r, 0.1, 0.5, 4),)),
    Case("DoublePendulum.dxdt", D, "dapper.mods.DoublePendulum", "dxdt",
         lambda r: (np.radians([130.0, 0.0, -10.0, 0.0]) + normal(r, 4, scale=0.1),)),
    Case("DoublePendulum.energy", D, "dapper.mods.DoublePendulum", "energy",
         lambda r: (np.radians([130.0, 0.0, -10.0, 0.0]) + normal(r, 4, scale=0.1),)),
    Case("Ikeda.step", D, "dapper.mods.Ikeda", "step",
         lambda r: (normal(r, 2), 0.0, 1.0)),
    Case("Lorenz05.dxdt", D, "dapper.mods.Lorenz05", "Model(M=240).dxdt",
         lambda r: (normal(r, 240, loc=3.0, scale=2.0),)),
    Case("KS.dxdt", D, "dapper.mods.KS", "Model().dxdt",
         lambda r: (normal(r, 128),)),
    # pyhpc-benchmarks: Veros' ocean routines (masks, halos, `or None` slice ends,
    # generators of slices, nested functions, LAPACK's tridiagonal solve)
    Case("eos.gsw_dHdT", P, "benchmarks.equation_of_state.eos_numpy", "gsw_dHdT",
         lambda r: (uniform(r, 1e-2, 10, *OCEAN), uniform(r, -12, 20, *OCEAN),
                    uniform(r, 0, 1000, 1, 1, OCEAN[2]))),
    Case("isoneutral_diffusion_pre", P, "benchmarks.isoneutral_mixing.isoneutral_numpy",
         "isoneutral_diffusion_pre", isoneutral_inputs,
         outputs=("K_11", "K_22", "K_33", "Ai_ez", "Ai_nz", "Ai_bx", "Ai_by")),
    Case("tke.integrate_tke", P, "benchmarks.turbulent_kinetic_energy.tke_numpy",
         "integrate_tke", tke_inputs, held=("maskU", "maskV", "maskW", MASKS)),
    Case("tke.adv_flux_superbee_wgrid", P, "benchmarks.turbulent_kinetic_energy.tke_numpy",
         "adv_flux_superbee_wgrid", superbee_inputs, outputs=("adv_fe", "adv_fn", "adv_ft"),
         held=("maskW", MASKS)),
    Case("tke.solve_tridiag", P, "benchmarks.turbulent_kinetic_energy.tke_numpy",
         "solve_tridiag", tridiagonal),
    # numpy-benchmarks (pythran's): small kernels as people post them
    Case("diffusion", T, "numpy_benchmarks.benchmarks.diffusion", "diffusion",
         lambda r: (uniform(r, 0, 1, 32, 32), np.zeros((32, 32)), 20), outputs=("u",)),
    Case("evolve", T, "numpy_benchmarks.benchmarks.evolve", "evolve",
         lambda r: (uniform(r, 0, 1, 64, 64), 0.1)),
    Case("grayscott", T, "numpy_benchmarks.benchmarks.grayscott", "grayscott",
         lambda r: (5, 0.16, 0.08, 0.04, 0.06, uniform(r, 0, 1, 280, 280),
                    uniform(r, 0, 1, 280, 280)), no_gradient=FLOAT32),
    Case("harris", T, "numpy_benchmarks.benchmarks.harris", "harris",
         lambda r: (normal(r, 64, 64),)),
    Case("laplacien", T, "numpy_benchmarks.benchmarks.laplacien", "laplacien",
         lambda r: (normal(r, 32, 32, 3),)),
    Case("wave.physics", T, "numpy_benchmarks.benchmarks.wave", "physics",
         lambda r: (masspoints(r), 1.0 / (300 * 60), 15, 32), outputs=("masspoints",)),
    Case("hasting", T, "numpy_benchmarks.benchmarks.hasting", "hasting",
         lambda r: (uniform(r, 0, 1, 3), *uniform(r, 0, 1, 7))),
    Case("lstsqr", T, "numpy_benchmarks.benchmarks.lstsqr", "lstsqr",
         lambda r: (uniform(r, 0, 1, 1000), uniform(r, 0, 1, 1000))),
    Case("multiple_sum", T, "numpy_benchmarks.benchmarks.multiple_sum", "multiple_sum",
         lambda r: (uniform(r, 0, 1, 30, 30),)),
    Case("periodic_dist", T, "numpy_benchmarks.benchmarks.periodic_dist", "periodic_dist",
         lambda r: (*(uniform(r, 0, 5, 50) for _ in range(3)), 4, True, True, True)),
    Case("slowparts", T, "numpy_benchmarks.benchmarks.slowparts", "slowparts",
         lambda r: (4, 3, normal(r, 8, 5, 3), normal(r, 4, 5, 3), normal(r, 4, 8),
                    normal(r, 4, 8), normal(r, 5, 3, 4), normal(r, 5, 3, 4), 1)),
    Case("wdist", T, "numpy_benchmarks.benchmarks.wdist", "wdist",
         lambda r: (uniform(r, 0, 1, 12, 12), uniform(r, 0, 1, 12, 12),
                    uniform(r, 0.5, 1.5, 12, 12))),
    Case("reverse_cumsum", T, "numpy_benchmarks.benchmarks.reverse_cumsum", "reverse_cumsum",
         lambda r: (uniform(r, 0, 1, 1000),)),
    Case("local_maxima", T, "numpy_benchmarks.benchmarks.local_maxima", "local_maxima",
         lambda r: (normal(r, 5, 4, 3, 2),)),
    Case("create_grid", T, "numpy_benchmarks.benchmarks.create_grid", "create_grid",
         lambda r: (uniform(r, 0, 1, 40),)),
    Case("euclidean_distance_square", T,
         "numpy_benchmarks.benchmarks.euclidean_distance_square", "euclidean_distance_square",
         lambda r: (uniform(r, 0, 1, 1, 16), uniform(r, 0, 1, 50, 16))),
    # finitevolume-python: one Euler step's pieces (np.roll, tuple returns, in-place
    # updates of arguments and of names bound to other arrays)
    Case("getPrimitive", "finitevolume", "finitevolume", "getPrimitive", conserved),
    Case("getGradient", "finitevolume", "finitevolume", "getGradient",
         lambda r: (euler_state(r)[0], 1 / 32)),
    Case("slopeLimit", "finitevolume", "finitevolume", "slopeLimit",
         lambda r: (euler_state(r)[0], 1 / 32, normal(r, 32, 32), normal(r, 32, 32))),
    Case("extrapolateInSpaceToFace", "finitevolume", "finitevolume",
         "extrapolateInSpaceToFace",
         lambda r: (euler_state(r)[0], normal(r, 32, 32), normal(r, 32, 32), 1 / 32)),
    Case("applyFluxes", "finitevolume", "finitevolume", "applyFluxes",
         lambda r: (euler_state(r)[0], normal(r, 32, 32), normal(r, 32, 32), 1 / 32, 1e-3)),
    Case("getFlux", "finitevolume", "finitevolume", "getFlux", faces),
    # sph-python: particles, all pairs (reshape, hstack, helpers returning tuples)
    Case("sph.getAcc", "sph", "sph", "getAcc",
         lambda r: (*stars(r), 2.0 / 50, 0.1, 0.1, 1, 2.01, 1.0)),
    Case("sph.getDensity", "sph", "sph", "getDensity",
         lambda r: (stars(r)[0], stars(r)[0], 2.0 / 50, 0.1)),
    # shallow-water: the boundary helper its time step calls (module flags, a string)
    Case("enforce_boundaries", "shallowwater", "shallow_water_nonlinear", "enforce_boundaries",
         lambda r: (normal(r, 20, 30), "u"), outputs=("arr",)),
    # nbody-python: all pairs of stars (x.T - x broadcasting, masked updates, triu, hstack)
    Case("nbody.getAcc", "nbody", "nbody", "getAcc",
         lambda r: (normal(r, 40, 3), uniform(r, 0.1, 0.5, 40, 1), 1.0, 0.1)),
    Case("nbody.getEnergy", "nbody", "nbody", "getEnergy",
         lambda r: (normal(r, 40, 3), normal(r, 40, 3), uniform(r, 0.1, 0.5, 40, 1), 1.0)),
    # constrainedtransport-python: MHD on a periodic grid (np.roll, tuple returns, a helper
    # returning a tuple, in-place updates of arguments)
    Case("mhd.getCurl", "mhd", "constrainedtransport", "getCurl",
         lambda r: (normal(r, 16, 16), 1 / 16)),
    Case("mhd.getDiv", "mhd", "constrainedtransport", "getDiv",
         lambda r: (normal(r, 16, 16), normal(r, 16, 16), 1 / 16)),
    Case("mhd.getBavg", "mhd", "constrainedtransport", "getBavg",
         lambda r: (normal(r, 16, 16), normal(r, 16, 16))),
    Case("mhd.getConserved", "mhd", "constrainedtransport", "getConserved",
         lambda r: (*mhd_state(r), 5 / 3, 1 / 256)),
    Case("mhd.getPrimitive", "mhd", "constrainedtransport", "getPrimitive",
         lambda r: (*uniform(r, 1.0, 2.0, 4, 16, 16) / 256, *normal(r, 2, 16, 16, scale=0.3),
                    5 / 3, 1 / 256)),
    Case("mhd.constrainedTransport", "mhd", "constrainedtransport", "constrainedTransport",
         lambda r: (*normal(r, 4, 16, 16), 1 / 16, 1e-3)),
    Case("mhd.getFlux", "mhd", "constrainedtransport", "getFlux", mhd_faces),
    # springnetwork-python: np.linalg.norm, np.add.at over index arrays, np.where's tuple
    Case("springs.getAcc", "springs", "springnetwork", "getAcc", springs),
    Case("springs.applyBoundary", "springs", "springnetwork", "applyBoundary",
         lambda r: (uniform(r, -0.5, 2.5, 30, 2), normal(r, 30, 2), 2.0),
         outputs=("pos", "vel")),
    # pic-python: deposits through indices the function computes, SciPy's sparse solve
    Case("pic.getAcc", "pic", "pic", "getAcc", plasma),
    # filterpy: the Kalman filter's steps (np.isscalar, dot imported from numpy, try/except
    # around linalg.inv, a helper raising ValueError, identity tests of arguments)
    Case("kalman.predict", "filterpy", "filterpy.kalman.kalman_filter", "predict",
         lambda r: (normal(r, 4), spd(r, 4), np.eye(4) + normal(r, 4, 4, scale=0.1),
                    spd(r, 4))),
    Case("kalman.update", "filterpy", "filterpy.kalman.kalman_filter", "update",
         kalman_update),
    Case("kalman.rts_smoother", "filterpy", "filterpy.kalman.kalman_filter", "rts_smoother",
         smoother),
    Case("unscented_transform", "filterpy", "filterpy.kalman.unscented_transform",
         "unscented_transform", sigma_points),
    Case("stats.mahalanobis", "filterpy", "filterpy.stats.stats", "mahalanobis",
         lambda r: (normal(r, 3), normal(r, 3), spd(r, 3))),
    Case("stats.multivariate_multiply", "filterpy", "filterpy.stats.stats",
         "multivariate_multiply", lambda r: (normal(r, 3), spd(r, 3), normal(r, 3), spd(r, 3))),
    Case("Q_discrete_white_noise", "filterpy", "filterpy.common.discretization",
         "Q_discrete_white_noise", lambda r: (3, 0.1, 2.0, 2)),
    # benchpress: scripts that parse their command line when imported (argv), a
    # benchmark object's flush() inside the loops, string flags, dtype=/positional dtypes
    Case("rosen", "benchpress", "benchpress.benchmarks.rosenbrock.python_numpy.rosenbrock",
         "rosen", lambda r: (uniform(r, 0, 1, 100),), argv=BENCH),
    Case("black_scholes.CND", "benchpress",
         "benchpress.benchmarks.black_scholes.python_numpy.black_scholes", "CND",
         lambda r: (normal(r, 100),), argv=BENCH),
    Case("black_scholes.BS", "benchpress",
         "benchpress.benchmarks.black_scholes.python_numpy.black_scholes", "BS",
         lambda r: ("c", uniform(r, 58, 62, 100), 65.0, 0.1, 0.08, 0.3), argv=BENCH),
    Case("black_scholes.price", "benchpress",
         "benchpress.benchmarks.black_scholes.python_numpy.black_scholes", "price",
         lambda r: (uniform(r, 58, 62, 100), 5), argv=BENCH),
    Case("gauss", "benchpress", "benchpress.benchmarks.gauss.python_numpy.gauss", "gauss",
         lambda r: (dominant(r),), argv=BENCH),
    Case("lu", "benchpress", "benchpress.benchmarks.lu.python_numpy.lu", "lu",
         lambda r: (dominant(r),), argv=BENCH),
    Case("magnetic.window", "benchpress",
         "benchpress.benchmarks.magnetic_field_extrapolation.python_numpy."
         "magnetic_field_extrapolation", "window", lambda r: (normal(r, 16, 16),), argv=BENCH),
    Case("magnetic.calcB", "benchpress",
         "benchpress.benchmarks.magnetic_field_extrapolation.python_numpy."
         "magnetic_field_extrapolation", "calcB", lambda r: (normal(r, 8, 8),), argv=BENCH),
    # its sea-ice model (wisp): UNESCO's seawater polynomials (a Latin-1 source), salt and
    # heat budgets of four layers (`[NL, NW, layers] = S.shape`, masks times numbers)
    Case("wisp.dens", "benchpress", "benchpress.benchmarks.wisp.python_numpy.density_imr",
         "dens", lambda r: (uniform(r, 30, 36, 40), uniform(r, -1.5, 20, 40),
                            uniform(r, 0, 1000, 40))),
    Case("wisp.heatcap", "benchpress", "benchpress.benchmarks.wisp.python_numpy.heat_imr",
         "heatcap", lambda r: (uniform(r, 30, 36, 40), uniform(r, -1.5, 20, 40),
                               uniform(r, 0, 1000, 40))),
    Case("wisp.salt", "benchpress", "benchpress.benchmarks.wisp.python_numpy.salt", "salt",
         sea),
    Case("wisp.temp", "benchpress", "benchpress.benchmarks.wisp.python_numpy.temp", "temp",
         sea_heat),
]


# ------------------------------------------------------------------ one case (child)

class Child(npbench.Child):
    """npbench's measurements on a case of CASES instead of an NPBench kernel."""

    def __init__(self, opts, case):
        self.opts, self.name, self.case = opts, case.name, case
        self.rng = np.random.default_rng(zlib.crc32(f"realcode/{case.name}".encode()))
        self.rec = {"name": case.name, "set": case.checkout, "stage": "load"}

    def run(self):
        import adjoint
        adjoint.configure(threads=1)
        self.adjoint, self.tol, case = adjoint, npbench.FWD_RTOL, self.case
        self.rec.update(module=case.module, func=case.func)
        self.save()
        sys.argv[1:] = case.argv
        try:
            module = importlib.import_module(case.module)
            self.func = eval(case.func, vars(module))          # noqa: S307 (our own text)
            self.args = tuple(case.inputs(self.rng))
            self.names = list(inspect.signature(self.func).parameters)[:len(self.args)]
        except Exception as exc:
            return self.finish(forward="load error", error=npbench.failure(exc, self.opts.path))
        self.rec["inputs"] = [describe(a) for a in self.args]
        if case.no_gradient:
            self.rec["gradient_note"] = case.no_gradient
        self.measure(case.outputs)

    def direction(self):
        """npbench's, with the case's held inputs left where they are."""
        held = self.case.held[:-1]
        if held:
            self.rec["gradient_held"] = f"{', '.join(held)}: {self.case.held[-1]}"
        return [None if n in held else e for n, e in zip(self.names, super().direction())]

    def gradient(self):
        if self.case.no_gradient:
            self.rec["gradient"] = "n/a"
            return False
        return super().gradient()

    def first_gradient(self, expected):
        """npbench's, noting the inputs whose cotangents hold NaN or inf (what a WRONG
        gradient often is: 0 * inf where the original is smooth)."""
        grads, seconds = super().first_gradient(expected)
        bad = sorted(n for n, g in grads.items() if not np.all(np.isfinite(g)))
        if bad:
            self.rec["nonfinite_cotangents"] = bad
        return grads, seconds


def describe(value):
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    return f"{type(value).__name__} {value!r}"


def child(opts):
    case = next(c for c in CASES if c.name == opts.child)
    opts.path = checkouts(opts)[case.checkout]
    sys.path += [opts.path] + [p for p in opts.pythonpath.split(os.pathsep) if p]
    Child(opts, case).run()


# ------------------------------------------------------------------------- the runner

def checkouts(opts):
    """{collection: path} from the --checkout NAME=PATH arguments."""
    found = {}
    for item in opts.checkout:
        name, _, path = item.partition("=")
        if name not in COLLECTIONS or not path:
            sys.exit(f"--checkout {item!r}: give NAME=PATH, NAME one of {', '.join(COLLECTIONS)}")
        if not pathlib.Path(path).is_dir():
            sys.exit(f"--checkout {item!r}: {path} is no folder")
        found[name] = str(pathlib.Path(path).resolve())
    return found


def record_file(tmp, name):
    return os.path.join(tmp, re.sub(r"[^\w.-]", "_", name) + ".json")


def run_child(opts, case, path, tmp):
    record = record_file(tmp, case.name)
    cmd = [sys.executable, __file__, "--child", case.name, "--record", record,
           "--checkout", f"{case.checkout}={path}", "--pythonpath", opts.pythonpath,
           "--repeats", str(opts.repeats), "--budget", str(opts.budget)]
    return npbench.run_recorded(cmd, record, opts.timeout,
                                {"name": case.name, "set": case.checkout})


def collection_info(opts, found):
    given = dict(item.partition("=")[::2] for item in opts.commit)
    return {name: {"repository": COLLECTIONS[name][0], "what": COLLECTIONS[name][1],
                   "commit": npbench.npbench_commit(path, given.get(name, ""))}
            for name, path in found.items()}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                    help=f"a checkout of a collection ({', '.join(COLLECTIONS)})")
    ap.add_argument("--commit", action="append", default=[], metavar="NAME=SHA",
                    help="a checkout's commit when it is not a git work tree")
    ap.add_argument("--cases", default="", help="comma-separated case names (default all)")
    ap.add_argument("--pythonpath", default="",
                    help="folders (os.pathsep) with the checkouts' own dependencies")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many calls (default 3)")
    ap.add_argument("--budget", type=float, default=1.0,
                    help="seconds of calls per function after which repeats stop (default 1)")
    ap.add_argument("--out", default=str(RESULTS), help="results folder")
    ap.add_argument("--update", action="store_true",
                    help="replace only these cases' records in an existing realcode.json")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--record", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main():
    opts = parse()
    if opts.list:
        for c in CASES:
            print(f"{c.name:<30} {c.checkout:<13} {c.module}: {c.func}")
        return 0
    os.environ.setdefault("MPLBACKEND", "Agg")       # plotting imports need no display
    run_on_one_core()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), npbench.RECURSION_LIMIT))
    if opts.child:
        child(opts)
        return 0
    found = checkouts(opts)
    if not found:
        sys.exit("give at least one --checkout NAME=PATH; --list shows the cases")
    chosen = [c for c in CASES if c.checkout in found]
    if opts.cases:
        names = opts.cases.split(",")
        unknown = sorted(set(names) - {c.name for c in chosen})
        if unknown:
            sys.exit(f"unknown cases (or no checkout for them): {unknown}")
        chosen = [c for c in chosen if c.name in names]
    import adjoint
    adjoint.configure(threads=1)
    info = {k: v for k, v in machine(None, adjoint.options).items() if k != "jax"}
    info.update(timeout_s=opts.timeout, repeats=opts.repeats, budget_s=opts.budget,
                fwd_rtol=npbench.FWD_RTOL, grad_rtol=npbench.GRAD_RTOL,
                fd_steps=npbench.STEPS, directions=npbench.DIRECTIONS)
    collections = collection_info(opts, found)
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    records, start = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="realcode_") as tmp:
        os.environ["SIMCORE_CACHE_DIR"] = os.path.join(tmp, "cache")    # cold compiles
        for case in chosen:
            records.append(run_child(opts, case, found[case.checkout], tmp))
            print(npbench_report.one_line(records[-1]), flush=True)
    info["run_wall_s"] = round(time.perf_counter() - start, 1)
    if opts.update and (out / "realcode.json").exists():
        old = json.loads((out / "realcode.json").read_text())
        done = {c.name for c in chosen}
        records += [r for r in old["kernels"] if r["name"] not in done]
        collections = {**old["collections"], **collections}
        info = {**old["machine"], "reruns": old["machine"].get("reruns", []) +
                [{"cases": sorted(done), "date": info["date"], "fd_steps": info["fd_steps"]}]}
    order = {c.name: i for i, c in enumerate(CASES)}
    records.sort(key=lambda r: order.get(r["name"], len(order)))
    (out / "realcode.json").write_text(json.dumps(
        {"machine": info, "collections": collections, "kernels": records},
        indent=1, default=npbench._json_default))
    md = out / "realcode.md"
    notes = md.read_text().partition(NOTES)[1:] if md.exists() else ("", "")
    md.write_text(markdown(info, collections, records) + "".join(notes))
    print(md.read_text())
    return 0


# ------------------------------------------------------------------------- the report

def summary(collections, records):
    def counts(rs):
        diff = [r for r in rs if r.get("differentiable") and "gradient_note" not in r]
        return (f"forward correct {sum(r.get('forward') == 'ok' for r in rs)}/{len(rs)}, "
                f"gradient correct {sum(r.get('gradient') == 'ok' for r in diff)}/{len(diff)} "
                f"(of those with float inputs and outputs), both "
                f"{sum(npbench_report.correct(r) for r in rs)}/{len(rs)}")
    lines = [f"- all ({len(records)} functions from {len(collections)} collections): "
             f"{counts(records)}"]
    lines += [f"- {name}: {counts(rs)}" for name in collections
              if (rs := [r for r in records if r["set"] == name])]
    wrong_f = [r["name"] for r in records if r.get("forward") == "WRONG"]
    wrong_g = [r["name"] for r in records if r.get("gradient") == "WRONG"]
    lines.append(f"- wrong without an error: forward {len(wrong_f)} "
                 f"({', '.join(wrong_f) or 'none'}), gradient {len(wrong_g)} "
                 f"({', '.join(wrong_g) or 'none'})")
    runs = [r for r in records if r.get("forward") == "ok" and "times" in r]
    grads = [r for r in runs if "engine_grad" in r["times"]]
    fmt, geomean = npbench_report.fmt, npbench_report.geomean
    lines.append(f"- speed at these small sizes (one core): NumPy/engine geometric mean "
                 f"{fmt(geomean(map(npbench_report.speedup, runs)))} over {len(runs)} correct "
                 f"forwards; grad/fwd {fmt(geomean(map(npbench_report.grad_ratio, grads)))} "
                 f"over {len(grads)}")
    return lines


def markdown(info, collections, records):
    lines = ["# Public scientific NumPy code, unchanged, through the engine", "",
             "Produced by `python experiments/realcode.py` (see its docstring) on checkouts "
             "of the repositories below; the functions are imported from them, nothing of "
             "them is copied into this repository. The cases (which functions, their "
             "inputs) are `CASES` in the script.", "",
             "| collection | repository | commit | what |", "|---|---|---|---|"]
    lines += [f"| {name} | {c['repository']} | `{c['commit']}` | {c['what']} |"
              for name, c in collections.items()]
    lines += ["", "## Summary", ""] + summary(collections, records) + ["", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "## Functions", "",
              "forward: the engine's result against the original's (every array argument "
              "afterwards and the return value), max |got - want| / max |want| within "
              f"{info.get('fwd_rtol')}; gradient: vjp against central differences of the "
              f"original along {info.get('directions')} random directions, relative tolerance "
              f"{info.get('grad_rtol')} (inputs a case holds fixed there, 0/1 masks where the "
              "original jumps, are `gradient_held` in the json); n/a: no float inputs or "
              "outputs, or (where noted in the json) an original in float32. Times: best wall time, one core; compile: "
              "first call minus steady call (forward / gradient, s). WRONG: differs without "
              "an error.", "",
              "| function | collection | forward | max rel. err | gradient | grad rel. err "
              "| compile s | NumPy ms | engine ms | NumPy/engine | grad/fwd | failure cause |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [npbench_report.row(r) for r in records]
    lines += ["", "## Failure causes", "",
              "Grouped by exception type and message with the location, quoted names and "
              "numbers taken out (the table above has them); located: what the message names "
              "(a source line, an argument, or nothing: an engine fault, the engine frame it "
              "came from in brackets).", ""]
    return "\n".join(lines + npbench_report.cause_table(records)) + "\n\n"


if __name__ == "__main__":
    sys.exit(main())
