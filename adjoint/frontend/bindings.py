"""Which array a Python name means: assignment to names with Python's semantics.

``x = expr`` makes ``x`` a name for a new array and ``b = a`` another name for
``a``'s array; neither touches the array the name meant before (a view of it, another
name for it, or the caller's argument keep it). Straight-line code gets exactly that:
the name moves to a new container, or to the other array.

A loop runs its body's IR again with the same containers, and after an ``if`` both
branches must leave a name in one container. So a name bound *outside* the loop or
branch it is rebound in (a carried name) keeps one container of its own there:

- on entry to the region, a carried name that shares its array (an argument, another
  name's array, a view) gets a copy of its own (:meth:`Bindings.own_copies`); the
  copy stands for the shared array until the name's first rebinding, so a write to
  either before it is refused (:meth:`Bindings.check_copies`): Python would see it
  through both names;
- a new value is stored in place, after names bound inside the region to the same
  array (``old = u`` before ``u = u + ...``) have moved to a snapshot of it
  (:meth:`Bindings.snapshot`);
- ``b = a`` makes ``b`` a name for ``a``'s array until the end of the block, where
  ``a``'s values are copied into ``b``'s own container (:meth:`Bindings.close`).
  From there on the two are separate arrays where Python has one; a write to one
  that the other then reads is refused (:meth:`Bindings.check_aliases`).

A binding's frame is the path of regions it was made in; a rebinding is carried when
the name was bound in an enclosing region, or in the other branch of the same ``if``.
"""
import ast
import builtins
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

from ..sdfg import LibraryNode, Sequence, State
from ..sdfg.nodes import regions, tasklets
from .array_shapes import MaskValue, View, ViewValue, number
from .expressions import DataValue


@dataclass
class _Copy:
    """A carried name's own copy of a shared array, made on entry to a region."""
    name: str
    container: str          # the copy
    shared: str             # the container it was copied from
    what: str               # what the name meant there, for messages
    line: int


@dataclass
class _Alias:
    """``name = other`` in a region, ended by copying ``other``'s array into ``own``."""
    name: str
    other: str
    own: object             # the name's binding before, in its own container
    line: int
    path: tuple
    copy_back: Optional[int] = None     # id of the copy's state
    shared: str = ""                    # the container the name meant at the end
    loop_body: object = None            # the innermost loop around it, once built


