"""The terminal: progress bars with rate and ETA, and log lines that do not break them.

Bars go to stderr and only when it is a terminal: batch jobs, pipes and CI see the log
lines alone. ``Console`` is the log handler of ``configs/hydra/job_logging/simcore.yaml``:
it prints each record above the bars, and leaves out what is meant for ``run.log``
only (records logged with ``extra=FILE_ONLY``, such as a failure's traceback, and the
engine's INFO diagnostics).
"""
import logging
import sys

try:
    from tqdm import tqdm
except ImportError:                     # an install without its dependencies: no bars
    tqdm = None

FILE_ONLY = {"file_only": True}


def progress(total, desc: str, unit: str = "it", file=None, initial: int = 0, leave=True):
    """A bar over ``total`` ``unit``s (``update(n)``, ``close()``); silent unless ``file``
    (default stderr) is a terminal."""
    file = sys.stderr if file is None else file
    on = tqdm is not None and hasattr(file, "isatty") and file.isatty()
    if not on:
        return _Silent()
    bar = tqdm(total=total, desc=desc, unit=unit, file=file, initial=initial, leave=leave,
               dynamic_ncols=True, smoothing=0.1,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                          "[{elapsed}<{remaining}, {rate_fmt}]")
    bar.live = True
    return bar


class _Silent:
    """What ``progress`` returns off a terminal: a bar that shows nothing."""
    live = False

    def update(self, n=1):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class OnTerminal(logging.Filter):
    """Leaves out the records meant for run.log only, and the engine's (or any other
    library's) diagnostics below WARNING: the terminal follows the task."""

    def filter(self, record):
        if getattr(record, "file_only", False):
            return False
        return record.levelno >= logging.WARNING or record.name.split(".")[0] == "simcore"


class Console(logging.StreamHandler):
    """A StreamHandler that writes above the progress bars."""

    def __init__(self, stream=None):
        super().__init__(stream)
        self.addFilter(OnTerminal())

    def emit(self, record):
        try:
            message = self.format(record)
            if tqdm is not None and getattr(tqdm, "_instances", None):
                tqdm.write(message, file=self.stream)
            else:
                self.stream.write(message + self.terminator)
            self.flush()
        except Exception:                               # noqa: BLE001 (logging's contract)
            self.handleError(record)
