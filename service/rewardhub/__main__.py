"""``python -m rewardhub`` is the ``rewardhub`` command."""

from rewardhub._entry import rewardhub as main

if __name__ == "__main__":  # not when a spawned child process re-imports the main module
    main()
