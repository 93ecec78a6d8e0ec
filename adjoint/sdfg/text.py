"""A readable text form of an SDFG (what ``explain()`` prints)."""
from .nodes import (ConditionalRegion, LibraryNode, LoopRegion, MapScope, Pop, Push, Sequence, State,
                    Tasklet)


def to_text(sdfg) -> str:
    lines = [f"sdfg {sdfg.name}({', '.join(a.name for a in sdfg.arguments)})"]
    for c in sdfg.containers.values():
        shape = "[" + ", ".join(map(str, c.shape)) + "]" if c.shape else ""
        kind = "transient " if c.transient else ""
        parts = " (complex: real, imaginary)" if c.complex else ""
        lines.append(f"  {kind}{c.dtype.name}{shape} {c.name}{parts}")
    _region(sdfg.body, 1, lines)
    if sdfg.returns or sdfg.result:
        lines.append(f"  return {', '.join(sdfg.returns or (sdfg.result,))}")
    return "\n".join(lines)


def _region(region, depth, lines):
    pad = "  " * depth
    if isinstance(region, Sequence):
        for element in region.elements:
            _region(element, depth, lines)
    elif isinstance(region, LoopRegion):
        rev = "reversed " if region.reverse else ""
        stop = "inf" if region.stop is None else region.stop
        until = f" until {region.exit}" if region.exit is not None else ""
        trips = " (trip count taped)" if region.tape_trips or (region.reverse and region.exit
                                                                is not None) else ""
        lines.append(f"{pad}for {region.var} in {rev}range({region.start}, {stop}, "
                     f"{region.step}){until}:{trips}")
        _region(region.body, depth + 1, lines)
    elif isinstance(region, ConditionalRegion):
        for k, (cond, body) in enumerate(region.branches):
            head = "else" if cond is None else ("if " if k == 0 else "elif ") + str(cond)
            lines.append(f"{pad}{head}:")
            _region(body, depth + 1, lines)
    elif isinstance(region, State):
        for node in region.nodes:
            _node(node, depth, lines)


def _node(node, depth, lines):
    pad = "  " * depth
    if isinstance(node, Tasklet):
        reads = ", ".join(f"{c}<-{m}" for c, m in node.inputs)
        for m, expr in node.outputs:
            lines.append(f"{pad}{m} = {expr}" + (f"    [{reads}]" if reads else ""))
    elif isinstance(node, MapScope):
        rng = ", ".join(f"{p}={a}:{b}:{s}" for p, (a, b, s) in zip(node.params, node.ranges))
        lines.append(f"{pad}map [{rng}]:")
        for t in node.body:
            _node(t, depth + 1, lines)
    elif isinstance(node, LibraryNode):
        lines.append(f"{pad}{node.text()}")
    elif isinstance(node, Push):
        lines.append(f"{pad}push {node.memlet}")
    elif isinstance(node, Pop):
        lines.append(f"{pad}pop {node.memlet}")
