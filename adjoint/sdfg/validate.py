"""Structural checks run after every pass in the tests."""
import sympy as sp

from .nodes import (SEGMENT, THREADS, ConditionalRegion, LibraryNode, LoopRegion, MapScope, Pop,
                    Push, Sequence, Tasklet, condition_containers, flag_symbol, tasklets, walk)


class InvalidSDFG(AssertionError):
    """An SDFG broke an invariant of the IR (a bug in a pass)."""


def validate(sdfg):
    """Raise :class:`InvalidSDFG` if a memlet names an unknown container, has the
    wrong number of indices, or an expression uses an unbound symbol."""
    _check_flags(sdfg, sdfg.body)
    known = set(sdfg.symbols) | set(SEGMENT) | {THREADS}    # every entry takes a segment
    for node, context in walk(sdfg.body):
        bound = set(known)
        for region in context:
            if isinstance(region, LoopRegion):
                bounds = (region.start, region.step) + ((region.stop,) if region.stop is not None
                                                         else ())
                _check_symbols(bounds, bound, f"loop over {region.var}")
                bound.add(region.var)
            else:
                flags = {flag_symbol(n) for n in condition_containers(region.condition,
                                                                        sdfg.containers)}
                _check_symbols((region.condition,), bound | flags, "condition")
        if isinstance(node, MapScope):
            bound = bound | set(node.params)
            for t in node.body:         # tasklets, and the pushes of a recording forward
                if isinstance(t, Tasklet):
                    _check_tasklet(sdfg, t, bound)
                else:
                    _check_memlet(sdfg, t.memlet, bound)
        elif isinstance(node, Tasklet):
            _check_tasklet(sdfg, node, bound)
        elif isinstance(node, (Push, Pop)):
            _check_memlet(sdfg, node.memlet, bound)
        elif isinstance(node, LibraryNode):
            _check_library(sdfg, node, bound)
    return sdfg


def _check_library(sdfg, node, bound):
    """Its operands are float64 containers its (rows, cols) cover, it writes none of
    what it only reads (its reverse reads them after it), and its own rules hold."""
    where = f"{node.kind} at line {node.line}"
    for name, dims in node.operands():
        c = sdfg.containers.get(name)
        if c is None or c.dtype.name != "float64":
            raise InvalidSDFG(f"{where}: {name} is not a float64 container")
        if not _covers(sdfg, dims, c):
            raise InvalidSDFG(f"{where}: dims {dims} do not cover {name}")
        _check_symbols(dims, bound, where)
    for name, _ in node.accesses():
        if name not in sdfg.containers:
            raise InvalidSDFG(f"{where}: no container {name}")
    read = {n for n, k in node.accesses() if k == "read"}
    if read & set(node.writes()):
        raise InvalidSDFG(f"{where} writes an operand")
    problem = node.invalid(sdfg.containers)
    if problem:
        raise InvalidSDFG(f"{where}: {problem}")


def _covers(sdfg, dims, c):
    """Whether (rows, cols) has as many elements as ``c``: proven, or among the conditions
    each call checks first (a reshaped argument multiplied in place)."""
    difference = sp.expand(dims[0] * dims[1] - c.volume())
    if difference == 0 or sp.simplify(difference) == 0:
        return True
    if sp.expand(sp.Max(0, dims[0]) * sp.Max(0, dims[1]) - c.volume()) == 0:
        return True                 # sizes of int arguments: (2*n, n) of a complex solve
    checked = {condition for condition, _, _ in sdfg.assumptions}
    return sp.Eq(difference, 0) in checked or sp.Eq(-difference, 0) in checked


def _check_tasklet(sdfg, t, bound):
    connectors = set()
    for conn, m in t.inputs:
        _check_memlet(sdfg, m, bound)
        connectors.add(conn)
    for m, expr in t.outputs:
        _check_memlet(sdfg, m, bound)
        _check_symbols((expr,), bound | connectors, f"tasklet at line {t.line}")


def _check_memlet(sdfg, m, bound):
    if m.data not in sdfg.containers:
        raise InvalidSDFG(f"memlet {m} names no container")
    if len(m.subset) != len(sdfg.containers[m.data].shape):
        raise InvalidSDFG(f"memlet {m} has {len(m.subset)} indices for a "
                          f"{len(sdfg.containers[m.data].shape)}-d container")
    _check_symbols(m.subset, bound, lambda: f"memlet {m}")


def _check_symbols(exprs, bound, where):
    """``where``: the place for the message, or a function giving it (printing a memlet
    on every check cost cavity_flow's lowering a quarter of a second)."""
    for e in exprs:
        free = sp.sympify(e).free_symbols - set(bound)
        if free:
            place = where() if callable(where) else where
            raise InvalidSDFG(f"{place} uses unbound symbols {sorted(map(str, free))}")


def _check_flags(sdfg, region):
    """A branch condition's flags must not be written inside the region it guards: the
    reverse sweep re-reads them after the region has been undone."""
    if isinstance(region, Sequence):
        for e in region.elements:
            _check_flags(sdfg, e)
    elif isinstance(region, LoopRegion):
        _check_flags(sdfg, region.body)
    elif isinstance(region, ConditionalRegion):
        for cond, body in region.branches:
            flags = condition_containers(cond, sdfg.containers) if cond is not None else set()
            written = {m.data for t, _, _ in tasklets(body) for m, _ in t.outputs}
            if flags & written:
                raise InvalidSDFG(f"condition {cond} at line {region.line} reads flags "
                                  f"{sorted(flags & written)} written inside its own branch")
            _check_flags(sdfg, body)
