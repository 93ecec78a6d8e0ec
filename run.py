"""simcore entry point (Hydra).

    python run.py model=seidel task=calibrate
    python run.py model=heat task=gradcheck model.nx=24 engine.threads=2
    python run.py --cfg job model=heat          # show the resolved config, run nothing

Outputs go to Hydra's run directory (outputs/<date>/<time>_<model>-<task>_<pid>-<rand>/):
the task's files plus .hydra/ (config, overrides) and run.log. Exits 1 when a task's
check fails (gradcheck).
"""
import sys

import hydra
from hydra.core.hydra_config import HydraConfig

from simcore.config import CONFIG_DIR, register_configs

register_configs()


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def main(cfg) -> None:
    from simcore.tasks import run_task
    summary = run_task(cfg, HydraConfig.get().runtime.output_dir)
    if summary.get("passed") is False:
        sys.exit(1)


if __name__ == "__main__":
    main()
