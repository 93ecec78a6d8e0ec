"""simcore entry point: the same as the installed command ``simcore run`` (simcore/cli.py).

    python run.py model=seidel task=calibrate
    python run.py model=heat task=gradcheck model.nx=24 engine.threads=2
    python run.py -m model=seidel,heat task=gradcheck    # a sweep: a job each, then a table
    python run.py --cfg job model=heat                   # show the resolved config, run nothing
    python run.py --help                                 # tasks, models, config groups

Outputs go to Hydra's run directory (outputs/<date>/<time>_<model>-<task>_<pid>-<rand>/):
the task's files, .hydra/ (config, overrides), run.log (ending with the outcome) and
outcome.json. Exit status: 0 finished, 1 a task or its check failed, 2 a config error
(nothing ran), 130 interrupted.
"""
import os
import sys

# Jobs that launchers start in new processes (hydra/launcher=local|slurm) unpickle
# simcore's configs: let them import it from this checkout even when it is not installed.
_ROOT = os.path.dirname(os.path.abspath(__file__))
if _ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT,
                                                             os.environ.get("PYTHONPATH")]))


def main() -> None:
    try:
        from simcore.cli import main as simcore
    except KeyboardInterrupt:                   # Ctrl-C while the engine is imported
        sys.exit(130)
    sys.exit(simcore(["run", *sys.argv[1:]], prog=sys.argv[0]))


if __name__ == "__main__":
    main()
