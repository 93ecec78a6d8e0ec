"""The ``simcore`` command day to day: every config value checked before anything runs
(one line each, "did you mean" for misspellings), every run.log ending with its
outcome, Ctrl-C saying how to resume, sweeps going on past failed jobs and ending with
a table, per-job engine settings, the threads default, progress bars off a terminal,
and the help, models, tasks and show subcommands."""
import io
import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from simcore import cli
from simcore.config import compose
from simcore.errors import ConfigError
from simcore.schema import TASK_MODELS, runs_on
from simcore.validate import composition_error, validate
from test_framework import MODELS, TINY, TASKS

SEIDEL = ["model=seidel", *TINY["seidel"]]


def first_problem(*overrides):
    with pytest.raises(ConfigError) as err:
        validate(compose(list(overrides)))
    return str(err.value).splitlines()[0]


# ---- validation: one line naming the key, the value and what is allowed ---------------------
@pytest.mark.parametrize("overrides, line", [
    (["model=seidel", "model.n=0"], "model.n=0: must be at least 3"),
    (["model=seidel", "model.n=1"], "model.n=1: must be at least 3"),
    (["model=heat", "model.nx=1"], "model.nx=1: must be at least 3"),
    (["model=seidel", "task=calibrate", "model.obs.every_k=40"],
     "model.obs.every_k=40: observes no point of A (y has 20 points, the first observed is "
     "every_k // 2); must be at most 39"),
    (["model=seidel", "task=gradcheck", "model.obs.every_m=11"],
     "model.obs.every_m=11: no observation time in a run of model.steps=10; must be at most 10"),
    (["task=gradcheck", "task.eps=0"], "task.eps=0.0: must be above 0"),
    (["engine.memory_budget=1e400"], "engine.memory_budget=inf: must be null or a size such "
                                     "as 512MiB or 2GB (bytes, above 0)"),
    (["engine.memory_budget=lots"], "engine.memory_budget=lots: must be null or a size such "
                                    "as 512MiB or 2GB (bytes, above 0)"),
    (["seed=-1"], "seed=-1: must be at least 0"),
    (["model=heat", "model.bounds=[1.5,0.5]"],
     "model.bounds=[1.5,0.5]: must be [low, high] with low < high, low >= 0"),
    (["model=seidel", "model.prior_std=-1"], "model.prior_std=-1.0: must be null or above 0"),
    (["model=seidel", "model.prior_std=0"], "model.prior_std=0.0: must be null or above 0"),
    (["model=seidel", "model.obs.sigma=inf"],
     "model.obs.sigma=inf: must be finite and above 0"),
    (["model=lorenz96", "model.F=nan"], "model.F=nan: must be a finite number"),
    (["task=calibrate", "task.memory=0"], "task.memory=0: must be at least 1"),
    (["task=calibrate", "task.max_iter=-1"], "task.max_iter=-1: must be at least 1"),
    (["engine.threads=-3"], "engine.threads=-3: must be at least 0"),
    (["task=forward", "task.output_every=-1"], "task.output_every=-1: must be at least 0"),
    (["task=gradcheck", "task.wrt=[]"],
     "task.wrt=[]: must be a list of one or more of parameters, initial_state"),
    (["task=assimilate", "task.window=4", "task.shift=5"],
     "task.shift=5: must be null or from 1 to window = 4"),
    (["task=assimilate", "task.burn_in_time=-1.5"],
     "task.burn_in_time=-1.5: must be null or at least 0"),
    (["task=assimilate", "task.method=newton"],
     "task.method=newton: must be one of lbfgs, gauss_newton"),
    (["device.name=gpu"], "device.name=gpu: must be one of cpu, cuda"),
])
def test_every_value_is_checked_in_one_line(overrides, line):
    assert first_problem(*overrides) == line


def test_the_defaults_of_every_model_and_task_are_allowed():
    for model in MODELS:
        validate(compose([f"model={model}", "task=calibrate"]))
    for task in TASKS:
        model = "seidel" if runs_on(task, "seidel") else TASK_MODELS[task][0]
        validate(compose([f"model={model}", f"task={task}"]))


