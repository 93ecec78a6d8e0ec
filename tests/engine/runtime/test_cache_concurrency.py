"""Four processes compile the same fresh kernel at once into an empty compile cache.

Each child imports the engine, waits at a file barrier until all four are ready, then
compiles and runs the forward and the gradient, checking both against the kernel's
plain-Python reference.  All must succeed; a fifth run afterwards uses the warm cache.
"""
import os
import subprocess
import sys
import textwrap
import time
import uuid

CHILD = textwrap.dedent('''
    import os, sys, time
    import numpy as np
    from adjoint import float64, grad, kernel, symbol

    N = symbol("N")

    @kernel
    def fresh(A: float64[N, N], c: float, T: int) -> float:
        for t in range(T):
            for i in range(1, N - 1):
                for j in range(1, N - 1):
                    A[i, j] = A[i, j] + c * (A[i - 1, j] + A[i, j + 1] - 2.0 * A[i, j]) + SALT
        return np.sum(A * A)

    def main(barrier, me, count):
        open(os.path.join(barrier, f"ready-{me}"), "w").close()
        deadline = time.time() + 120
        while len(os.listdir(barrier)) < count:
            if time.time() > deadline:
                sys.exit("barrier timed out")
            time.sleep(0.002)
        rng = np.random.default_rng(3)
        A = rng.random((9, 9))
        ref = A.copy()
        want = float(fresh.py_func(ref, 0.1, 3))
        got_A = A.copy()
        got = float(fresh(got_A, 0.1, 3))
        assert abs(got - want) <= 1e-12 * abs(want), (got, want)
        assert np.allclose(got_A, ref, rtol=1e-12, atol=1e-14)
        g = grad(fresh, wrt="A")(A, 0.1, 3)
        d = rng.standard_normal(A.shape)
        h = 1e-4
        f = lambda s: float(fresh.py_func(A + s * h * d, 0.1, 3))
        fd = (8.0 * (f(1) - f(-1)) - (f(2) - f(-2))) / (12.0 * h)
        ad = float(np.sum(g * d))
        assert abs(ad - fd) <= 1e-6 * abs(fd), (ad, fd)
        print("OK", me)

    if __name__ == "__main__":
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
''')


def _env(repo_root, cache):
    env = dict(os.environ)
    env["SIMCORE_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(repo_root)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _spawn(script, barrier, me, count, env):
    return subprocess.Popen([sys.executable, str(script), str(barrier), str(me), str(count)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_concurrent_compiles_into_empty_cache(tmp_path, repo_root):
    cache = tmp_path / "cache"
    cache.mkdir()
    salt = f"{1e-9 * (uuid.uuid4().int % 1000 + 1)!r}"    # a kernel no cache has seen
    script = tmp_path / "fresh_kernel.py"
    script.write_text(CHILD.replace("SALT", salt))
    env = _env(repo_root, cache)

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [_spawn(script, barrier, me, 4, env) for me in range(4)]
    start = time.time()
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, 300 - (time.time() - start)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        results.append((p.returncode, out, err))
    for me, (rc, out, err) in enumerate(results):
        assert rc == 0 and f"OK {me}" in out, f"process {me} failed (rc={rc}):\n{out}\n{err}"
    assert any(cache.iterdir()), "nothing was written to SIMCORE_CACHE_DIR"

    # A later process finds the cache warm and still gets the right answers.
    barrier2 = tmp_path / "barrier2"
    barrier2.mkdir()
    p = _spawn(script, barrier2, 0, 1, env)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0 and "OK 0" in out, f"warm run failed:\n{out}\n{err}"
