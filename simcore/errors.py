"""The framework's exceptions; each says what usually causes it."""


class SimcoreError(Exception):
    """Base class of every framework error."""


class ModelError(SimcoreError):
    """A model's declarations disagree (names vs kernel arguments, shapes vs dims)."""


class UnknownModelError(SimcoreError, KeyError):
    """A model name that no module in ``models/`` registers: check the spelling."""

    def __str__(self):                  # KeyError would quote the message
        return str(self.args[0])


class ConfigError(SimcoreError):
    """A configuration value that parses but cannot work (unstable time step, ...)."""


class DataFileError(SimcoreError):
    """An observation, truth or background file that cannot be used: a missing variable,
    other units, NaNs, times outside the run. The message names the file and the field."""
