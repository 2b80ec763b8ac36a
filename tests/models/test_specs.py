"""Backend specs: the backends file (YAML/JSON), shortcuts, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardhub.config import ConfigError, Settings
from rewardhub.models.hub import ModelHub, specs_from_settings
from rewardhub.models.specs import LocalSpec, RemoteSpec, load_backends_file


def settings(**kw: object) -> Settings:
    return Settings(_env_file=None, embedding_model="off", **kw)  # type: ignore[call-arg, arg-type]


def test_yaml_file_and_shortcuts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "b.yaml"
    f.write_text(
        "backends:\n"
        "  big-judge:\n    kind: openai\n    url: https://judge.internal/v1\n    model: qwen-72b\n"
        "    api_key_env: BIG_KEY\n    concurrency: 4\n"
        "  pool-prm:\n    kind: vllm_pooling\n    url: http://prm:8000/v1\n    model: Qwen/Qwen2.5-Math-PRM-7B\n"
        "    convention: qwen\n"
    )
    monkeypatch.setenv("BIG_KEY", "k-123")
    specs = load_backends_file(str(f))
    big = specs["big-judge"]
    assert isinstance(big, RemoteSpec) and big.key() == "k-123" and big.concurrency == 4
    s = settings(
        backends_file=str(f),
        judge_url="http://j:8000/v1",
        judge_model="m",
        prm_model="/m/prm",
        prm_convention="math_shepherd",
    )
    all_specs, lazy = specs_from_settings(s)
    assert set(all_specs) == {"judge", "prm", "big-judge", "pool-prm"} and not lazy
    prm = all_specs["prm"]
    assert isinstance(prm, LocalSpec) and prm.task == "generate" and prm.convention == "math_shepherd"
    hub = ModelHub.from_settings(s)
    assert hub.names() == ["big-judge", "judge", "pool-prm", "prm"]
    assert hub.conventions == {"prm": "math_shepherd", "pool-prm": "qwen"}
    assert hub.get("pool-prm").client.base_url == "http://prm:8000"  # type: ignore[attr-defined]


def test_bad_specs_name_the_problem(tmp_path: Path) -> None:
    f = tmp_path / "b.json"
    f.write_text('{"backends": {"x": {"kind": "openai", "url": "file:///etc/passwd", "model": "m"}}}')
    with pytest.raises(ValueError, match=r"backends\.x\..*url must start with http"):
        load_backends_file(str(f))
    f.write_text('{"backends": {"judge": {"kind": "openai", "url": "http://a/v1", "model": "m"}}}')
    with pytest.raises(ValueError, match="both"):
        specs_from_settings(settings(backends_file=str(f), judge_url="http://b/v1"))
    with pytest.raises(ValueError, match="REWARDHUB_BACKENDS_FILE"):
        load_backends_file(str(tmp_path / "missing.json"))
    # a key variable that is not set: refused at start-up, named (not a run of 401s and an open breaker)
    f.write_text(
        '{"backends": {"x": {"kind": "openai", "url": "http://a/v1", "model": "m", "api_key_env": "NO_SUCH_KEY_VAR"}}}'
    )
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR, which is not set"):
        load_backends_file(str(f))
    f.write_text('{"backends": {}, "defualts": {}}')
    with pytest.raises(ValueError, match=r"unknown top-level keys \['defualts'\]"):
        load_backends_file(str(f))
    f.write_text('{"backends": {')
    with pytest.raises(ValueError, match=rf"{f}: not valid JSON"):
        load_backends_file(str(f))
    y = tmp_path / "b.yaml"
    y.write_text("backends: [unclosed\n")
    with pytest.raises(ValueError, match=rf"{y}: not valid YAML"):
        load_backends_file(str(y))


def test_a_backends_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    """A file saved as Latin-1 (a comment with an accent) failed the start with a bare
    UnicodeDecodeError traceback, naming neither the file nor the setting. Found in review."""
    f = tmp_path / "b.yaml"
    f.write_bytes("# modèle du juge\nbackends: {}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"REWARDHUB_BACKENDS_FILE={f}: not UTF-8 text"):
        load_backends_file(str(f))


def test_a_yaml_file_with_an_upper_case_suffix_is_read_as_yaml(tmp_path: Path) -> None:
    """``backends.YAML`` (or ``.Yml``) was read as JSON and refused as "not valid JSON". Found in review."""
    f = tmp_path / "backends.YAML"
    f.write_text("backends:\n  j: {kind: openai, url: 'http://a/v1', model: m}\n")
    assert isinstance(load_backends_file(str(f))["j"], RemoteSpec)


def test_skywork_loads_a_value_head_and_only_in_process(tmp_path: Path) -> None:
    """A skywork PRM needs its value head, which only the transformers backend adds: the shortcut picks
    task value_head, and a vLLM kind or a vLLM engine with that task is refused when the file is read."""
    all_specs, _ = specs_from_settings(settings(prm_model="/m/sky", prm_convention="skywork"))
    prm = all_specs["prm"]
    assert isinstance(prm, LocalSpec) and (prm.task, prm.convention) == ("value_head", "skywork")
    f = tmp_path / "b.json"
    f.write_text(
        '{"backends": {"p": {"kind": "vllm_pooling", "url": "http://a", "model": "m", "convention": "skywork"}}}'
    )
    with pytest.raises(ValueError, match="convention skywork .* needs kind transformers"):
        load_backends_file(str(f))
    f.write_text('{"backends": {"p": {"kind": "vllm", "model": "/m", "task": "value_head"}}}')
    with pytest.raises(ValueError, match="task value_head .* needs kind transformers"):
        load_backends_file(str(f))


@pytest.mark.parametrize("var", ["judge_url", "prm_url", "orm_url"])
def test_a_bad_shortcut_url_names_its_variable(var: str) -> None:
    """A shortcut URL without its scheme failed the start with pydantic's 'validation error for
    RemoteSpec', naming no setting (and quoting the value, which may hold credentials)."""
    with pytest.raises(ValueError, match=rf"REWARDHUB_{var.upper()}: url must start with http") as info:
        specs_from_settings(settings(**{var: "user:tok3n@server:8000/v1"}))
    assert "tok3n" not in str(info.value)


