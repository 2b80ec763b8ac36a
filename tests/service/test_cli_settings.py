"""`rewardhub serve` as an operator starts it: a REWARDHUB_* name that is no setting is reported."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (its service/ and clients/ on PYTHONPATH)


def _serve(cwd: Path, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """``python -m rewardhub serve`` in ``cwd`` with no REWARDHUB_* name but ``env_vars``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWARDHUB_")}
    env.update(PYTHONPATH=os.pathsep.join(str(ROOT / d) for d in ("service", "clients")), **env_vars)
    return subprocess.run(
        [sys.executable, "-m", "rewardhub", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_serve_warns_about_a_misspelt_setting_and_names_the_close_one() -> None:
    # The port is taken, so the service stops after its start-up; the warning comes before it.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _serve(
            ROOT,
            REWARDHUB_PORT=str(port),
            REWARDHUB_PROT="9000",  # typo of REWARDHUB_PORT
            REWARDHUB_URL="http://127.0.0.1:1",  # the clients' variable: no warning
            REWARDHUB_VERL_ROUTES="{}",  # likewise
        )
    assert "REWARDHUB_PROT is no rewardhub setting and is ignored" in done.stderr
    assert "did you mean REWARDHUB_PORT?" in done.stderr
    assert "REWARDHUB_URL is no" not in done.stderr
    assert "REWARDHUB_VERL_ROUTES is no" not in done.stderr
    assert done.returncode != 0  # the port was in use


def test_serve_warns_about_a_misspelt_setting_in_the_env_file(tmp_path: Path) -> None:
    """Settings read a `.env` file in the working directory too, and a typo there (REWARDHUB_PROT=9000)
    was ignored without a word: only the process environment's names were checked. Found in review."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        (tmp_path / ".env").write_text(
            f"REWARDHUB_PORT={port}\n"  # read from the file: the service stops at the taken port
            "REWARDHUB_PROT=9000\n"  # typo of REWARDHUB_PORT
            "export REWARDHUB_WOKRERS=2\n"  # (dotenv's export form) typo of REWARDHUB_WORKERS
            "REWARDHUB_URL=http://127.0.0.1:1\n"  # the clients' variable: no warning
            "OTHER_APP_SETTING=1\n"  # no REWARDHUB_ name: not ours to judge
        )
        done = _serve(tmp_path)
    assert "REWARDHUB_PROT (in .env) is no rewardhub setting and is ignored" in done.stderr, done.stderr
    assert "did you mean REWARDHUB_PORT?" in done.stderr
    assert "REWARDHUB_WOKRERS (in .env) is no rewardhub setting" in done.stderr
    assert "did you mean REWARDHUB_WORKERS?" in done.stderr
    assert "REWARDHUB_URL" not in done.stderr and "OTHER_APP_SETTING" not in done.stderr
    assert done.returncode != 0  # the port (from the file) was in use
