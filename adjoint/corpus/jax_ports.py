"""JAX ports of the corpus kernels (loops.py, arrays.py, more.py here), for the benchmark
suite (experiments/bench.py).

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

``STYLE`` records per port which of these it is. ``LITERAL`` holds a second, *faithful*
port of every loop-heavy kernel (kind "loops" or "mixed" in sizes.py), transcribed
loop for loop (a ``fori_loop`` per loop in the same order, ``.at[].set`` per element, the
same arithmetic, as experiments/jax_seidel2d.py does; see "literal ports" at the end of
this file): how a scientist who ports the loop code to JAX without restructuring it
fares; the suite reports it beside the idiomatic port, and
experiments/check_literal_ports.py checks it against the original and the idiomatic port.
Importing this module fails cleanly (ImportError) without JAX; it turns on float64
(``jax_enable_x64``).
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


# ============================================================================ loops.py

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


# =========================================================================== arrays.py

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


# ============================================================================= more.py

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


def adi_coefficients(N, TSTEPS):
    """(a, b, c, d, e, f) of PolyBench's ADI, as the kernel computes them."""
    DX, DY, DT = 1.0 / N, 1.0 / N, 1.0 / TSTEPS
    mul1 = 2.0 * DT / (DX * DX)
    mul2 = 1.0 * DT / (DY * DY)
    a, d = -mul1 / 2.0, -mul2 / 2.0
    return a, 1.0 + mul2, a, d, 1.0 + mul2, d


@port("adi", "fori over j with column/row .at[].set, fori over TSTEPS", static=("TSTEPS",))
def adi(u, v, p, q, TSTEPS):
    N = u.shape[0]
    a, b, c, d, e, f = adi_coefficients(N, TSTEPS)
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

    return jnp.sum(ping_pong(sweep, A, B, T) ** 2)


@port("gemm", "", literal=True)
def gemm_literal(C, A, B, alpha, beta):
    N, M = C.shape
    K = A.shape[1]

    def row(i, C):
        C = loop(M, lambda j, C: C.at[i, j].set(C[i, j] * beta), C)
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


# ---------------------------------------------------- literal ports of the other loop kernels
#
# One per "loops"/"mixed" kernel (sizes.py), transcribed statement for
# statement: a ``fori_loop`` per Python loop in the same order, ``.at[].set`` per element
# (``.add`` for ``+=``; ``x *= s`` as ``.set(x[i] * s)``, since ``.multiply``/``.divide``
# by a differentiated value make reverse mode save the whole array every iteration),
# scalars carried in the loop state, an ``if`` on data as ``jnp.where`` on the element
# (``lax.cond`` on a whole-array decision), NumPy slice statements as the same ``jnp``
# slices. A loop whose bound depends on an enclosing loop index (``range(i)``,
# ``range(i + 1, N)``, a slice ``[:i + 1]``) would be a ``while_loop``, which JAX cannot
# reverse-differentiate, so it runs over the full range with the update masked, as
# trisolv_literal does. Under ``jax.grad`` several of these (ema, powers, lu, ...) cost
# O(array size) per element update: XLA copies the loop-carried array in every
# iteration of the while loop. That is what JAX does with this code, so it is measured.

def nest(bounds, body, init):
    """Perfectly nested loops, a fori_loop per level: ``for i in range(*bounds[0]): for j
    in range(*bounds[1]): ... state = body(i, j, ..., state)``; a bound is ``stop`` or
    ``(start, stop)``, static."""
    def level(k, idx, state):
        lo, hi = bounds[k] if isinstance(bounds[k], tuple) else (0, bounds[k])
        if k == len(bounds) - 1:
            return lax.fori_loop(lo, hi, lambda i, s: body(*idx, i, s), state)
        return lax.fori_loop(lo, hi, lambda i, s: level(k + 1, idx + (i,), s), state)
    return level(0, (), init)


def ping_pong(sweep, A, B, T):
    """T time steps of ``B = sweep(B, A); A = sweep(A, B)``; the final A."""
    def step(t, s):
        A, B = s
        B = sweep(B, A)
        return sweep(A, B), B
    return loop(T, step, (A, B))[0]


def loop_down(start, stop, body, init):
    """``for i in range(start, stop, -1)`` with a static trip count."""
    return lax.fori_loop(0, start - stop, lambda k, s: body(start - k, s), init)


# ------------------------------------------------------------------------------- loops.py