def test_a_url_httpx_cannot_parse_is_refused_with_the_setting_that_gave_it(tmp_path: Path) -> None:
    """A URL with a scheme but a malformed port (a typo, or an IPv6 address without brackets) passed the
    check, and the start then failed inside httpx ("InvalidURL: Invalid port"), naming no setting; a URL
    with no host at all ("http://") started, and every call failed. Found in review."""
    f = tmp_path / "b.json"
    for url, problem in (("http://prm:80a0", "not a valid URL"), ("http://", "no host")):
        f.write_text(f'{{"backends": {{"x": {{"kind": "vllm_pooling", "url": "{url}", "model": "m"}}}}}}')
        with pytest.raises(ConfigError, match=rf"backends\.x\.url: .*{problem}"):
            ModelHub.from_settings(settings(backends_file=str(f)))
    for url in ("http://u:tok3n@fe80::1:8000/v1", "http://svc:tok3n/v1"):  # the second: no "@host"
        with pytest.raises(
            ConfigError, match=r"REWARDHUB_JUDGE_URL: url is not a valid URL \(invalid port\)"
        ) as info:
            ModelHub.from_settings(settings(judge_url=url))
        assert "tok3n" not in str(info.value)


def test_missing_vllm_names_the_extra() -> None:
    from rewardhub.models.errors import MissingExtra
    from rewardhub.models.vllm_local import import_vllm

    try:
        import vllm  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(MissingExtra, match=r"scripts/bootstrap service,vllm"):
            import_vllm()
    else:  # pragma: no cover - only where vLLM is installed
        import_vllm()


