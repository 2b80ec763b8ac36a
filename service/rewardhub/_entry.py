"""The console scripts' entry points, importable without any extra.

Every install of rewardhub, the base one (the client: httpx and pydantic only) included, puts the
``rewardhub`` and ``rewardhub-train`` commands on the path, while their modules need the ``service`` and
``trainer`` extras. Run without them, a command ended in a ``ModuleNotFoundError`` traceback; here a
missing package of the command's extra ends it with one line naming the package and the install command.
A module of rewardhub's own that is missing is a bug, and still raises.
"""

from __future__ import annotations

import sys
from importlib import import_module

__all__ = ["rewardhub", "rewardhub_train"]

_OWN = {"rewardhub", "rewardhub_client", "rewardhub_trainer"}


def _run(module: str, command: str, extras: str) -> None:
    try:
        main = import_module(module).main
    except ModuleNotFoundError as exc:
        package = (exc.name or "").split(".")[0]
        if not package or package in _OWN:
            raise
        sys.exit(
            f"{command}: {package} is not installed: the command needs rewardhub[{extras}]; "
            f"in the clone: scripts/bootstrap {extras} (or pip install -c constraints.txt -e '.[{extras}]')"
        )
    main()


def rewardhub() -> None:
    """The ``rewardhub`` command (``rewardhub.cli``)."""
    _run("rewardhub.cli", "rewardhub", "service")


def rewardhub_train() -> None:
    """The ``rewardhub-train`` command (``rewardhub_trainer.cli``)."""
    _run("rewardhub_trainer.cli", "rewardhub-train", "service,trainer")
