"""``python -m rewardhub`` is the ``rewardhub`` command."""

from rewardhub.cli import main

main()