@pytest.mark.parametrize("override, line", [
    ("task.maxiter=3", "task.maxiter: no such key in task; did you mean task.max_iter?"),
    ("engine.thread=2", "engine.thread: no such key in engine; did you mean engine.threads?"),
    ("sed=3", "sed: no such key; did you mean seed?"),
    ("model.obs.sigmaa=1", "model.obs.sigmaa: no such key in model.obs; did you mean "
                           "model.obs.sigma?"),
    ("model=seidell", "model=seidell: no such model; did you mean seidel? (known: heat, "
                      "lorenz96, lorenz96_2scale, seidel)"),
    ("task=calibrat", "task=calibrat: no such task; did you mean calibrate? (known: "
                      "assimilate, calibrate, compile, forward, gradcheck, train_closure, "
                      "train_closure_long)"),
    ("model.n=big", "model.n=big: Value 'big' of type 'str' could not be converted to Integer"),
    ("seed=0,1", "seed=0,1: several values run a sweep only with -m (simcore run -m ...); a "
                 "list is written key=[a,b]"),
])
def test_what_hydra_refuses_is_one_line_with_a_did_you_mean(override, line):
    overrides = ["model=seidel", "task=calibrate", override]
    with pytest.raises(Exception) as err:
        compose(overrides)
    assert composition_error(err.value, overrides) == line


def test_a_forced_misspelt_key_gets_a_did_you_mean_too():
    assert first_problem("task=calibrate", "+task.maxiter=3") == \
        "task.maxiter: no such key in task; did you mean task.max_iter?"


def test_a_config_error_is_one_line_and_nothing_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    status = cli.main(["run", "task=calibrate", "task.maxiter=3",
                       f"hydra.run.dir={tmp_path}/run"])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err == "error: task.maxiter: no such key in task; did you mean task.max_iter?\n"
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")                     # the traceback instead
    with pytest.raises(Exception, match="Could not override 'task.maxiter'"):
        cli.main(["run", "task=calibrate", "task.maxiter=3", f"hydra.run.dir={tmp_path}/run"])


def test_a_sweep_is_checked_job_by_job_before_any_runs(tmp_path, capsys):
    status = cli.main(["run", "-m", *SEIDEL, "task=forward", "seed=0,-1",
                       f"hydra.sweep.dir={tmp_path}/sweep"])
    _, err = capsys.readouterr()
    assert status == 2 and not (tmp_path / "sweep").exists()
    assert err.startswith("error: job 1 (") and err.endswith("): seed=-1: must be at least 0\n")


# ---- outcomes: the last line of run.log, outcome.json, the exit status --------------------------
def run_log(folder):
    return (folder / "run.log").read_text().splitlines()


def test_a_finished_run_says_so_last(tmp_path, capsys):
    assert cli.main(["run", *SEIDEL, "task=forward", f"hydra.run.dir={tmp_path}/r"]) == 0
    assert " - finished: forward on seidel in " in run_log(tmp_path / "r")[-1]
    outcome = json.loads((tmp_path / "r" / "outcome.json").read_text())
    assert outcome["status"] == "finished" and outcome["overrides"][0] == "model=seidel"


def test_a_failure_is_one_line_and_its_traceback_is_in_run_log(tmp_path, capsys, monkeypatch):
    import simcore.tasks

    def broken(run):
        return 1 / 0

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr(simcore.tasks, "tasks", lambda: {"forward": broken})
    status = cli.main(["run", *SEIDEL, "task=forward", f"hydra.run.dir={tmp_path}/r"])
    out, err = capsys.readouterr()
    assert status == 1 and "Traceback" not in out + err
    last = out.rstrip().splitlines()[-1]
    assert "[simcore][ERROR] - failed: ZeroDivisionError: division by zero at " \
           "tests/framework/test_cli.py:" in last and last.endswith("(traceback in run.log)")
    log = run_log(tmp_path / "r")
    assert log[-1] == last
    assert any(x.startswith("Traceback (most recent call last):") for x in log)
    assert json.loads((tmp_path / "r" / "outcome.json").read_text())["status"] == "failed"