@port("jacobi1d", "", literal=True)
def jacobi1d_literal(A, B, T):
    N = A.shape[0]

    def sweep(dst, src):
        return loop(N - 1, lambda i, d: d.at[i].set(0.33333 * (src[i - 1] + src[i] + src[i + 1])),
                    dst, start=1)
    return jnp.sum(ping_pong(sweep, A, B, T) ** 2)


@port("heat3d", "", literal=True)
def heat3d_literal(A, B, T):
    N = A.shape[0]

    def sweep(dst, src):
        def point(i, j, k, dst):
            return dst.at[i, j, k].set(
                0.125 * (src[i + 1, j, k] - 2.0 * src[i, j, k] + src[i - 1, j, k])
                + 0.125 * (src[i, j + 1, k] - 2.0 * src[i, j, k] + src[i, j - 1, k])
                + 0.125 * (src[i, j, k + 1] - 2.0 * src[i, j, k] + src[i, j, k - 1])
                + src[i, j, k])
        return nest([(1, N - 1)] * 3, point, dst)

    return jnp.sum(ping_pong(sweep, A, B, T) ** 2)


@port("wave1d", "", literal=True)
def wave1d_literal(up, u, un, c2, T):
    N = u.shape[0]

    def step(t, s):
        up, u, un = s
        un = loop(N - 1, lambda i, un: un.at[i].set(
            2.0 * u[i] - up[i] + c2 * (u[i + 1] - 2.0 * u[i] + u[i - 1])), un, start=1)

        def shift(i, s):
            up, u = s
            up = up.at[i].set(u[i])
            return up, u.at[i].set(un[i])
        up, u = loop(N - 1, shift, (up, u), start=1)
        return up, u, un
    up, u, un = loop(T, step, (up, u, un))
    return jnp.sum(u * u)


@port("prefix_sum", "", literal=True)
def prefix_sum_literal(x):
    x = loop(x.shape[0], lambda i, x: x.at[i].add(x[i - 1]), x, start=1)
    return jnp.sum(x * x)


@port("red_black", "", literal=True)
def red_black_literal(u, f, T):
    N = u.shape[0]

    def red(k, u):                      # for i in range(1, N - 1, 2)
        i = 1 + 2 * k
        return u.at[i].set(0.5 * (u[i - 1] + u[i + 1]) + f[i])

    def black(k, u):                    # for i in range(N - 2, 0, -2)
        i = N - 2 - 2 * k
        return u.at[i].set(0.5 * (u[i - 1] + u[i + 1]) - 0.25 * f[i])
    u = loop(T, lambda t, u: loop(len(range(N - 2, 0, -2)), black,
                                  loop(len(range(1, N - 1, 2)), red, u)), u)
    return jnp.sum(u * u)


@port("forced_chain", "", literal=True)
def forced_chain_literal(x, dt, p, T):
    N = x.shape[0]
    point = lambda i, x: x.at[i].set(x[i] + dt * jnp.sin(x[i - 1]) * p)  # noqa: E731
    x = loop(T, lambda t, x: loop(N, point, x, start=1), x)
    return jnp.sum(x * x)


@port("lorenz96_sweep", "", literal=True)
def lorenz96_sweep_literal(x, F, dt, T):
    N = x.shape[0]

    def point(i, x):
        return x.at[i].set(x[i] + dt * ((x[i + 1] - x[i - 2]) * x[i - 1] - x[i] + F))
    x = loop(T, lambda t, x: loop(N - 1, point, x, start=2), x)
    return jnp.sum(x * x)


@port("ema", "", literal=True)
def ema_literal(x, y, beta):
    def step(i, s):
        m, y = s
        m = beta * m + (1.0 - beta) * x[i]
        return m, y.at[i].set(m * m)
    _, y = loop(x.shape[0], step, (0.0, y))
    return jnp.sum(y)


@port("lower_matvec", "", literal=True)
def lower_matvec_literal(L, x, y):
    N = L.shape[0]

    def row(i, y):                      # for j in range(i + 1): full range, masked
        s = loop(N, lambda j, s: s + jnp.where(j <= i, L[i, j] * x[j], 0.0), 0.0)
        return y.at[i].set(s)
    y = loop(N, row, y)
    return jnp.sum(y * y) + 0.5 * jnp.sum(x * y)


