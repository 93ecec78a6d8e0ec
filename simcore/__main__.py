"""``python -m simcore ...``: the ``simcore`` command where its script is not installed."""
from .cli import console

console()
