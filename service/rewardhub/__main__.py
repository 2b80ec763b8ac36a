"""``python -m rewardhub`` is the ``rewardhub`` command."""

from rewardhub.cli import main

if __name__ == "__main__":  # not when a spawned child process re-imports the main module
    main()