@port("back_substitution", "", literal=True)
def back_substitution_literal(U, b, x):
    N = U.shape[0]
    x = x.at[N - 1].set(b[N - 1] / U[N - 1, N - 1])

    def row(i, x):                      # for j in range(i + 1, N): full range, masked
        s = loop(N, lambda j, s: s - jnp.where(j > i, U[i, j] * x[j], 0.0), b[i])
        return x.at[i].set(s / U[i, i])
    x = loop_down(N - 2, -1, row, x)
    return jnp.sum(x * x)


@port("roughness", "", literal=True)
def roughness_literal(x, w, lam):
    N = x.shape[0]

    def rough(i, s):
        d = x[i] - x[i - 1]
        return s + w[i] * d * d
    s = loop(N, rough, 0.0, start=1)
    r = loop(N, lambda i, r: r + x[i] * x[i], 0.0)
    return 0.5 * s + lam * r


@port("mirror_coupling", "", literal=True)
def mirror_coupling_literal(x, y):
    N = x.shape[0]

    def point(i, y):
        k = N - 1 - i
        return y.at[i].set(0.5 * y[i - 1] + x[k] * x[i])
    y = loop(N, point, y, start=1)
    return jnp.sum(y * y)


@port("column_recurrence", "", literal=True)
def column_recurrence_literal(A, c):
    A = nest([(1, A.shape[0]), A.shape[1] - 1], lambda i, j, A: A.at[i, j].set(
        A[i, j] + c * A[i - 1, j] * A[i - 1, j + 1]), A)
    return jnp.sum(A * A)


@port("powers", "", literal=True)
def powers_literal(x, y, c, p):
    x = loop(x.shape[0], lambda i, x: x.at[i].set(
        c * x[i - 1] ** 3 + (1.0 + y[i] ** 2) ** p - x[i] ** 2), x, start=1)
    return jnp.sum(x * x)


@port("clipped_update", "", literal=True)
def clipped_update_literal(x, y):
    y = loop(x.shape[0] - 1, lambda i, y: y.at[i].set(
        jnp.maximum(x[i], 0.5 * x[i - 1]) + jnp.abs(x[i] - x[i + 1])
        - jnp.minimum(x[i], 2.0 * x[i + 1] - 0.3)), y, start=1)
    return jnp.sum(y * y)


@port("math_funcs", "", literal=True)
def math_funcs_literal(x, y, a):
    y = loop(x.shape[0], lambda i, y: y.at[i].set(
        jnp.tanh(a * x[i]) + jnp.exp(-x[i] * x[i]) + jnp.log(1.0 + x[i] * x[i])
        + jnp.sqrt(2.0 + jnp.cos(x[i])) + jnp.sin(x[i]) * jnp.arctan(x[i])
        + jnp.tan(0.5 * x[i])), y)
    return jnp.sum(y * y)


@port("numpy_funcs", "", literal=True)
def numpy_funcs_literal(x, y):
    y = loop(x.shape[0], lambda i, y: y.at[i].set(
        jnp.sin(x[i]) * jnp.cos(x[i - 1]) + jnp.tan(0.3 * x[i]) + jnp.exp(0.1 * x[i])
        + jnp.log(2.0 + x[i]) + jnp.sqrt(1.0 + x[i] * x[i]) + jnp.tanh(y[i - 1])
        + jnp.arctan(x[i])), y, start=1)
    return jnp.sum(y * y)


@port("normalize_rows", "", literal=True)
def normalize_rows_literal(A, s):
    def point(i, j, A):
        A = A.at[i, j].set(A[i, j] * s)
        return A.at[i, j].set(A[i, j] / (1.0 + A[i, j - 1] * A[i, j - 1]))
    A = nest([A.shape[0], (1, A.shape[1])], point, A)
    return jnp.sum(A * A)


@port("diffuse32", "", literal=True)
def diffuse32_literal(x, alpha, T):
    """float32 arithmetic, as NumPy does it (x[i] is a float32 scalar, alpha a Python float)."""
    N = x.shape[0]

    def point(i, x):
        return x.at[i].set(x[i] + alpha * (x[i - 1] - 2.0 * x[i] + x[i + 1]))
    x = loop(T, lambda t, x: loop(N - 1, point, x, start=1), x)
    return jnp.sum(x * x)


@port("leapfrog", "", literal=True)
def leapfrog_literal(x, y, a, n):
    def point(i, s):
        x, y = s
        y = y.at[i].add(a * x[i])
        return x.at[i].set(x[i] - 0.5 * a * y[i]), y
    x, y = loop(n, lambda t, s: loop(x.shape[0], point, s), (x, y))
    return jnp.sum(y * y) + jnp.sum(x * x)


