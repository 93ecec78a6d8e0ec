"""Values from outside a function's body, read as Python reads them when it runs.

A body reads names it does not bind: module-level names and closure cells (its
namespace), a bound method's ``self``, and attribute chains through them (``self.F``,
``model.dxdt``, ``self.shift``). This is the one place that says what such a value is
to a kernel:

- a number is a constant of the specialisation, read by
  ``ExpressionBuilder._global_number`` (an attribute chain naming one becomes a name of
  the namespace, as below); ``True``/``False``, None, a string or a tuple of such values,
  named or reached through an attribute, is written into the tree as that constant;
- a function, a bound method, a kernel or a decorated function is inlined where it is
  called (``calls.py``): an attribute chain naming one becomes a name of the namespace;
- a NumPy or math function under another name (``from numpy import zeros, tanh``) is
  that function: the name becomes ``np.zeros`` (by identity, so any alias works);
- a NumPy array is a hidden argument of the kernel: :func:`outside_reads` finds every
  such array the kernel can reach (following the functions it calls) with a getter that
  reads it again at every call, so the kernel sees what Python would, in-place changes
  and rebinding alike; the frontend binds the names meaning it to that argument and
  refuses writes to it;
- every other value it finds (numbers, constants, functions) is read again at every call
  too, and a changed one compiles the kernel anew (``api.Kernel``).

:func:`resolve` rewrites a function's tree so the rest of the frontend sees names only.
"""
import ast
import copy
import importlib
import inspect
import math
import operator
import types

import numpy as np

from ..errors import KernelSyntaxError

NUMPY_NAME, MATH_NAME = "__numpy", "__math"
HIDDEN = "__outside_"           # hidden arguments: __outside_r, __outside_self_A


def namespace(func):
    """What a function's free names mean: its module's globals and its closure cells."""
    out = dict(func.__globals__)
    out.update(cells(func))
    return out


def cells(func):
    """{name: value} of a function's closure cells that hold a value."""
    out = {}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:          # not assigned yet
            pass
    return out


def self_parameter(func, tree):
    """The name of a bound method's ``self`` parameter in ``tree``, or None."""
    if inspect.ismethod(func) and tree.args.args:
        return tree.args.args[0].arg
    return None


def free_names(tree):
    """Names a function's tree reads and never binds (parameters of nested lambdas and
    functions, assignment targets and nested ``def`` names count as bound)."""
    bound = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and not isinstance(n.ctx, ast.Load)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n is not tree}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} - bound


def integer_names(src):
    """The free names of ``src``'s body that mean integers from outside (``N = 40`` at
    module level, ``self.nX``): integers where locals are classified."""
    return {n for n in free_names(src.tree) if isinstance(src.globals.get(n), (int, np.integer))
            and not isinstance(src.globals.get(n), (bool, np.bool_))}


def is_constant(value):
    if isinstance(value, tuple):
        return all(is_constant(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, np.integer, np.floating,
                                               np.bool_))


def _is_object(value):
    """A value whose attributes a chain goes on reading: a model object, a class or a
    module of the program (``cls.F``, ``Config.F``, ``mods.Lorenz96.dxdt``); not NumPy and
    math, whose functions the frontend knows by their names."""
    if isinstance(value, type):
        return (value.__module__ or "").split(".")[0] not in LANGUAGE
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] not in LANGUAGE
    return not (is_constant(value) or isinstance(value, np.ndarray) or callable(value))


LANGUAGE = ("numpy", "math", "builtins")


def function_value(value):
    """Whether ``value`` is a function to a kernel: a Python function, a bound method, an
    ``adjoint.kernel``, or a NumPy or math function (decided by what it is, not where)."""
    return inspect.isfunction(value) or inspect.ismethod(value) or \
        hasattr(value, "py_func") or library_function(value) is not None


def library_function(value):
    """``(module name, attribute)`` when ``value`` is a NumPy (``np.linalg`` too: the
    attribute ``linalg.inv``) or math function or type."""
    name = getattr(value, "__name__", None)
    if not isinstance(name, str) or isinstance(value, types.ModuleType):
        return None
    for module, alias, prefix in ((np, NUMPY_NAME, ""), (np.linalg, NUMPY_NAME, "linalg."),
                                  (math, MATH_NAME, "")):
        try:
            if getattr(module, name, None) is value:
                return alias, prefix + name
        except TypeError:
            pass
    return None


