"""simcore entry point (Hydra).

    python run.py model=seidel task=calibrate
    python run.py model=heat task=gradcheck model.nx=24 engine.threads=2
    python run.py --cfg job model=heat          # show the resolved config, run nothing

Outputs go to Hydra's run directory (outputs/<date>/<time>_<model>-<task>_<pid>-<rand>/):
the task's files plus .hydra/ (config, overrides) and run.log. Exits 1 when a task's
check fails (gradcheck).
"""
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig

from simcore.config import CONFIG_DIR, register_configs

register_configs()
# Jobs that launchers start in new processes (hydra/launcher=local|slurm) unpickle
# simcore's configs: let them import it from this checkout even when it is not installed.
_ROOT = os.path.dirname(os.path.abspath(__file__))
if _ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT,
                                                             os.environ.get("PYTHONPATH")]))


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def main(cfg) -> None:
    from simcore.tasks import run_task
    summary = run_task(cfg, HydraConfig.get().runtime.output_dir)
    if summary.get("passed") is False:
        sys.exit(1)


if __name__ == "__main__":
    main()
