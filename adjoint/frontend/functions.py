"""Integer functions with Python's semantics, printed as C helpers."""
import sympy as sp


class floordiv(sp.Function):
    """Python's ``a // b`` on integers (rounds towards minus infinity)."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer and b != 0:
            return sp.Integer(int(a) // int(b))
        if b == 1 or a.is_zero:             # 0 // b: checked non-zero b or never executed
            return a

    def _sympystr(self, printer):
        a, b = (printer.parenthesize(x, 50) for x in self.args)
        return f"{a} // {b}"


class python_mod(sp.Function):
    """Python's ``a % b`` on integers (takes the sign of ``b``)."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer and b != 0:
            return sp.Integer(int(a) % int(b))
        if a.is_zero or b == 1:
            return sp.Integer(0)

    def _sympystr(self, printer):
        a, b = (printer.parenthesize(x, 50) for x in self.args)
        return f"{a} % {b}"
