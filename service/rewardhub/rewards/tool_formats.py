"""Scanners for the tool-call formats that are not JSON: what :mod:`.tool_call` reads besides its JSON.

Each scanner takes text and returns the calls' names and their arguments as the raw text the model
wrote; :mod:`.tool_call` turns those into values (its bounded JSON reader) and checks them. A scanner
raises ``ValueError`` for a call that starts in its format but is not whole.

* Qwen3-Coder (vLLM's ``qwen3_coder`` parser) writes a ``<tool_call>`` block as XML:
  ``<function=get_weather>\\n<parameter=city>\\nParis\\n</parameter>\\n</function>`` (also without
  the block, which vLLM's parser reads in a text that has none).
* MiniMax-M2 (vLLM's ``minimax_m2``) writes a block of invokes, each value raw text (stripped):
  ``<minimax:tool_call>\\n<invoke name="get_weather">\\n<parameter name="city">Paris</parameter>\\n
  </invoke>\\n</minimax:tool_call>``.
* DeepSeek V3.2 (vLLM's ``deepseek_v32``) writes the same shape in its DSML tags, each parameter
  saying whether its value is a string (raw text) or not (JSON): ``<｜DSML｜function_calls>\\n
  <｜DSML｜invoke name="get_weather">\\n<｜DSML｜parameter name="city" string="true">Paris
  </｜DSML｜parameter>\\n</｜DSML｜invoke>\\n</｜DSML｜function_calls>``.
  DeepSeek V4 (vLLM's ``deepseek_v4``) writes the same invokes in a ``<｜DSML｜tool_calls>`` block.
* GLM-4.5/4.6/4.7 (vLLM's ``glm45``/``glm47``) write the name first, then key/value tags:
  ``get_weather\\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>`` (4.7: no newline after the name).
* DeepSeek V3/R1 (vLLM's ``deepseek_v3``) write each call between special tokens, the type before the
  separator and a fenced JSON after the name, ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
  \\n```json\\n{...}\\n```<｜tool▁call▁end｜>``; V3.1 (``deepseek_v31``) the name before it and the
  JSON after, ``<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`` (all of them
  between ``<｜tool▁calls▁begin｜>`` and ``<｜tool▁calls▁end｜>``; the bars are full-width, the
  spaces U+2581).
* gpt-oss (the harmony format; vLLM's ``openai`` parser) sends a message to a function:
  ``<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}
  <|call|>`` (``to=`` also before ``<|channel|>``; the first message of a completion has no
  ``<|start|>assistant``).
* Kimi-K2 (vLLM's ``kimi_k2``) writes each call's id, ``functions.NAME:INDEX``, then its JSON:
  ``<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
  {...}<|tool_call_end|><|tool_calls_section_end|>`` (``functions.`` absent in some outputs; a call
  whose id lacks the ``:INDEX`` is no call, as vLLM passes it over).

* Kimi K3 (vLLM's ``kimi_k3``, its XTML) writes a ``tools`` channel of calls, each argument typed:
  ``<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city"
  type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>``.
  (:func:`xtml_unspaced` drops whitespace inside its markers first, as vLLM's parser reads past it.)

* MiniMax-M3 (vLLM's ``minimax_m3``) prefixes each tag with its namespace token ``]<]minimax[>[`` and
  writes each argument as a tag of its name, a nested object as nested tags, an array as ``<item>`` tags:
  ``]<]minimax[>[<tool_call>]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>Paris
  ]<]minimax[>[</city>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>``.

The last four are special tokens: the text has them only when the engine keeps them (vLLM's
``skip_special_tokens=False``).

Every scanner is one forward pass: ``str.find``/``split``/``partition`` from a cursor that only moves on,
or bounded to the span already found, never a search from each opener to the end of the text (a lazy
``<function=(.*?)</function>`` regex search is quadratic in openers without a closer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "DEEPSEEK_CALL",
    "DSML",
    "DSML_V4",
    "HARMONY_MESSAGE",
    "Invoke",
    "KIMI_CALL",
    "KIMI_K3_TOOLS",
    "MINIMAX",
    "MINIMAX_M3",
    "QWEN3_FUNCTION",
    "InvokeForm",
    "deepseek_calls",
    "glm45_call",
    "glm45_shaped",
    "harmony_calls",
    "harmony_without_reasoning",
    "invoke_calls",
    "kimi_calls",
    "kimi_k3_calls",
    "minimax_m3_calls",
    "qwen3_coder_bare_calls",
    "qwen3_coder_calls",
    "xtml_unspaced",
]

QWEN3_FUNCTION = "<function="
_QWEN3_FUNCTION_END = "</function>"
_QWEN3_PARAMETER, _QWEN3_PARAMETER_END = "<parameter=", "</parameter>"
# A function's name: no whitespace, markup or quotes (one character class: fullmatch is linear)
_NAME = re.compile(r"[^\s<>{}\[\]\"'`]+")
_GLM_KEY, _GLM_KEY_END = "<arg_key>", "</arg_key>"
_GLM_VALUE, _GLM_VALUE_END = "<arg_value>", "</arg_value>"
# a GLM call without arguments is its name alone, which a JSON literal (true, 3) is not
_GLM_BARE_NAME = re.compile(r"[A-Za-z_][^\s<>{}\[\]\"'`]*")
# what may stand between GLM's tags: whitespace, and the two characters "\n" GLM-4.7 at times writes for a
# newline (vLLM's glm47 parser skips them too)
_GLM_GAP = re.compile(r"(?:\s|\\n)*")
DEEPSEEK_CALL = "<\uff5ctool\u2581call\u2581begin\uff5c>"  # <｜tool▁call▁begin｜>
_DEEPSEEK_SEP = "<\uff5ctool\u2581sep\uff5c>"
_DEEPSEEK_CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
KIMI_CALL = "<|tool_call_begin|>"
_KIMI_ARGUMENTS, _KIMI_CALL_END = "<|tool_call_argument_begin|>", "<|tool_call_end|>"
HARMONY_MESSAGE = "<|message|>"
_HARMONY_START, _HARMONY_CHANNEL = "<|start|>", "<|channel|>"
# what ends a harmony message's content: its end tokens, or the next message's start
_HARMONY_STOP = re.compile(r"<\|(?:call|end|return|start)\|>")
# the recipient in a header ("to=functions.get_weather"), a word of its own
_HARMONY_TO = re.compile(r"(?<![^\s>])to=([^\s<]+)")
_HARMONY_ROLE = re.compile(r"\s*([^\s<]*)")


def _strip_newline(value: str) -> str:
    """``value`` without one leading and one trailing newline: the XML forms put each value on its own
    line(s), and the newlines around it are the format's, not the value's (vLLM strips the same)."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def qwen3_coder_calls(block: str, closed: bool = True) -> list[tuple[str, dict[str, str]]]:
    """The calls of a Qwen3-Coder ``<tool_call>`` block (its body, which starts with ``<function=``):
    each ``<function=name>`` up to its ``</function>``, its ``<parameter=key>value</parameter>`` pairs as
    raw text (a ``</parameter>`` the model left out ends at the next parameter, as vLLM reads it). In a
    block ``closed`` by its ``</tool_call>``, the last function may leave out its ``</function>``: the
    block's end is its end, as vLLM reads it (``<function=(.*)$`` within the block).

    Raises:
        ValueError: a function without its ``</function>`` (a call cut off, or one before another) or a
            name, or text between the parts that is none of them.
    """
    body = block.strip()
    if not body.startswith(QWEN3_FUNCTION):
        raise ValueError("a Qwen3-Coder call block starts with <function=")
    calls: list[tuple[str, dict[str, str]]] = []
    parts = body.split(QWEN3_FUNCTION)[1:]  # (one split: each part is read within its own bounds)
    for i, part in enumerate(parts):
        if closed and i == len(parts) - 1 and _QWEN3_FUNCTION_END not in part:
            part += _QWEN3_FUNCTION_END  # (the block's end closes it)
        name, args, after = _qwen3_function(part)
        if after.strip():
            raise ValueError(f"text after the call {name[:80]!r}: {after.strip()[:80]!r}")
        calls.append((name, args))
    return calls


