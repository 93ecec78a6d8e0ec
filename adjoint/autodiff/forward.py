"""Forward mode: the tangent-linear SDFG.

Each statement ``x[w] = f(x[r1], ...)`` becomes one tasklet that first writes the
tangent ``xd[w] = sum_k df/dx[r_k] * xd[r_k]`` and then the primal value: inputs are
read before either write, so self-references see the old values, as in Python.
"""
from dataclasses import replace

import sympy as sp

from ..analysis.activity import varied_containers
from ..sdfg.arithmetic import TANGENT
from ..sdfg.nodes import (ConditionalRegion, Container, LibraryNode, LoopRegion, MapScope, Memlet,
                          Sequence, State, Tasklet)
from ..library.base import Rules
from .partials import partial, times


def tangent_name(name):
    return TANGENT + name


def linearize(sdfg, wrt):
    """(tangent-linear SDFG, varied containers) for tangents seeded on ``wrt``."""
    varied = varied_containers(sdfg, wrt)
    containers = dict(sdfg.containers)
    for name in sorted(varied):
        c = sdfg.containers[name]
        containers[tangent_name(name)] = Container(tangent_name(name), c.dtype, c.shape)
    rules = Rules(varied, TANGENT, containers)
    body = _region(sdfg.body, rules)
    return sdfg.replace(body=body, containers=containers), varied


def _region(region, rules):
    if isinstance(region, Sequence):
        return Sequence(tuple(_region(e, rules) for e in region.elements))
    if isinstance(region, LoopRegion):
        return replace(region, body=_region(region.body, rules))
    if isinstance(region, ConditionalRegion):
        return ConditionalRegion(tuple((c, _region(b, rules)) for c, b in region.branches),
                                 region.line)
    return State(tuple(n for node in region.nodes for n in _nodes(node, rules)), region.label)


def _nodes(node, rules):
    """A library node's tangent rule (nodes, itself among them), or the tasklet's."""
    if isinstance(node, LibraryNode):
        if not any(rules.has(n) for n in node.reads()):
            return (node,)
        return node.jvp(rules)
    return (_node(node, rules.carried),)


def _node(node, varied):
    if isinstance(node, MapScope):
        return MapScope(node.params, node.ranges, tuple(_node(t, varied) for t in node.body),
                        node.line)
    (out, expr), = node.outputs
    if out.data not in varied:
        return node
    conns = node.connector_memlets()
    inputs, terms = list(node.inputs), []
    for k, conn in enumerate(sorted(expr.free_symbols & conns.keys(), key=str)):
        m = conns[conn]
        if m.data in varied:
            d = sp.Symbol(f"__d{k}", real=True)
            inputs.append((d, Memlet(tangent_name(m.data), m.subset)))
            terms.append(times(d, partial(expr, conn)))
    tangent = (Memlet(tangent_name(out.data), out.subset, out.wcr), sp.Add(*terms))
    return Tasklet(tuple(inputs), (tangent, (out, expr)), node.line)
