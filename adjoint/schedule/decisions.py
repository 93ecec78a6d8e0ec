"""The decisions the scheduling pass records on the IR, one frozen dataclass per kind of
region: ``LoopRegion.schedule`` (a ``LoopSchedule``), ``MapScope.schedule`` (a
``MapSchedule``), ``ConditionalRegion.schedule`` (a ``BranchSchedule``). The printers
read them and decide nothing: a node whose ``schedule`` is None (code that no pass
scheduled, a loop a printer builds to print a decision) runs in order, without threads,
SIMD sums or tape slots."""
from dataclasses import dataclass
from enum import Enum
from typing import Optional

import sympy as sp


@dataclass(frozen=True)
class Threads:
    """Threads for a parallel construct when its ``work`` (statement instances, a sympy
    expression of sizes) reaches ``least``; the test runs when the code does."""
    work: sp.Expr
    least: int


class Threading(Enum):
    """How a parallel loop's iterations share out among the threads (C, OpenMP)."""
    ROWS = "rows"           # `omp parallel for` over the loop
    SHARED = "shared"       # inside another loop: one function over each thread's share
    SUMMED = "summed"       # its sums through per-thread copies, added in thread order
    TAPED = "taped"         # each iteration's tape values at a place found from its index


@dataclass(frozen=True)
class Reduction:
    """An innermost loop whose iterations reduce into elements fixed across them: one
    local accumulator per element of ``sums`` (memlets, each with its ``wcr``), the
    loop's ``body`` with those updates as reductions (`omp simd reduction`)."""
    sums: tuple
    body: tuple


@dataclass(frozen=True)
class Slots:
    """A counted loop whose iterations each push (or each pop) the same number of tape
    values: iteration q's c-th value at ``tp + c * n + q`` (n trips)."""
    pushes: int
    pops: int


@dataclass(frozen=True)
class TapeShare:
    """A parallel loop each of whose iterations pushes or pops ``per`` values (``kind``
    "push" or "pop"): each finds its place from its index."""
    kind: str
    per: sp.Expr


@dataclass(frozen=True)
class Kernel:
    """A loop marked for the GPU: the nest its grid runs (``analysis.device.Nest``:
    levels, atomics, tape, block sums; None: it runs in one GPU thread), or the pieces it
    is distributed into, each a loop with a Kernel of its own."""
    nest: object = None
    pieces: tuple = ()


@dataclass(frozen=True)
class MapKernel:
    """A map marked for the GPU: a grid over its points."""
    atomic: frozenset       # Memlets of sums other points may add into too: atomicAdd
    pushes: int             # tape values each point pushes
    sums: tuple             # scalars its points add into: block sums


@dataclass(frozen=True)
class Interchange:
    """A parallel loop run as its body's ``pieces`` in order (regions: sequential loops,
    and the statements between them), each over the loop's range (a thread's share of
    it); in a sequential loop's piece the parallel loop runs innermost, its iterations as
    SIMD lanes (schedule/interchange.py). A loop that pushes ``per`` values an iteration
    pushes each piece's from its ``offsets`` (None: no tape) in the iteration's block,
    or in its slots where ``slotted``. ``own``: the scalars each iteration keeps, as the
    (name, subset) they are accessed by, one element per iteration (strips of STRIP
    iterations at a time)."""
    pieces: tuple
    offsets: Optional[tuple] = None
    per: sp.Expr = sp.Integer(0)
    slotted: bool = False
    own: tuple = ()


STRIP = 256     # iterations of an Interchange with scalars of their own, at a time


@dataclass(frozen=True)
class Promotion:
    """An element a sequential loop keeps in a local: read before the loop, written back
    after it when the loop ``writes`` it (schedule/promote.py)."""
    element: object         # a Memlet, no wcr
    writes: bool


@dataclass(frozen=True)
class LoopSchedule:
    threads: Optional[Threads] = None       # None: in order, on the thread it is reached on
    threading: Optional[Threading] = None   # with threads: how
    tape: Optional[TapeShare] = None        # Threading.TAPED: the values per iteration
    reduction: Optional[Reduction] = None   # a sequential loop's SIMD sums
    slots: Optional[Slots] = None           # its tape values in slots
    slot_reduction: Optional[Reduction] = None  # a slotted loop's SIMD sums (pushes, pops
    #                                             as accesses of their elements)
    polls: bool = False                     # tests for Ctrl-C at the top of an iteration
    kernel: Optional[Kernel] = None         # on the GPU, a marked loop's kernel
    simd: bool = False                      # Threading.ROWS of an innermost loop: each
    #                                         thread's rows as SIMD lanes too
    interchange: Optional[Interchange] = None   # a parallel loop's pieces, it innermost
    promoted: tuple = ()                    # Promotions: elements kept in locals


@dataclass(frozen=True)
class MapSchedule:
    threads: Optional[Threads] = None       # threads over the map's first parameter
    shared: bool = False                    # one function over a thread's share (in a
                                            # loop; a one-axis map's SIMD sums)
    copies: tuple = ()                      # containers its rows all add into: per-thread
    #                                         copies, added in thread order
    sums: tuple = ()                        # scalars its points add into: partial sums
    reduction: Optional[Reduction] = None   # its innermost parameter's SIMD sums
    kernel: Optional[MapKernel] = None      # on the GPU, a marked map's kernel


@dataclass(frozen=True)
class BranchSchedule:
    selects: bool = False   # inside a loop, its writes as `x = taken ? value : x`
