"""Scanners for the tool-call formats that are not JSON: what :mod:`.tool_call` reads besides its JSON.

Each scanner takes text and returns the calls' names and their arguments as the raw text the model
wrote; :mod:`.tool_call` turns those into values (its bounded JSON reader) and checks them. A scanner
raises ``ValueError`` for a call that starts in its format but is not whole.

* Qwen3-Coder (vLLM's ``qwen3_coder`` parser) writes a ``<tool_call>`` block as XML:
  ``<function=get_weather>\\n<parameter=city>\\nParis\\n</parameter>\\n</function>``.
* GLM-4.5/4.6/4.7 (vLLM's ``glm45``/``glm47``) write the name first, then key/value tags:
  ``get_weather\\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>`` (4.7: no newline after the name).

Every scanner is one forward pass: ``str.find``/``split``/``partition`` from a cursor that only moves on,
or bounded to the span already found, never a search from each opener to the end of the text (a lazy
``<function=(.*?)</function>`` regex search is quadratic in openers without a closer).
"""

from __future__ import annotations

import re

__all__ = ["QWEN3_FUNCTION", "glm45_call", "glm45_shaped", "qwen3_coder_calls"]

QWEN3_FUNCTION = "<function="
_QWEN3_FUNCTION_END = "</function>"
_QWEN3_PARAMETER, _QWEN3_PARAMETER_END = "<parameter=", "</parameter>"
# A function's name: no whitespace, markup or quotes (one character class: fullmatch is linear)
_NAME = re.compile(r"[^\s<>{}\[\]\"'`]+")
_GLM_KEY, _GLM_KEY_END = "<arg_key>", "</arg_key>"
_GLM_VALUE, _GLM_VALUE_END = "<arg_value>", "</arg_value>"
# a GLM call without arguments is its name alone, which a JSON literal (true, 3) is not
_GLM_BARE_NAME = re.compile(r"[A-Za-z_][^\s<>{}\[\]\"'`]*")
_WHITESPACE = re.compile(r"\s*")


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


def glm45_shaped(body: str) -> bool:
    """Whether a ``<tool_call>`` block's (stripped) body is a GLM-4.5+ call: no JSON or Python literal
    (not ``{``/``[``), and an ``<arg_key>`` in it, or a function's name alone (a call without arguments)."""
    if body[:1] in ("{", "[", ""):
        return False
    if _GLM_KEY in body:
        return True
    return _GLM_BARE_NAME.fullmatch(body) is not None and body not in ("true", "false", "null")


def glm45_call(body: str) -> tuple[str, dict[str, str]]:
    """The call of a GLM-4.5+ ``<tool_call>`` block's body: its name (up to the first ``<arg_key>``) and
    its ``<arg_key>k</arg_key><arg_value>v</arg_value>`` pairs as raw text, whitespace between the tags.

    Raises:
        ValueError: no function name first, a tag without its closer, or text between the pairs.
    """
    body = body.strip()
    first = body.find(_GLM_KEY)
    at = len(body) if first < 0 else first
    name = body[:at].strip()
    if not _NAME.fullmatch(name):
        raise ValueError(f"the call {name[:80]!r} is not a function name")
    args: dict[str, str] = {}
    while at < len(body):  # (every find starts at the cursor, which only moves on: one pass)
        if not body.startswith(_GLM_KEY, at):
            raise ValueError(f"text between the arguments of {name[:80]!r}: {body[at : at + 80]!r}")
        key_end = body.find(_GLM_KEY_END, at)
        if key_end < 0:
            raise ValueError(f"an <arg_key> of {name[:80]!r} has no </arg_key>")
        key = body[at + len(_GLM_KEY) : key_end].strip()
        at = _skip_whitespace(body, key_end + len(_GLM_KEY_END))
        if not body.startswith(_GLM_VALUE, at):
            raise ValueError(f"the argument {key[:80]!r} of {name[:80]!r} has no <arg_value>")
        value_end = body.find(_GLM_VALUE_END, at)
        if value_end < 0:
            raise ValueError(f"the argument {key[:80]!r} of {name[:80]!r} has no </arg_value>")
        args[key] = _strip_newline(body[at + len(_GLM_VALUE) : value_end])
        at = _skip_whitespace(body, value_end + len(_GLM_VALUE_END))
    return name, args


def _skip_whitespace(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at
