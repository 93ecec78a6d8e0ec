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
    assert printer.doprint(x + i) == "c_x + ((double)(i_i))"
    assert printer.doprint(x * y + 2 * x) == "2.0*c_x + c_x*c_y"


# ---- values as Python computes them (sdfg/arithmetic.py) ---------------------------------
from adjoint.sdfg import arithmetic as fp              # noqa: E402
from adjoint.sdfg.nodes import Memlet, Tasklet, self_update   # noqa: E402

a, b, c = sp.symbols("a b c", real=True)


def test_values_print_one_operation_per_node_in_python_order():
    printer = CPrinter({})
    cases = {fp.sub(x, x): "c_x - c_x",
             fp.sub(fp.add(a, sp.Float(1e16)), sp.Float(1e16)):
                 "c_a + 10000000000000000.0 - 10000000000000000.0",
             fp.div(fp.mul(x, y), y): "c_x*c_y/c_y",
             fp.add(a, fp.add(b, c)): "c_a + (c_b + c_c)",
             fp.sub(a, fp.sub(b, c)): "c_a - (c_b - c_c)",
             fp.mul(a, fp.div(b, c)): "c_a*(c_b/c_c)",
             fp.div(a, fp.mul(b, c)): "c_a/(c_b*c_c)",
             fp.sub(sp.Float(0.0), x): "0.0 - c_x",
             fp.UNARY["exp"](fp.UNARY["log"](x)): "exp(log(c_x))",
             fp.power(fp.sqrt(x), sp.Integer(2)): "((sqrt(c_x))*(sqrt(c_x)))",
             fp.power(x, sp.Integer(3)): "pow(c_x, 3.0)",
             fp.power(x, sp.Float(0.5)): "sc_pow(c_x, 0.5)",
             fp.power(x, sp.Float(0.5), array=True): "sqrt(c_x)",
             fp.div(i, n): "((double)(i_i))/((double)(i_n))",
             fp.div(sp.Integer(1), sp.Integer(3)): "(1.0/3.0)"}
    for expr, text in cases.items():
        assert printer.doprint(expr) == text, (expr, printer.doprint(expr))


def test_substitution_rebuilds_nothing_else():
    assert fp.substitute(fp.sub(x, y), {y: x}) == fp.sub(x, x)
    assert fp.substitute(fp.sub(x, y), {y: x}) != 0


def test_repeated_subtrees_are_named_and_nothing_is_regrouped():
    square = fp.mul(x, x)                      # sympy's cse would see the set {x}
    exprs = [fp.add(fp.mul(square, y), square), fp.mul(fp.add(a, b), c)]
    temps, out = fp.common_subexpressions(exprs, sp.numbered_symbols("t", real=True))
    assert [e for _, e in temps] == [square]
    back = [fp.substitute(e, dict(temps)) for e in out]
    assert back == exprs


def test_only_a_top_level_sum_of_the_old_value_is_a_reduction():
    own = sp.Symbol("s", real=True)
    m = Memlet("acc")

    def update(expr):
        return self_update(Tasklet(((own, m), (a, Memlet("A", (i,))), (b, Memlet("B", (i,)))),
                                   ((m, expr),)))
    assert update(fp.add(own, fp.add(a, b)))[0] == "sum"
    assert update(fp.add(fp.add(own, a), b)) is None       # (s + a) + b is not s + (a + b)
    assert update(fp.sub(own, a))[2] == fp.neg(a)
