"""``python_grader``: a caller-written ``grade(sample, item) -> float`` run in the sandbox.

This is OpenAI's ``python`` grader. The grader source comes from the caller's config (the item's
reference: ``{"source": "def grade(sample, item): ...", "item": {...}}``), the model's output is data:
``sample = {"output_text": <answer>, "output_json": <the answer parsed, or None>}``. Like OpenAI's
``output_text``, which is a reasoning model's answer and not its reasoning (and as ``string_check`` and
``text_similarity`` read it), the answer is the response after its last ``</think>`` and before a
``<think>`` that never closes (:func:`~.text.answer_text`), without the whitespace that separates it
from the reasoning: a grader checking that the gold answer is in the output is not satisfied by a
draft in the reasoning, and a JSON answer after it is ``output_json``. Grader code is still
arbitrary code inside the service, so it runs where every untrusted program runs: in the bubblewrap
sandbox, no network, read-only system, time and memory limits.

The program reads ``{"sample", "item"}`` as JSON on stdin and prints the result on a line prefixed with
a per-run random marker, so output the grader prints for its own debugging cannot be mistaken for it.
grade() runs in a child process that never holds the marker (:data:`_MAIN`), so a grader that runs the
model's code in a subprocess of its own, its output captured, cannot be forged by it (the marker was in
the program's source, which that code could read, and print with 1.0). Known limit: a grader that runs
the model's code in its own process (``exec`` of the sample) hands it grade()'s result channel and
builtins; use the ``code`` reward for such programs, or a subprocess.
A grader that raises, times out or returns a non-number cannot score the item: invalid (``parse_error``
for a grader fault, ``timeout``, ``sandbox_error``), with the grader's stderr tail in ``details``.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from rewardhub import jsonutil
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.text import after_think_at, answer_text
from rewardhub.sandbox import SandboxUnavailable, resolve_language
from rewardhub.sandbox.pool import refusal, sandbox_version

__all__ = ["PythonGraderConfig", "PythonGraderReward", "grader_program", "grader_stdin"]

_MAX_SOURCE = 256 * 1024  # OpenAI's limit for python grader source

# The grader's program after its source. grade() runs in a child process; the parent, made non-dumpable
# first (no other process may read its memory or /proc/<pid>/fd), reads the result line's marker from
# stdin only after the fork and prints it with the child's number. A grader that runs the model's code
# (``exec`` of the sample) runs it in the child, which never held the marker: in the program's source, it
# was read and printed with 1.0 by a wrong program. Stdin: the payload's length in bytes, a newline, the
# payload (JSON), the marker; the parent reads exactly the payload before the fork (no read-ahead of the
# marker into a buffer the child would inherit), and the child closes stdin before grade() runs.
_MAIN = """

