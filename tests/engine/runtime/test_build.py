"""Building generated C: the parts of a module's source compile as translation units of
their own, all at once, and link into a library that computes what the whole source
compiled in one piece computes."""
import numpy as np
import pytest

from adjoint import grad, kernel, options
from adjoint.codegen import translation_units
from adjoint.errors import CompileError
from adjoint.runtime import build
from adjoint.corpus.loops import jacobi1d


def _smooth():
    """jacobi1d with specialisations of its own (not shared with earlier tests)."""
    return kernel(jacobi1d.__wrapped__)


def _gradient(monkeypatch, folder, cpus, smooth=None):
    monkeypatch.setattr(options, "cache_dir", str(folder))
    monkeypatch.setattr(build, "_cpus", lambda: cpus)
    A = np.linspace(0.0, 1.0, 40) ** 2
    return grad(smooth or _smooth(), wrt="A")(A.copy(), np.zeros(40), 7)


def test_parallel_units_compute_what_one_unit_computes(tmp_path, monkeypatch):
    linked = []
    compile_parallel = build._compile_parallel
    monkeypatch.setattr(build, "_compile_parallel",
                        lambda units, *a: linked.append(len(units)) or
                        compile_parallel(units, *a))
    whole = _gradient(monkeypatch, tmp_path / "one", cpus=1)
    assert not linked
    parallel = _gradient(monkeypatch, tmp_path / "many", cpus=3)
    assert linked and max(linked) == 3          # record, reverse, ... in three units
    np.testing.assert_array_equal(whole, parallel)
    leftovers = [p.name for p in (tmp_path / "many").iterdir()
                 if p.suffix == ".o" or ".tmp-" in p.name]     # the process's own files
    assert not leftovers


def test_a_generated_module_is_a_head_and_parts(tmp_path, monkeypatch):
    smooth = _smooth()
    _gradient(monkeypatch, tmp_path, cpus=1, smooth=smooth)
    spec = smooth.specializations[0]
    source = spec.backward(("A",), {"__return"}).source
    head, parts = translation_units(source)
    assert source.startswith(head) and "#include <stdint.h>" in head
    assert all(f"sc_entry{k}(" in head for k in range(len(parts) - 1))    # prototypes
    assert all("#include" not in p and "sc_run(" not in p for p in parts[:-1])
    assert "int64_t sc_run(" in parts[-1] and "int sc_check(" in parts[-1]


def test_units_are_balanced_by_length():
    units = build._units(("H", ["a" * 5, "b" * 3, "c" * 3, "d"]), 2)
    assert sorted(units) == ["Haaaaad", "Hbbbccc"]
    assert len(build._units(("H", ["a", "b"]), 8)) == 2
    assert build._units(("H", ["a"]), 4) == ["Ha"]


def test_a_unit_that_fails_to_compile_is_named_and_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(options, "cache_dir", str(tmp_path))
    monkeypatch.setattr(build, "_cpus", lambda: 2)
    head, parts = "#include <stdint.h>\n", ["int64_t sc_one(void) { return 1; }\n",
                                             "int64_t sc_two(void) { return 2 }\n"]
    with pytest.raises(CompileError, match=r"compiling broken failed.*\.1\.c") as err:
        build.build_module(head + "".join(parts), "broken", parts=(head, parts))
    kept = str(err.value).rsplit("the generated source is ", 1)[1].strip()
    assert "return 2 }" in open(kept).read()
    assert not list(tmp_path.glob("*.o")) and not list(tmp_path.glob("*.so"))