def _library_node(lib):
    node = ast.Name(lib[0], ast.Load())
    for attr in lib[1].split("."):                  # __numpy.linalg.inv
        node = ast.Attribute(node, attr, ast.Load())
    return node


def _library_module(lib):
    return {lib[0]: np if lib[0] == NUMPY_NAME else math}


def as_library_calls(tree, functions):
    """``tree`` with the names in ``functions`` (name -> function value) that are NumPy or
    math functions written as those (``f(x)`` with ``f`` np.sin is ``np.sin(x)``), and the
    namespace entries for the names and modules it then reads."""
    library = {n: library_function(f) for n, f in functions.items()}
    library = {n: lib for n, lib in library.items() if lib is not None}
    names = {n: f for n, f in functions.items() if n not in library}
    if not library:
        return tree, names

    class Rewrite(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in library and isinstance(node.ctx, ast.Load):
                names.update(_library_module(library[node.id]))
                return ast.copy_location(_library_node(library[node.id]), node)
            return node
    return ast.fix_missing_locations(Rewrite().visit(tree)), names


def _chain(node):
    """``a.b.c`` as ``[a, b, c]`` when it is a chain of attributes on a name, else None."""
    path = []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + path[::-1]


class Missing:
    """An attribute a chain names that its object does not have."""
    def __init__(self, owner, attr):
        self.owner, self.attr = owner, attr


def _walk_chain(names, path):
    """The shortest prefix of ``path`` that names a value (not a model object to read on):
    (length, value); the value is a :class:`Missing` where an attribute is not there."""
    value = names[path[0]]
    for k, attr in enumerate(path[1:], start=1):
        if not _is_object(value):
            return k, value
        try:
            value = getattr(value, attr)
        except AttributeError:
            return k + 1, Missing(value, attr)
    return len(path), value


def references(tree, names):
    """(node, value, label) for every read of a value from outside in ``tree``: free names
    and the attribute chains rooted at them (model objects read on to the value), with
    ``names`` the namespace (``self`` included for a method)."""
    free = free_names(tree) & set(names)
    out = []

    def visit(node):
        path = _chain(node) if isinstance(node, ast.Attribute) else None
        if path and path[0] in free and _is_object(names[path[0]]):
            length, value = _walk_chain(names, path)
            inner = node
            for _ in range(len(path) - length):
                inner = inner.value
            out.append((inner, value, ".".join(path[:length])))
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in free:
            out.append((node, names[node.id], node.id))
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return out


def prepared(func, tree):
    """(tree, namespace, self's name or None): a bound method's tree loses its ``self``
    parameter, which becomes a name of the namespace bound to the object."""
    names = namespace(func)
    tree = _imported(func, tree, names)
    me = self_parameter(func, tree)
    if me is not None:
        tree = copy.copy(tree)
        tree.args = copy.copy(tree.args)
        tree.args.args = tree.args.args[1:]
        names[me] = func.__self__
    return tree, names, me


def _imported(func, tree, names):
    """``tree`` without the imports among its own statements (``import numpy as np``,
    ``from scipy.special import erf``), each name they bind in ``names`` as Python binds
    it: they run when the kernel is read, like the module's own."""
    kept = []
    for stmt in tree.body:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)) or \
                isinstance(stmt, ast.ImportFrom) and stmt.level:
            kept.append(stmt)
            continue
        try:
            for alias in stmt.names:
                names.update(_binding(stmt, alias))
        except (ImportError, AttributeError) as error:
            raise KernelSyntaxError(f"`{ast.unparse(stmt)}`: {error}", *_where(func, stmt)) \
                from None
    if len(kept) == len(tree.body):
        return tree
    tree = copy.copy(tree)
    tree.body = kept or [ast.copy_location(ast.Pass(), tree)]
    return tree


def _binding(stmt, alias):
    """{name: value} that one alias of an import binds."""
    if isinstance(stmt, ast.Import):
        if alias.asname:
            return {alias.asname: importlib.import_module(alias.name)}
        top = alias.name.split(".")[0]
        importlib.import_module(alias.name)
        return {top: importlib.import_module(top)}
    if alias.name == "*":
        raise ImportError("import * is not supported in kernels; name what you use")
    module = importlib.import_module(stmt.module)
    value = getattr(module, alias.name, None)
    if value is None:                           # a submodule: from scipy import special
        try:
            value = importlib.import_module(f"{stmt.module}.{alias.name}")
        except ImportError:
            raise ImportError(f"cannot import name {alias.name!r} from {stmt.module!r}") \
                from None
    return {alias.asname or alias.name: value}


