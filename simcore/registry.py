"""Models by name: ``@register`` a Model subclass, ``get_model("seidel")`` finds it.

Every module of ``simcore.models`` (the repository's ``models/``) is imported on first
lookup, so a new model only needs its module there: run.py's ``model=<name>`` is its
Config dataclass (simcore.config).
"""
import importlib
import pkgutil

from .errors import ModelError, UnknownModelError

_MODELS = {}
_discovered = False


def register(cls):
    """Class decorator: make ``cls`` findable as ``cls.name``."""
    if not cls.name:
        raise ModelError(f"{cls.__qualname__} has no name; set name = '...'")
    other = _MODELS.get(cls.name)
    if other is not None and (other.__module__, other.__qualname__) != \
            (cls.__module__, cls.__qualname__):
        hint = " (one file imported under two names: import a model as " \
               "simcore.models.<module>)" if other.__qualname__ == cls.__qualname__ else ""
        raise ModelError(f"two models named {cls.name!r}: {other.__module__}."
                         f"{other.__qualname__} and {cls.__module__}.{cls.__qualname__}{hint}")
    _MODELS[cls.name] = cls
    return cls


def discover():
    """Import every module of ``simcore.models`` (each registers its models)."""
    global _discovered
    if _discovered:
        return
    models = importlib.import_module(f"{__package__}.models")   # as each of its modules
    for info in pkgutil.iter_modules(models.__path__):
        importlib.import_module(f"{models.__name__}.{info.name}")
    _discovered = True


def known_models() -> list:
    discover()
    return sorted(_MODELS)


def model_class(name: str):
    discover()
    if name not in _MODELS:
        raise UnknownModelError(f"unknown model {name!r}; known models: "
                                f"{', '.join(known_models())}")
    return _MODELS[name]


def get_model(name: str, cfg=None, seed: int = 0):
    """An instance of the model ``name`` for ``cfg`` (its Config dataclass or a DictConfig)."""
    return model_class(name)(cfg, seed=seed)
