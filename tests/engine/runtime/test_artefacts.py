"""A process that finds a kernel built skips parsing and code generation."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

KERNEL = textwrap.dedent('''
    import numpy as np
    from adjoint import float64, grad, kernel, symbol
    N = symbol("N")

    @kernel
    def smooth_artefacts(A: float64[N], p: float) -> float:
        for i in range(1, N - 1):
            A[i] = p * A[i] + 0.5 * (A[i - 1] + A[i + 1])
        return np.sum(A * A)
''')

RUN = textwrap.dedent('''
    import sys
    import numpy as np
    import adjoint.pipeline as pipeline
    if sys.argv[1] == "warm":
        def refuse(*args, **kwargs):
            raise AssertionError("the warm process parsed or generated code")
        pipeline.parse = pipeline.generate_module = pipeline.differentiate = refuse
        # sizes are evaluated at the call's values: a symbolic Max(0, N - 2) per array
        # took sympy milliseconds each (the first call in a warm process)
        from adjoint.sdfg.nodes import Container
        Container.volume = refuse
    from kern import smooth_artefacts
    from adjoint import grad
    A = np.linspace(0.0, 1.0, 9)
    print(smooth_artefacts(A.copy(), 0.3), grad(smooth_artefacts, wrt="p")(A, 0.3))
''')


def test_warm_process_loads_artefacts(tmp_path):
    (tmp_path / "kern.py").write_text(KERNEL)
    env = {**os.environ, "SIMCORE_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    outputs = [subprocess.run([sys.executable, "-c", RUN, mode], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
               for mode in ("cold", "warm")]
    for out in outputs:
        assert out.returncode == 0, out.stderr[-2000:]
    assert outputs[0].stdout == outputs[1].stdout
    assert len(list((tmp_path / "cache").glob("*.artefact"))) == 2