def _rh_main():
    import ctypes as _rh_ctypes, json as _rh_json, math as _rh_math, os as _rh_os, sys as _rh_sys
    if _rh_ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
        raise OSError(_rh_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    head = b""
    while not head.endswith(b"\\n"):
        byte = _rh_os.read(0, 1)
        if not byte:
            raise EOFError("no payload")
        head += byte
    want, payload = int(head), b""
    while len(payload) < want:
        chunk = _rh_os.read(0, want - len(payload))
        if not chunk:
            raise EOFError("short payload")
        payload += chunk
    r, w = _rh_os.pipe()
    pid = _rh_os.fork()
    if pid == 0:
        code = 1
        try:
            _rh_os.close(0)
            _rh_os.close(r)
            _rh_in = _rh_json.loads(payload)
            value = grade(_rh_in["sample"], _rh_in["item"])
            if isinstance(value, (str, bytes, bytearray)):  # float() would parse "0.5": not a number
                raise TypeError("grade() returned " + type(value).__name__ + ", not a number")
            value = float(value)
            if not _rh_math.isfinite(value):
                raise ValueError("grade() returned a non-finite number")
            _rh_os.write(w, repr(value).encode())
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            try:
                _rh_sys.stdout.flush()
            finally:
                _rh_os._exit(code)
    _rh_os.close(w)
    marker = b""
    while chunk := _rh_os.read(0, 1 << 16):
        marker += chunk
    result = b""
    while chunk := _rh_os.read(r, 1 << 16):
        result += chunk
    _, status = _rh_os.waitpid(pid, 0)
    if status != 0 or not result:
        _rh_sys.exit(1)
    _rh_sys.stdout.flush()
    _rh_os.write(1, b"\\n" + marker.strip() + result + b"\\n")


_rh_main()
"""


def grader_program(source: str) -> str:
    return source + _MAIN


def grader_stdin(payload: bytes, marker: str) -> bytes:
    """The program's stdin (see :data:`_MAIN`)."""
    return b"%d\n" % len(payload) + payload + marker.encode() + b"\n"


class PythonGraderConfig(RewardConfig):
    timeout_s: float = Field(10.0, gt=0, le=120, description="Wall-clock limit of one grade() call, seconds.")
    memory_mb: int | None = Field(
        None, ge=64, le=65536, description="Address-space limit, MiB (default: the sandbox's)."
    )


@register
class PythonGraderReward(Reward[PythonGraderConfig]):
    name: ClassVar[str] = "python_grader"
    # 1.0.2: grade() runs in a child process; the result line's marker is no longer in the program's
    # source (model code a grader ran read it there and printed it with 1.0)
    # 1.0.3: sample.output_text is the answer after the reasoning, as OpenAI's is (a draft in <think>
    # satisfied a grader looking for the gold answer in the output; a JSON answer after it was no output_json)
    # ... and sample.output_json reads an integer past 64 bits exactly (orjson made it a float: 25! was
    # 1.5511210043330986e+25 to the grader); NaN and Infinity are no JSON (None)
    version: ClassVar[str] = "1.0.3"
    description: ClassVar[str] = (
        "OpenAI python grader: the reference's grade(sample, item) -> float, run in the bubblewrap sandbox."
    )
    config_model = PythonGraderConfig

    def unavailable(self) -> str | None:
        return refusal(self.runtime.sandbox)

    def version_for(self, config: PythonGraderConfig) -> str:
        # the grader runs under the server's interpreter and limits (sandbox_version)
        return sandbox_version(self.version, self.runtime.sandbox)

    async def score(
        self, items: Sequence[ScoreItem], config: PythonGraderConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        pool = self.runtime.sandbox
        message = refusal(pool)
        if pool is None or message is not None:  # (a missing pool has a message too)
            return [Outcome.invalid(Reason.SANDBOX_ERROR, str(message)) for _ in items]
        python = resolve_language("python")
        assert python is not None
        with pool.admit(len(items)):
            return list(await asyncio.gather(*(self._one(pool, python, item, config) for item in items)))

    async def _one(self, pool: Any, python: Any, item: ScoreItem, config: PythonGraderConfig) -> Outcome:
        ref = item.reference
        if not isinstance(ref, dict) or not isinstance(ref.get("source"), str):
            return Outcome.invalid(
                Reason.MISSING_REFERENCE, 'python_grader needs reference {"source": ..., "item": {...}}'
            )
        source: str = ref["source"]
        if len(source) > _MAX_SOURCE or "def grade" not in source:
            return Outcome.invalid(
                Reason.PARSE_ERROR, "the grader source must define grade(sample, item), at most 256 KiB"
            )
        text = answer_text(item.response)
        if after_think_at(item.response) > 0:
            text = text.lstrip()  # the separator after </think>, not part of the answer
        try:
            output_json = jsonutil.loads_exact(text)  # big integers exact, as OpenAI's Python reads them
        except (ValueError, RecursionError):
            output_json = None
        payload = jsonutil.dumps(
            {
                "sample": {"output_text": text, "output_json": output_json},
                "item": ref.get("item") or {},
            }
        )
        marker = f"@@rewardhub-grade-{secrets.token_hex(8)}@@"
        try:
            report, _raw = await pool.run_program(
                language=python,
                code=grader_program(source),
                stdins=[grader_stdin(payload, marker)],
                run_timeout_s=config.timeout_s,
                memory_mb=config.memory_mb,
                wall_clock=True,  # timeout_s is documented as wall-clock; a timeout is invalid, not cached
            )
        except SandboxUnavailable as exc:
            return Outcome.invalid(Reason.SANDBOX_ERROR, str(exc))
        if report.error is not None or not report.done:
            return Outcome.invalid(Reason.SANDBOX_ERROR, report.error or "the sandbox run did not finish")
        run = report.runs.get(0)
        if run is None:
            return Outcome.invalid(Reason.SANDBOX_ERROR, "no run report")
        stderr = run.stderr.decode("utf-8", "replace")[-1000:]
        if run.status == "timeout":
            return Outcome.invalid(Reason.TIMEOUT, f"grade() ran past {config.timeout_s}s", stderr=stderr)
        for line in reversed(run.stdout.decode("utf-8", "replace").splitlines()):
            if line.startswith(marker):
                try:
                    value = float(line[len(marker) :])
                except ValueError:
                    break
                if math.isfinite(value):
                    return Outcome(value, details={"execution_time_s": run.wall_s})
        return Outcome.invalid(
            Reason.PARSE_ERROR,
            f"grade() did not return a number (status {run.status}, exit {run.return_code})",
            stderr=stderr,
        )