@port("smooth_unannotated", "", literal=True)
def smooth_unannotated_literal(A, alpha, T):
    N, M = A.shape

    def point(i, j, A):
        return A.at[i, j].set(A[i, j] + alpha * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1]
                                                 + A[i, j + 1] - 4.0 * A[i, j]))
    A = loop(T, lambda t, A: nest([(1, N - 1), (1, M - 1)], point, A), A)
    return jnp.sum(A * A)


# ------------------------------------------------------------------------------ arrays.py

@port("assorted_views", "", literal=True)
def assorted_views_literal(A, w):
    N, M = A.shape

    def row(i, A):
        A = A.at[i].set(A[i] * w[i] + 0.1 * i)      # r = A[i]; r[:] = r * w[i] + 0.1 * i
        return A.at[i, 0].set(2.0 * A[i, 0])
    A = loop(N, row, A)
    A = A.reshape(-1).at[::2].multiply(1.5).reshape(N, M)
    E = A * 0.5
    A = jnp.where((w > 0.5)[:, None], E, A)       # A[w > 0.5] = E[w > 0.5]
    A = lax.cond(jnp.any(A > 0.6) | jnp.all(w < 0.1), lambda A: A / 2.0, lambda A: A, A)
    return jnp.sum(A * A) + jnp.sum(jnp.clip(A, 0.01, None)) + jnp.sum(A > 0.0)


# -------------------------------------------------------------------------------- more.py

@port("bicg", "", literal=True)
def bicg_literal(A, p, r, s, q):
    N, M = A.shape

    def row(i, st):
        s, q = st
        q = q.at[i].set(0.0)

        def col(j, st):
            s, q = st
            s = s.at[j].set(s[j] + r[i] * A[i, j])
            return s, q.at[i].set(q[i] + A[i, j] * p[j])
        return loop(M, col, (s, q))
    s, q = loop(N, row, (s.at[:].set(0.0), q))
    return jnp.sum(s * s) + jnp.sum(q)


@port("2mm", "", literal=True)
def k2mm_literal(alpha, beta, A, B, C, D):
    N, K = A.shape
    M, L = C.shape
    tmp = nest([N, M, K], lambda i, j, k, tmp: tmp.at[i, j].add(alpha * A[i, k] * B[k, j]),
               jnp.zeros((N, M)))

    def point(i, j, D):
        D = D.at[i, j].set(D[i, j] * beta)
        return loop(M, lambda k, D: D.at[i, j].add(tmp[i, k] * C[k, j]), D)
    D = nest([N, L], point, D)
    return jnp.sum(D)


@port("3mm", "", literal=True)
def k3mm_literal(A, B, C, D, G):
    N, K = A.shape
    M, L = C.shape
    E = nest([N, M, K], lambda i, j, k, E: E.at[i, j].add(A[i, k] * B[k, j]),
             jnp.zeros((N, M)))
    F = nest([M, K, L], lambda i, j, k, F: F.at[i, j].add(C[i, k] * D[k, j]),
             jnp.zeros((M, K)))

    def point(i, j, G):
        G = G.at[i, j].set(0.0)
        return loop(M, lambda k, G: G.at[i, j].add(E[i, k] * F[k, j]), G)
    G = nest([N, K], point, G)
    return jnp.sum(G * G)


@port("syrk", "", literal=True)
def syrk_literal(alpha, beta, C, A):
    N, M = A.shape

    def row(i, C):                      # for j in range(i + 1): full range, masked
        C = loop(N, lambda j, C: C.at[i, j].set(jnp.where(j <= i, C[i, j] * beta, C[i, j])), C)
        return nest([M, N], lambda k, j, C: C.at[i, j].add(
            jnp.where(j <= i, alpha * A[i, k] * A[j, k], 0.0)), C)
    C = loop(N, row, C)
    return jnp.sum(C * C)


@port("syr2k", "", literal=True)
def syr2k_literal(alpha, beta, C, A, B):
    N, M = A.shape
    idx = jnp.arange(N)

    def row(i, C):
        head = idx <= i                 # the slice [:i + 1], a traced bound: a mask
        C = C.at[i].set(jnp.where(head, C[i] * beta, C[i]))
        return loop(M, lambda k, C: C.at[i].add(jnp.where(
            head, A[:, k] * alpha * B[i, k] + B[:, k] * alpha * A[i, k], 0.0)), C)
    C = loop(N, row, C)
    return jnp.sum(C * C)


