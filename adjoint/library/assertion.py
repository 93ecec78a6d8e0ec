"""``assert test, message`` on data or loop variables: checked where Python checks it.

The frontend stores the test into a scalar flag (1: it held) and puts an ``Assertion``
after it; the node's C ends the entry point with status ``FAILED - line`` when the flag
is 0 (the path a failed factorisation takes), and the runtime raises
``errors.AssertionFailed`` (an ``AssertionError``) naming the line, the test and the
message. What the kernel wrote before that stays written, as in Python (statements
before the assert ran); nothing is returned. The reverse sweep runs after a forward
that passed every check, so the node has no adjoint, and the tangent program checks
as the forward does.
"""
from dataclasses import dataclass

from ..sdfg.nodes import LibraryNode


@dataclass(frozen=True, eq=False)
class Assertion(LibraryNode):
    """Stop the call unless the scalar ``flag`` is nonzero; ``failure`` is the message."""
    flag: str
    failure: str
    line: int = 0

    kind = "assert"

    def accesses(self):
        return ((self.flag, "read"),)

    def operands(self):
        return ()

    def text(self):
        return f"assert {self.flag}    [{self.failure}]"

    def work(self):
        return (1,)                     # one comparison

    def reverse_reads(self, active):
        return ()

    def vjp(self, d):
        return ()

    def jvp(self, d):
        return (self,)

    def emit(self, gen):
        gen.emit(f"if ({gen.pointer(self.flag)}[0] == 0) {gen.fail(self.line)}")