def test_a_user_error_at_run_time_is_its_message(tmp_path, capsys):
    """The engine refuses a memory budget that cannot hold the tape: its own words."""
    status = cli.main(["run", *SEIDEL, "task=calibrate", "task.plot=false",
                       "engine.memory_budget=1KiB", f"checkpoint_dir={tmp_path}/ck",
                       f"hydra.run.dir={tmp_path}/r"])
    assert status == 1
    last = run_log(tmp_path / "r")[-1]
    assert "[ERROR] - failed: no store/recompute plan fits the memory budget of 1.0 KiB" in last
    assert last.endswith("(traceback in run.log)")


def test_ctrl_c_says_where_the_checkpoint_is_and_how_to_resume(tmp_path, capsys, monkeypatch):
    from simcore.tasks import assimilate as task
    real = task.analyse

    def interrupted(setup, c, xb):
        if c == 2:
            raise KeyboardInterrupt
        return real(setup, c, xb)

    args = ["model=lorenz96", *TINY["lorenz96"], "task=assimilate", "task.cycles=4",
            "task.plot=false", f"checkpoint_dir={tmp_path}/ck"]
    monkeypatch.setattr(task, "analyse", interrupted)
    status = cli.main(["run", *args, f"hydra.run.dir={tmp_path}/r"])
    out, err = capsys.readouterr()
    assert status == 130 and "Traceback" not in out + err
    last = run_log(tmp_path / "r")[-1]
    assert "[WARNING] - interrupted: by Ctrl-C; checkpoint of step 1 in " in last
    outcome = json.loads((tmp_path / "r" / "outcome.json").read_text())
    assert outcome["status"] == "interrupted" and os.path.isfile(outcome["checkpoint"])
    assert last.endswith(f"resume with: {outcome['resume']}")
    command = shlex.split(outcome["resume"])
    assert command[:2] == ["simcore", "run"] and command[-1] == "resume=true"

    monkeypatch.setattr(task, "analyse", real)                      # the printed command
    assert cli.main([*command[1:], f"hydra.run.dir={tmp_path}/again"]) == 0
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert summary["resumed_from_cycle"] == 1 and summary["cycles"] == 4


def test_sigterm_ends_a_run_like_ctrl_c_with_its_checkpoint_kept(tmp_path, capsys, monkeypatch):
    """Slurm's time limit sends SIGTERM: the outcome says so and how to resume."""
    from simcore.tasks import assimilate as task
    real, before = task.analyse, signal.getsignal(signal.SIGTERM)

    def terminated(setup, c, xb):
        if c == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(setup, c, xb)

    args = ["model=lorenz96", *TINY["lorenz96"], "task=assimilate", "task.cycles=4",
            "task.plot=false", f"checkpoint_dir={tmp_path}/ck"]
    monkeypatch.setattr(task, "analyse", terminated)
    assert cli.main(["run", *args, f"hydra.run.dir={tmp_path}/r"]) == 130
    last = run_log(tmp_path / "r")[-1]
    assert "[WARNING] - interrupted: by SIGTERM; checkpoint of step " in last
    outcome = json.loads((tmp_path / "r" / "outcome.json").read_text())
    assert outcome["status"] == "interrupted" and os.path.isfile(outcome["checkpoint"])
    assert signal.getsignal(signal.SIGTERM) is before


# ---- sweeps ----------------------------------------------------------------------------------
def test_a_sweep_goes_on_past_a_failed_job_and_ends_with_a_table(tmp_path, capsys):
    status = cli.main(["run", "-m", *SEIDEL, "task=gradcheck", "task.slope_tol=1e-9,0.1",
                       f"hydra.sweep.dir={tmp_path}/sweep"])
    out, _ = capsys.readouterr()
    assert status == 1
    table = out[out.index("sweep of 2 jobs in"):].splitlines()
    assert table[0].startswith(f"sweep of 2 jobs in {tmp_path}/sweep; all with ")
    assert table[1].split() == ["job", "overrides", "outcome"]
    assert table[2].split()[:4] == ["0", "task.slope_tol=1e-09", "failed:", "gradcheck:"]
    assert "FAILED" in table[2]
    assert table[3].split()[:3] == ["1", "task.slope_tol=0.1", "finished:"]
    assert table[4] == "1 of 2 jobs finished, 1 did not"
    assert len(list((tmp_path / "sweep").glob("*/summary.json"))) == 2