class Bindings:
    """Frames, owners and aliases of the array bindings of one kernel (and its callees)."""

    def __init__(self):
        self.path = ()           # the regions around the statement being lowered
        self.bound_in = {}       # name -> path of its current binding
        self.owner = {}          # container -> the name it was made for
        self.stores = set()      # ids of the states that bind a name (not in-place writes)
        self.pending = []        # aliases of this block, ended by close()
        self.aliases = []        # ended aliases, checked once the kernel is built
        self._count = 0

    # ---- frames ------------------------------------------------------------------------
    def token(self):
        self._count += 1
        return self._count

    @contextmanager
    def region(self, kind, token=None, branch=0):
        """Lower a loop body, an ``if`` branch (one ``token`` for the branches of one
        statement) or an inlined callee's body."""
        outer, self.path = self.path, self.path + ((kind, token or self.token(), branch),)
        try:
            yield
        finally:
            self.path = outer

    def bind(self, name, container=None):
        """``name`` gets a binding here; a container made for it is its own."""
        self.bound_in[name] = self.path
        if container is not None:
            self.owner[container] = name

    def carried(self, name):
        bound, here = self.bound_in.get(name, ()), self.path
        n = 0
        while n < min(len(bound), len(here)) and bound[n] == here[n]:
            n += 1
        if n == len(bound):
            return n < len(here)
        if n == len(here):
            return False
        (kind_b, token_b, _), (kind_h, token_h, _) = bound[n], here[n]
        if kind_b == "if" and token_b != token_h:   # bound in an ``if`` that has ended:
            return True                             # the binding after it
        return kind_b == kind_h == "if" and token_b == token_h

    def _enters(self, name):
        """Whether ``name``'s binding is carried into a region starting here (not one
        made in a loop or branch that has ended)."""
        return self.carried(name) or self.bound_in.get(name, ()) == self.path

    def fresh(self, containers, name):
        """A container name for ``name``'s next array: ``name__2``, ``name__3``, ..."""
        k = 2
        while f"{name}__{k}" in containers:
            k += 1
        return f"{name}__{k}"

    # ---- ownership ---------------------------------------------------------------------
    def shared(self, scope, name):
        """None when ``name``'s array is its own alone, else (container, what, in words)."""
        binding = scope.get(name)
        if isinstance(binding, ViewValue):
            c = binding.view.container.name
            return c, f"a view of {self._named(c)}"
        c = binding.container.name
        if self.owner.get(c) != name:
            return c, self._named(c)
        others = sorted(n for n, v in scope.items() if n != name and _refers(v, c))
        if others:
            return c, f"the array {others[0]!r} also names"
        return None

    def named(self, scope, container, name):
        """The user's name (other than ``name``) for an array in ``container``, or None:
        a value nobody else names (a product, a call's result) is not an alias."""
        others = sorted(n for n, v in scope.items()
                        if n != name and not n.startswith("__") and _refers(v, container))
        return others[0] if others else None

    def materialize(self, kernel, stmts, line):
        """States giving each name this branch bound to another's array, and that a later
        branch (``stmts``) rebinds, an array of its own: after the ``if`` the branches
        must leave it in one container. Recorded like an ended alias."""
        out = []
        for name in sorted(_rebound(stmts)):
            binding = kernel.scope.get(name)
            if self.bound_in.get(name) != self.path or not _is_array(binding) or \
                    self.shared(kernel.scope, name) is None:
                continue
            shared = _container(binding)
            more, c = self._copy(kernel, name, name, line)
            out += more
            kernel.scope[name] = (MaskValue if getattr(binding, "boolean", False) or
                                  isinstance(binding, MaskValue) else DataValue)(c)
            self.owner[c.name] = name
            alias = _Alias(name, self._named(shared) if self.owner.get(shared) else shared,
                           kernel.scope[name], line, self.path, id(more[-1]), shared=shared)
            self.aliases.append(alias)
        return out

    def _named(self, container):
        owner = self.owner.get(container)
        return f"the array of {owner!r}" if owner else f"the argument {container!r}"

    def own_copies(self, kernel, stmts, line):
        """(regions, copies) giving each carried name that ``stmts`` rebind, and whose
        array is shared, an array of its own."""
        out, copies = [], []
        for name in sorted(_rebound(stmts)):
            binding = kernel.scope.get(name)
            if not _is_array(binding) or not self._enters(name):
                continue
            found = self.shared(kernel.scope, name)
            if found is None:
                continue
            shared, what = found
            _check_no_handover(kernel.src, name, what, stmts)
            regions_, c = self._copy(kernel, name, name, line)
            out += regions_
            mask = isinstance(binding, MaskValue) or getattr(binding, "boolean", False)
            kernel.scope[name] = (MaskValue if mask else DataValue)(c)
            self.owner[c.name] = name
            copies.append(_Copy(name, c.name, shared, what, line))
        return out, copies

    def _copy(self, kernel, name, base, line, into=None):
        """(regions, container): the values ``name`` means now, stored into ``into`` or
        a new container named after ``base``; the regions count as a binding store."""
        from .array_stores import store, stored_dtype, temporary
        from .arrays import ArrayBuilder, ExpressionBuilder
        b = ArrayBuilder(ExpressionBuilder(kernel, kernel.scope))
        node = ast.Name(name, ast.Load(), lineno=line - kernel.src.first_line + 1,
                        col_offset=0)
        v = b.expr(node)
        c = into or temporary(b, node, v.shape, None, self.fresh(kernel.containers, base),
                                 stored_dtype(v))
        out = b.ex.prelude + store(b, b.container(c, v.boolean),
                                   lambda p, old: number(v.at(p)), line)
        self.stores.update(id(r) for r in out)
        return out, c

    def check_copies(self, src, copies, bodies):
        """Refuse a write to a copied array, or to what it copies, before the name's
        first rebinding in each body (a loop's, or each branch of an ``if``)."""
        for copy in copies:
            for body in bodies:
                line = self._write_before_rebinding(body, copy)
                if line is not None:
                    raise _error(src, line,
                                 f"{copy.name!r} is rebound in the loop or branch at line "
                                 f"{copy.line}, and before that this line writes {copy.name!r}"
                                 f" or what it names ({copy.what}) in place: Python would "
                                 "write the shared array, the engine gives "
                                 f"{copy.name!r} a copy of its own there; write "
                                 f"`{copy.name} = {copy.name}.copy()` before the loop or "
                                 "branch, or use another name")

    def _write_before_rebinding(self, body, copy):
        for element in body.elements if isinstance(body, Sequence) else (body,):
            if id(element) in self.stores and _writes(element) & {copy.container}:
                return None
            line = _first_write(element, {copy.container, copy.shared}, self.stores)
            if line is not None:
                return line
        return None

    # ---- carried stores ----------------------------------------------------------------
    def snapshot(self, kernel, name, container, line):
        """Regions moving the other names of ``container`` (bound inside the region) to
        a copy of it, before ``name`` is stored in place there."""
        others = sorted(n for n, v in kernel.scope.items()
                        if n != name and _refers(v, container.name))
        if not others:
            return []
        out, c = self._copy(kernel, others[0], others[0], line)
        for n in others:
            kernel.scope[n] = _moved(kernel.scope[n], container.name, c)
            self.owner.setdefault(c.name, n)
        return out

    def alias(self, kernel, name, value_binding, other, line):
        """``name = other`` for a carried name: an alias until the end of the block."""
        own = self.revert(kernel, name)
        self.pending.append(_Alias(name, other, own, line, self.path))
        kernel.scope[name] = value_binding

    def revert(self, kernel, name):
        """End a pending alias of ``name`` without a copy (it is rebound again); the
        binding in its own container."""
        for k, a in enumerate(self.pending):
            if a.name == name and a.path == self.path:
                kernel.scope[name] = a.own
                del self.pending[k]
                return a.own
        return kernel.scope[name]

    def mark(self):
        return len(self.pending)

    def close(self, kernel, mark):
        """States ending the aliases a block made since ``mark``: each name's own
        container gets the values it names."""
        out = []
        for a in self.pending[mark:]:
            a.shared = _container(kernel.scope[a.name])
            more, _ = self._copy(kernel, a.name, a.name, a.line, into=a.own.container)
            out += more
            a.copy_back = id(more[-1])
            kernel.scope[a.name] = a.own
            self.aliases.append(a)
        del self.pending[mark:]
        return out

    def loop_built(self, body, path):
        """Tell the aliases ended inside a loop whose body (at ``path``) is built."""
        for a in self.aliases:
            if a.loop_body is None and a.path[:len(path)] == path:
                a.loop_body = body

    def check_aliases(self, src, body):
        """Refuse, after an alias ended, a write to one of the two arrays that the other
        then reads (in the rest of the kernel, and in its loop's next iteration)."""
        states = [r for r, _ in regions(body) if isinstance(r, State)]
        for a in self.aliases:
            pair = {a.own.container.name, a.shared}
            after = next(k for k, s in enumerate(states) if id(s) == a.copy_back) + 1
            tails = [states[after:]]
            if a.loop_body is not None:
                tails.append([r for r, _ in regions(a.loop_body) if isinstance(r, State)])
            for tail in tails:
                line = self._divergence(tail, pair)
                if line is not None:
                    raise _error(src, line,
                                 f"`{a.name} = {a.other}` at line {a.line} makes {a.name!r} "
                                 f"another name for {a.other!r}'s array, as in Python, but "
                                 f"the engine gives {a.name!r} its own copy at the end of "
                                 "that block (it is carried around a loop or out of a "
                                 "branch); here one of the two is read after the other was "
                                 f"changed in place; write `{a.name} = {a.other}.copy()` "
                                 "if a copy is meant, or update through one name")

    def _divergence(self, states, pair):
        dirty = set()
        for state in states:
            for node in state.nodes:
                reads, writes = _reads(node), _writes_node(node)
                if dirty and (reads & (pair - dirty)):
                    return getattr(node, "line", None) or 1
                if id(state) in self.stores and writes & pair:
                    return None
                dirty |= writes & pair
        return None