@port("symm", "", literal=True)
def symm_literal(alpha, beta, C, A, B):
    M, N = C.shape

    def point(i, j, C):
        def inner(k, s):                # for k in range(i): full range, masked
            C, temp2 = s
            C = C.at[k, j].add(jnp.where(k < i, alpha * B[i, j] * A[i, k], 0.0))
            return C, temp2 + jnp.where(k < i, B[k, j] * A[i, k], 0.0)
        C, temp2 = loop(M, inner, (C, 0.0))
        return C.at[i, j].set(beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2)
    C = nest([M, N], point, C)
    return jnp.sum(C * C)


@port("trmm", "", literal=True)
def trmm_literal(alpha, A, B):
    M, N = B.shape

    def point(i, j, B):                 # for k in range(i + 1, M): full range, masked
        B = loop(M, lambda k, B: B.at[i, j].add(jnp.where(k > i, A[k, i] * B[k, j], 0.0)), B)
        return B.at[i, j].set(alpha * B[i, j])
    B = nest([M, N], point, B)
    return jnp.sum(B * B)


@port("lu", "", literal=True)
def lu_literal(A):
    N = A.shape[0]

    def row(i, A):
        def lower(j, A):                # for j in range(i): for k in range(j): masked
            A = loop(N, lambda k, A: A.at[i, j].set(jnp.where(
                (k < j) & (j < i), A[i, j] - A[i, k] * A[k, j], A[i, j])), A)
            return A.at[i, j].set(jnp.where(j < i, A[i, j] / A[j, j], A[i, j]))

        def upper(j, A):                # for j in range(i, N): for k in range(i): masked
            return loop(N, lambda k, A: A.at[i, j].set(jnp.where(
                (k < i) & (j >= i), A[i, j] - A[i, k] * A[k, j], A[i, j])), A)
        return loop(N, upper, loop(N, lower, A))
    A = loop(N, row, A)
    return jnp.sum(A * A)


@port("ludcmp", "", literal=True)
def ludcmp_literal(A, b, x, y):
    N = A.shape[0]

    def lu_row(i, A):                   # lu_in_place: triangular bounds masked
        def lower(j, A):
            w = loop(N, lambda k, w: w - jnp.where(k < j, A[i, k] * A[k, j], 0.0), A[i, j])
            return A.at[i, j].set(jnp.where(j < i, w / A[j, j], A[i, j]))

        def upper(j, A):
            w = loop(N, lambda k, w: w - jnp.where(k < i, A[i, k] * A[k, j], 0.0), A[i, j])
            return A.at[i, j].set(jnp.where(j >= i, w, A[i, j]))
        return loop(N, upper, loop(N, lower, A))
    A = loop(N, lu_row, A)

    def forward(i, y):
        w = loop(N, lambda j, w: w - jnp.where(j < i, A[i, j] * y[j], 0.0), b[i])
        return y.at[i].set(w)
    y = loop(N, forward, y)

    def back(i, x):
        w = loop(N, lambda j, w: w - jnp.where(j > i, A[i, j] * x[j], 0.0), y[i])
        return x.at[i].set(w / A[i, i])
    x = loop_down(N - 1, -1, back, x)
    return jnp.sum(x * x) + jnp.sum(y)


@port("cholesky", "", literal=True)
def cholesky_literal(A):
    N = A.shape[0]
    idx = jnp.arange(N)

    def row(i, A):
        def col(j, A):                  # for j in range(i): full range, masked
            a = A[i, j] - jnp.sum(jnp.where(idx < j, A[i] * A[j], 0.0))  # A[i, :j] * A[j, :j]
            return A.at[i, j].set(jnp.where(j < i, a / A[j, j], A[i, j]))
        A = loop(N, col, A)
        A = A.at[i, i].set(A[i, i] - jnp.sum(jnp.where(idx < i, A[i] * A[i], 0.0)))
        return A.at[i, i].set(jnp.sqrt(A[i, i]))
    A = loop(N, row, A)
    return jnp.sum(A * A)


