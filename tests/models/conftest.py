"""Fixtures of the model-backend tests: tiny random models saved on disk once per session (the real
``from_pretrained`` path loads them), and a scripted OpenAI-compatible judge server per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_openai import FakeJudge, fake_judge
from tiny_models import build_tiny_causal_lm, build_tiny_math_shepherd_prm, build_tiny_orm, build_tiny_qwen_prm


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def qwen_prm_path(tiny_dir: Path) -> str:
    return str(build_tiny_qwen_prm(tiny_dir / "qwen-prm"))


@pytest.fixture(scope="session")
def shepherd_prm_path(tiny_dir: Path) -> str:
    return str(build_tiny_math_shepherd_prm(tiny_dir / "math-shepherd"))


@pytest.fixture(scope="session")
def orm_path(tiny_dir: Path) -> str:
    return str(build_tiny_orm(tiny_dir / "orm"))


@pytest.fixture(scope="session")
def causal_lm_path(tiny_dir: Path) -> str:
    return str(build_tiny_causal_lm(tiny_dir / "causal-lm"))


@pytest.fixture
def judge_server() -> Iterator[FakeJudge]:
    with fake_judge() as server:
        yield server
