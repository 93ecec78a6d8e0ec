"""The C printer's cheap pre-test of integer-valued expressions (codegen/printer.py):
it may only skip sympy's assumption query where that query could not answer True, or
the printed C would change (an integer subexpression is printed as a cast)."""
import sympy as sp

from adjoint.codegen.printer import CPrinter, _may_be_integer

x, y = sp.symbols("x y", real=True)
i, n = sp.symbols("i n", integer=True)

CASES = [x, x + 1, 2 * x, x * y, x ** 2, i + x, i * x, i, i + 1, 2 * i * n, i ** 2,
         sp.sign(x), -sp.sign(x), 2 * sp.sign(x - y), sp.sign(x) + sp.sign(y),
         sp.floor(x), sp.floor(x) + i, x * sp.sign(y), sp.sign(x) ** 2, sp.Rational(1, 2) * i,
         sp.Heaviside(x), 0.5 * sp.sign(x)]


def test_the_pre_test_never_hides_an_integer():
    for e in CASES:
        assert _may_be_integer(e) or not e.is_integer, e


def test_integer_valued_parts_of_a_value_are_cast():
    printer = CPrinter({})
    assert printer.doprint(-sp.sign(x)) == "((double)(-sc_sign(c_x)))"
    assert printer.doprint(x * sp.sign(y)) == "c_x*((double)(sc_sign(c_y)))"
    assert printer.doprint(x + i) == "((double)(i_i)) + c_x"
    assert printer.doprint(x * y + 2 * x) == "c_x*c_y + 2*c_x"