def resolve(tree, func):
    """``tree`` (a function's definition) rewritten for the frontend, with its namespace
    (entries the rewrite adds included) and the (user's name, engine name) pairs it
    introduces: see the module's docstring."""
    tree, names, me = prepared(func, copy.deepcopy(tree))
    added, renamed, replace = {}, [], {}
    statement = _statements(tree)
    for node, value, label in references(tree, names):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            _refuse(replace, statement, node,
                    f"`{ast.unparse(node)} = ...` writes an attribute of an object from "
                    "outside the kernel; kernels read them only: return the value instead",
                    _where(func, node))
            continue
        if isinstance(value, Missing):
            _refuse(replace, statement, node,
                    f"`{label}`: {type(value.owner).__name__} object has no attribute "
                    f"{value.attr!r}", _where(func, node))
            continue
        if isinstance(node, ast.Name):
            lib = (NUMPY_NAME, "linalg") if value is np.linalg else library_function(value)
            if lib is not None:                     # np.sin as sin, np.linalg as linalg
                added.update(_library_module(lib))
                replace[id(node)] = _library_node(lib)
                renamed.append((node.id, f"{lib[0]}.{lib[1]}"))     # messages: the user's
            elif node.id == me:
                _refuse(replace, statement, node,
                        f"`{me}` is used as a value; a method may read attributes of {me} "
                        f"({me}.F, {me}.helper(x))", _where(func, node))
            elif is_constant(value) and not _number(value):    # periodic = False, "wrap"
                replace[id(node)] = ast.parse(repr(_plain(value)), mode="eval").body
            continue
        if is_constant(value) and not _number(value):   # True, None, "wrap", (1, -2)
            replace[id(node)] = ast.parse(repr(_plain(value)), mode="eval").body
            continue
        lib = library_function(value)
        if lib is not None:
            added.update(_library_module(lib))
            replace[id(node)] = _library_node(lib)
            continue
        engine = "__" + label.replace(".", "_")
        while engine in names and names[engine] is not value:
            engine += "_"
        names[engine] = added[engine] = value
        renamed.append((label, engine))
        replace[id(node)] = ast.Name(engine, ast.Load())

    class Rewrite(ast.NodeTransformer):
        def visit(self, node):
            new = replace.get(id(node))
            if new is not None:
                return ast.copy_location(new, node)
            return super().visit(node)
    tree = ast.fix_missing_locations(Rewrite().visit(tree))
    return tree, {**names, **added}, tuple(renamed)


class Refused(ast.stmt):
    """A statement reading or writing what kernels cannot (``self.count += 1``, an
    attribute the object lacks, ``self`` as a value), kept as its error: raised where the
    statement is lowered, so a branch decided when compiling not to run (benchpress'
    ``if bh_is_loaded_as_np:`` in a method) may hold one, as Python never runs it."""
    _fields = ("message", "where")        # KernelSyntaxError's: (filename, line, col)

    def error(self):
        return KernelSyntaxError(self.message, *self.where)


def _statements(tree):
    """{id(node): the innermost statement holding it} below the function's definition."""
    out = {}

    def visit(node, stmt):
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.stmt) else stmt
            out[id(child)] = inner
            visit(child, inner)
    visit(tree, None)
    return out


def _refuse(replace, statement, node, message, where):
    """``node``'s statement replaced by :class:`Refused` (the error raised now where the
    node is in the definition itself: a default, a decorator)."""
    stmt = statement.get(id(node))
    if stmt is None:
        raise KernelSyntaxError(message, *where)
    replace[id(stmt)] = Refused(message, where)


def _number(value):
    """Numbers stay names (``self.F`` as ``__self_F``), read as module-level numbers are
    (``ExpressionBuilder._global_number``), so that messages name them."""
    return isinstance(value, (int, float, np.integer, np.floating)) and \
        not isinstance(value, (bool, np.bool_))


def _plain(value):
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


def _where(func, node):
    code = func.__code__
    return code.co_filename, code.co_firstlineno + getattr(node, "lineno", 1) - 1, \
        getattr(node, "col_offset", 0) + 1


