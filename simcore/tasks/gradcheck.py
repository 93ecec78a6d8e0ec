"""task=gradcheck: the Taylor test of the cost's adjoint gradient, for any model.

    r(eps) = |J(x + eps d) - J(x) - eps <grad J(x), d>|  = O(eps^2)

for x = the parameters and x = the initial state, along a random direction d scaled
like x. The log-log slope of r over ``halvings`` halvings of eps must be 2 +- slope_tol;
a wrong gradient leaves an O(eps) remainder (slope 1). J is the calibrate cost at a
perturbed first guess (so misfit and prior terms both contribute).

The dot-product test checks the linearised observed model L = H dM (engine forward mode,
``jvp``) against its transpose (reverse mode, ``vjp``) for random dx = (dp, dx0), dy:
<L dx, dy> = <dx, L^T dy> to ``dot_tol``. Writes summary.json; ``passed`` is false (and
run.py exits 1) when any check fails.
"""
import logging

import numpy as np

from ..io import write_json
from ..twin import Observations, Twin
from .calibrate import first_guess

log = logging.getLogger("simcore")

ROUNDOFF = 1e-10        # remainders below ROUNDOFF * |J| are rounding noise, not Taylor terms


def gradcheck(run) -> dict:
    model, cfg = run.model, run.cfg.task
    twin = Twin(model, Observations.from_config(run.cfg.model.obs))
    params = first_guess(model, float(cfg.perturbation))
    J, _, grad_p, grad_x0 = twin.cost_and_grad(params)
    rng = model.rng(3)
    checks = []
    for wrt in cfg.wrt:
        if wrt == "parameters":
            point, grad = params, grad_p
            cost = lambda x: twin.cost(x)[0]                            # noqa: E731
        else:                                       # initial_state (simcore.schema)
            point, grad = twin.x0, grad_x0
            cost = lambda x: twin.cost(params, x)[0]                    # noqa: E731
        direction = {k: _scale(v) * rng.standard_normal(v.shape) for k, v in point.items()}
        checks.append(taylor_test(wrt, cost, J, point, grad, direction, cfg))
    if cfg.dot_product:
        checks.append(dot_product_test(twin, params, rng, float(cfg.dot_tol)))
    passed = all(c["passed"] for c in checks)
    summary = {**run.header(), "passed": passed, "cost": J, "checks": checks,
               "outputs": ["summary.json"], "wall_time_s": run.elapsed()}
    write_json(summary, run.path("summary.json"))
    log.info("gradcheck: %s", "PASSED" if passed else "FAILED")
    return summary


def _scale(v) -> float:
    rms = float(np.sqrt(np.mean(v * v)))
    return rms if rms > 0 else 1.0


def taylor_test(wrt, cost, J, point, grad, direction, cfg) -> dict:
    """Remainders over eps, eps/2, ... and their fitted slope; eps grows while rounding
    noise swamps the smallest remainder."""
    slope_dot = sum(float(np.sum(grad[k] * direction[k])) for k in point)
    eps0 = float(cfg.eps)
    for _ in range(4):
        eps = eps0 * 0.5 ** np.arange(int(cfg.halvings) + 1)
        r = np.array([abs(cost({k: point[k] + e * direction[k] for k in point}) - J
                          - e * slope_dot) for e in eps])
        if r.min() > ROUNDOFF * max(abs(J), 1e-300):
            break
        eps0 *= 10.0
    fit = np.polyfit(np.log(eps), np.log(np.maximum(r, 1e-300)), 1)[0]
    rates = np.log2(r[:-1] / np.maximum(r[1:], 1e-300))
    passed = bool(abs(fit - 2.0) <= float(cfg.slope_tol))
    log.info("gradcheck: Taylor test w.r.t. %s   <grad J, d> = %.6e", wrt, slope_dot)
    log.info("    %-10s %-14s %s", "eps", "remainder", "rate")
    for k, (e, rk) in enumerate(zip(eps, r)):
        rate = f"{rates[k - 1]:.3f}" if k else ""
        log.info("    %s", f"{e:<10.3e} {rk:<14.6e} {rate}".rstrip())
    log.info("    fitted slope %.4f (want 2 +- %g): %s", fit, cfg.slope_tol,
             "ok" if passed else "FAILED")
    return {"wrt": wrt, "eps": eps.tolist(), "remainder": r.tolist(), "rates": rates.tolist(),
            "slope": float(fit), "directional_derivative": slope_dot, "passed": passed}


def dot_product_test(twin, params, rng, tol) -> dict:
    """<L dx, dy> (forward mode) against <dx, L^T dy> (reverse mode), random dx and dy."""
    dp = {k: _scale(v) * rng.standard_normal(v.shape) for k, v in params.items()}
    dx0 = {k: _scale(v) * rng.standard_normal(v.shape) for k, v in twin.x0.items()}
    dy = [rng.standard_normal(y.shape) for y in twin.y]
    ldx = twin.linearized(params, dp, dx0)
    gp, gx0 = twin.adjoint(params, dy)
    lhs = sum(float(np.sum(a * b)) for a, b in zip(ldx, dy))
    rhs = (sum(float(np.sum(dp[k] * gp[k])) for k in dp)
           + sum(float(np.sum(dx0[k] * gx0[k])) for k in dx0))
    mismatch = abs(lhs - rhs) / max(abs(lhs), abs(rhs), 1e-300)
    passed = bool(mismatch <= tol)
    log.info("gradcheck: dot-product test  <L dx, dy> = %.15e", lhs)
    log.info("                             <dx, L^T dy> = %.15e", rhs)
    log.info("    relative mismatch %.2e (want <= %g): %s", mismatch, tol,
             "ok" if passed else "FAILED")
    return {"wrt": "dot_product", "lhs": lhs, "rhs": rhs, "mismatch": mismatch,
            "passed": passed}