def test_engine_settings_are_per_job_in_a_sweep(tmp_path, capsys):
    """engine.threads=2,1 in one process: the second job runs on one thread, and each
    summary says what its job used."""
    assert cli.main(["run", "-m", *SEIDEL, "task=forward", "engine.threads=2,1",
                     f"hydra.sweep.dir={tmp_path}/sweep"]) == 0
    threads = {}
    for path in (tmp_path / "sweep").glob("*/summary.json"):
        summary = json.loads(path.read_text())
        job = json.loads((path.parent / "outcome.json").read_text())["job"]
        threads[job] = summary["engine"]["threads"]
    assert threads == {0: 2, 1: 1}


def test_the_threads_default_is_never_more_than_the_process_may_use():
    import simcore
    from simcore.engine import SMALL, available_cpus, default_threads
    small = simcore.get_model("seidel")
    big = simcore.get_model("heat", compose(["model=heat", "model.nx=512",
                                             "model.ny=512"]).model)
    assert 512 * 512 >= SMALL > 20 * 20
    assert default_threads(small, load=0.0) == 1                    # a small model
    cpus = available_cpus()
    assert default_threads(big, load=0.0) == cpus                   # an idle node: all
    assert default_threads(big, load=cpus + 1.0) == 1               # a busy node: one
    assert default_threads(big, cpus=1, load=0.0) == 1              # the launcher's share
    assert available_cpus(environ={"SLURM_CPUS_PER_TASK": "1"}) == 1
    assert available_cpus(cpus=10 ** 6) == len(os.sched_getaffinity(0))


# ---- progress ----------------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_quiet_off_a_terminal_and_shows_rate_and_eta_on_one():
    from simcore.terminal import progress
    plain = io.StringIO()
    bar = progress(10, "calibrate", "iter", file=plain)
    bar.update(3)
    bar.close()
    assert plain.getvalue() == "" and not bar.live
    pytest.importorskip("tqdm")
    tty = Terminal()
    bar = progress(10, "calibrate", "iter", file=tty)
    for _ in range(4):
        bar.update(1)
    bar.refresh()
    text = tty.getvalue().replace("\r", "\n").splitlines()[-1]
    assert text.startswith("calibrate:  40%|") and " 4/10 [" in text
    assert "<" in text and ("iter/s" in text or "s/iter" in text)      # ETA and rate
    bar.close()


def test_the_console_handler_keeps_tracebacks_for_run_log():
    import logging
    from simcore.terminal import FILE_ONLY, Console
    stream = io.StringIO()
    handler = Console(stream)
    logger = logging.getLogger("test_cli.console")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.error("failed: x")
        logger.error("Traceback ...", extra=FILE_ONLY)
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "failed: x\n"


