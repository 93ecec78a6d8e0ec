"""simcore: gridded xarray states, models, tasks and I/O on top of the ``adjoint`` engine.

    from simcore import get_model, Twin, Observations
    model = get_model("seidel")                     # models/seidel.py, default config
    twin = Twin(model, Observations(every_k=2, every_m=2, sigma=0.01))
    J, parts, grad_p, grad_x0 = twin.cost_and_grad(model.truth())
"""
from .errors import ConfigError, ModelError, SimcoreError, UnknownModelError
from .model import Dim, Model, Parameter, TimeAxis, Variable
from .registry import get_model, known_models, model_class, register
from .version import __version__

# imported last: chain and twin pull in the engine
from .chain import advance  # noqa: E402
from .twin import Observations, Twin  # noqa: E402

__all__ = ["Dim", "Model", "Parameter", "TimeAxis", "Variable", "register", "get_model",
           "known_models", "model_class", "Twin", "Observations", "advance", "SimcoreError",
           "ModelError", "UnknownModelError", "ConfigError", "__version__"]