@port("durbin", "", literal=True)
def durbin_literal(r, y):
    N = r.shape[0]
    idx = jnp.arange(N)

    def step(k, s):
        y, z, beta, alpha = s
        beta = (1.0 - alpha * alpha) * beta
        head = idx < k                              # [:k]
        rev = jnp.clip(k - 1 - idx, 0, N - 1)       # [k - 1::-1]
        total = jnp.sum(jnp.where(head, r[rev] * y, 0.0))
        alpha = -(r[k] + total) / beta
        z = jnp.where(head, y + alpha * y[rev], z)
        y = jnp.where(head, z, y)
        return y.at[k].set(alpha), z, beta, alpha
    y, _, _, _ = loop(N, step, (y.at[0].set(-r[0]), jnp.zeros_like(y), 1.0, -r[0]), start=1)
    return jnp.sum(y * y)


@port("gramschmidt", "", literal=True)
def gramschmidt_literal(A, R, Q):
    N = A.shape[1]

    def step(k, s):
        A, R, Q = s
        nrm = jnp.sum(A[:, k] * A[:, k])
        R = R.at[k, k].set(jnp.sqrt(nrm))
        Q = Q.at[:, k].set(A[:, k] / R[k, k])

        def col(j, s):                  # for j in range(k + 1, N): full range, masked
            A, R = s
            R = R.at[k, j].set(jnp.where(j > k, jnp.sum(Q[:, k] * A[:, j]), R[k, j]))
            return A.at[:, j].set(jnp.where(j > k, A[:, j] - Q[:, k] * R[k, j], A[:, j])), R
        A, R = loop(N, col, (A, R))
        return A, R, Q
    A, R, Q = loop(N, step, (A, R, Q))
    return jnp.sum(R) + jnp.sum(Q * Q * Q)


@port("covariance", "", literal=True)
def covariance_literal(data, cov):
    n, M = data.shape
    data = data - jnp.mean(data, axis=0)

    def point(i, j, cov):               # for j in range(i, M): full range, masked
        cov = cov.at[i, j].set(jnp.where(
            j >= i, jnp.sum(data[:, i] * data[:, j]) / (n - 1.0), cov[i, j]))
        return cov.at[j, i].set(jnp.where(j >= i, cov[i, j], cov[j, i]))
    cov = nest([M, M], point, cov)
    return jnp.sum(cov * cov)


@port("correlation", "", literal=True)
def correlation_literal(data, corr):
    n, M = data.shape
    mean = jnp.mean(data, axis=0)
    stddev = jnp.std(data, axis=0)
    stddev = jnp.where(stddev <= 0.1, 1.0, stddev)
    data = data - mean
    data = data / (jnp.sqrt(n * 1.0) * stddev)

    def row(i, corr):
        corr = corr.at[i, i].set(1.0)

        def col(j, corr):               # for j in range(i + 1, M): full range, masked
            corr = corr.at[i, j].set(jnp.where(j > i, jnp.sum(data[:, i] * data[:, j]),
                                               corr[i, j]))
            return corr.at[j, i].set(jnp.where(j > i, corr[i, j], corr[j, i]))
        return loop(M, col, corr)
    corr = loop(M - 1, row, corr.at[:].set(0.0))
    corr = corr.at[M - 1, M - 1].set(1.0)
    return jnp.sum(corr * corr * corr)


@port("doitgen", "", literal=True)
def doitgen_literal(A, C4):
    L, M, N = A.shape

    def plane(r, q, st):
        A, s = st

        def entry(p, s):
            return loop(N, lambda t, s: s.at[p].add(A[r, q, t] * C4[t, p]), s.at[p].set(0.0))
        s = loop(N, entry, s)
        return loop(N, lambda p, A: A.at[r, q, p].set(s[p]), A), s
    A, _ = nest([L, M], plane, (A, jnp.zeros(N)))
    return jnp.sum(A * A)


