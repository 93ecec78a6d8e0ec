"""JAX ports of the corpus kernels (tests/corpus*.py), for the benchmark suite (bench.py).

Each port is a pure function of the kernel's arguments, in the same order, returning the
kernel's loss; ``jax.jit(jax.grad(port, argnums=<the case's wrt>), static_argnames=<ints>)``
is what the suite times against ``adjoint.grad``. They are written the way a JAX user
would port the NumPy original:

- array code -> ``jnp`` (``.at[].set`` for slice stores, ``@`` where NumPy sums products);
- loops whose iterations are independent -> vectorised ``jnp`` (what a JAX user writes;
  it is the fastest form JAX has, so these comparisons favour JAX);
- true recurrences -> ``lax.scan`` (carrying the just-updated value/row/column) or
  ``lax.fori_loop`` with ``.at[].set``; loops with a traced bound (triangular nests)
  run over the full range with masks, since a ``fori_loop`` with traced bounds is a
  ``while_loop`` and cannot be reverse-differentiated;
- integer arguments (time steps, iteration counts) are static, so loops have static
  trip counts.

``STYLE`` records per port which of these it is. ``LITERAL`` holds a second port of a few
loop kernels, transcribed loop for loop (a ``fori_loop`` per loop, ``.at[].set`` per
element, as experiments/jax_seidel2d.py does): how a JAX user who does not restructure
the loops fares; the suite reports it beside the idiomatic port. Importing this module fails cleanly
(ImportError) without JAX; it turns on float64 (``jax_enable_x64``).
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)

PORTS = {}    # kernel name -> function
STATIC = {}   # kernel name -> names of the static (integer) arguments
STYLE = {}    # kernel name -> how it was ported
LITERAL = {}  # kernel name -> a second, literal port (see the end of this file)


def port(name, style, static=(), literal=False):
    def register(fn):
        if literal:
            LITERAL[name] = fn
        else:
            PORTS[name], STATIC[name], STYLE[name] = fn, tuple(static), style
        return fn
    return register


def loop(n, body, init, start=0):
    """``for t in range(start, n)`` with a static trip count."""
    return lax.fori_loop(start, n, body, init)


def sweep1d(x, point):
    """In-place left-to-right update of x[1:-1] (each point sees its updated left
    neighbour): ``x[i] = point(x[i-1] (new), x[i], x[i+1], i)``, as a scan."""
    def step(left, xs):
        cur, right, i = xs
        new = point(left, cur, right, i)
        return new, new
    n = x.shape[0]
    _, inner = lax.scan(step, x[0], (x[1:-1], x[2:], jnp.arange(1, n - 1)))
    return jnp.concatenate([x[:1], inner, x[-1:]])


def sweep2d(A, point):
    """One in-place Gauss-Seidel sweep over the interior of A in row-major order:
    ``A[i, j] = point(up-left, up, up-right, left, centre, right, down-left, down,
    down-right)`` where the row above and the left neighbour are already updated.
    Nested scans: rows carry the updated row above, points the updated left value."""
    def row(up, rows):
        cur, down = rows
        def pt(left, xs):
            new = point(xs[0], xs[1], xs[2], left, xs[3], xs[4], xs[5], xs[6], xs[7])
            return new, new
        xs = jnp.stack([up[:-2], up[1:-1], up[2:], cur[1:-1], cur[2:],
                        down[:-2], down[1:-1], down[2:]], axis=1)
        _, inner = lax.scan(pt, cur[0], xs)
        new_row = jnp.concatenate([cur[:1], inner, cur[-1:]])
        return new_row, new_row
    _, rows = lax.scan(row, A[0], (A[1:-1], A[2:]))
    return jnp.concatenate([A[:1], rows, A[-1:]])


def lower_mask(n, k=0):
    """Boolean (n, n): j <= i + k."""
    return np.tril(np.ones((n, n), bool), k)


# =========================================================================== corpus.py

@port("jacobi1d", "vectorised sweeps, fori over T", static=("T",))
def jacobi1d(A, B, T):
    def step(t, s):
        A, B = s
        B = B.at[1:-1].set(0.33333 * (A[:-2] + A[1:-1] + A[2:]))
        A = A.at[1:-1].set(0.33333 * (B[:-2] + B[1:-1] + B[2:]))
        return A, B
    A, B = loop(T, step, (A, B))
    return jnp.sum(A * A)


def _jacobi2d_step(t, s):
    A, B = s
    B = B.at[1:-1, 1:-1].set(0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                                    + A[2:, 1:-1] + A[:-2, 1:-1]))
    A = A.at[1:-1, 1:-1].set(0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:]
                                    + B[2:, 1:-1] + B[:-2, 1:-1]))
    return A, B


@port("jacobi2d", "vectorised sweeps, fori over T", static=("T",))
def jacobi2d(A, B, T):
    A, B = loop(T, _jacobi2d_step, (A, B))
    return jnp.sum(A * A)


def _heat(A):
    c = A[1:-1, 1:-1, 1:-1]
    return (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * c + A[:-2, 1:-1, 1:-1])
            + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * c + A[1:-1, :-2, 1:-1])
            + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * c + A[1:-1, 1:-1, :-2]) + c)


def _heat3d_step(t, s):
    A, B = s
    B = B.at[1:-1, 1:-1, 1:-1].set(_heat(A))
    A = A.at[1:-1, 1:-1, 1:-1].set(_heat(B))
    return A, B


@port("heat3d", "vectorised sweeps, fori over T", static=("T",))
def heat3d(A, B, T):
    A, B = loop(T, _heat3d_step, (A, B))
    return jnp.sum(A * A)


@port("wave1d", "vectorised sweeps, fori over T", static=("T",))
def wave1d(up, u, un, c2, T):
    def step(t, s):
        up, u, un = s
        un = un.at[1:-1].set(2.0 * u[1:-1] - up[1:-1] + c2 * (u[2:] - 2.0 * u[1:-1] + u[:-2]))
        up = up.at[1:-1].set(u[1:-1])
        u = u.at[1:-1].set(un[1:-1])
        return up, u, un
    up, u, un = loop(T, step, (up, u, un))
    return jnp.sum(u * u)


@port("prefix_sum", "vectorised (jnp.cumsum)")
def prefix_sum(x):
    x = jnp.cumsum(x)
    return jnp.sum(x * x)


@port("sor1d", "scan over i, fori over T", static=("T",))
def sor1d(u, f, omega, T):
    def step(t, u):
        return sweep1d(u, lambda left, c, right, i:
                       (1.0 - omega) * c + omega * 0.5 * (left + right + f[i]))
    u = loop(T, step, u)
    return jnp.sum(u * u)


@port("red_black", "vectorised half-sweeps (static index sets), fori over T", static=("T",))
def red_black(u, f, T):
    n = u.shape[0]
    first, second = np.arange(1, n - 1, 2), np.arange(n - 2, 0, -2)

    def step(t, u):
        u = u.at[first].set(0.5 * (u[first - 1] + u[first + 1]) + f[first])
        return u.at[second].set(0.5 * (u[second - 1] + u[second + 1]) - 0.25 * f[second])
    u = loop(T, step, u)
    return jnp.sum(u * u)


@port("nonlinear_seidel", "nested scans (rows, points), fori over T", static=("T",))
def nonlinear_seidel(A, omega, dt, T):
    def point(ul, u, ur, l, c, r, dl, d, dr):
        return c + omega * (0.25 * (u + d + l + r) - c) + dt * jnp.sin(c)
    A = loop(T, lambda t, A: sweep2d(A, point), A)
    return jnp.sum(A * A)


@port("forced_chain", "scan over i, fori over T", static=("T",))
def forced_chain(x, dt, p, T):
    def step(t, x):
        def f(prev, xi):
            new = xi + dt * jnp.sin(prev) * p
            return new, new
        _, rest = lax.scan(f, x[0], x[1:])
        return jnp.concatenate([x[:1], rest])
    x = loop(T, step, x)
    return jnp.sum(x * x)


@port("lorenz96_sweep", "scan over i, fori over T", static=("T",))
def lorenz96_sweep(x, F, dt, T):
    n = x.shape[0]

    def step(t, x):
        def f(carry, xs):
            xm2, xm1 = carry
            xi, xp1 = xs
            new = xi + dt * ((xp1 - xm2) * xm1 - xi + F)
            return (xm1, new), new
        _, mid = lax.scan(f, (x[0], x[1]), (x[2:n - 1], x[3:n]))
        return jnp.concatenate([x[:2], mid, x[n - 1:]])
    x = loop(T, step, x)
    return jnp.sum(x * x)


@port("ema", "scan over i")
def ema(x, y, beta):
    def f(m, xi):
        m = beta * m + (1.0 - beta) * xi
        return m, m * m
    _, y = lax.scan(f, jnp.zeros((), x.dtype), x)
    return jnp.sum(y)


@port("trisolv", "fori over i, masked dot")
def trisolv(L, b, x):
    n = L.shape[0]
    idx = jnp.arange(n)

    def row(i, x):
        return x.at[i].set((b[i] - jnp.dot(jnp.where(idx < i, L[i], 0.0), x)) / L[i, i])
    x = loop(n, row, x)
    return jnp.sum(x * x)


@port("lower_matvec", "vectorised (tril @ x)")
def lower_matvec(L, x, y):
    y = jnp.tril(L) @ x
    return jnp.sum(y * y) + 0.5 * jnp.sum(x * y)


@port("back_substitution", "fori over i (backwards), masked dot")
def back_substitution(U, b, x):
    n = U.shape[0]
    idx = jnp.arange(n)
    x = x.at[n - 1].set(b[n - 1] / U[n - 1, n - 1])

    def row(k, x):
        i = n - 2 - k
        s = b[i] - jnp.dot(jnp.where(idx > i, U[i], 0.0), x)
        return x.at[i].set(s / U[i, i])
    x = loop(n - 1, row, x)
    return jnp.sum(x * x)


@port("gemm", "vectorised (@)")
def gemm(C, A, B, alpha, beta):
    C = beta * C + alpha * (A @ B)
    return jnp.sum(C * C)


@port("roughness", "vectorised")
def roughness(x, w, lam):
    d = x[1:] - x[:-1]
    return 0.5 * jnp.sum(w[1:] * d * d) + lam * jnp.sum(x * x)


@port("mirror_coupling", "scan over i")
def mirror_coupling(x, y):
    def f(prev, xs):
        xk, xi = xs
        new = 0.5 * prev + xk * xi
        return new, new
    _, rest = lax.scan(f, y[0], (x[:-1][::-1], x[1:]))
    y = jnp.concatenate([y[:1], rest])
    return jnp.sum(y * y)


@port("column_recurrence", "scan over rows, vectorised along the row")
def column_recurrence(A, c):
    def f(prev, row):
        new = row.at[:-1].set(row[:-1] + c * prev[:-1] * prev[1:])
        return new, new
    _, rest = lax.scan(f, A[0], A[1:])
    A = jnp.concatenate([A[:1], rest])
    return jnp.sum(A * A)


@port("powers", "scan over i")
def powers(x, y, c, p):
    def f(prev, xs):
        xi, yi = xs
        new = c * prev ** 3 + (1.0 + yi ** 2) ** p - xi ** 2
        return new, new
    _, rest = lax.scan(f, x[0], (x[1:], y[1:]))
    x = jnp.concatenate([x[:1], rest])
    return jnp.sum(x * x)


@port("clipped_update", "vectorised")
def clipped_update(x, y):
    y = y.at[1:-1].set(jnp.maximum(x[1:-1], 0.5 * x[:-2]) + jnp.abs(x[1:-1] - x[2:])
                       - jnp.minimum(x[1:-1], 2.0 * x[2:] - 0.3))
    return jnp.sum(y * y)


@port("math_funcs", "vectorised")
def math_funcs(x, y, a):
    y = (jnp.tanh(a * x) + jnp.exp(-x * x) + jnp.log(1.0 + x * x)
         + jnp.sqrt(2.0 + jnp.cos(x)) + jnp.sin(x) * jnp.arctan(x) + jnp.tan(0.5 * x))
    return jnp.sum(y * y)


@port("numpy_funcs", "vectorised terms, scan over i for the tanh(y[i-1]) recurrence")
def numpy_funcs(x, y):
    xi, xm = x[1:], x[:-1]
    terms = (jnp.sin(xi) * jnp.cos(xm) + jnp.tan(0.3 * xi) + jnp.exp(0.1 * xi)
             + jnp.log(2.0 + xi) + jnp.sqrt(1.0 + xi * xi))
    atan = jnp.arctan(xi)

    def f(prev, xs):
        t, a = xs
        new = t + jnp.tanh(prev) + a
        return new, new
    _, rest = lax.scan(f, y[0], (terms, atan))
    y = jnp.concatenate([y[:1], rest])
    return jnp.sum(y * y)


@port("normalize_rows", "scan over columns, vectorised over rows")
def normalize_rows(A, s):
    def f(prev, col):
        new = col * s / (1.0 + prev * prev)
        return new, new
    _, rest = lax.scan(f, A[:, 0], A[:, 1:].T)
    A = jnp.concatenate([A[:, :1], rest.T], axis=1)
    return jnp.sum(A * A)


@port("diffuse32", "scan over i, fori over T (float32 storage)", static=("T",))
def diffuse32(x, alpha, T):
    def step(t, x):
        return sweep1d(x, lambda left, c, right, i: (
            c.astype(jnp.float64) + alpha * (left.astype(jnp.float64) - 2.0 * c
                                             + right)).astype(x.dtype))
    x = loop(T, step, x)
    return jnp.sum(x.astype(jnp.float64) ** 2)


@port("leapfrog", "vectorised over i, fori over n", static=("n",))
def leapfrog(x, y, a, n):
    def step(t, s):
        x, y = s
        y = y + a * x
        return x - 0.5 * a * y, y
    x, y = loop(n, step, (x, y))
    return jnp.sum(y * y) + jnp.sum(x * x)


@port("smooth_unannotated", "nested scans (rows, points), fori over T", static=("T",))
def smooth_unannotated(A, alpha, T):
    def point(ul, u, ur, l, c, r, dl, d, dr):
        return c + alpha * (u + d + l + r - 4.0 * c)
    A = loop(T, lambda t, A: sweep2d(A, point), A)
    return jnp.sum(A * A)


# ==================================================================== corpus_arrays.py

@port("jacobi2d_slices", "vectorised, fori over T", static=("T",))
def jacobi2d_slices(A, B, T):
    return jacobi2d(A, B, T)


@port("heat3d_vec", "vectorised, fori over T", static=("T",))
def heat3d_vec(A, B, T):
    return heat3d(A, B, T)


@port("wave_temporaries", "vectorised, fori over T", static=("T",))
def wave_temporaries(u, v, c, T):
    def step(t, s):
        u, v = s
        lap = jnp.zeros_like(u).at[1:-1].set(u[2:] - 2.0 * u[1:-1] + u[:-2])
        v = v + c * lap
        return u.at[1:-1].set(u[1:-1] + 0.1 * v[1:-1]), v
    u, v = loop(T, step, (u, v))
    return jnp.sum(u * u) + 0.5 * jnp.sum(v * v)


@port("gesummv_vec", "vectorised (@)")
def gesummv_vec(A, B, x, y, alpha, beta):
    y = alpha * (A @ x) + beta * (B @ x)
    return jnp.sum(y * y)


@port("atax_vec", "vectorised (@)")
def atax_vec(A, x, y):
    y = A.T @ (A @ x)
    return jnp.sum(y * y)


@port("outer_update", "vectorised")
def outer_update(C, a, b, s):
    C = C + s * a[:, None] * b[None, :]
    C = C.at[:, 1:].add(-0.5 * C[:, :-1])
    return jnp.sum(C * C)


@port("row_broadcast", "vectorised")
def row_broadcast(A, b, w):
    A = (A + b) * w[:, None]
    A = A.at[1:].set(A[1:] - A[0])
    return jnp.sum(A * A)


@port("softmax_rows", "vectorised")
def softmax_rows(X, W, P):
    e = jnp.exp(X - jnp.max(X, axis=1, keepdims=True))
    P = e / jnp.sum(e, axis=1, keepdims=True)
    return jnp.sum(P * W)


@port("logsumexp", "vectorised")
def logsumexp(x, w):
    m = jnp.max(x)
    return m + jnp.log(jnp.sum(jnp.exp(x - m))) + jnp.sum(w * x) / x.shape[0]


@port("layer_norm", "vectorised")
def layer_norm(X, g, Y):
    mu = X.mean(axis=1, keepdims=True)
    sd = jnp.sqrt(jnp.var(X, axis=1, keepdims=True) + 1e-3)
    Y = g * (X - mu) / sd
    return jnp.sum(Y * Y * g) + jnp.std(X) + jnp.prod(g[:3])


@port("mlp_relu", "vectorised (@)")
def mlp_relu(X, W, b, H):
    H = X @ W + b
    H = jnp.where(H < 0.0, 0.0, H)
    return jnp.sum(H * H) + jnp.min(X, axis=0).sum() + jnp.max(H, axis=0).sum()


@port("minmod_advection", "vectorised, fori over T", static=("T",))
def minmod_advection(q, c, T):
    def step(t, q):
        dq = q[1:] - q[:-1]
        r = dq[:-1] * dq[1:] / (dq[1:] * dq[1:] + 1e-2)
        phi = jnp.maximum(0.0, jnp.minimum(1.0, r))
        flux = c * (q[1:-1] + 0.5 * phi * dq[1:])
        return q.at[2:-1].add(-(flux[1:] - flux[:-1]))
    q = loop(T, step, q)
    return jnp.sum(q * q)


def _hdiff(inp, coeff, lap):
    """flux-limited horizontal diffusion of the interior [2:-2, 2:-2] from lap on [1:-1, 1:-1]"""
    flx = lap[1:, 1:-1] - lap[:-1, 1:-1]
    flx = jnp.where(flx * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2]) > 0.0, 0.0, flx)
    fly = lap[1:-1, 1:] - lap[1:-1, :-1]
    fly = jnp.where(fly * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2]) > 0.0, 0.0, fly)
    return inp[2:-2, 2:-2] - coeff[2:-2, 2:-2] * (flx[1:, :] - flx[:-1, :]
                                                  + fly[:, 1:] - fly[:, :-1])


@port("hdiff_limiter", "vectorised")
def hdiff_limiter(inp, coeff, out):
    lap = 4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1]
                                   + inp[1:-1, 2:] + inp[1:-1, :-2])
    out = out.at[2:-2, 2:-2].set(_hdiff(inp, coeff, lap))
    return jnp.sum(out * out)


@port("masked_updates", "vectorised (jnp.where)")
def masked_updates(x, y, lo):
    x = jnp.where(x > 1.0, 0.5 * x, x)
    y = jnp.where(x < lo, 2.0 * lo, y)
    y = jnp.where(y > 0.5, x, y)
    z = jnp.where(x > 0.2, jnp.abs(x - y), jnp.clip(y, -0.5, 0.5))
    return jnp.sum(z * z) + jnp.sum(x * y)


@port("overlapping_shifts", "vectorised")
def overlapping_shifts(x, y, A):
    x = x.at[1:].set(x[:-1] + y[1:])
    x = x.at[:-1].add(0.5 * x[1:])
    y = y.at[:-1:2].set(0.3 * y[1::2] + y[:-1:2])
    y = y[::-1] * 1.5
    A = A.T + 0.5 * A
    A = A.at[1:, :].set(A[:-1, :] * 0.5 + A[1:, :])
    return jnp.sum(x * x) + jnp.sum(y * y) + jnp.sum(A * A * A)


@port("views_and_copies", "vectorised")
def views_and_copies(A, v):
    N, M = A.shape
    A = A.at[0, 1:].add(2.0 * A[0, :-1])
    saved = A[:, 0]
    A = A.at[:, 0].set(0.0)
    B = jnp.flip(A, axis=1) + jnp.transpose(A)[::-1, :].T
    C = jnp.ones((N, M)) * 0.25 + jnp.full((N, M), 0.5)
    C = C * B + saved[:, None] * v
    D = C.reshape(N * M)
    return jnp.sum(D * D) + jnp.sum(A * saved[:, None]) + jnp.sum(jnp.fliplr(A)[0] * v)


@port("stepped_slices", "vectorised")
def stepped_slices(x, A):
    x = x.at[::3].set(2.0 * x[::3])
    A = A.at[::2, 1:].set(A[::2, :-1] * x[::2, None])
    A = A.at[-1, ::-2].set(jnp.sqrt(1.0 + A[-1, ::-2] ** 2))
    A = A.at[1, :].set(A[:, 0].sum() + A[2, :-1].mean())
    return jnp.sum(A * A) + jnp.sum(x[-3:] ** 3)


@port("assorted_views", "vectorised (the row loop as broadcasting)")
def assorted_views(A, w):
    N, M = A.shape
    A = A * w[:, None] + 0.1 * jnp.arange(N)[:, None]
    A = A.at[:, 0].set(2.0 * A[:, 0])
    flat = A.reshape(-1)
    A = flat.at[::2].multiply(1.5).reshape(N, M)
    E = A * 0.5
    A = jnp.where((w > 0.5)[:, None], E, A)
    A = jnp.where(jnp.any(A > 0.6) | jnp.all(w < 0.1), A / 2.0, A)
    return jnp.sum(A * A) + jnp.sum(jnp.clip(A, 0.01, None)) + jnp.sum(A > 0.0)


# ===================================================================== corpus_more.py

@port("bicg", "vectorised (@)")
def bicg(A, p, r, s, q):
    s = r @ A
    q = A @ p
    return jnp.sum(s * s) + jnp.sum(q)


@port("mvt", "vectorised (@)")
def mvt(x1, x2, y1, y2, A):
    x1 = x1 + A @ y1
    x2 = x2 + y2 @ A
    return jnp.sum(x1 * x2)


@port("gemver", "vectorised (@)")
def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    A = A + jnp.outer(u1, v1) + jnp.outer(u2, v2)
    x = x + beta * (y @ A) + z
    w = w + alpha * (A @ x)
    return jnp.sum(w * w)


@port("2mm", "vectorised (@)")
def k2mm(alpha, beta, A, B, C, D):
    D = beta * D + (alpha * (A @ B)) @ C
    return jnp.sum(D)


@port("3mm", "vectorised (@)")
def k3mm(A, B, C, D, G):
    G = (A @ B) @ (C @ D)
    return jnp.sum(G * G)


@port("syrk", "vectorised (@, lower-triangle mask)")
def syrk(alpha, beta, C, A):
    C = jnp.where(lower_mask(C.shape[0]), beta * C + alpha * (A @ A.T), C)
    return jnp.sum(C * C)


@port("syr2k", "vectorised (@, lower-triangle mask)")
def syr2k(alpha, beta, C, A, B):
    C = jnp.where(lower_mask(C.shape[0]), beta * C + alpha * (A @ B.T + B @ A.T), C)
    return jnp.sum(C * C)


@port("symm", "vectorised (@ with the symmetric matrix from the lower triangle)")
def symm(alpha, beta, C, A, B):
    low = jnp.tril(A, -1)
    S = low + low.T + jnp.diag(jnp.diag(A))
    C = beta * C + alpha * (S @ B)
    return jnp.sum(C * C)


@port("trmm", "vectorised (@ with the strict lower triangle)")
def trmm(alpha, A, B):
    B = alpha * (B + jnp.tril(A, -1).T @ B)
    return jnp.sum(B * B)


def _lu(A):
    """Doolittle LU in place (no pivoting) as right-looking masked rank-1 updates."""
    n = A.shape[0]
    idx = jnp.arange(n)

    def step(k, A):
        below = idx > k
        l = jnp.where(below, A[:, k] / A[k, k], 0.0)
        A = A.at[:, k].set(jnp.where(below, l, A[:, k]))
        return A - jnp.outer(l, jnp.where(below, A[k, :], 0.0))
    return loop(n, step, A)


@port("lu", "fori over k, masked rank-1 updates (right-looking)")
def lu(A):
    A = _lu(A)
    return jnp.sum(A * A)


@port("ludcmp", "fori over k, masked rank-1 updates; fori substitutions, masked dots")
def ludcmp(A, b, x, y):
    n = A.shape[0]
    idx = jnp.arange(n)
    A = _lu(A)
    y = loop(n, lambda i, y: y.at[i].set(b[i] - jnp.dot(jnp.where(idx < i, A[i], 0.0), y)), y)

    def back(k, x):
        i = n - 1 - k
        w = y[i] - jnp.dot(jnp.where(idx > i, A[i], 0.0), x)
        return x.at[i].set(w / A[i, i])
    x = loop(n, back, x)
    return jnp.sum(x * x) + jnp.sum(y)


@port("cholesky", "fori over k, masked rank-1 updates of the lower triangle")
def cholesky(A):
    n = A.shape[0]
    idx = jnp.arange(n)
    low = lower_mask(n)

    def step(k, A):
        d = jnp.sqrt(A[k, k])
        col = jnp.where(idx > k, A[:, k] / d, 0.0)
        A = A.at[:, k].set(jnp.where(idx > k, col, A[:, k])).at[k, k].set(d)
        return A - jnp.where(low, jnp.outer(col, col), 0.0)
    A = loop(n, step, A)
    return jnp.sum(A * A)


@port("durbin", "fori over k, masked reversed dot and update")
def durbin(r, y):
    n = r.shape[0]
    idx = jnp.arange(n)
    y = y.at[0].set(-r[0])

    def step(k, s):
        y, beta, alpha = s
        beta = (1.0 - alpha * alpha) * beta
        rev = jnp.clip(k - 1 - idx, 0, n - 1)           # r[k-1::-1], y[k-1::-1]
        below = idx < k
        dot = jnp.sum(jnp.where(below, r[rev] * y, 0.0))
        alpha = -(r[k] + dot) / beta
        y = jnp.where(below, y + alpha * y[rev], y)
        return y.at[k].set(alpha), beta, alpha
    y, _, _ = loop(n, step, (y, jnp.ones((), r.dtype), -r[0]), start=1)
    return jnp.sum(y * y)


@port("gramschmidt", "fori over k, masked column updates")
def gramschmidt(A, R, Q):
    n = A.shape[1]
    idx = jnp.arange(n)

    def step(k, s):
        A, R, Q = s
        rkk = jnp.sqrt(jnp.sum(A[:, k] * A[:, k]))
        q = A[:, k] / rkk
        Q = Q.at[:, k].set(q)
        right = idx > k
        rk = jnp.where(right, q @ A, R[k])
        R = R.at[k].set(rk).at[k, k].set(rkk)
        A = A - jnp.outer(q, jnp.where(right, rk, 0.0))
        return A, R, Q
    A, R, Q = loop(n, step, (A, R, Q))
    return jnp.sum(R) + jnp.sum(Q * Q * Q)


@port("covariance", "vectorised (@)")
def covariance(data, cov):
    data = data - jnp.mean(data, axis=0)
    cov = data.T @ data / (data.shape[0] - 1.0)
    return jnp.sum(cov * cov)


@port("correlation", "vectorised (@)")
def correlation(data, corr):
    n, m = data.shape
    stddev = jnp.std(data, axis=0)
    stddev = jnp.where(stddev <= 0.1, 1.0, stddev)
    data = (data - jnp.mean(data, axis=0)) / (jnp.sqrt(n * 1.0) * stddev)
    corr = data.T @ data
    corr = jnp.where(np.eye(m, dtype=bool), 1.0, corr)
    return jnp.sum(corr * corr * corr)


@port("doitgen", "vectorised (@)")
def doitgen(A, C4):
    A = A @ C4
    return jnp.sum(A * A)


@port("fdtd_2d", "vectorised, fori over T")
def fdtd_2d(ex, ey, hz, fict):
    def step(t, s):
        ex, ey, hz = s
        ey = ey.at[0, :].set(fict[t])
        ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
        ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
        hz = hz.at[:-1, :-1].add(-0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1]
                                         - ey[:-1, :-1]))
        return ex, ey, hz
    ex, ey, hz = loop(fict.shape[0], step, (ex, ey, hz))
    return jnp.sum(hz * hz) + jnp.sum(ex) + jnp.sum(ey * ey)


@port("adi", "fori over j with column/row .at[].set, fori over TSTEPS", static=("TSTEPS",))
def adi(u, v, p, q, TSTEPS):
    N = u.shape[0]
    DX = 1.0 / N
    DY = 1.0 / N
    DT = 1.0 / TSTEPS
    mul1 = 2.0 * DT / (DX * DX)
    mul2 = 1.0 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul2
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    I = slice(1, N - 1)

    def step(t, s):
        u, v, p, q = s
        v = v.at[0, I].set(1.0)
        p = p.at[I, 0].set(0.0)
        q = q.at[I, 0].set(v[0, I])

        def col_sweep(j, s):
            p, q = s
            den = a * p[I, j - 1] + b
            p = p.at[I, j].set(-c / den)
            q = q.at[I, j].set((-d * u[j, 0:N - 2] + (1.0 + 2.0 * d) * u[j, 1:N - 1]
                                - f * u[j, 2:N] - a * q[I, j - 1]) / den)
            return p, q
        p, q = loop(N - 1, col_sweep, (p, q), start=1)
        v = v.at[N - 1, I].set(1.0)
        v = loop(N - 2, lambda k, v: v.at[N - 2 - k, I].set(
            p[I, N - 2 - k] * v[N - 1 - k, I] + q[I, N - 2 - k]), v)
        u = u.at[I, 0].set(1.0)
        p = p.at[I, 0].set(0.0)
        q = q.at[I, 0].set(u[I, 0])

        def row_sweep(j, s):
            p, q = s
            den = d * p[I, j - 1] + e
            p = p.at[I, j].set(-f / den)
            q = q.at[I, j].set((-a * v[0:N - 2, j] + (1.0 + 2.0 * a) * v[1:N - 1, j]
                                - c * v[2:N, j] - d * q[I, j - 1]) / den)
            return p, q
        p, q = loop(N - 1, row_sweep, (p, q), start=1)
        u = u.at[I, N - 1].set(1.0)
        u = loop(N - 2, lambda k, u: u.at[I, N - 2 - k].set(
            p[I, N - 2 - k] * u[I, N - 1 - k] + q[I, N - 2 - k]), u)
        return u, v, p, q
    u, v, p, q = loop(TSTEPS + 1, step, (u, v, p, q), start=1)
    return jnp.sum(u * u) + jnp.sum(v)


def _iir(x, a, b, b1, b2):
    """y[j] = a x[j] + b x[j-1] + b1 y[j-1] + b2 y[j-2] along axis 0 (y[-1] = y[-2] = 0,
    x[-1] = 0), as a scan carrying the last two outputs."""
    def f(carry, xs):
        y1, y2 = carry
        xj, xm = xs
        y = a * xj + b * xm + b1 * y1 + b2 * y2
        return (y, y1), y
    zero = jnp.zeros_like(x[0])
    _, y = lax.scan(f, (zero, zero), (x, jnp.concatenate([zero[None], x[:-1]])))
    return y


@port("deriche", "scans along columns/rows (IIR recurrences), vectorised across")
def deriche(alpha, imgIn, imgOut):
    k = (1.0 - jnp.exp(-alpha)) ** 2 / (1.0 + 2.0 * alpha * jnp.exp(-alpha)
                                        - jnp.exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * jnp.exp(-alpha) * (alpha - 1.0)
    a3 = a7 = k * jnp.exp(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * jnp.exp(-2.0 * alpha)
    b1 = 2.0 ** (-alpha)
    b2 = -jnp.exp(-2.0 * alpha)
    # causal and anti-causal passes along rows (axis 1), then along columns (axis 0);
    # the anti-causal pass: y2[j] = a3 x[j+1] + a4 x[j+2] + b1 y2[j+1] + b2 y2[j+2]
    X = imgIn.T
    y1 = _iir(X, a1, a2, b1, b2)
    y2 = jnp.concatenate([_iir(X[::-1][:-1], a3, a4, b1, b2)[::-1], jnp.zeros_like(X[:1])])
    out = (y1 + y2).T
    y1 = _iir(out, a5, a6, b1, b2)
    y2 = jnp.concatenate([_iir(out[::-1][:-1], a7, a8, b1, b2)[::-1], jnp.zeros_like(out[:1])])
    out = y1 + y2
    return jnp.sum(out * out)


@port("seidel2d", "nested scans (rows, points), fori over TSTEPS", static=("TSTEPS",))
def seidel2d(A, TSTEPS):
    def point(ul, u, ur, l, c, r, dl, d, dr):
        return (ul + u + ur + l + c + r + dl + d + dr) / 9.0
    A = loop(TSTEPS, lambda t, A: sweep2d(A, point), A)
    return jnp.sum(A * A)


@port("vertical_advection", "scans along k (Thomas), vectorised over columns, fori over T",
      static=("T",))
def vertical_advection(u, w, dt, T):
    K = u.shape[2]
    k = jnp.arange(K)
    a = jnp.where(k > 0, -0.25 * dt * w, 0.0)
    c = jnp.where(k < K - 1, 0.25 * dt * w, 0.0)
    b = 1.0 - a + c
    a, b, c = (jnp.moveaxis(z, 2, 0) for z in (a, b, c))   # k first

    def step(t, u):
        uk = jnp.moveaxis(u, 2, 0)

        def fwd(carry, xs):
            cp, dp = carry
            ak, bk, ck, uk_ = xs
            den = bk - ak * cp
            cp, dp = ck / den, (uk_ - ak * dp) / den
            return (cp, dp), (cp, dp)
        zero = jnp.zeros_like(uk[0])
        _, (cp, dp) = lax.scan(fwd, (zero, zero), (a, b, c, uk))

        def back(nxt, xs):
            cpk, dpk = xs
            val = dpk - cpk * nxt
            return val, val
        _, rest = lax.scan(back, dp[-1], (cp[:-1], dp[:-1]), reverse=True)
        return jnp.moveaxis(jnp.concatenate([rest, dp[-1:]]), 0, 2)
    u = loop(T, step, u)
    return jnp.sum(u * u)


@port("hdiff_loops", "vectorised")
def hdiff_loops(inp, coeff, out):
    lap = 4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1]
                                   + inp[1:-1, 2:] + inp[1:-1, :-2])
    out = out.at[2:-2, 2:-2].set(_hdiff(inp, coeff, lap))
    return jnp.sum(out * out)


def _pressure_source(u, v, rho, dt, dx, dy):
    return rho * (1.0 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx)
                              + (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy))
                  - ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx)) ** 2
                  - 2 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy)
                         * (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2 * dx))
                  - ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) ** 2)


@port("cavity_flow", "vectorised, fori over nt and nit", static=("nt", "nit"))
def cavity_flow(u, v, p, nt, nit, dt, rho, nu):
    N, M = u.shape
    dx = 2.0 / (M - 1)
    dy = 2.0 / (N - 1)

    def pressure(q, s):
        p, b = s
        pn = p
        p = p.at[1:-1, 1:-1].set(((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy ** 2
                                  + (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx ** 2)
                                 / (2 * (dx ** 2 + dy ** 2))
                                 - dx ** 2 * dy ** 2 / (2 * (dx ** 2 + dy ** 2)) * b[1:-1, 1:-1])
        p = p.at[:, -1].set(p[:, -2])
        p = p.at[0, :].set(p[1, :])
        p = p.at[:, 0].set(p[:, 1])
        p = p.at[-1, :].set(0.0)
        return p, b

    def step(n, s):
        u, v, p, b = s
        un, vn = u, v
        b = b.at[1:-1, 1:-1].set(_pressure_source(u, v, rho, dt, dx, dy))
        p, b = loop(nit, pressure, (p, b))
        u = u.at[1:-1, 1:-1].set(
            un[1:-1, 1:-1]
            - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, 0:-2])
            - vn[1:-1, 1:-1] * dt / dy * (un[1:-1, 1:-1] - un[0:-2, 1:-1])
            - dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2])
            + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2])
                    + dt / dy ** 2 * (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))
        v = v.at[1:-1, 1:-1].set(
            vn[1:-1, 1:-1]
            - un[1:-1, 1:-1] * dt / dx * (vn[1:-1, 1:-1] - vn[1:-1, 0:-2])
            - vn[1:-1, 1:-1] * dt / dy * (vn[1:-1, 1:-1] - vn[0:-2, 1:-1])
            - dt / (2 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1])
            + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2])
                    + dt / dy ** 2 * (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))
        u = u.at[0, :].set(0.0).at[:, 0].set(0.0).at[:, -1].set(0.0).at[-1, :].set(1.0)
        v = v.at[0, :].set(0.0).at[-1, :].set(0.0).at[:, 0].set(0.0).at[:, -1].set(0.0)
        return u, v, p, b
    u, v, p, _ = loop(nt, step, (u, v, p, jnp.zeros((N, M))))
    return jnp.sum(u * u) + jnp.sum(v * v) + jnp.sum(p * p)


def _periodic_source(rho, dt, dx, dy, u, v):
    b = jnp.zeros_like(u)
    b = b.at[1:-1, 1:-1].set(rho * (1.0 / dt * ((u[1:-1, 2:] - u[1:-1, :-2]) / (2 * dx)
                                                + (v[2:, 1:-1] - v[:-2, 1:-1]) / (2 * dy))
                                    - ((u[1:-1, 2:] - u[1:-1, :-2]) / (2 * dx)) ** 2
                                    - ((v[2:, 1:-1] - v[:-2, 1:-1]) / (2 * dy)) ** 2))
    b = b.at[1:-1, -1].set(rho * (1.0 / dt * ((u[1:-1, 0] - u[1:-1, -2]) / (2 * dx)
                                              + (v[2:, -1] - v[:-2, -1]) / (2 * dy))
                                  - ((u[1:-1, 0] - u[1:-1, -2]) / (2 * dx)) ** 2))
    b = b.at[1:-1, 0].set(rho * (1.0 / dt * ((u[1:-1, 1] - u[1:-1, -1]) / (2 * dx)
                                             + (v[2:, 0] - v[:-2, 0]) / (2 * dy))
                                 - ((u[1:-1, 1] - u[1:-1, -1]) / (2 * dx)) ** 2))
    return b


@port("channel_flow", "scan over maxit steps with a done mask (while loops have no "
      "reverse mode), fori over nit", static=("nit", "maxit"))
def channel_flow(u, v, p, nit, dt, rho, nu, F, tol, maxit):
    N, M = u.shape
    dx = 2.0 / (M - 1)
    dy = 2.0 / (N - 1)

    def pressure(q, p, b):
        pn = p
        p = p.at[1:-1, 1:-1].set(((pn[1:-1, 2:] + pn[1:-1, :-2]) * dy ** 2
                                  + (pn[2:, 1:-1] + pn[:-2, 1:-1]) * dx ** 2
                                  - b[1:-1, 1:-1] * dx ** 2 * dy ** 2)
                                 / (2 * (dx ** 2 + dy ** 2)))
        p = p.at[1:-1, -1].set(p[1:-1, -2]).at[1:-1, 0].set(p[1:-1, 1])
        return p.at[-1, :].set(p[-2, :]).at[0, :].set(p[1, :])

    def step(s, _):
        u, v, p, udiff, steps = s
        active = (udiff > tol) & (steps < maxit)
        un = u
        b = _periodic_source(rho, dt, dx, dy, u, v)
        p1 = loop(nit, lambda q, p: pressure(q, p, b), p)
        u1 = u.at[1:-1, 1:-1].set(
            un[1:-1, 1:-1]
            - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, :-2])
            - dt / (2 * rho * dx) * (p1[1:-1, 2:] - p1[1:-1, :-2])
            + nu * dt / dy ** 2 * (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[:-2, 1:-1])
            + F * dt)
        u1 = u1.at[1:-1, -1].set(u1[1:-1, -2]).at[1:-1, 0].set(u1[1:-1, 1])
        u1 = u1.at[0, :].set(0.0).at[-1, :].set(0.0)
        v1 = v.at[1:-1, 1:-1].set(0.9 * v[1:-1, 1:-1])
        udiff1 = (jnp.sum(u1) - jnp.sum(un)) / jnp.sum(u1)
        keep = lambda new, old: jnp.where(active, new, old)  # noqa: E731
        return (keep(u1, u), keep(v1, v), keep(p1, p), keep(udiff1, udiff),
                keep(steps + 1.0, steps)), None
    init = (u, v, p, jnp.ones((), u.dtype), jnp.zeros((), u.dtype))
    (u, v, p, _, steps), _ = lax.scan(step, init, None, length=maxit)
    return jnp.sum(u * u) + jnp.sum(p * v) + steps


@port("conv2d", "vectorised (9 shifted einsums)")
def conv2d(x, w, bias, out):
    T = out.shape[1]
    s = bias[:, None, None] + sum(
        jnp.einsum("fc,cij->fij", w[:, :, di, dj], x[:, di:di + T, dj:dj + T])
        for di in range(3) for dj in range(3))
    out = jnp.tanh(s)
    return jnp.sum(out * out)


@port("mlp_loops", "vectorised (@, logsumexp)")
def mlp_loops(X, W1, b1, W2, b2, Y, H, Z):
    H = jnp.tanh(X @ W1 + b1)
    Z = jnp.tanh(H @ W2 + b2)
    zmax = jnp.max(Z, axis=1, keepdims=True)
    lse = zmax[:, 0] + jnp.log(jnp.sum(jnp.exp(Z - zmax), axis=1))
    return jnp.sum(lse - jnp.sum(Y * Z, axis=1)) / X.shape[0]


@port("softmax_loops", "vectorised")
def softmax_loops(x, w, out):
    e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
    out = e / jnp.sum(e, axis=1, keepdims=True)
    return jnp.sum(out * w)


# ==================================================== literal ports (loop for loop)

@port("seidel2d", "", literal=True)
def seidel2d_literal(A, TSTEPS):
    N = A.shape[0]

    def point(i, j, A):
        return A.at[i, j].set((A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                               + A[i, j - 1] + A[i, j] + A[i, j + 1]
                               + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0)
    row = lambda i, A: loop(N - 1, lambda j, A: point(i, j, A), A, start=1)  # noqa: E731
    A = loop(TSTEPS, lambda t, A: loop(N - 1, row, A, start=1), A)
    return jnp.sum(A * A)


@port("nonlinear_seidel", "", literal=True)
def nonlinear_seidel_literal(A, omega, dt, T):
    N = A.shape[0]

    def point(i, j, A):
        return A.at[i, j].set(A[i, j] + omega * (0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1]
                                                         + A[i, j + 1]) - A[i, j])
                              + dt * jnp.sin(A[i, j]))
    row = lambda i, A: loop(N - 1, lambda j, A: point(i, j, A), A, start=1)  # noqa: E731
    A = loop(T, lambda t, A: loop(N - 1, row, A, start=1), A)
    return jnp.sum(A * A)


@port("sor1d", "", literal=True)
def sor1d_literal(u, f, omega, T):
    N = u.shape[0]

    def point(i, u):
        return u.at[i].set((1.0 - omega) * u[i] + omega * 0.5 * (u[i - 1] + u[i + 1] + f[i]))
    u = loop(T, lambda t, u: loop(N - 1, point, u, start=1), u)
    return jnp.sum(u * u)


@port("jacobi2d", "", literal=True)
def jacobi2d_literal(A, B, T):
    N = A.shape[0]

    def sweep(dst, src):
        def point(i, j, dst):
            return dst.at[i, j].set(0.2 * (src[i, j] + src[i, j - 1] + src[i, j + 1]
                                           + src[i + 1, j] + src[i - 1, j]))
        row = lambda i, d: loop(N - 1, lambda j, d: point(i, j, d), d, start=1)  # noqa: E731
        return loop(N - 1, row, dst, start=1)

    def step(t, s):
        A, B = s
        B = sweep(B, A)
        return sweep(A, B), B
    A, B = loop(T, step, (A, B))
    return jnp.sum(A * A)


@port("gemm", "", literal=True)
def gemm_literal(C, A, B, alpha, beta):
    N, M = C.shape
    K = A.shape[1]

    def row(i, C):
        C = loop(M, lambda j, C: C.at[i, j].multiply(beta), C)
        return loop(K, lambda k, C: loop(M, lambda j, C: C.at[i, j].add(
            alpha * A[i, k] * B[k, j]), C), C)
    C = loop(N, row, C)
    return jnp.sum(C * C)


@port("trisolv", "", literal=True)
def trisolv_literal(L, b, x):
    N = L.shape[0]

    def row(i, x):
        x = x.at[i].set(b[i])
        # range(i) has a traced bound (a while loop, no reverse mode): full range, masked
        x = loop(N, lambda j, x: x.at[i].add(jnp.where(j < i, -L[i, j] * x[j], 0.0)), x)
        return x.at[i].set(x[i] / L[i, i])
    x = loop(N, row, x)
    return jnp.sum(x * x)