# ---- hidden arguments ----------------------------------------------------------------------
def bind_arrays(kernel, src, scope):
    """Bind each free name of ``src``'s body that means an array from outside to the
    kernel's hidden argument for that array (``kernel.outside``: id of the array -> its
    binding), in ``scope``."""
    for name in sorted(free_names(src.tree)):
        value = src.globals.get(name)
        if isinstance(value, np.ndarray) and name not in scope:
            binding = kernel.outside.get(id(value))
            if binding is None:
                raise src.error(src.tree, f"{name!r} is an array from outside the kernel "
                                          "that it reaches in a way the engine does not "
                                          "follow (through a value computed at the call?); "
                                          "pass it as an argument")
            scope[name] = binding


def outside_reads(func, parse, also=()):
    """What ``func`` reads from outside its body, directly or in the functions it can call
    (by name, through attributes, as defaults, in closure cells, the functions ``also`` it
    is called with), in a fixed order; ``parse(f)`` gives a function's tree or None:

    - arrays: [(label, getter)] of the NumPy arrays, hidden arguments read again at every
      call (one array read under several names is one argument: the first getter);
    - fixed: [(label, getter)] of every other value (numbers, constants, functions,
      modules), which the compiled code holds as they were when it was compiled: the
      kernel reads them again at every call and compiles anew when one changed, as
      Python would see the new value (``F = 10.0`` at module level after a first call).
    """
    arrays, fixed, seen = {}, {}, set()

    def visit(f):
        target = f.__wrapped__ if hasattr(f, "py_func") else f     # an adjoint.kernel
        key = (id(getattr(target, "__func__", target)), id(getattr(target, "__self__", None)))
        if key in seen or not (inspect.isfunction(target) or inspect.ismethod(target)):
            return
        seen.add(key)
        tree = parse(target)
        if tree is None:
            return
        tree, names, me = prepared(target, tree)
        tree = copy.deepcopy(tree)          # decorators and annotations: read at `def`
        tree.decorator_list, tree.returns = [], None
        for a in tree.args.args + tree.args.kwonlyargs:
            a.annotation = None
        for default in target.__defaults__ or ():
            if callable(default):
                visit(default)
        for node, value, label in references(tree, names):
            if isinstance(value, np.ndarray):
                if id(value) not in arrays:
                    arrays[id(value)] = (label, _getter(target, names, node, me))
                continue
            if isinstance(value, Missing) or _chain(node) in (None, [me]) or \
                    value is np or value is math:
                continue            # refused by resolve; `self` itself; np (no per-call cost)
            where = (key, tuple(_chain(node)))
            if where not in fixed:
                fixed[where] = (label, _getter(target, names, node, me))
            if callable(value) and library_function(value) is None:
                visit(value)
    for f in (func,) + tuple(also):
        visit(f)
    return list(arrays.values()), list(fixed.values())


def value_key(value):
    """What a value from outside is to compiled code, hashable: a constant by its type and
    value (nan is nan; -0.0 is not 0.0), a bound method by its function and object
    (``self.dxdt`` is a new object at every read), anything else by identity. A value read
    again is the one the code was compiled with when the keys are equal."""
    if is_constant(value):
        return ("constant", type(value).__name__, repr(value))
    if inspect.ismethod(value):
        return ("method", _Identity(value.__func__), _Identity(value.__self__))
    return ("object", _Identity(value))


class _Identity:
    """A value held in a key by identity (lists and other unhashable objects too)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __hash__(self):
        return id(self.value)

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.value is self.value


def _getter(func, names, node, me):
    """A function reading the value of ``node`` (a free name or an attribute chain) again,
    from the module's globals, the closure cell or the object it was found in (built once:
    kernels call it at every call)."""
    root, *attrs = _chain(node)
    if root == me:
        obj = func.__self__
        base = lambda: obj                                          # noqa: E731
    elif root in func.__code__.co_freevars:
        cell = func.__closure__[func.__code__.co_freevars.index(root)]
        base = lambda: cell.cell_contents                           # noqa: E731
    else:
        module = func.__globals__
        base = lambda: module[root]                                 # noqa: E731
    if not attrs:
        return base
    chain = operator.attrgetter(".".join(attrs))
    return lambda: chain(base())
