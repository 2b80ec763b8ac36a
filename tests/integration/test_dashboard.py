"""/dashboard rendered by headless Chromium against a live server: data shows up, the screenshot is real."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def chromium(url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "chromium is not installed (scripts/system-deps installs it)"
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--window-size=1280,900",
        "--virtual-time-budget=4000",
        *extra,
        url,
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and raw (filtered) scanline bytes of a PNG, with the standard library only."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_dashboard_renders_live_data(live_server_factory: Any, tmp_path: Path) -> None:
    with live_server_factory() as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            items = [{"response": f"\\boxed{{{i}}}", "reference": str(i)} for i in range(50)]
            items.append({"response": "\\boxed{1}"})  # invalid: missing_reference
            for _ in range(3):
                c.post("/v1/score", json={"reward": "math", "items": items}).raise_for_status()
            c.post(
                "/v1/score",
                json={
                    "reward": "exact_match",
                    "items": [{"response": "a", "reference": "a"}],
                    "shadow": {"reward": "f1"},
                },
            )
            data = c.get("/dashboard/data").json()
        assert data["total_items"] == 3 * 51 + 1 + 1  # the shadowed item once more, as f1's
        assert [(p["reward"], p["shadow"], p["agreement"]) for p in data["shadow"]] == [
            ("exact_match", "f1", 1.0)
        ]
        assert data["invalid"] == {"missing_reference": 3}
        assert 0 < data["cache_hit_rate"] < 1
        assert set(data["rewards"]) == {"math", "exact_match", "f1"}
        # one process's figures: the page says so when it is one of several workers
        assert data["worker"]["one_of_several"] is False and data["worker"]["pid"] > 0

        dom = chromium(f"{server.url}/dashboard", tmp_path, "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        html = dom.stdout
        assert 'data-loaded="1"' in html, "the page's script did not load data"
        assert ">math<" in html and ">exact_match<" in html  # per-reward latency rows
        assert ">missing_reference<" in html  # invalid reasons
        assert ">f1<" in html and "100 %" in html  # the shadow pair and its agreement
        assert "connecting" not in html

        shot = tmp_path / "dashboard.png"
        out = chromium(f"{server.url}/dashboard", tmp_path, f"--screenshot={shot}")
        assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    width, height, raw = png_pixels(shot)
    assert (width, height) == (1280, 900)
    # A rendered page, not a blank one: many distinct byte values across the image.
    assert len(set(raw[:: max(1, len(raw) // 200_000)])) > 20
    assert shot.stat().st_size > 20_000
