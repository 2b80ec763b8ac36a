"""Scanners for the tool-call formats that are not JSON: what :mod:`.tool_call` reads besides its JSON.

Each scanner takes text and returns the calls' names and their arguments as the raw text the model
wrote; :mod:`.tool_call` turns those into values (its bounded JSON reader) and checks them. A scanner
raises ``ValueError`` for a call that starts in its format but is not whole.

* Qwen3-Coder (vLLM's ``qwen3_coder`` parser) writes a ``<tool_call>`` block as XML:
  ``<function=get_weather>\\n<parameter=city>\\nParis\\n</parameter>\\n</function>``.

Every scanner is one forward pass: ``str.find``/``split``/``partition`` from a cursor that only moves on,
or bounded to the span already found, never a search from each opener to the end of the text (a lazy
``<function=(.*?)</function>`` regex search is quadratic in openers without a closer).
"""

from __future__ import annotations

import re

__all__ = ["QWEN3_FUNCTION", "qwen3_coder_calls"]

QWEN3_FUNCTION = "<function="
_QWEN3_FUNCTION_END = "</function>"
_QWEN3_PARAMETER, _QWEN3_PARAMETER_END = "<parameter=", "</parameter>"
# A function's name: no whitespace, markup or quotes (one character class: fullmatch is linear)
_NAME = re.compile(r"[^\s<>{}\[\]\"'`]+")


def _strip_newline(value: str) -> str:
    """``value`` without one leading and one trailing newline: the XML forms put each value on its own
    line(s), and the newlines around it are the format's, not the value's (vLLM strips the same)."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def qwen3_coder_calls(block: str) -> list[tuple[str, dict[str, str]]]:
    """The calls of a Qwen3-Coder ``<tool_call>`` block (its body, which starts with ``<function=``):
    each ``<function=name>`` up to its ``</function>``, its ``<parameter=key>value</parameter>`` pairs as
    raw text (a ``</parameter>`` the model left out ends at the next parameter, as vLLM reads it).

    Raises:
        ValueError: a function without its ``</function>`` (a call cut off) or a name, or text between
            the parts that is none of them.
    """
    body = block.strip()
    if not body.startswith(QWEN3_FUNCTION):
        raise ValueError("a Qwen3-Coder call block starts with <function=")
    calls: list[tuple[str, dict[str, str]]] = []
    for part in body.split(QWEN3_FUNCTION)[1:]:  # (one split: each part is read within its own bounds)
        head, gt, rest = part.partition(">")
        name = head.strip()
        if not gt or not _NAME.fullmatch(name):
            raise ValueError(f"<function={head[:80]} is not a function name")
        inner, closer, after = rest.partition(_QWEN3_FUNCTION_END)
        if not closer:
            raise ValueError(f"the call {name[:80]!r} has no </function>")
        if after.strip():
            raise ValueError(f"text after the call {name[:80]!r}: {after.strip()[:80]!r}")
        pieces = inner.split(_QWEN3_PARAMETER)
        if pieces[0].strip():
            raise ValueError(
                f"text in the call {name[:80]!r} that is no parameter: {pieces[0].strip()[:80]!r}"
            )
        args: dict[str, str] = {}
        for piece in pieces[1:]:
            key, gt, value = piece.partition(">")
            if not gt or not key.strip():
                raise ValueError(f"<parameter={key[:80]} of {name[:80]!r} is not a parameter name")
            value, closed, tail = value.partition(_QWEN3_PARAMETER_END)
            if closed and tail.strip():
                raise ValueError(f"text between the parameters of {name[:80]!r}: {tail.strip()[:80]!r}")
            args[key.strip()] = _strip_newline(value)
        calls.append((name, args))
    return calls
