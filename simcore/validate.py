"""Every config value checked before anything runs, each problem as one line that names
the key, the value and what is allowed.

``validate(cfg)`` walks the config against its schemas (``simcore.schema``: the
``allowed`` of each :func:`~simcore.schema.option`, finite numbers everywhere), refuses
keys no schema declares (``+key=value`` gets them past Hydra) with a "did you mean",
builds the model (its own checks: heat's stable time step) and checks that the
observations see something. ``composition_error`` says the same kind of line for what
Hydra refuses while composing (misspelt keys and groups, values of the wrong type).
"""
import dataclasses
import difflib
import math
import re

from omegaconf import DictConfig, ListConfig, OmegaConf

from .errors import ConfigError
from .registry import get_model, model_class
from .schema import TASK_MODELS, TASK_SCHEMAS, Config, field_default, runs_on

# tasks whose cost observes the truth on model.obs's grid (assimilate: unless stations;
# calibrate and assimilate: unless obs.file)
OBSERVING = ("calibrate", "gradcheck", "assimilate")


def validate(cfg):
    """Raise ConfigError (one line per problem) unless every value of ``cfg`` is allowed;
    return the model ``cfg`` describes."""
    name = cfg.task.name
    if name not in TASK_SCHEMAS:
        raise ConfigError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASK_SCHEMAS))}")
    schema = model_class(cfg.model.name).Config
    problems = check_section({k: cfg[k] for k in cfg if k not in ("model", "task")}, Config)
    problems += check_section(cfg.model, schema, "model.")
    problems += check_section(cfg.task, TASK_SCHEMAS[name], "task.")
    if not runs_on(name, cfg.model.name):
        problems.append(f"task={name}: runs on model={' or model='.join(TASK_MODELS[name])}, "
                        f"not model={cfg.model.name}")
    if problems:
        raise ConfigError("\n".join(problems))
    model = get_model(cfg.model.name, cfg.model, seed=int(cfg.seed))
    _check_observations(model, cfg)
    if name == "train_closure":
        _check_closure(model, cfg.task)
    return model


def check_section(node, schema, prefix="") -> list:
    """The problems of one config section (a DictConfig, dict or dataclass instance)
    against its ``schema`` dataclass: unknown keys, values not allowed."""
    declared = {f.name: f for f in dataclasses.fields(schema)}
    keys = list(node) if isinstance(node, (dict, DictConfig)) else list(declared)
    problems = []
    for key in keys:
        if key not in declared:
            problems.append(unknown_key(prefix + str(key), declared))
            continue
        f, value = declared[key], _get(node, key)
        sub = _dataclass_of(f)
        if sub is not None and value is not None:
            problems += check_section(value, sub, f"{prefix}{key}.")
            continue
        problem = check_value(prefix + key, _plain(value), f, node)
        if problem:
            problems.append(problem)
    return problems


def check_value(key, value, f, section):
    """One line saying what is wrong with ``key=value``, or None."""
    allowed = f.metadata.get("allowed")
    finite = all(math.isfinite(x) for x in _numbers(value))
    if allowed is not None and not allowed(value, section):
        return f"{key}={shown(value)}: must be {'' if finite else 'finite and '}" \
               f"{allowed.describe(section)}"
    return None if finite else f"{key}={shown(value)}: must be a finite number"


def unknown_key(key, declared) -> str:
    """``task.maxiter: no such key ...; did you mean task.max_iter?``"""
    prefix, _, last = key.rpartition(".")
    where = f" in {prefix}" if prefix else ""
    close = difflib.get_close_matches(last, list(declared), n=1, cutoff=0.6)
    hint = f"; did you mean {prefix + '.' if prefix else ''}{close[0]}?" if close else \
        f"; the keys{where} are {', '.join(declared)}"
    return f"{key}: no such key{where}{hint}"


def _check_observations(model, cfg):
    """The grid observations of the observing tasks see at least one point, at least once."""
    task = cfg.task
    if task.name not in OBSERVING or (task.name == "assimilate" and task.stations > 0) \
            or (task.name != "gradcheck" and cfg.obs.file is not None):
        return
    k, m = int(cfg.model.obs.every_k), int(cfg.model.obs.every_m)
    for v in model.variables():
        for d in v.dims if v.observed else ():
            n = model.dim(d).size
            if k // 2 >= n:
                raise ConfigError(f"model.obs.every_k={k}: observes no point of {v.name} "
                                  f"({d} has {n} points, the first observed is every_k // 2); "
                                  f"must be at most {2 * n - 1}")
    if task.name != "assimilate" and m > model.steps:
        raise ConfigError(f"model.obs.every_m={m}: no observation time in a run of "
                          f"model.steps={model.steps}; must be at most {model.steps}")


def _check_closure(model, task):
    """The truth's segments hold what train_closure asks of them."""
    dt = float(task.substeps) * model.time().dt
    train, test = round(float(task.train_time) / dt), round(float(task.test_time) / dt)
    where = f"(hybrid step task.substeps * model.dt = {dt:g})"
    if int(task.rollout) >= train:
        raise ConfigError(f"task.rollout={task.rollout}: must be below the training segment's "
                          f"{train} hybrid steps {where}; raise task.train_time")
    for key in ("forecast_time", "acf_time"):
        steps = round(float(task[key]) / dt)
        if steps < 1 or steps >= test:
            raise ConfigError(f"task.{key}={task[key]}: must span 1 to {test - 1} hybrid steps "
                              f"of the held-out segment {where}; it spans {steps}")


def composition_error(exc, overrides=()) -> str:
    """One line for what Hydra refused while composing ``overrides``."""
    text, cause = str(exc), str(exc.__cause__ or "")
    bad = re.search(r"Could not override '([^']+)'", text)
    if bad and "not in" in cause:
        return _misspelt(bad.group(1), overrides)
    missing = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
    if missing:
        group, value = missing.groups()
        options = re.findall(r"^\t(\S+)$", text.split("Config search path")[0], re.M)
        close = difflib.get_close_matches(value, options, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{group}={value}: no such {group}; {hint}(known: {', '.join(options)})"
    ambiguous = re.search(r"Ambiguous value for argument '([^']+)'", text)
    if ambiguous:
        return (f"{ambiguous.group(1)}: several values run a sweep only with -m "
                "(simcore run -m ...); a list is written key=[a,b]")
    merging = re.search(r"Error merging override (\S+)", text)
    if merging and cause:
        return f"{merging.group(1)}: {cause.splitlines()[0]}"
    return " ".join(line.strip() for line in [text.splitlines()[0], *cause.splitlines()[:1]])


def _misspelt(key, overrides):
    """The unknown-key line for ``key``, with the keys of the section it was meant for."""
    from .config import compose
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
    choices = [o for o, k in zip(overrides, keys) if "." not in k and k != key]  # model=...
    try:
        cfg = compose(choices)
    except Exception:                                   # noqa: BLE001 (another error)
        return f"{key}: no such key"
    section, _, _ = key.rpartition(".")
    node = OmegaConf.select(cfg, section) if section else cfg
    if not isinstance(node, DictConfig):
        return f"{key}: no such key"
    return unknown_key(key, {k: None for k in node})


def shown(value) -> str:
    """A value as one writes it on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(shown(v) for v in value) + "]"
    return str(value)


def _get(node, key):
    return node[key] if isinstance(node, (dict, DictConfig)) else getattr(node, key)


def _plain(value):
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _numbers(value):
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, float):
        yield value


def _dataclass_of(f):
    if dataclasses.is_dataclass(f.type):
        return f.type
    value = field_default(f)
    return type(value) if dataclasses.is_dataclass(value) else None
