"""SDFG validation (sdfg/validate.py): an index naming a symbol nothing binds is an
error that names the memlet."""
from dataclasses import replace

import pytest
import sympy as sp

from adjoint import float64, kernel, symbol
from adjoint.frontend import parse, read_source
from adjoint.sdfg import validate
from adjoint.sdfg.nodes import Sequence
from adjoint.sdfg.validate import InvalidSDFG

N = symbol("N")


@kernel
def doubled(x: float64[N], y: float64[N]):
    for i in range(N):
        y[i] = 2.0 * x[i]


def test_an_unbound_index_names_its_memlet():
    sdfg = validate(parse(read_source(doubled.__wrapped__), "doubled", dict(doubled._declared)))
    loop = sdfg.body.elements[0]
    state = loop.body.elements[0]
    t = state.nodes[0]
    (m, e), = t.outputs
    stray = sp.Symbol("k", integer=True)
    bad = replace(t, outputs=((replace(m, subset=(stray,)), e),))
    body = Sequence((replace(loop, body=Sequence((replace(state, nodes=(bad,)),))),))
    with pytest.raises(InvalidSDFG, match=r"memlet y\[k\] uses unbound symbols \['k'\]"):
        validate(sdfg.replace(body=body))