def _container(binding):
    return binding.view.container.name if isinstance(binding, ViewValue) else \
        binding.container.name


def _error(src, line, message):
    return src.error(SimpleNamespace(lineno=line - src.first_line + 1, col_offset=0), message)


def _is_array(binding):
    return isinstance(binding, DataValue) and not binding.container.is_scalar


def _refers(binding, container):
    if isinstance(binding, ViewValue):
        return binding.view.container.name == container
    return _is_array(binding) and binding.container.name == container


def _moved(binding, old, new):
    """``binding`` of the container ``old``, rebound to the same part of ``new``."""
    if isinstance(binding, ViewValue):
        return ViewValue(binding.container.name, View(new, binding.view.subset),
                         binding.shape, binding.boolean, binding.loops)
    return type(binding)(new)


def _rebound(stmts):
    """Names that plain assignments in ``stmts`` bind (not inside nested functions)."""
    names, todo = set(), list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        for t in targets:
            for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                if isinstance(e, ast.Name):
                    names.add(e.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _check_no_handover(src, name, what, stmts):
    """``v = name`` or ``u, v = v, name`` in the region would make ``v`` another name for
    the shared array, which the copy cannot follow: refused where the kernel writes
    ``v`` in place (``v[...] = ...``, ``v += ...``, or passes it to a call)."""
    receivers = {}
    for node in _statements(stmts):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) \
                    and isinstance(node.value, ast.Tuple) else [(target, node.value)]
                for t, v in pairs:
                    if isinstance(t, ast.Name) and isinstance(v, ast.Name) and \
                            v.id == name and t.id != name:
                        receivers.setdefault(t.id, node)
    written = _written_in_place(src.tree)
    for receiver, node in sorted(receivers.items()):
        if receiver in written:
            raise src.error(node, f"`{ast.unparse(node)}` makes {receiver!r} another name for "
                                  f"the array {name!r} meant on entry to this loop or branch "
                                  f"({what}), and {receiver!r} is written in place: the engine "
                                  f"gives {name!r} a copy of its own there and cannot follow "
                                  f"the array to {receiver!r}; write `{name} = {name}.copy()` "
                                  "before the loop or branch")


