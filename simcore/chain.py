"""The model run chunk by chunk between observation times: the one mechanism under the
twin experiment's cost (simcore.twin) and 4D-Var's (simcore.fourdvar).

``chunks`` are the kernel steps before each observation time (0: a time at the start).
States are {variable: array} dicts; what is kept at each time is what ``observe`` takes
of the state there (a selection, a flat vector).

    run      the compiled forward, in place
    record   the same through ``vjp``: each chunk's pullback is kept
    pull     the pullbacks chained backwards, each time's cotangent (H^T of a misfit)
             added on the way: the gradient w.r.t. the parameters and the first state
    tangent  the chunks through ``jvp``: the state's tangent at each time
"""
import numpy as np

from adjoint import jvp, vjp


def advance(model, state: dict, params: dict, nsteps: int):
    """Run the compiled kernel ``nsteps`` steps, updating ``state`` in place."""
    return model.kernel(*model.kernel_args(state, params, nsteps))


class Chain:
    """``model`` over ``chunks`` of steps (see the module docstring)."""

    def __init__(self, model, chunks):
        self.model = model
        self.chunks = [int(c) for c in chunks]
        if any(c < 0 for c in self.chunks):
            raise ValueError(f"chunks of steps must be >= 0, got {self.chunks}")
        self.names = [v.name for v in model.variables()]
        self.shapes = {v.name: model.shape(v.dims) for v in model.variables()}
        self.parameter_shapes = {p.name: p.value.shape for p in model.parameters()}

    def run(self, state: dict, params: dict, observe) -> list:
        """[observe(state) at each time]; advances ``state`` in place, so ``observe``
        must copy what it keeps."""
        frames = []
        for steps in self.chunks:
            if steps:
                advance(self.model, state, params, steps)
            frames.append(observe(state))
        return frames

    def record(self, state: dict, params: dict, observe):
        """([observe(state) at each time], [each chunk's pullback; None for no steps]).
        ``state`` is not changed (the engine's ``vjp`` copies what the kernel writes)."""
        frames, pullbacks = [], []
        for steps in self.chunks:
            pullback = None
            if steps:
                outs, pullback = vjp(self.model.kernel,
                                     *self.model.kernel_args(state, params, steps))
                state = {n: outs[n] for n in self.names}
            frames.append(observe(state))
            pullbacks.append(pullback)
        return frames, pullbacks

    def pull(self, pullbacks: list, cotangents: list):
        """(dp, dx0) = sum_j M'_j^T c_j for the cotangents c_j ({variable: array of the
        state's shape}, one per time) and the pullbacks of :meth:`record`."""
        lam = {n: np.zeros(shape) for n, shape in self.shapes.items()}
        gp = {n: np.zeros(shape) for n, shape in self.parameter_shapes.items()}
        for pullback, cot in zip(reversed(pullbacks), reversed(cotangents)):
            lam = {n: lam[n] + cot[n] for n in self.names}
            if pullback is not None:
                back = pullback(lam)
                lam = {n: back[n] for n in self.names}
                for name in gp:
                    gp[name] += back[name]
        return gp, lam

    def tangent(self, state: dict, params: dict, dp: dict, dx0: dict) -> list:
        """The state's tangent at each time, for the tangents ``dp`` of (some) parameters
        and ``dx0`` of the first state, by forward mode. ``state`` is not changed."""
        tangent, frames = {n: dx0[n] for n in self.names}, []
        for steps in self.chunks:
            if steps:
                args = self.model.kernel_args(state, params, steps)
                outs, dots = jvp(self.model.kernel, args, {**dp, **tangent})
                state = {n: outs[n] for n in self.names}
                tangent = {n: dots[n] for n in self.names}
            frames.append(tangent)
        return frames