def qwen3_coder_bare_calls(text: str, max_calls: int) -> list[tuple[str, dict[str, str]]]:
    """The Qwen3-Coder calls written without their ``<tool_call>`` wrapper (vLLM's qwen3_coder parser
    reads them in a text that has none): each ``<function=name>...</function>`` in ``text``, the text
    around and between them the model's prose; a last function without its ``</function>`` is a call
    cut off, no call.

    Raises:
        ValueError: a function before another without its ``</function>``, or without a name, or
            with text in it that is no parameter; more than ``max_calls`` calls.
    """
    parts = text.split(QWEN3_FUNCTION)[1:]  # (one split: each part is read within its own bounds)
    calls: list[tuple[str, dict[str, str]]] = []
    for i, part in enumerate(parts):
        if i == len(parts) - 1 and _QWEN3_FUNCTION_END not in part:
            break
        name, args, _after = _qwen3_function(part)
        calls.append((name, args))
        if len(calls) > max_calls:
            raise ValueError(f"more than {max_calls} tool calls")
    return calls


def _qwen3_function(part: str) -> tuple[str, dict[str, str], str]:
    """One ``<function=`` part (what follows the opener, up to the next one): its name, its parameters
    as raw text, and the text after its ``</function>``."""
    head, gt, rest = part.partition(">")
    name = head.strip()
    if not gt or not _NAME.fullmatch(name):
        raise ValueError(f"<function={head[:80]} is not a function name")
    inner, closer, after = rest.partition(_QWEN3_FUNCTION_END)
    if not closer:
        raise ValueError(f"the call {name[:80]!r} has no </function>")
    pieces = inner.split(_QWEN3_PARAMETER)
    if pieces[0].strip():
        raise ValueError(f"text in the call {name[:80]!r} that is no parameter: {pieces[0].strip()[:80]!r}")
    args: dict[str, str] = {}
    for piece in pieces[1:]:
        key, gt, value = piece.partition(">")
        if not gt or not key.strip():
            raise ValueError(f"<parameter={key[:80]} of {name[:80]!r} is not a parameter name")
        value, closed, tail = value.partition(_QWEN3_PARAMETER_END)
        if closed and tail.strip():
            raise ValueError(f"text between the parameters of {name[:80]!r}: {tail.strip()[:80]!r}")
        args[key.strip()] = _strip_newline(value)
    return name, args, after


