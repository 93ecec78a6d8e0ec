"""The ``simcore`` command (and ``run.py``, which is ``simcore run``).

    simcore run model=seidel task=calibrate [key=value ...]    one run (the Hydra app)
    simcore run -m model=seidel,heat task=gradcheck            a sweep, one job each
    simcore models | simcore tasks                             what exists, a line each
    simcore show task=assimilate [model=heat ...]              options: default, allowed, meaning

``run`` checks every job's config before any job starts (simcore.validate), so a user
error is one line and nothing runs; HYDRA_FULL_ERROR=1 shows the traceback instead.
Each job ends with its outcome (simcore.outcome); a sweep goes on past failed jobs and
ends with a table of them. Exit status: 0 all finished, 1 a run or job failed, 2 a
config error, 130 interrupted.
"""
import dataclasses
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from .config import CONFIG_DIR, compose, register_configs
from .errors import ConfigError, SimcoreError
from .outcome import sigterm_interrupts
from .schema import Config

register_configs()

COMMAND = "simcore run"         # how resume commands and the help name the run command
_ARGV = {}                      # the command line, for the outputs' provenance
_OUTCOMES = []                  # this process's jobs (Hydra's basic launcher runs them here)
_SWEEP = {}                     # the sweep directory, from SweepDir when a multirun starts


def job(cfg) -> str:
    """One job (the Hydra task function): the task in its run directory, its outcome."""
    from .outcome import run_job
    hc = HydraConfig.get()
    multirun = hc.mode.name == "MULTIRUN"
    outcome = run_job(cfg, hc.runtime.output_dir, list(hc.overrides.task),
                      job=hc.job.num if multirun else None,
                      cpus=OmegaConf.select(hc, "launcher.cpus_per_task", default=None),
                      command=COMMAND, argv=_ARGV.get("argv"), outcomes=_OUTCOMES)
    if multirun and "jobs" in _SWEEP:           # a sweep run by this process
        from .terminal import progress
        _SWEEP.setdefault("bar", progress(_SWEEP["jobs"], "sweep", "job")).update(1)
    return outcome.status


# a name of its own, so that launchers pickle ``job`` by reference
_app = hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")(job)


class SweepDir(Callback):
    """A Hydra callback (configs/config.yaml): where this process's multirun writes."""

    def on_multirun_start(self, config, **kwargs):
        _SWEEP["dir"] = str(config.hydra.sweep.dir)


def run(argv, prog="simcore run") -> int:
    """``simcore run ARGS`` / ``python run.py ARGS``: the exit status."""
    from hydra._internal.utils import get_args_parser
    global COMMAND
    COMMAND = f"python {prog}" if prog.endswith(".py") else prog
    args = get_args_parser().parse_args(argv)
    if args.help:
        print(help_text(COMMAND))
        return 0
    jobs = None
    if not (args.hydra_help or args.cfg or args.info or args.shell_completion):
        jobs = preflight(args.overrides, args.multirun, args.config_name or "config")
        if isinstance(jobs, int):
            return jobs
    _OUTCOMES.clear()
    _SWEEP.clear()
    if args.multirun and jobs is not None:
        _SWEEP["jobs"] = len(jobs)
    _ARGV["argv"] = [prog, *argv]
    saved, sys.argv = sys.argv, [prog, *argv]
    status, interrupted = 0, False
    try:
        with sigterm_interrupts():
            _app()
    except SystemExit as exc:           # Hydra's own error reports end this way
        status = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sys.argv = saved
        if "bar" in _SWEEP:
            _SWEEP["bar"].close()
    if args.multirun and jobs is not None:
        from .outcome import sweep_table
        text, table_status = sweep_table(jobs, _SWEEP.get("dir"))
        print(text, flush=True)
        return 130 if interrupted else (status or table_status)
    if interrupted:
        if not _OUTCOMES:
            print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    from .outcome import EXIT
    return status or max([EXIT[o.status] for o in _OUTCOMES], default=0)


