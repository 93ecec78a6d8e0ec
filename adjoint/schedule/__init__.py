"""Scheduling: how each loop, map and branch of an entry point runs, decided between
differentiation and printing (``decide.schedule``) and recorded on the IR as the frozen
dataclasses of ``decisions``; the printers (codegen/) read them."""
from .decide import schedule
from .decisions import (BranchSchedule, Kernel, LoopSchedule, MapKernel, MapSchedule,
                        Reduction, Slots, TapeShare, Threading, Threads)

__all__ = ["schedule", "BranchSchedule", "Kernel", "LoopSchedule", "MapKernel", "MapSchedule",
           "Reduction", "Slots", "TapeShare", "Threading", "Threads"]