@dataclass(frozen=True, slots=True)
class InvokeForm:
    """The tags of a format that writes blocks of ``<invoke name="f">`` elements, each holding
    ``<parameter name="x">value</parameter>`` elements, and whether a value's whitespace is the format's."""

    block: str
    block_end: str
    invoke: str
    invoke_end: str
    parameter: str
    parameter_end: str
    strip: bool


MINIMAX = InvokeForm(
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<invoke name=",
    "</invoke>",
    "<parameter name=",
    "</parameter>",
    strip=True,  # (vLLM's minimax_m2 strips a value, as MiniMax's own parsing guide does)
)
_DSML = "\uff5cDSML\uff5c"  # ｜DSML｜, the bars full-width
DSML = InvokeForm(
    f"<{_DSML}function_calls>",
    f"</{_DSML}function_calls>",
    f"<{_DSML}invoke name=",
    f"</{_DSML}invoke>",
    f"<{_DSML}parameter name=",
    f"</{_DSML}parameter>",
    strip=False,  # (its template writes a value as it is, no newline around it)
)
# DeepSeek V4 (vLLM's deepseek_v4) keeps V3.2's invokes and parameters in a block of another name
DSML_V4 = InvokeForm(
    f"<{_DSML}tool_calls>",
    f"</{_DSML}tool_calls>",
    DSML.invoke,
    DSML.invoke_end,
    DSML.parameter,
    DSML.parameter_end,
    strip=False,
)
# a parameter's string="true"/"false" after its name (DSML: whether the value is raw text or JSON)
_STRING_ATTRIBUTE = re.compile(r"""\s*string\s*=\s*(["']?)(true|false)\1""")


# an invoke's name, its parameters' raw text, and whether each whose tag says so is a string
Invoke = tuple[str, dict[str, str], dict[str, bool]]


def invoke_calls(text: str, form: InvokeForm, max_calls: int) -> list[Invoke] | None:
    """The calls of ``form``'s blocks in ``text``, each its name, its parameters as raw text, and, for a
    parameter that says (DSML's ``string="true"``), whether its value is a string; None when the text
    has no block. A last block without its closer counts when every invoke in it is whole (a
    rollout stopped at the closer); one cut off is no call.

    Raises:
        ValueError: a closed block holding text that is no invoke, an invoke without its closer or a
            function name, a parameter without its closer, or more than ``max_calls`` calls.
    """
    calls: list[Invoke] = []
    found = False
    at = 0
    while (start := text.find(form.block, at)) >= 0:
        found = True
        start += len(form.block)
        end = text.find(form.block_end, start)
        if end < 0:  # no closer after this opener: none after any later one either
            try:
                calls.extend(_invokes(text[start:], form, max_calls - len(calls)))
            except ValueError:
                pass
            break
        calls.extend(_invokes(text[start:end], form, max_calls - len(calls)))
        at = end + len(form.block_end)
    return calls if found else None


def _invokes(body: str, form: InvokeForm, max_calls: int) -> list[Invoke]:
    """The invokes of one block's body (one split: each part is read within its own bounds)."""
    parts = body.split(form.invoke)
    if parts[0].strip():
        raise ValueError(f"text in a call block that is no invoke: {parts[0].strip()[:80]!r}")
    if len(parts) - 1 > max_calls:
        raise ValueError(f"more than {max_calls} tool calls")  # (the count is over all blocks)
    calls: list[Invoke] = []
    for part in parts[1:]:
        head, gt, rest = part.partition(">")
        name = _unquoted(head)
        if not gt or not _NAME.fullmatch(name):
            raise ValueError(f"{form.invoke}{head[:80]} is not a function name")
        inner, closer, after = rest.partition(form.invoke_end)
        if not closer:
            raise ValueError(f"the call {name[:80]!r} has no {form.invoke_end}")
        if after.strip():
            raise ValueError(f"text after the call {name[:80]!r}: {after.strip()[:80]!r}")
        calls.append((name, *_parameters(inner, name, form)))
    return calls