@port("adi", "", literal=True)
def adi_literal(u, v, p, q, TSTEPS):
    N = u.shape[0]
    a, b, c, d, e, f = adi_coefficients(N, TSTEPS)
    I = slice(1, N - 1)  # noqa: E741

    def step(t, s):
        u, v, p, q = s
        v = v.at[0, I].set(1.0)
        p = p.at[I, 0].set(0.0)
        q = q.at[I, 0].set(v[0, I])

        def col(j, s):
            p, q = s
            p = p.at[I, j].set(-c / (a * p[I, j - 1] + b))
            q = q.at[I, j].set((-d * u[j, 0:N - 2] + (1.0 + 2.0 * d) * u[j, 1:N - 1]
                                - f * u[j, 2:N] - a * q[I, j - 1]) / (a * p[I, j - 1] + b))
            return p, q
        p, q = loop(N - 1, col, (p, q), start=1)
        v = v.at[N - 1, I].set(1.0)
        v = loop_down(N - 2, 0, lambda j, v: v.at[j, I].set(p[I, j] * v[j + 1, I] + q[I, j]), v)
        u = u.at[I, 0].set(1.0)
        p = p.at[I, 0].set(0.0)
        q = q.at[I, 0].set(u[I, 0])

        def row(j, s):
            p, q = s
            p = p.at[I, j].set(-f / (d * p[I, j - 1] + e))
            q = q.at[I, j].set((-a * v[0:N - 2, j] + (1.0 + 2.0 * a) * v[1:N - 1, j]
                                - c * v[2:N, j] - d * q[I, j - 1]) / (d * p[I, j - 1] + e))
            return p, q
        p, q = loop(N - 1, row, (p, q), start=1)
        u = u.at[I, N - 1].set(1.0)
        u = loop_down(N - 2, 0, lambda j, u: u.at[I, j].set(p[I, j] * u[I, j + 1] + q[I, j]), u)
        return u, v, p, q
    u, v, p, q = loop(TSTEPS + 1, step, (u, v, p, q), start=1)
    return jnp.sum(u * u) + jnp.sum(v)