async def test_a_missing_model_directory_names_the_setting_that_gave_it(tmp_path: Path) -> None:
    """A local model path that is not there stopped the start with transformers' words about hub ids
    ("Repo id must be in the form 'repo_name' or 'namespace/repo_name'"), naming no setting."""
    from rewardhub.models.errors import BackendUnavailable

    missing = tmp_path / "no-such-prm"
    hub = ModelHub.from_settings(settings(prm_model=str(missing)))
    with pytest.raises(BackendUnavailable, match="no such model directory") as info:
        await hub.start()
    assert "(configured by REWARDHUB_PRM_MODEL)" in str(info.value)
    assert "Repo id" not in str(info.value)
    f = tmp_path / "b.yaml"
    f.write_text(
        f"backends:\n  my-orm: {{kind: transformers, model: {missing}, task: sequence_classification}}\n"
    )
    hub = ModelHub.from_settings(settings(backends_file=str(f)))
    with pytest.raises(BackendUnavailable, match="no such model directory") as info:
        await hub.start()
    assert f"(configured by backends.my-orm in REWARDHUB_BACKENDS_FILE={f})" in str(info.value)


def test_a_field_error_is_reported_at_the_users_path(tmp_path: Path) -> None:
    """A typo in a backend's field said "backends.prm2.transformers.convnetion: Extra inputs are not
    permitted": `transformers` is pydantic's union tag, a level the file does not have, and nothing said
    which fields there are. Found in review."""
    f = tmp_path / "b.yaml"
    f.write_text(
        "backends:\n"
        "  prm2:\n    kind: transformers\n    model: /m/prm\n    task: token_classification\n"
        "    convnetion: qwen\n"
    )
    with pytest.raises(ValueError) as info:
        load_backends_file(str(f))
    message = str(info.value)
    assert message.startswith(
        f"REWARDHUB_BACKENDS_FILE={f}: backends.prm2.convnetion: not a field of kind transformers"
    )
    assert "convention" in message.split("its fields:")[1]
    f.write_text("backends:\n  j:\n    kind: openai\n    url: http://a/v1\n    model: m\n    timeout_s: 0\n")
    with pytest.raises(ValueError, match=r"=\S+: backends\.j\.timeout_s: Input should be greater than 0$"):
        load_backends_file(str(f))
    # a kind that is missing or misspelt is reported on `kind`, with the kinds there are
    f.write_text("backends:\n  j:\n    kind: opanai\n    url: http://a/v1\n    model: m\n")
    with pytest.raises(
        ValueError, match=r"backends\.j\.kind: 'opanai' is not a kind of backend; one of openai, "
    ):
        load_backends_file(str(f))
    f.write_text("backends:\n  j:\n    url: http://a/v1\n    model: m\n")
    with pytest.raises(ValueError, match=r"backends\.j\.kind: missing; one of openai, "):
        load_backends_file(str(f))
    # every problem is counted, not only the first
    f.write_text(
        "backends:\n  j:\n    kind: openai\n    url: http://a/v1\n    model: m\n    x: 1\n    y: 2\n"
    )
    with pytest.raises(ValueError, match=r"backends\.j\.x: not a field .* \(and 1 more problem\)$"):
        load_backends_file(str(f))


@pytest.mark.parametrize(
    ("extra", "extras"), [("models", "service,models"), ("vllm", "service,vllm"), ("service", "service")]
)
def test_a_missing_extra_names_the_readme_s_install(extra: str, extras: str) -> None:
    """A model backend configured on an install without its extra said `pip install 'rewardhub[models]'`:
    no constraints (on a CPU host, pip's pick of torch is the CUDA wheel), no embedded MiniLM, and the
    system's pip unless .venv was active. It names the README's install now: scripts/bootstrap with the
    extras, or pip with constraints.txt in the clone."""
    from rewardhub.models.errors import MissingExtra

    message = str(MissingExtra("torch", extra))
    assert message.startswith("torch is not installed"), message
    assert f"scripts/bootstrap {extras}" in message, message
    assert f"pip install -c constraints.txt -e '.[{extras}]'" in message, message
