"""How a run ended, said where people look: the last line of ``run.log`` (and of the
terminal), ``outcome.json`` in the run directory, and for a sweep a table of its jobs.

    finished     the task completed (its check, if any, passed)
    failed       why, in one line: the message of a user error, or the exception and
                 where it was raised; the traceback goes to run.log only
    interrupted  Ctrl-C or SIGTERM (a batch system's time limit, ``kill``): where the
                 checkpoint is and the command that resumes it

``run_job`` is what each job of ``simcore run`` / ``run.py`` does around ``run_task``;
it never raises but for Ctrl-C (which stops a sweep) and, with ``HYDRA_FULL_ERROR=1``,
the failure itself.
"""
import json
import logging
import os
import shlex
import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import SimcoreError
from .io import write_json
from .terminal import FILE_ONLY

log = logging.getLogger("simcore")

FILE = "outcome.json"
EXIT = {"finished": 0, "failed": 1, "interrupted": 130}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python next runs (after a compiled call returns): the run
    ends as after Ctrl-C, its outcome and checkpoint kept (Slurm sends SIGTERM at the
    time limit and kills only after its KillWait, 30 s by default)."""


@contextmanager
def sigterm_interrupts():
    """SIGTERM raises ``Terminated`` while the block runs (on the main thread only:
    elsewhere Python cannot take signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise Terminated("SIGTERM")

    before = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@dataclass
class Outcome:
    status: str                         # finished | failed | interrupted
    reason: str                         # one line
    outdir: str = ""
    overrides: list = field(default_factory=list)
    job: int = None                     # the job number in a sweep
    seconds: float = 0.0
    checkpoint: str = None              # interrupted with a saved state: its file
    resume: str = None                  # ... and the command that continues it

    def line(self) -> str:
        return f"{self.status}: {self.reason}"


def run_job(cfg, outdir, overrides=(), job=None, cpus=None, command="simcore run",
            argv=None, outcomes=None) -> Outcome:
    """``run_task`` with its outcome logged last, written to ``outdir/outcome.json`` and
    appended to ``outcomes`` (a list; also when Ctrl-C ends the run)."""
    from . import tasks                             # looked up now: tests replace run_task
    start, overrides = time.perf_counter(), list(overrides)
    outcome = Outcome("failed", "", str(outdir), overrides, job)
    try:
        summary = tasks.run_task(cfg, outdir, argv, cpus)
        outcome.status, outcome.reason = _verdict(cfg, summary, time.perf_counter() - start)
    except KeyboardInterrupt as exc:
        _interrupted(outcome, cfg, command, "SIGTERM" if isinstance(exc, Terminated)
                     else "Ctrl-C")
        raise
    except Exception as exc:                        # noqa: BLE001 (reported, not lost)
        outcome.reason = reason(exc)
        log.error("traceback of the failure:\n%s", traceback.format_exc().rstrip(),
                  extra=FILE_ONLY)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
    finally:
        outcome.seconds = time.perf_counter() - start
        _record(outcome)
        if outcomes is not None:
            outcomes.append(outcome)
    return outcome


def _verdict(cfg, summary, seconds):
    name = cfg.task.name
    if summary.get("passed") is False:
        failed = [_check(c) for c in summary.get("checks", []) if not c.get("passed")]
        return "failed", f"{name}: {', '.join(failed) or 'its check'} FAILED (summary.json)"
    return "finished", f"{name} on {cfg.model.name} in {seconds:.2f} s"


def _check(c) -> str:
    """``parameters (slope 1.02)``: a failed check of a summary and its number."""
    for key, fmt in (("slope", ".4f"), ("mismatch", ".2e")):
        if key in c:
            return f"{c.get('wrt', '?')} ({key} {c[key]:{fmt}})"
    return str(c.get("wrt", "?"))


def _interrupted(outcome, cfg, command, by):
    from .checkpoint import CheckpointError, checkpoint_for, read
    outcome.status = "interrupted"
    path = checkpoint_for(cfg).path
    try:
        step = read(path).step if path.exists() else None
    except CheckpointError:
        step = None
    if step is None:
        outcome.reason = f"by {by}; nothing saved to resume from (rerun the command)"
        return
    keep = [o for o in outcome.overrides if not o.startswith(("resume=", "+resume="))]
    outcome.checkpoint = str(path)
    outcome.resume = " ".join([command, *map(shlex.quote, keep), "resume=true"])
    outcome.reason = (f"by {by}; checkpoint of step {step} in {path}; resume with: "
                      f"{outcome.resume}")


def reason(exc) -> str:
    """One line for a failure: the message of a user error (the framework's, the
    engine's), otherwise the exception and the line that raised it."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, SimcoreError) or type(exc).__module__.startswith("adjoint"):
        return f"{text} (traceback in run.log)"
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {_short(frame.filename)}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}: {text}{where} (traceback in run.log)"


def _short(filename) -> str:
    """``.../site-packages/simcore/tasks/calibrate.py`` -> ``simcore/tasks/calibrate.py``."""
    parts = Path(filename).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("simcore", "adjoint", "models"):
            return "/".join(parts[i:])
    rel = os.path.relpath(filename)
    return filename if rel.startswith("..") else rel


def _record(outcome):
    level = {"finished": logging.INFO, "interrupted": logging.WARNING}.get(outcome.status,
                                                                          logging.ERROR)
    log.log(level, "%s", outcome.line())
    if outcome.outdir and Path(outcome.outdir).is_dir():
        write_json(asdict(outcome), Path(outcome.outdir) / FILE)


def read_outcome(outdir):
    """The Outcome a job wrote into ``outdir``, or None."""
    try:
        return Outcome(**json.loads((Path(outdir) / FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def sweep_table(jobs, sweep_dir) -> tuple:
    """(text, exit status) for a sweep: one row per job (its number, the overrides that
    differ between jobs, its outcome), then a count. ``jobs``: each job's overrides."""
    found = {}
    for path in Path(sweep_dir).glob(f"*/{FILE}") if sweep_dir else ():
        o = read_outcome(path.parent)
        if o is not None and o.job is not None:
            found[o.job] = o
    common = set.intersection(*(set(j) for j in jobs)) if jobs else set()
    rows = []
    for num, overrides in enumerate(jobs):
        o = found.get(num)
        status = o.line() if o else "no outcome: never started, or killed (see its " \
                                    "folder's run.log and .submitit/)"
        rows.append((str(num), " ".join(x for x in overrides if x not in common) or "-",
                     status, o.status if o else "missing"))
    width = max([len(r[1]) for r in rows] + [9])
    lines = [f"sweep of {len(jobs)} jobs in {sweep_dir}"
             + (f"; all with {' '.join(sorted(common))}" if common else ""),
             f"  job  {'overrides':<{width}}  outcome"]
    lines += [f"  {n:>3}  {o:<{width}}  {s}" for n, o, s, _ in rows]
    bad = [r for r in rows if r[3] != "finished"]
    lines.append(f"{len(rows) - len(bad)} of {len(rows)} jobs finished"
                 + (f", {len(bad)} did not" if bad else ""))
    status = 0
    if bad:
        status = 130 if any(r[3] == "interrupted" for r in bad) else 1
    return "\n".join(lines), status