def preflight(overrides, multirun, config_name="config"):
    """Every job's overrides (a list of lists), each composed and validated; or the exit
    status 2 after printing the first problem."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from .validate import composition_error, validate
    full = os.environ.get("HYDRA_FULL_ERROR") == "1"
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        if full:
            raise
        return _refuse(str(exc).splitlines()[0])
    if multirun:    # the jobs in the order Hydra's sweeper numbers them
        jobs = [ov for batch in BasicSweeper.split_arguments(parsed, None) for ov in batch]
    else:
        jobs = [list(overrides)]
    for num, ov in enumerate(jobs):
        which = f"job {num} ({' '.join(ov)}): " if multirun and len(jobs) > 1 else ""
        try:
            validate(compose(ov, config_name=config_name))
        except HydraException as exc:
            if full:
                raise
            return _refuse(which + composition_error(exc, ov))
        except SimcoreError as exc:
            if full:
                raise
            return _refuse(which + str(exc))
    return [[o for o in ov if not o.lstrip("+~").startswith("hydra")] for ov in jobs]


def _refuse(message) -> int:
    for line in message.splitlines():
        print(f"error: {line}", file=sys.stderr)
    return 2


# ---- what exists --------------------------------------------------------------------------
def task_lines() -> dict:
    """Each task's one line: the first of its module's docstring, without ``task=name:``."""
    from . import tasks
    out = {}
    for name, fn in sorted(tasks.tasks().items()):
        doc = (sys.modules[fn.__module__].__doc__ or "").strip().splitlines()[0]
        out[name] = doc.split(":", 1)[1].strip() if doc.startswith("task=") else doc
    return out


def model_lines() -> dict:
    from .registry import known_models, model_class
    return {name: model_class(name).description for name in known_models()}


def groups() -> dict:
    return {
        "model": "the model and its settings: model=NAME, model.KEY=VALUE "
                 "(simcore show model=NAME)",
        "task": "what to do with it: task=NAME, task.KEY=VALUE (simcore show task=NAME)",
        "engine": "compiler, threads, memory budget, cache (simcore show engine)",
        "device": "device=cpu | device=cuda",
        "hydra/launcher": "where sweep jobs run: local (processes) | slurm (job arrays); "
                          "pip install -e \".[hpc]\"",
        "top level": "seed, resume, checkpoint_dir; obs.file, truth.file, background.file: "
                     "data to read (simcore show top)",
    }


def help_text(command="simcore run") -> str:
    lines = ["simcore: models on grids, compiled forward and adjoint kernels, Hydra configs.",
             "", "usage:",
             f"  {command} model=NAME task=NAME [KEY=VALUE ...]   one run",
             f"  {command} -m KEY=A,B [KEY=C,D ...]                a sweep: a job per "
             "combination",
             f"  {command} ... --cfg job                           print the config, run "
             "nothing"]
    if command == "simcore run":
        lines += ["  simcore models | simcore tasks                      what exists",
                  "  simcore show task=NAME | model=NAME | engine        options: default, "
                  "meaning, allowed"]
    lines += ["", "tasks (task=NAME):"]
    lines += [f"  {k:<11} {v}" for k, v in task_lines().items()]
    lines += ["", "models (model=NAME):"]
    lines += [f"  {k:<11} {v}" for k, v in model_lines().items()]
    lines += ["", "config groups:"]
    lines += [f"  {k:<15} {v}" for k, v in groups().items()]
    lines += ["", "Outputs go to outputs/<date>/<time>_<model>-<task>_<id>/ (sweeps: "
              "multirun/...): the task's files, run.log (ending with the outcome), "
              "outcome.json.",
              "Hydra's own options: --hydra-help."]
    return "\n".join(lines)


def show(selectors) -> str:
    """The options of each ``group=name`` (or ``engine``, ``device``, ``top``): key,
    default, what is allowed, meaning."""
    from .registry import model_class
    from .schema import TASK_SCHEMAS, DeviceConfig, EngineConfig
    out = []
    for sel in selectors or ["top"]:
        group, _, name = sel.partition("=")
        if group == "task" and name in TASK_SCHEMAS:
            schema, title = TASK_SCHEMAS[name], f"task={name}: {task_lines()[name]}"
        elif group == "model" and name:
            schema, title = model_class(name).Config, f"model={name}: {model_lines()[name]}"
        elif group in ("engine", "device"):
            schema, title = {"engine": EngineConfig, "device": DeviceConfig}[group], group
        elif group == "top":
            schema, title = Config, "top-level keys"
        else:
            raise ConfigError(f"show {sel}: use task=NAME ({', '.join(sorted(TASK_SCHEMAS))}),"
                              " model=NAME, engine, device or top")
        prefix = "" if group == "top" else f"{group}."
        out += [title, *_options(schema, prefix), ""]
    return "\n".join(out).rstrip()


def _options(schema, prefix) -> list:
    rows = _rows(schema, prefix, values=None, nested=schema is not Config)  # top: no groups
    width = max(len(k) + len(d) for k, d, _, _ in rows) + 3 if rows else 0
    return [f"  {f'{k}={d}':<{width}} {h}" + (f" [{a}]" if a else "") for k, d, a, h in rows]


DATA_FILES = ("obs", "truth", "background")      # top-level sections of one key each


def _rows(schema, prefix, values, nested) -> list:
    """(key, default, allowed, meaning) of every key of ``schema`` (defaults from the
    dataclass instance ``values`` when given), nested sections' keys too if ``nested``."""
    from .schema import field_default
    from .validate import shown
    rows = []
    for f in dataclasses.fields(schema):
        if f.name in ("model", "task") or (f.name == "name" and prefix in ("model.", "task.")):
            continue
        default = getattr(values, f.name) if values is not None else field_default(f)
        if dataclasses.is_dataclass(default):
            if nested or f.name in DATA_FILES:        # top: the file keys, not the groups
                rows += _rows(type(default), f"{prefix}{f.name}.", default, nested)
            continue
        allowed = f.metadata.get("allowed")
        rows.append((prefix + f.name, shown(default), allowed.describe() if allowed else "",
                     f.metadata.get("help", "")))
    return rows


# ---- the console script ---------------------------------------------------------------------
def main(argv=None, prog="simcore run") -> int:
    """The ``simcore`` console command (``prog``: how ``run`` was invoked, for messages)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv, prog)
    except KeyboardInterrupt:
        print("simcore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:             # simcore --help | head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv, prog) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("--help", [])
    if command == "run":
        return run(rest, prog)
    if command in ("-h", "--help", "help"):
        print(help_text())
        return 0
    if command == "models":
        print("\n".join(f"{k:<11} {v}" for k, v in model_lines().items()))
        return 0
    if command == "tasks":
        print("\n".join(f"{k:<11} {v}" for k, v in task_lines().items()))
        return 0
    if command == "show":
        try:
            print(show(rest))
        except SimcoreError as exc:
            return _refuse(str(exc))
        return 0
    return _refuse(f"unknown command {command!r}; simcore run | models | tasks | show "
                   "(simcore --help)")


def console() -> None:
    """The entry point of ``pyproject.toml``'s ``simcore`` script."""
    sys.exit(main())