@port("deriche", "", literal=True)
def deriche_literal(alpha, imgIn, imgOut):
    M, N = imgIn.shape
    k = (1.0 - jnp.exp(-alpha)) ** 2 / (1.0 + 2.0 * alpha * jnp.exp(-alpha)
                                        - jnp.exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * jnp.exp(-alpha) * (alpha - 1.0)
    a3 = a7 = k * jnp.exp(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * jnp.exp(-2.0 * alpha)
    b1 = 2.0 ** (-alpha)
    b2 = -jnp.exp(-2.0 * alpha)
    c1 = c2 = 1.0
    y1 = jnp.zeros_like(imgIn)                      # np.empty_like
    y1 = y1.at[:, 0].set(a1 * imgIn[:, 0])
    y1 = y1.at[:, 1].set(a1 * imgIn[:, 1] + a2 * imgIn[:, 0] + b1 * y1[:, 0])
    y1 = loop(N, lambda j, y1: y1.at[:, j].set(
        a1 * imgIn[:, j] + a2 * imgIn[:, j - 1] + b1 * y1[:, j - 1] + b2 * y1[:, j - 2]),
        y1, start=2)
    y2 = jnp.zeros_like(imgIn)
    y2 = y2.at[:, -1].set(0.0)
    y2 = y2.at[:, -2].set(a3 * imgIn[:, -1])
    y2 = loop_down(N - 3, -1, lambda j, y2: y2.at[:, j].set(
        a3 * imgIn[:, j + 1] + a4 * imgIn[:, j + 2] + b1 * y2[:, j + 1] + b2 * y2[:, j + 2]),
        y2)
    imgOut = c1 * (y1 + y2)
    y1 = y1.at[0, :].set(a5 * imgOut[0, :])
    y1 = y1.at[1, :].set(a5 * imgOut[1, :] + a6 * imgOut[0, :] + b1 * y1[0, :])
    y1 = loop(M, lambda i, y1: y1.at[i, :].set(
        a5 * imgOut[i, :] + a6 * imgOut[i - 1, :] + b1 * y1[i - 1, :] + b2 * y1[i - 2, :]),
        y1, start=2)
    y2 = y2.at[-1, :].set(0.0)
    y2 = y2.at[-2, :].set(a7 * imgOut[-1, :])
    y2 = loop_down(M - 3, -1, lambda i, y2: y2.at[i, :].set(
        a7 * imgOut[i + 1, :] + a8 * imgOut[i + 2, :] + b1 * y2[i + 1, :] + b2 * y2[i + 2, :]),
        y2)
    imgOut = c2 * (y1 + y2)
    return jnp.sum(imgOut * imgOut)


@port("vertical_advection", "", literal=True)
def vertical_advection_literal(u, w, dt, T):
    N, M, K = u.shape

    def column(i, j, s):
        u, a, b, c, cp, dp = s

        def coefficients(k, s):
            a, b, c = s
            a = a.at[k].set(jnp.where(k > 0, -0.25 * dt * w[i, j, k], 0.0))     # 0, if k > 0
            c = c.at[k].set(jnp.where(k < K - 1, 0.25 * dt * w[i, j, k], 0.0))
            return a, b.at[k].set(1.0 - a[k] + c[k]), c
        a, b, c = loop(K, coefficients, (a, b, c))
        cp = cp.at[0].set(c[0] / b[0])
        dp = dp.at[0].set(u[i, j, 0] / b[0])

        def forward(k, s):
            cp, dp = s
            den = b[k] - a[k] * cp[k - 1]
            cp = cp.at[k].set(c[k] / den)
            return cp, dp.at[k].set((u[i, j, k] - a[k] * dp[k - 1]) / den)
        cp, dp = loop(K, forward, (cp, dp), start=1)
        u = u.at[i, j, K - 1].set(dp[K - 1])
        u = loop_down(K - 2, -1, lambda k, u: u.at[i, j, k].set(dp[k] - cp[k] * u[i, j, k + 1]),
                      u)
        return u, a, b, c, cp, dp
    z = jnp.zeros(K)
    u = loop(T, lambda t, s: nest([N, M], column, s), (u, z, z, z, z, z))[0]
    return jnp.sum(u * u)


@port("hdiff_loops", "", literal=True)
def hdiff_loops_literal(inp, coeff, out):
    N, M = inp.shape
    lap = nest([(1, N - 1), (1, M - 1)], lambda i, j, lap: lap.at[i, j].set(
        4.0 * inp[i, j] - (inp[i + 1, j] + inp[i - 1, j] + inp[i, j + 1] + inp[i, j - 1])),
        jnp.zeros((N, M)))

    def fx(i, j, flx):
        flx = flx.at[i, j].set(lap[i + 1, j] - lap[i, j])
        return flx.at[i, j].set(jnp.where(flx[i, j] * (inp[i + 1, j] - inp[i, j]) > 0.0,
                                          0.0, flx[i, j]))

    def fy(i, j, fly):
        fly = fly.at[i, j].set(lap[i, j + 1] - lap[i, j])
        return fly.at[i, j].set(jnp.where(fly[i, j] * (inp[i, j + 1] - inp[i, j]) > 0.0,
                                          0.0, fly[i, j]))
    flx = nest([(1, N - 2), (2, M - 2)], fx, jnp.zeros((N, M)))
    fly = nest([(2, N - 2), (1, M - 2)], fy, jnp.zeros((N, M)))
    out = nest([(2, N - 2), (2, M - 2)], lambda i, j, out: out.at[i, j].set(
        inp[i, j] - coeff[i, j] * (flx[i, j] - flx[i - 1, j] + fly[i, j] - fly[i, j - 1])),
        out)
    return jnp.sum(out * out)


@port("conv2d", "", literal=True)
def conv2d_literal(x, w, bias, out):
    L, T = out.shape[:2]
    K = x.shape[0]

    def point(f, i, j, out):
        s = nest([K, 3, 3], lambda c, di, dj, s: s + w[f, c, di, dj] * x[c, i + di, j + dj],
                 bias[f])
        return out.at[f, i, j].set(jnp.tanh(s))
    out = nest([L, T, T], point, out)
    return jnp.sum(out * out)


def _dense_tanh_literal(x, W, b, h):
    N, K = x.shape

    def point(n, m, h):
        s = loop(K, lambda k, s: s + x[n, k] * W[k, m], b[m])
        return h.at[n, m].set(jnp.tanh(s))
    return nest([N, W.shape[1]], point, h)


@port("mlp_loops", "", literal=True)
def mlp_loops_literal(X, W1, b1, W2, b2, Y, H, Z):
    N = X.shape[0]
    H = _dense_tanh_literal(X, W1, b1, H)
    Z = _dense_tanh_literal(H, W2, b2, Z)

    def sample(n, loss):
        zmax = jnp.max(Z[n])
        lse = zmax + jnp.log(jnp.sum(jnp.exp(Z[n] - zmax)))
        return loss + (lse - jnp.sum(Y[n] * Z[n]))
    return loop(N, sample, 0.0) / N


@port("softmax_loops", "", literal=True)
def softmax_loops_literal(x, w, out):
    N, M = x.shape

    def row(i, out):
        mx = loop(M, lambda j, mx: jnp.where(x[i, j] > mx, x[i, j], mx), x[i, 0], start=1)

        def exp(j, st):
            out, s = st
            out = out.at[i, j].set(jnp.exp(x[i, j] - mx))
            return out, s + out[i, j]
        out, s = loop(M, exp, (out, 0.0))
        return loop(M, lambda j, out: out.at[i, j].set(out[i, j] / s), out)
    out = loop(N, row, out)
    return jnp.sum(out * w)