def _statements(stmts):
    todo = list(stmts)
    while todo:
        node = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node
            todo.extend(ast.iter_child_nodes(node))


def _written_in_place(tree):
    """Names whose arrays ``tree`` may write in place: subscript stores, augmented
    assignments, arguments of the program's own functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id not in dir(builtins):          # a helper of the program
            out |= {a.id for a in node.args if isinstance(a, ast.Name)}
    return out


def _reads(node):
    if isinstance(node, LibraryNode):
        return set(node.reads())
    return {m.data for t, _, _ in tasklets(State((node,), "")) for _, m in t.inputs}


def _writes_node(node):
    if isinstance(node, LibraryNode):
        return set(node.writes())
    return {m.data for t, _, _ in tasklets(State((node,), "")) for m, _ in t.outputs}


def _writes(region):
    return {c for r, _ in regions(region) if isinstance(r, State)
            for node in r.nodes for c in _writes_node(node)}


def _first_write(region, containers, skip):
    """The line of the first write in ``region`` to one of ``containers`` outside the
    states in ``skip``, or None."""
    for r, _ in regions(region):
        if isinstance(r, State) and id(r) not in skip:
            for node in r.nodes:
                if _writes_node(node) & containers:
                    return getattr(node, "line", None) or 1
    return None