def _parameters(inner: str, name: str, form: InvokeForm) -> tuple[dict[str, str], dict[str, bool]]:
    """An invoke's parameters as raw text, and whether each that says so is a string. A parameter without
    its closer is a broken call: vLLM's minimax_m2 and deepseek_v32 parsers read a value up to its
    closer only (one left out: the value runs on over the next parameter's tag, or is dropped), so the
    tool would not get the arguments such a call seems to give (Qwen3-Coder's parser, and so ours,
    reads on to the next parameter)."""
    pieces = inner.split(form.parameter)
    if pieces[0].strip():
        raise ValueError(f"text in the call {name[:80]!r} that is no parameter: {pieces[0].strip()[:80]!r}")
    args: dict[str, str] = {}
    strings: dict[str, bool] = {}
    for piece in pieces[1:]:
        head, gt, value = piece.partition(">")
        key, attributes = _name_and_rest(head)
        if not gt or not key:
            raise ValueError(f"{form.parameter}{head[:80]} of {name[:80]!r} is not a parameter name")
        value, closed, tail = value.partition(form.parameter_end)
        if not closed:
            raise ValueError(f"the parameter {key[:80]!r} of {name[:80]!r} has no {form.parameter_end}")
        if tail.strip():
            raise ValueError(f"text between the parameters of {name[:80]!r}: {tail.strip()[:80]!r}")
        args[key] = value.strip() if form.strip else value
        if string := _STRING_ATTRIBUTE.match(attributes):
            strings[key] = string.group(2) == "true"
    return args, strings


def _name_and_rest(head: str) -> tuple[str, str]:
    """A tag's quoted (or bare) name and the attributes after it: ``"city" string="true"``."""
    head = head.strip()
    if head[:1] in ("'", '"'):
        end = head.find(head[0], 1)
        if end > 0:
            return head[1:end], head[end + 1 :]
    name, _, rest = head.partition(" ")
    return name, rest