# ---- what exists: help, models, tasks, show -----------------------------------------------------
def test_help_describes_tasks_models_and_groups_not_hydra_internals(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    for name in [*MODELS, *TASKS, "engine", "device", "hydra/launcher"]:
        assert f"  {name} " in text, name
    assert "schema" not in text and "simcore run -m" in text
    assert cli.main(["run", "--help"]) == 0
    assert capsys.readouterr().out == text


def test_models_and_tasks_are_a_line_each(capsys):
    import simcore
    assert cli.main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [x.split()[0] for x in lines] == MODELS
    assert lines[0].split(None, 1)[1] == simcore.model_class(MODELS[0]).description
    assert cli.main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [x.split()[0] for x in lines] == TASKS
    assert all(len(x.split()) > 3 for x in lines)


def test_show_prints_every_option_with_its_default_and_meaning(capsys):
    import dataclasses
    from simcore.schema import AssimilateConfig
    assert cli.main(["show", "task=assimilate"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("task=assimilate: cycling strong-constraint 4D-Var")
    keys = [f.name for f in dataclasses.fields(AssimilateConfig) if f.name != "name"]
    assert [x.split("=")[0].strip() for x in lines[1:]] == [f"task.{k}" for k in keys]
    burn = next(x for x in lines if x.strip().startswith("task.burn_in_time="))
    assert burn.split()[0] == "task.burn_in_time=null" and "a fifth of the run" in burn
    assert cli.main(["show", "model=heat"]) == 0
    text = capsys.readouterr().out
    assert "model.obs.every_k=3 " in text and "model.dt=0.15 " in text     # heat's own values
    assert cli.main(["show", "task=nope"]) == 2


def test_the_simcore_command_is_installed_and_runs(repo_root):
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["simcore"] == "simcore.cli:console"
    done = subprocess.run([sys.executable, "-m", "simcore", "tasks"], capture_output=True,
                          text=True, timeout=120, cwd=repo_root,
                          env={**os.environ, "PYTHONPATH": str(repo_root)})
    assert done.returncode == 0, done.stderr
    assert [x.split()[0] for x in done.stdout.splitlines()] == TASKS


# ---- README output blocks: what the documented commands print ----------------------------------
# A README block that starts with "$ simcore run ..." (one line) holds what it prints; "..."
# stands for lines left out (one gap at most: the lines before it are the first printed,
# those after it the last). Numbers, paths and thread counts differ from run to run and
# are compared as placeholders. `python tests/framework/test_cli.py --readme` reruns every
# documented command and writes what it printed into README.md.
import contextlib  # noqa: E402
import re  # noqa: E402

NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
HASH = re.compile(r"\b[0-9a-f]{16,}\b")


def readme_blocks(text):
    """[(start, end, command, lines)]: each output block, its line span in ``text``."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("```") and i + 1 < len(lines) and \
                lines[i + 1].startswith("$ simcore run ") and not lines[i + 1].endswith("\\"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            out.append((i + 1, end, lines[i + 1][2:], lines[i + 2:end]))
            i = end
        i += 1
    return out


def normal(line):
    """A line up to what changes from run to run: numbers, paths, thread counts."""
    line = " ".join("PATH" if "/" in w and not w.startswith("[") else w for w in line.split())
    return NUMBER.sub("#", HASH.sub("HASH", line)).replace("threads", "thread")


def printed(command, where):
    """What ``command`` (``simcore run ...``) prints, run in the folder ``where`` (its
    outputs and checkpoints go there). task=compile compiles into a fresh cache there,
    shown as the default one."""
    args = shlex.split(command)[1:]
    cache = os.path.join(where, "cache")
    if "task=compile" in args:
        args.append(f"engine.cache_dir={cache}")
    stream = io.StringIO()
    cwd = os.getcwd()
    os.chdir(where)
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            cli.main(args)
    finally:
        os.chdir(cwd)
    lines = stream.getvalue().replace(cache, "~/.cache/simcore").splitlines()
    return [x.replace(f"{where}/", "").replace(str(where), ".") for x in lines]


def expected(block, output):
    """The block's lines that ``output`` should reproduce: the head and the tail around
    "...", or all of them."""
    if "..." not in block:
        return block, output
    gap = block.index("...")
    head, tail = block[:gap], block[gap + 1:]
    return head + ["..."] + tail, output[:len(head)] + ["..."] + output[len(output) - len(tail):]


README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
README_BLOCKS = readme_blocks(open(README).read())


@pytest.mark.parametrize("command", [b[2] for b in README_BLOCKS])
def test_readme_output_blocks_are_what_the_commands_print(command, tmp_path, monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    block = next(b[3] for b in README_BLOCKS if b[2] == command)
    want, got = expected(block, printed(command, tmp_path))
    assert [normal(x) for x in got] == [normal(x) for x in want], \
        "README.md is out of date: python tests/framework/test_cli.py --readme rewrites its blocks"


def rewrite_readme(path):
    """Rerun every documented command and put what it printed into its block."""
    import tempfile
    os.environ.setdefault("SIMCORE_CACHE_DIR", tempfile.mkdtemp(prefix="simcore-readme-"))
    text = open(path).read()
    lines = text.splitlines()
    for start, end, command, block in reversed(readme_blocks(text)):
        with tempfile.TemporaryDirectory() as where:
            output = printed(command, where)
        _, new = expected(block, output)
        lines[start + 1:end] = new
        print(f"{command}: {len(new)} lines", file=sys.stderr)
    open(path, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__" and sys.argv[1:] == ["--readme"]:
    rewrite_readme(README)
