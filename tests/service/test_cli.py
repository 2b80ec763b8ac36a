"""The ``rewardhub`` command line as a user reads it."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from rewardhub.cli import app


def test_serve_help_names_the_settings_and_defaults() -> None:
    # typer renders option help as rich markup, where "[env REWARDHUB_HOST, default 127.0.0.1]" is a
    # (unknown) style tag and vanished: --help said "Interface to bind ." and never named the variable.
    result = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = re.sub(r"[\s│]+", " ", result.output)  # the help box's wrapped lines, joined
    for expected in (
        "[env REWARDHUB_HOST, default 127.0.0.1]",
        "[env REWARDHUB_PORT, default 8000]",
        "[env REWARDHUB_WORKERS, default 1]",
        "[env REWARDHUB_REDIS_URL]",
    ):
        assert expected in text, f"{expected!r} missing from serve --help:\n{result.output}"