def _unquoted(text: str) -> str:
    """``text`` stripped, without the quotes around it (``"get_weather"``, ``'x'``, or none)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


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
    its ``<arg_key>k</arg_key><arg_value>v</arg_value>`` pairs, each value's text stripped as vLLM's
    glm45 parser strips it, whitespace (or GLM-4.7's literal ``\\n``) between the tags.

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
        at = _skip_gap(body, key_end + len(_GLM_KEY_END))
        if not body.startswith(_GLM_VALUE, at):
            raise ValueError(f"the argument {key[:80]!r} of {name[:80]!r} has no <arg_value>")
        value_end = body.find(_GLM_VALUE_END, at)
        if value_end < 0:
            raise ValueError(f"the argument {key[:80]!r} of {name[:80]!r} has no </arg_value>")
        args[key] = body[at + len(_GLM_VALUE) : value_end].strip()  # (vLLM's glm45 strips it)
        at = _skip_gap(body, value_end + len(_GLM_VALUE_END))
    return name, args


def _skip_gap(text: str, at: int) -> int:
    match = _GLM_GAP.match(text, at)
    return match.end() if match else at


def deepseek_calls(text: str, max_calls: int) -> list[tuple[str, str, bool]]:
    """DeepSeek's calls in ``text``: each one's name, its arguments' JSON text (from the fence of V3/R1's
    form), and whether its ``<｜tool▁call▁end｜>`` was there: the last call may lack it, as the end of a
    rollout stopped at it, and is then whole only when its JSON is.

    Raises:
        ValueError: a closed call without a separator or a function name, or more than ``max_calls``.
    """
    return _delimited_calls(
        text,
        DEEPSEEK_CALL,
        _DEEPSEEK_CALL_END,
        _deepseek_call,
        "DeepSeek",
        "function name and separator",
        max_calls,
    )


def _deepseek_call(body: str) -> tuple[str, str] | None:
    """One DeepSeek call's name and arguments' JSON text; None without a separator or a name."""
    head, sep, tail = body.partition(_DEEPSEEK_SEP)
    tail = tail.strip()
    if tail[:1] in ("{", ""):  # V3.1: the name, then the arguments
        name, args = head.strip(), tail
    else:  # V3/R1: the type ("function"), then the name and the fenced arguments
        line, _, rest = tail.partition("\n")
        name, args = line.strip(), _unfenced(rest)
    return (name, args) if sep and _NAME.fullmatch(name) else None


class _Skip(Enum):
    """What a reader of :func:`_delimited_calls` answers for a body between the tokens that the model's
    server passes over (a Kimi call without its id's index): no call, and no broken one either."""

    CALL = "skip"


def kimi_calls(text: str, max_calls: int) -> list[tuple[str, str, bool]]:
    """Kimi-K2's calls in ``text``: each one's name (its id, ``functions.get_weather:0``, without the
    ``functions.`` and the ``:INDEX``; a dotted name, ``browser.search``, is kept whole), its arguments'
    JSON text, and whether its ``<|tool_call_end|>`` was there (the last call may lack it, as a rollout
    stopped at it, and is then whole only when its JSON is).

    The id is ``functions.{func_name}:{idx}`` (Moonshot's docs/tool_call_guidance.md), the tool's whole
    name between the two: ``functions.browser.search:0`` calls the tool the model was given as
    ``browser.search``, as mlx-lm's kimi_k2 parser and vLLM's current one (its parser engine) read it.
    vLLM's earlier kimi_k2 parser kept only the last dotted part (``search``) and the guidance's own
    sample the second (``browser``): read so, a right call to a tool of a dotted name would never equal
    its reference, so the reward does not follow them.

    A call whose id has no ``:INDEX`` (``functions.invalid.0``) is passed over, no call, as vLLM's parser
    passes it over (it takes a call only under an id of text, a colon and digits; its
    ``test_invalid_funcall_id_skipped``), the calls around it read.

    Raises:
        ValueError: a closed call without ``<|tool_call_argument_begin|>`` or a function name, or more
            than ``max_calls``.
    """
    return _delimited_calls(
        text, KIMI_CALL, _KIMI_CALL_END, _kimi_call, "Kimi", "function id and arguments", max_calls
    )


def _kimi_call(body: str) -> tuple[str, str] | _Skip | None:
    """One Kimi call's name and arguments' JSON text; None without the arguments token or a name, and
    :attr:`_Skip.CALL` for an id without its ``:INDEX``: read whole as the name (``invalid.0``), such a
    call was scored as a wrong call where vLLM makes none of it."""
    head, sep, args = body.partition(_KIMI_ARGUMENTS)
    if not sep:
        return None
    base, colon, index = head.strip().rpartition(":")
    if not (colon and index.isascii() and index.isdigit()):
        return _Skip.CALL
    name = base.removeprefix("functions.")
    return (name, args.strip()) if _NAME.fullmatch(name) else None


def _delimited_calls(
    text: str,
    opener: str,
    closer: str,
    read: Callable[[str], tuple[str, str] | _Skip | None],
    family: str,
    needs: str,
    max_calls: int,
) -> list[tuple[str, str, bool]]:
    """The calls between ``opener`` and ``closer`` tokens (DeepSeek's, Kimi's), each body read by
    ``read``: its name, its arguments' text, and whether its closer was there. One forward pass: each
    find starts where the last call ended. A last call without its closer ends the scan (none can follow
    it), and one cut before ``read`` finds a call is no call; a closed one ``read`` refuses is an error
    naming what it ``needs``, and one it passes over (:attr:`_Skip.CALL`) is left out."""
    calls: list[tuple[str, str, bool]] = []
    at = 0
    while (start := text.find(opener, at)) >= 0:
        start += len(opener)
        end = text.find(closer, start)
        closed = end >= 0
        body = text[start:end] if closed else text[start:]
        call = read(body)
        if call is _Skip.CALL:
            if not closed:
                break
            at = end + len(closer)
            continue
        if call is None:
            if not closed:
                break
            raise ValueError(f"the {family} call {body[:80]!r} has no {needs}")
        calls.append((*call, closed))
        if len(calls) > max_calls:
            raise ValueError(f"more than {max_calls} tool calls")
        if not closed:
            break
        at = end + len(closer)
    return calls


def _unfenced(text: str) -> str:
    """The text inside a ``` fence around ``text`` (the fence's tag line dropped), or ``text``."""
    text = text.strip()
    if text.startswith("```"):
        text = text.partition("\n")[2]
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


KIMI_K3_TOOLS = "<|open|>tools<|sep|>"
_K3_TOOLS_END, _K3_SEP = "<|close|>tools<|sep|>", "<|sep|>"
_K3_CALL, _K3_CALL_END = "<|open|>call", "<|close|>call<|sep|>"
_K3_ARGUMENT, _K3_ARGUMENT_END = "<|open|>argument", "<|close|>argument<|sep|>"
# an XTML tag's attribute, its value escaped (&quot; and &amp;) as K3's template writes it
_K3_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')

# a Kimi K3 call: its name, its arguments' raw text, and the type each says (string, number, object...)
K3Call = tuple[str, dict[str, str], dict[str, str]]


def kimi_k3_calls(text: str, max_calls: int) -> list[K3Call]:
    """Kimi K3's calls in ``text``: each ``<|open|>call tool="NAME"<|sep|>`` of its ``tools`` channels
    (``<|open|>tools<|sep|>`` up to ``<|close|>tools<|sep|>``), its name, its arguments' raw text and
    the ``type`` each says (vLLM's kimi_k3 parser: ``string`` the text as written, another its JSON). A
    last channel without its closer holds the calls before one cut off (a rollout stopped there).

    Raises:
        ValueError: a closed channel holding text that is no call, or a call without its closer; a call
            without a function name, an argument without its closer or key, text in a call that is no
            argument; more than ``max_calls`` calls.
    """
    calls: list[K3Call] = []
    at = 0
    while (start := text.find(KIMI_K3_TOOLS, at)) >= 0:
        start += len(KIMI_K3_TOOLS)
        end = text.find(_K3_TOOLS_END, start)
        channel = text[start:] if end < 0 else text[start:end]
        calls.extend(_k3_channel(channel, closed=end >= 0, max_calls=max_calls - len(calls)))
        if end < 0:
            break
        at = end + len(_K3_TOOLS_END)
    return calls


def xtml_unspaced(text: str) -> str:
    """``text`` without whitespace inside its XTML markers (Kimi K3's): after a ``<|open|>`` or
    ``<|close|>`` and before a ``<|sep|>``, ``<|open|> tools <|sep|>`` read as ``<|open|>tools<|sep|>``.
    vLLM's detokenizer puts a space between a special token and the text beside it unless the request
    turns ``spaces_between_special_tokens`` off (vLLM's own kimi_k3 parser turns it off for its requests,
    but a rollout generated with special tokens kept and that default on has the spaces), and that parser
    reads such markers (``\\s*`` inside each). A value's text, between ``<|sep|>`` and ``<|close|>``, is
    kept as written, spaces and all, as that parser keeps it."""
    if _K3_SEP not in text:
        return text
    return _XTML_INNER_SPACE.sub("", text)


# whitespace inside an XTML marker; a run before <|sep|> is matched from its start only (the lookbehind),
# so a long run that no <|sep|> follows is read once, not once from each of its characters
_XTML_INNER_SPACE = re.compile(r"(?<=<\|open\|>)\s++|(?<=<\|close\|>)\s++|(?<!\s)\s++(?=<\|sep\|>)")


def _k3_channel(channel: str, closed: bool, max_calls: int) -> list[K3Call]:
    """The calls of one ``tools`` channel's text (each find starts at the cursor, which only moves on)."""
    calls: list[K3Call] = []
    at = 0
    while (at := _skip_space(channel, at)) < len(channel):
        if not channel.startswith(_K3_CALL, at):
            if not closed and _K3_CALL.startswith(channel[at:]):
                break  # (the opener itself cut off)
            raise ValueError(f"text in a tools channel that is no call: {channel[at : at + 80]!r}")
        head_end = channel.find(_K3_SEP, at)
        close = channel.find(_K3_CALL_END, at) if head_end >= 0 else -1
        if close < 0:
            if not closed:
                break  # a call cut off: no call
            raise ValueError(f"a call in a tools channel has no {_K3_CALL_END}: {channel[at : at + 80]!r}")
        name = _k3_attributes(channel[at + len(_K3_CALL) : head_end]).get("tool", "")
        if not _NAME.fullmatch(name):
            raise ValueError(f"the call {name[:80]!r} has no function name")
        calls.append((name, *_k3_arguments(channel[head_end + len(_K3_SEP) : close], name)))
        if len(calls) > max_calls:
            raise ValueError(f"more than {max_calls} tool calls")  # (the count is over all channels)
        at = close + len(_K3_CALL_END)
    return calls


def _k3_arguments(body: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """A call's ``<|open|>argument key="k" type="t"<|sep|>value<|close|>argument<|sep|>`` elements: their
    raw values and types (``string`` when none is said, as vLLM reads it)."""
    args: dict[str, str] = {}
    types: dict[str, str] = {}
    at = 0
    while (at := _skip_space(body, at)) < len(body):
        if not body.startswith(_K3_ARGUMENT, at):
            raise ValueError(f"text in the call {name[:80]!r} that is no argument: {body[at : at + 80]!r}")
        head_end = body.find(_K3_SEP, at)
        end = body.find(_K3_ARGUMENT_END, head_end) if head_end >= 0 else -1
        if end < 0:
            raise ValueError(f"an argument of {name[:80]!r} has no {_K3_ARGUMENT_END}")
        attributes = _k3_attributes(body[at + len(_K3_ARGUMENT) : head_end])
        key = attributes.get("key", "")
        if not key:
            raise ValueError(f"an argument of {name[:80]!r} has no key")
        args[key] = body[head_end + len(_K3_SEP) : end]
        types[key] = attributes.get("type", "string")
        at = end + len(_K3_ARGUMENT_END)
    return args, types


def _k3_attributes(head: str) -> dict[str, str]:
    """An XTML tag's attributes, ``tool="get_weather" index="1"``, unescaped."""
    return {
        m.group(1): m.group(2).replace("&quot;", '"').replace("&amp;", "&")
        for m in _K3_ATTRIBUTE.finditer(head)
    }


def _skip_space(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


_SPACE = re.compile(r"\s*")


MINIMAX_M3 = "]<]minimax[>["  # the namespace token before each of MiniMax-M3's tags
_M3_BLOCK, _M3_BLOCK_END = f"{MINIMAX_M3}<tool_call>", f"{MINIMAX_M3}</tool_call>"
_M3_INVOKE = "invoke"
_M3_MAX_DEPTH = 64  # arguments nested deeper are no call (as a JSON call's are)

# an M3 argument's value: its raw text, or what its child tags make (an object, or an array of <item>s)
M3Value = str | dict[str, "M3Value"] | list["M3Value"]


def minimax_m3_calls(text: str, max_calls: int) -> list[tuple[str, dict[str, M3Value]]] | None:
    """MiniMax-M3's calls in ``text``: each ``<invoke name="f">`` of its ``<tool_call>`` blocks (every tag
    after the namespace token), its name and its arguments, a leaf's raw text stripped; None when the
    text has no block. A last block without its closer counts when its invokes are whole; one cut off
    is no call.

    Raises:
        ValueError: a closed block holding text that is no tag, a tag out of place (an argument outside an
            invoke, a closer that closes another tag), an invoke without its closer or a name, arguments
            nested past the bound, or more than ``max_calls`` calls.
    """
    calls: list[tuple[str, dict[str, M3Value]]] = []
    found = False
    at = 0
    while (start := text.find(_M3_BLOCK, at)) >= 0:
        found = True
        start += len(_M3_BLOCK)
        end = text.find(_M3_BLOCK_END, start)
        if end < 0:  # no closer after this opener: none after any later one either
            try:
                calls.extend(_m3_invokes(text[start:], max_calls - len(calls)))
            except ValueError:
                pass
            break
        calls.extend(_m3_invokes(text[start:end], max_calls - len(calls)))
        at = end + len(_M3_BLOCK_END)
    return calls if found else None


def _m3_invokes(body: str, max_calls: int) -> list[tuple[str, dict[str, M3Value]]]:
    """The invokes of one M3 block's body, read tag by tag (one split on the namespace token; the text
    after each tag is a value's or whitespace)."""
    pieces = body.split(MINIMAX_M3)
    if pieces[0].strip():
        raise ValueError(f"text in a call block that is no tag: {pieces[0].strip()[:80]!r}")
    calls: list[tuple[str, dict[str, M3Value]]] = []
    name: str | None = None
    # the open elements: the invoke's (its name None), then each argument's; each its (key, value) children
    # and the text written in it
    stack: list[tuple[str | None, list[tuple[str, M3Value]], list[str]]] = []
    for piece in pieces[1:]:
        gt = piece.find(">")
        if not piece.startswith("<") or gt < 0:
            raise ValueError(f"text in a call block that is no tag: {piece[:80]!r}")
        tag, rest = piece[1:gt].strip(), piece[gt + 1 :]
        if stack and (plain := _m3_plain_closed(stack[-1], tag)) is not None:
            stack.pop()  # (a leaf closed by its tag without the namespace token)
            stack[-1][1].append(plain)
        if tag.startswith(_M3_INVOKE + " ") or tag == _M3_INVOKE:
            head, _, value = tag[len(_M3_INVOKE) :].partition("=")
            name = _unquoted(value)
            if stack or head.strip() != "name" or not _NAME.fullmatch(name):
                raise ValueError(f"<{tag[:80]}> is not an invoke of a function name")
            stack.append((None, [], []))
        elif tag == "/" + _M3_INVOKE:
            if len(stack) != 1 or name is None:
                raise ValueError(f"a </invoke> that closes no invoke, or an argument of {name!r}")
            calls.append((name, _m3_object(stack.pop()[1])))
            if len(calls) > max_calls:
                raise ValueError(f"more than {max_calls} tool calls")
        elif tag.startswith("/"):
            if len(stack) < 2 or stack[-1][0] != tag[1:]:
                raise ValueError(f"<{tag[:80]}> closes no open argument of {name!r}")
            key, children, texts = stack.pop()
            stack[-1][1].append((tag[1:], _m3_value(children, "".join(texts), name)))
        else:
            if not stack or not tag or len(stack) > _M3_MAX_DEPTH:
                raise ValueError(f"an argument <{tag[:80]}> outside an invoke, or nested too deeply")
            stack.append((tag, [], []))
        if stack and stack[-1][0] is not None:
            stack[-1][2].append(rest)  # (an argument's text: its value, or the space between its children)
        elif rest.strip():
            raise ValueError(f"text in a call block that is no tag: {rest.strip()[:80]!r}")
    if stack:
        raise ValueError(f"the call {name!r} has no </invoke>")
    return calls


def _m3_plain_closed(
    element: tuple[str | None, list[tuple[str, M3Value]], list[str]], tag: str
) -> tuple[str, M3Value] | None:
    """The value of an open leaf argument whose text ends with its closing tag written without the
    namespace token, ``]<]minimax[>[<query>AI news</query>]<]minimax[>[<sources>...`` (M3 outputs mix
    the two: MiniMax API clients and sanitizers are tested on such text, and parsers that drop the token
    first read it so), when the next tag is not its namespaced closer (then that text is the value's,
    an HTML value that ends with the same tag): its key and value (stripped); None otherwise."""
    key, children, texts = element
    if key is None or children or len(texts) != 1 or tag == "/" + key:
        return None
    text = texts[0].rstrip()
    closer = f"</{key}>"
    return (key, text[: -len(closer)].strip()) if text.endswith(closer) else None


def _m3_value(children: list[tuple[str, M3Value]], text: str, name: str | None) -> M3Value:
    """An argument's value: its text (stripped) when it has no child tags, an array of its ``<item>``
    children, or an object of the others."""
    if not children:
        return text.strip()
    if text.strip():
        raise ValueError(f"an argument of {name!r} holds both text and tags: {text.strip()[:80]!r}")
    if all(key == "item" for key, _ in children):
        return [value for _, value in children]
    return _m3_object(children)


def _m3_object(children: list[tuple[str, M3Value]]) -> dict[str, M3Value]:
    """Child tags as an object; a key written more than once is an array of its values."""
    grouped: dict[str, list[M3Value]] = {}
    for key, value in children:
        grouped.setdefault(key, []).append(value)
    return {key: values[0] if len(values) == 1 else values for key, values in grouped.items()}


def harmony_calls(text: str, max_calls: int) -> list[tuple[str, str, bool]]:
    """gpt-oss's calls in ``text``: each assistant message sent ``to=`` a recipient, its name
    (``functions.`` dropped; a built-in tool, ``browser.search``, keeps its whole name), its content
    (the arguments' JSON), and whether an end token closed it (the last one may lack its ``<|call|>``, a
    stop token). A message from another role (a tool's output in a transcript) is not a call, nor one to
    a built-in tool whose content is no JSON object (the ``python`` tool's code: vLLM's parser reads
    only messages to ``functions.``; read as a call, the code was a broken call, 0 format).

    Raises:
        ValueError: more than ``max_calls`` calls.
    """
    calls: list[tuple[str, str, bool]] = []
    at = 0
    while (content := text.find(HARMONY_MESSAGE, at)) >= 0:
        header = text[at:content]
        content += len(HARMONY_MESSAGE)
        stop = _HARMONY_STOP.search(text, content)
        end = stop.start() if stop else len(text)
        recipient = _recipient(header)
        body = text[content:end].strip()
        if recipient is not None and (recipient.startswith("functions.") or _json_object(body)):
            name = recipient.removeprefix("functions.")
            calls.append((name, body, stop is not None))
            if len(calls) > max_calls:
                raise ValueError(f"more than {max_calls} tool calls")
        if stop is None:
            break
        # (the next header starts at the next message's <|start|>, or after this one's end token)
        at = stop.start() if stop.group() == _HARMONY_START else stop.end()
    return calls


def harmony_without_reasoning(text: str) -> str:
    """``text`` without the content of its harmony messages that are no call and not the model's answer:
    the assistant's ``analysis`` messages (its reasoning, which vLLM's reasoning parser keeps out of the
    content: a call written there, ``<tool_call>...`` or a fenced JSON call, is a draft, no call) and the
    messages of other roles (a tool's output in a transcript). A message sent ``to=`` a recipient (a
    call, also on the analysis channel: gpt-oss's built-in tools) is kept, as is every header and end
    token. One forward pass, as :func:`harmony_calls` reads the messages."""
    kept: list[str] = []
    at = cursor = 0
    while (content := text.find(HARMONY_MESSAGE, at)) >= 0:
        header = text[at:content]
        content += len(HARMONY_MESSAGE)
        stop = _HARMONY_STOP.search(text, content)
        end = stop.start() if stop else len(text)
        if _recipient(header) is None and (_other_role(header) or _channel(header) == "analysis"):
            kept.append(text[cursor:content])
            cursor = end
        if stop is None:
            break
        at = stop.start() if stop.group() == _HARMONY_START else stop.end()
    kept.append(text[cursor:])
    return "".join(kept)


def _other_role(header: str) -> bool:
    """Whether a harmony header starts a message of another role than the assistant's."""
    opened = header.rfind(_HARMONY_START)
    if opened < 0:
        return False
    role = _HARMONY_ROLE.match(header, opened + len(_HARMONY_START))
    return role is not None and role.group(1) not in ("", "assistant")


def _channel(header: str) -> str | None:
    """The channel a harmony header names (``analysis``, ``commentary``, ``final``), or None."""
    at = header.rfind(_HARMONY_CHANNEL)
    if at < 0:
        return None
    channel = _HARMONY_ROLE.match(header, at + len(_HARMONY_CHANNEL))
    return channel.group(1) if channel else None


def _json_object(text: str) -> bool:
    """Whether ``text`` is a JSON object (a built-in tool's arguments, not its code)."""
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def _recipient(header: str) -> str | None:
    """The recipient of an assistant message's header (``to=...``), or None: no recipient, no channel
    (no harmony header), or a message of another role."""
    opened = header.rfind(_HARMONY_START)
    if opened >= 0:
        header = header[opened + len(_HARMONY_START) :]
        role = _HARMONY_ROLE.match(header)
        if role is None or role.group(1) not in ("", "assistant"):
            return None
    if _HARMONY_CHANNEL not in header:
        return None
    to = _HARMONY_TO.search(header)
    return to.group(1) if to else None
