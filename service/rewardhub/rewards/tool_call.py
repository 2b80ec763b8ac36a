"""``tool_call``: the tool calls a response makes equal the reference's (names and arguments).

For function-calling / agentic RL (BFCL-style AST matching, ToolRL-style partial credit). The response is
read outside its reasoning (each turn's, as :func:`.text.answer_text` reads a response; gpt-oss's: its
harmony ``analysis`` messages that are no call) and outside the tools' output
(``<tool_response>...</tool_response>`` between the turns of a multi-turn transcript, or a harmony message
of another role: a call written there is not the model's); the calls of all its turns count. Its calls
are, in order of precedence:

* every ``<tool_call>{...}</tool_call>`` block (the Hermes format of Qwen2.5/Qwen3 and most open chat
  templates; unless a call of the special-token or invoke forms below opens before the first block and
  is read: a block quoted in its argument is no call of its own; a ``</tool_call>`` quoted in a JSON
  string does not end its block, nor a reasoning or tool-output tag quoted there, or in a raw-text
  value of any XML form below, cut it), each a call object, a list of them, or call objects one a line (ToolRL's format), in
  JSON or (Hermes 2 Pro's prompt and data, up to 20,000 characters) a Python literal,
  ``{'name': ...}``, or Qwen3-Coder's XML (vLLM's ``qwen3_coder``),
  ``<function=f>\\n<parameter=x>\\nvalue\\n</parameter>\\n</function>``, each value the raw text (a newline
  either side dropped) or, when it is a JSON number, boolean, null, object or array, that value and
  also the string it spells (there is no schema to say which parameters are strings: ``94103`` equals
  the reference's 94103 and its "94103"), or GLM-4.5+'s (vLLM's ``glm45``),
  ``f\\n<arg_key>x</arg_key>\\n<arg_value>value</arg_value>`` (its name alone: a call without arguments),
  values stripped (as vLLM's reader does) and read so too, a JSON string unquoted as GLM's reader does;
  a last block whose ``</tool_call>`` is missing (a stop string) counts when the rest of the text is a
  whole call (JSON, or XML up to ``</function>``; a GLM call has no end of its own, so never), and a
  closed block ends its last Qwen3-Coder function when its ``</function>`` was left out (vLLM reads it
  so);
* otherwise, with special tokens kept in the text, DeepSeek's calls, V3/R1's
  ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\\n```json\\n{...}\\n```<｜tool▁call▁end｜>`` and V3.1's
  ``<｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>``, or Kimi-K2's (vLLM's ``kimi_k2``),
  ``<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|>`` (the id's
  ``functions.`` and ``:INDEX`` dropped), or gpt-oss's harmony messages to a function,
  ``<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>`` (after
  ``<|start|>assistant`` or not, ``to=`` before or after the channel; a message of another role, a
  tool's output, is none), or Kimi K3's XTML (vLLM's ``kimi_k3``), ``<|open|>tools<|sep|><|open|>call
  tool="f"<|sep|><|open|>argument key="x" type="string"<|sep|>value<|close|>argument<|sep|>
  <|close|>call<|sep|><|close|>tools<|sep|>`` (a ``string`` argument the text as written, another its
  JSON; a call cut off before its closer none; whitespace inside a marker, ``<|open|> tools <|sep|>``,
  as vLLM's detokenizer writes it with ``spaces_between_special_tokens``, read as vLLM's parser does); a last call without its end token counts when its JSON
  is whole;
* otherwise MiniMax-M2's blocks (vLLM's ``minimax_m2``), ``<minimax:tool_call>\\n<invoke name="f">\\n
  <parameter name="x">value</parameter>\\n</invoke>\\n</minimax:tool_call>``, several invokes a block,
  each value raw text (stripped) read as Qwen3-Coder's are, or DeepSeek V3.2's (vLLM's
  ``deepseek_v32``), ``<｜DSML｜function_calls>`` blocks of the same shape in its tags, a parameter
  ``string="true"`` the text as written, ``"false"`` its JSON value, or DeepSeek V4's (vLLM's
  ``deepseek_v4``), the same in ``<｜DSML｜tool_calls>`` blocks; a parameter without its closer is a
  broken call (vLLM's parsers read a value only up to it); a last block without its closer counts when
  its invokes are whole; a form whose reading fails gives way to the answer's JSON calls
  (below: a JSON call whose string argument quotes such a form is read as JSON); or MiniMax-M3's (vLLM's
  ``minimax_m3``), every tag after its namespace token ``]<]minimax[>[``, ``<tool_call>`` blocks of
  ``<invoke name="f">`` elements, each argument a tag of its name (``<city>Paris</city>``; nested tags
  an object, ``<item>`` tags an array; a leaf's closer written without the token, as M3 output mixes
  them, closes it), its text read as MiniMax-M2's values are;
* otherwise, in a text without ``<tool_call>``, Qwen3-Coder's functions without their block (vLLM's
  ``qwen3_coder`` reads them so), ``<function=f>...</function>`` each, the first at the start of a line
  (not inside a JSON string), read as in a block, the text around them prose; a last one without its
  ``</function>`` is cut off, no call;
* otherwise one JSON value (the last ```json block, or else the last other fence holding JSON, or the
  whole answer, or what follows Mistral's ``[TOOL_CALLS]`` marker or Llama's ``<|python_tag|>``, there
  the value it starts with, text after it the answer's, as vLLM reads it; the
  end-of-turn tokens after it dropped, ``<|eom_id|>``, ``</s>``, ``<|im_end|>``...): a call
  object, a list of them, or ``{"tool_calls": [...]}``; or call objects separated by ``;`` or one a
  line (Llama 3.x's parallel calls, ``{"name": ..., "parameters": {...}}; {...}``, as vLLM's
  ``llama3_json`` parser reads both); or a Python list of calls given
  literal keyword arguments, ``[get_weather(city="Paris"), math.factorial(n=5)]`` (the pythonic format
  of Llama 3.2/4, ToolACE and BFCL's prompting mode; up to 20,000 characters; Llama 4's
  ``<|python_start|>``/``<|python_end|>`` around it dropped);
* or Mistral's v11+ form (Mistral Small 3.1+, Magistral, Devstral), ``[TOOL_CALLS]name[ARGS]{...}``
  for each call (``[ARGS]`` absent when control tokens are skipped, ``[CALL_ID]id`` before it in some).

Not read (no call): bare JSON after prose (``Sure: {"name": ...}``; fenced, it is read).

A call object is ``{"name": ..., "arguments": {...}}``; ``arguments`` may also be a JSON *string* of an
object (OpenAI's wire format), ``parameters`` (Llama 3.x), ``args`` (LangChain's tool calls, Gemini's) and
``input`` (Anthropic's ``tool_use``) are read as ``arguments``, and an OpenAI entry
``{"type": "function", "function": {"name", "arguments"}}`` is unwrapped, as are its legacy
``{"function_call": {...}}``, ``{"tool_call": {...}}`` and Gemini's ``{"functionCall": {...}}``; an
OpenAI message whose ``tool_calls`` is ``null`` (the SDK's dump of a turn without calls) calls no tool. A
turn written as its API's blocks is read past those that are no call: Anthropic's content blocks (a list,
or its message ``{"role", "content": [...]}``), a text or thinking block beside its ``tool_use`` ones,
the OpenAI Responses API's output items (reasoning and message beside ``function_call``), Gemini's
``{"role", "parts": [...]}`` (text beside ``functionCall``); a turn of only such blocks calls no tool.
A response with no call at all
scores 0 with reason ``no_answer``; one whose call blocks are not valid call JSON scores 0 with reason
``format`` (both valid: the model's fault); JSON with none of a call's keys (``name``, ``function``,
``arguments``, ``tool_calls``...), outside call tags and markers, is an answer: no call. The reference
takes the same JSON shapes (or ``{"calls": [...]}``), or is text in any form a response's calls are read
in: ``<tool_call>`` blocks (Hermes function-calling data, ToolRL's ground truth), pythonic calls
(ToolACE's data), or a model's native form (its chat template's text); an empty list means
"call no tool", which a response without calls satisfies. A reference that is none of these is
``parse_error``: BFCL's possible answers, ``[{"f": {"x": [1, 2], "unit": ["celsius", ""]}}]``, among them,
unless ``reference_format: "bfcl"`` (below).

Two calls are equal when their names are equal and their arguments are equal as JSON values: objects
key by key, arrays in order, ``true`` never equal to ``1``, numbers within ``float_tolerance``
(default 1e-6; ``|got - want| <= tol * max(1, |want|)``; two integers only when equal, as ids are, and an integer
and a float only when the float rounds to it: ``5.0`` = ``5``, as JSON has one number type, serialisers
write one value either way and JSON Schema's ``integer`` takes ``5.0``; no declared type is read, a tool
schema's neither: BFCL's type check is ``reference_format: "bfcl"``'s, below), strings exactly
or, with ``string_match: "normalized"``, after casefolding, collapsing whitespace and Unicode canonical
normalisation (NFC: a precomposed "é" equals "e" and a combining accent; not NFKC, "m²" is not "m2"); no
type is coerced
(``"3"`` is not ``3``) unless ``coerce_types`` (then a string equals the number or boolean it spells,
``"10"`` = 10, ``"true"`` = true, and the JSON text of an object or array that value), an argument
given as ``null`` is not an absent one unless ``null_as_absent`` (on both sides), and every argument the
reference gives is required, every other one extra: an argument given its default value too, unless
``omit_defaults`` and the reference names its tools, ``{"calls": [...], "tools": [...]}`` (OpenAI's
function definitions, or bare ``{"name", "parameters"}``; :func:`declared_defaults`): then an argument
equal to the default its schema declares counts as not given, on both sides. With ``order: "any"`` (default; parallel calls)
reference and predicted calls are paired for the best total credit (past 64 calls a side, greedily by
best credit; ``reference_format: "bfcl"``: first as BFCL pairs them, below), with ``"strict"`` position
by position.

With ``reference_format: "bfcl"`` the reference is a BFCL possible answer (:func:`bfcl_reference`; the
format is the config's, never guessed from the shape: a call object is then ``parse_error``, and a
possible answer under the default format is ``parse_error`` naming this setting), scored as BFCL's AST
checker scores one: a call's name equal, each argument it gives one the reference lists and given one of
its listed values, each listed argument whose values hold no ``""`` (the mark of an optional one; or,
with ``null_as_absent``, ``null``) given. Values compare as BFCL's checker compares them: strings
lowercased without spaces and ``, . / - _ * ^`` (``"April 1, 2024"`` = ``"april 1 2024"``; with
``string_match: "normalized"`` also casefolded and NFC), lists element by element in order (an array in one with Python's ``==``, its strings exact, as BFCL's
list checker compares it), an object
against an object listing each key's values (optional ones ``""``; each value given compared with
Python's ``==``, as BFCL's dict checker compares it: a string standardised, ``true`` = ``1``, a list or
object inside as it is, its strings exact), any other value as above (``true``
is not ``1``, ``"10"`` is not ``10`` unless ``coerce_types``), numbers exactly (BFCL compares them with
``==``: ``float_tolerance`` unset is 0 here; set, it applies). BFCL's checker checks a given argument's
type before its value (and an array argument's items'; not the values inside an object): an integer for a
listed float is that float (``2`` = ``2.0``; an array's integer item for a listed float not: BFCL converts
an argument's own value only), but a float for a listed integer a type error (``5.0`` is not
``5``; in BFCL v4's data the arguments listed as integers are the integer parameters, but for two float
ones listed ``[0]``); and it reads ``""`` given as a value of a string parameter only: an
argument whose listed values are strings takes ``""`` (the mark is among its strings), one whose values are
integers, floats, booleans, arrays or objects does not (``n: ""`` for ``[5, ""]`` is wrong), an array's
takes ``[]`` for the mark (BFCL's list checker reads it so), and one whose values say no type (``""`` alone,
``null`` and ``""``) takes ``""`` (the type read from the first listed value that is neither: a possible
answer carries no declared type; inside an object BFCL checks no type, and ``""`` is an optional key's
mark whatever its values). Partial credit is the share of the keys given or required (an optional one
left out counts for nothing) given a listed value. Parallel calls (``order: "any"``) are paired as BFCL's
checker pairs them: each reference call in turn with the first predicted call not yet paired that it
accepts whole, so one BFCL's order leaves unmatched fails the item (exact 0) even where another pairing
matches every call; the calls left are paired for the best total credit.
A function's name is the possible answer's as written (BFCL's prompt-mode models are shown it so, and call
``math.factorial``), or, with ``underscore_to_dot``, with every ``.`` in it written ``_`` (BFCL shows its
function-calling models the names so, their APIs refusing a dot, and its checker expects
``math_factorial``: its model flag of that name); the other spelling is then no function the model was
shown (0, as BFCL scores it).

Score: ``mode: "exact"`` gives 1 when the calls pair up one to one and every pair is equal, else 0.
``mode: "partial"`` gives each pair a credit, 0 for different names, else the share of argument keys
(over the union of both calls' keys) whose values are equal (1 for two calls without arguments), and
scores ``sum(credits) / max(#reference, #predicted)``: a missing call, an extra one or a wrong argument
each cost their share. Components: ``exact`` (1/0), ``name_f1`` (F1 of the multisets of called names)
and ``calls`` (the number of calls read).

Reading and pairing calls is pure Python (pairing: predicted x reference calls): a batch of more than
``_INLINE_CHARS`` characters of responses (and string references) is read and paired in the CPU
workers, and one of more than ``_INLINE_PAIRS`` call pairs paired there, each item under the request's
deadline (``timeout`` past it); smaller batches are scored on the event loop, with the same results.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.json_schema import json_in_answer
from rewardhub.rewards.text import THINK_CLOSE
from rewardhub.rewards.tool_formats import (
    DEEPSEEK_CALL,
    DSML,
    DSML_V4,
    HARMONY_MESSAGE,
    KIMI_CALL,
    KIMI_K3_TOOLS,
    MINIMAX,
    MINIMAX_M3,
    QWEN3_FUNCTION,
    deepseek_calls,
    glm45_call,
    glm45_shaped,
    harmony_calls,
    harmony_without_reasoning,
    invoke_calls,
    kimi_calls,
    kimi_k3_calls,
    minimax_m3_calls,
    qwen3_coder_bare_calls,
    qwen3_coder_calls,
    xtml_unspaced,
)

__all__ = [
    "Call",
    "ToolCallConfig",
    "ToolCallReward",
    "bfcl_reference",
    "declared_defaults",
    "parse_calls",
    "values_equal",
]

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
# a response's calls read at most: a call list longer than this is no answer a trainer wants scored
_MAX_CALLS = 256
_MAX_DEPTH = 64
# a block is read as a Python literal up to this long (ast.parse: ~0.05 s, a few MB, at this size)
_MAX_LITERAL_CHARS = 20_000
# GLM's values read as Python literals in one response, in all: each value is bounded alone, but a value
# that is no literal is its text and the next is read, so a megabyte of f-strings (which ast compiles
# expression by expression before refusing them) took 6 s, past the item's deadline. Past this many
# characters, a value that is no JSON is its text.
_MAX_LITERAL_TOTAL = 4 * _MAX_LITERAL_CHARS
_literal_budget: ContextVar[list[int] | None] = ContextVar("_literal_budget", default=None)
# pairings of up to this much work (smaller side^2 x larger side: 64 calls a side) are optimal
_OPTIMAL_PAIRING_WORK = 64**3
# Mistral's chat template puts its calls after a marker: "[TOOL_CALLS] [{...}]" (v3: "[TOOL_CALLS][{...}]")
_MISTRAL_MARKER = "[TOOL_CALLS]"
# v11+ (Mistral Small 3.1+, Magistral, Devstral): "[TOOL_CALLS]name[ARGS]{...}" for each call
_MISTRAL_V11 = re.compile(r"\s*[\w.\-]+\s*(?:\[CALL_ID\]|\[ARGS\]|\{)")
# Llama 3.1+ may put this token before its JSON calls (when special tokens are kept in the text)
_PYTHON_TAG = "<|python_tag|>"
# Llama 4 may wrap its pythonic calls in these tokens (vLLM's llama4_pythonic parser drops them)
_PYTHON_START, _PYTHON_END = "<|python_start|>", "<|python_end|>"
# the end-of-turn tokens a rollout decoded with its special tokens kept ends with (Llama 3.x, Llama 4,
# Qwen/ChatML, Mistral and Llama 2, Phi, DeepSeek, Gemma), dropped after a JSON answer (a few at most)
_END_OF_TURN = (
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|eot|>",
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    "<|end|>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<end_of_turn>",
)
_MAX_END_TOKENS = 4


# float_tolerance unset, reference_format "calls"
_FLOAT_TOLERANCE = 1e-6


class ToolCallConfig(RewardConfig):
    mode: Literal["exact", "partial"] = Field(
        "exact", description="exact: 1 only when all calls match one to one; partial: per-argument credit."
    )
    order: Literal["any", "strict"] = Field(
        "any", description="any: calls paired by best match (parallel calls); strict: position by position."
    )
    string_match: Literal["exact", "normalized"] = Field(
        "exact",
        description="normalized: string argument values compared casefolded, whitespace collapsed, Unicode "
        "NFC-normalised (canonical, not NFKC: `m²` is not `m2`).",
    )
    float_tolerance: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Numbers match when |got - want| <= tol * max(1, |want|); two integers only when equal, "
        "an integer and a float only when the float rounds to it (5.0 = 5: no declared type is read; "
        "reference_format bfcl: a float for a listed integer is a type error, as BFCL's checker finds it). "
        "Unset: 1e-6, or 0 (numbers exactly equal, as BFCL's checker compares them) with reference_format "
        "bfcl.",
    )
    coerce_types: bool = Field(
        False,
        description="An argument equals its value written another way, as models and parsers write them: "
        '"10" = 10, "3.5" = 3.5 (under float_tolerance), "true"/"false" (any case) = the boolean, and a JSON '
        "string of an object or array = that object or array (at any depth). Off: no type is coerced.",
    )
    null_as_absent: bool = Field(
        False,
        description="An argument given as null counts as not given, in the reference and the response alike "
        "(BFCL/OpenAI optional parameters are often written out as null). Off: null is a value of its own.",
    )
    omit_defaults: bool = Field(
        False,
        description="An argument equal to the default its tool's schema declares counts as not given, in the "
        'reference and the response alike. The schemas are the reference\'s: {"calls": [...], "tools": [...]}, '
        'each tool OpenAI\'s {"type": "function", "function": {"name", "parameters"}} or bare {"name", '
        '"parameters"} (or Anthropic\'s "input_schema"), its defaults parameters.properties.<arg>.default. '
        "Off, or no tools given: an argument given is given, its default or not. (reference_format bfcl: a "
        "possible answer lists a default among the argument's values itself; not applied.)",
    )
    reference_format: Literal["calls", "bfcl"] = Field(
        "calls",
        description='calls: the reference is calls (a call, a list, {"calls": [...]}, or text in a response\'s '
        'forms). bfcl: it is a BFCL possible answer, [{"f": {"x": [1, 2], "unit": ["celsius", ""]}}] (or its '
        'file line, {"id": ..., "ground_truth": [...]}): each argument any of its listed values, "" in the list '
        "meaning it may be left out, any other argument extra, strings compared as BFCL's checker does "
        "(lowercased, without spaces and , . / - _ * ^).",
    )
    underscore_to_dot: bool = Field(
        False,
        description="reference_format bfcl: the model was shown each function with every '.' of its name "
        "written '_', as BFCL shows its function-calling models (OpenAI, Mistral, Gemini... refuse a dot in "
        "a function name; BFCL's model flag of this name): a possible answer's math.factorial is then called "
        "math_factorial, and math.factorial is no function the model was shown. Off (BFCL's prompt-mode "
        "models): the name as the possible answer writes it.",
    )


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    arguments: dict[str, Any]
    # an XML-form argument read as a JSON value (3, true, {...}): the text it was written as, which the
    # string the tool's schema may make it is (no type in the XML says which: see _xml_value)
    texts: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class _Possible(Call):
    """A call of a BFCL possible answer (``reference_format: "bfcl"``): each argument maps to the list of
    its acceptable values, ``""`` among them when it may be left out."""


_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


class _Malformed(ValueError):
    """A call that is not ``{"name": str, "arguments": object}`` in any accepted shape."""


def _call(obj: Any) -> Call:
    if not isinstance(obj, dict):
        raise _Malformed("a tool call must be a JSON object")
    # OpenAI: {"type": "function", "function": {...}}, its legacy {"function_call": {...}},
    # {"tool_call": {...}}, and Gemini's {"functionCall": {...}}
    for key in ("function", "function_call", "tool_call", "functionCall"):
        if isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise _Malformed("a tool call needs a non-empty string 'name'")
    # the arguments under the first of these keys given: "parameters" (Llama 3.x), "args" (LangChain's tool
    # calls, Gemini's), "input" (Anthropic's tool_use); read as none, a wrong call equalled its reference
    given = next((k for k in _ARGUMENT_KEYS if k in obj), None)
    args = obj[given] if given is not None else {}
    if isinstance(args, str):  # OpenAI's wire format: the arguments as a JSON string
        try:  # (bounded as the call JSON is: json.loads alone raised RecursionError past ~1000 levels)
            args = _loads(args) if args.strip() else {}
        except ValueError:
            raise _Malformed(f"the arguments of {name!r} are not JSON (or nested too deeply)") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _Malformed(f"the arguments of {name!r} must be a JSON object")
    return Call(name, args)


def _calls(value: Any) -> list[Call]:
    if isinstance(value, dict) and not ("name" in value or "function" in value):
        for key in ("tool_calls", "calls"):
            if isinstance(value.get(key), list):
                value = value[key]
                break
        else:
            if (
                "tool_calls" in value
                and value["tool_calls"] is None
                and not any(
                    isinstance(value.get(k), dict) for k in ("function_call", "tool_call", "functionCall")
                )
            ):
                return []  # an OpenAI message without calls (the SDK's dump writes "tool_calls": null)
            if (blocks := _turn_blocks(value)) is not None:
                value = blocks
    # (a turn's blocks that are no call passed over: in a list only, a lone object stays a call or broken)
    items = [v for v in value if not _no_call_block(v)] if isinstance(value, list) else [value]
    if len(items) > _MAX_CALLS:
        raise _Malformed(f"more than {_MAX_CALLS} tool calls")
    return [_call(v) for v in items]


# the blocks of a turn that are no call: Anthropic's text and thinking content blocks, the OpenAI Responses
# API's reasoning and message output items (Gemini's text parts have no type: _no_call_block)
_NO_CALL_TYPES = frozenset({"text", "thinking", "redacted_thinking", "reasoning", "message"})


def _turn_blocks(value: dict[str, Any]) -> list[Any] | None:
    """The blocks of a model's turn written as its API's message: Anthropic's ``{"role", "content":
    [blocks]}`` (its tool_use blocks among them), Gemini's ``{"role", "parts": [parts]}``; None for any
    other object."""
    if any(isinstance(value.get(k), dict) for k in ("function_call", "tool_call", "functionCall")):
        return None
    for key in ("content", "parts"):
        if isinstance(value.get(key), list):
            return list(value[key])
    return None


def _no_call_block(value: Any) -> bool:
    """Whether a block of a turn's list is none of its calls: a text, thinking, reasoning or message block
    (Anthropic, the Responses API) or a Gemini text part, with none of a call's keys. Such a block beside
    the calls was read as a call without a name, and the turn's calls as broken."""
    if not isinstance(value, dict) or any(k in value for k in _CALL_KEYS):
        return False
    kind = value.get("type")
    return kind in _NO_CALL_TYPES if isinstance(kind, str) else "type" not in value and "text" in value


def _loads(text: str) -> Any:
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
    if _depth(value) > _MAX_DEPTH:  # comparing it would recurse as deep
        raise ValueError(f"the JSON is nested more than {_MAX_DEPTH} levels deep")
    return value


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (iteratively: no recursion limit to hit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if d <= _MAX_DEPTH:
                stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


_RESPONSE_OPEN, _RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
# a reasoning block's opener and closer: <think> (most models), and Kimi K3's XTML think channel
_REASONING = {"<think>": THINK_CLOSE, "<|open|>think<|sep|>": "<|close|>think<|sep|>"}
# what starts a part of a response that is not the model's answer: its reasoning, or a tool's output
_NOT_ANSWER = re.compile("|".join(re.escape(t) for t in (*_REASONING, *_REASONING.values(), _RESPONSE_OPEN)))
_REASONING_CLOSERS = frozenset(_REASONING.values())


# the call blocks whose JSON strings or raw-text values may quote those tags (_model_output's quoted mode)
_QUOTING_BLOCKS = {
    "<tool_call>": "</tool_call>",
    **{form.block: form.block_end for form in (MINIMAX, DSML, DSML_V4)},
}
_NOT_ANSWER_OR_CALL = re.compile("|".join([_NOT_ANSWER.pattern, *map(re.escape, _QUOTING_BLOCKS)]))
_INVOKES = {form.block: form.invoke for form in (MINIMAX, DSML, DSML_V4)}
# (a block's opener: its "<" and one of their names; the search skips to a "<" at C speed)
_BLOCK_OPENER = re.compile("<(?:" + "|".join(re.escape(o[1:]) for o in _QUOTING_BLOCKS) + ")")


def _model_output(text: str, quoted: bool = False) -> tuple[str, bool]:
    """The model's own output in ``text``: without its reasoning and without the tools' output, each
    turn read as :func:`.text.answer_text` reads a response. A multi-turn rollout's text (verl's, a
    Hermes/Qwen transcript) holds the tools' output between the model's turns (``<tool_response>...
    </tool_response>``, an unclosed last one to the end): a call written there (a web page, a file the
    model had read back) is not one the model made. A turn's answer is its text after its last reasoning
    closer (``</think>``, or Kimi K3's ``<|close|>think<|sep|>``), up to an opener never closed; DeepSeek
    V4 may start its ``<｜DSML｜tool_calls>`` block without closing its ``<think>``, which then ends
    there (its vLLM reasoning parser reads so). The answers of all the turns stay: reading after the
    text's last ``</think>`` alone dropped every turn's calls but the last's. One forward pass with
    ``re.search``/``str.find``.

    Also whether a tag it cut at followed a call block's opener (:data:`_QUOTING_BLOCKS`) with no closer
    between (so may be quoted in that block's string or value: a note on the chat format, a template or
    code written to a file). Then :func:`_parse_calls` reads it again ``quoted``: a ``<tool_call>``
    block of JSON in the answer is read past its strings (:func:`_json_strings_end`), a tag in them the
    string's text, and a block of XML calls (Qwen3-Coder's, GLM's, MiniMax-M2's, DSML's) to its closer
    (:func:`_xml_block_end`), a tag in it a value's; a reasoning block is read as before (its drafted
    calls no call of the answer)."""
    if _NOT_ANSWER.search(text) is None:
        return text, False
    kept: list[str] = []
    turn = 0  # where the current turn's text starts in kept
    at = 0  # where the text not yet kept or dropped starts
    search = at  # where the next tag is looked for (past a block's strings, quoted)
    suspect = False
    absent: set[str] = set()  # the closers not in the text past the cursor
    budget = [len(text)]  # (what the scans of blocks' strings may read, all together: linear)
    # (each block's closer last found: -2, not looked for)
    next_close = {opener: [-2] for opener in _QUOTING_BLOCKS} if quoted else {}
    tags = _NOT_ANSWER_OR_CALL if quoted else _NOT_ANSWER
    while (found := tags.search(text, search)) is not None:
        tag = found.group()
        if tag in _QUOTING_BLOCKS:  # (quoted only)
            end = _json_strings_end(text, found.end(), budget) if tag == _OPEN else -1
            if end < 0:
                end = _xml_block_end(text, found.end(), tag, next_close[tag])
            search = max(end, found.end())
            continue
        if not suspect and _BLOCK_OPENER.search(text, search, found.start()) is not None:
            for opener, block_end in _QUOTING_BLOCKS.items():
                if (opened := text.rfind(opener, search, found.start())) >= 0:
                    suspect = suspect or text.find(block_end, opened, found.start()) < 0
        if tag in _REASONING_CLOSERS:  # (a reasoning block opened in the prompt)
            del kept[turn:]  # the turn's answer starts after its reasoning
            at = search = found.end()
            continue
        closer = _REASONING.get(tag, _RESPONSE_CLOSE)
        end = -1 if closer in absent else text.find(closer, found.end())
        if end >= 0 and tag in _REASONING:
            del kept[turn:]  # the turn's answer starts after its reasoning
            at = search = end + len(closer)
            continue
        kept.append(text[at : found.start()])
        if end < 0 and tag == "<think>" and (block := text.find(DSML_V4.block, found.end())) >= 0:
            absent.add(closer)  # (none after this opener: none after a later one either, unsearched)
            # DeepSeek V4 starts its calls right after its reasoning, unclosed (vLLM reads so)
            at = search = block
            continue
        if end < 0:  # an unclosed reasoning block, or tool's output, runs to the end
            return "\n".join(kept), suspect
        at = search = end + len(closer)
        turn = len(kept)  # (a tool's output: the next turn starts after it)
    kept.append(text[at:])
    return "\n".join(kept), suspect


def _json_strings_end(text: str, at: int, budget: list[int]) -> int:
    """Where the strings of a ``<tool_call>`` block's JSON starting at ``at`` end: the block's first
    ``</tool_call>`` outside them, or the end of its JSON value when no closer follows (a stop string's);
    -1 when the block is no JSON or a string never closes (or the scan would read past ``budget``, which
    all the blocks share: a scan given up is read again as plain text, so the reading stays linear).

    The text up to the first quote is read here, the strings from it on by :func:`_quoted_block_end`
    (one loop for both: a block cut inside a string is read on from inside it), with the same window and
    the closer found already; the text up to that quote is taken off ``budget`` as that scan's own reads
    are. A block without a string before its closer ends there, uncharged (the reading goes on from the
    closer: no later block reads that text again); one with neither, in a window cut short by the
    budget, is charged the whole window."""
    if _JSON_START.match(text, at) is None:
        return -1
    limit = min(len(text), at + budget[0])
    closer = text.find(_CLOSE, at, limit)
    quote = text.find('"', at, closer if closer >= 0 else limit)
    if quote >= 0:
        budget[0] -= quote + 1 - at
        end = _quoted_block_end(text, quote + 1, budget, closer)
    elif closer >= 0:
        return closer
    else:
        budget[0] -= limit - at
        end = _NO_CLOSER if limit == len(text) else _NO_END
    if end == _NO_CLOSER:  # no closer after it (nor after a later block: scanned no more)
        budget[0] = 0
        return _json_end(text, at)
    return -1 if end == _NO_END else end


def _xml_block_end(text: str, at: int, opener: str, next_close: list[int]) -> int:
    """Where a block of XML calls opened by ``opener`` (a ``<tool_call>`` of Qwen3-Coder's or GLM's
    XML, or MiniMax-M2's or DSML's block of invokes) starting at ``at`` ends: its first closer (its values
    raw text, a tag in them the value's); -1 when it is no such block or another of its openers comes
    before that closer (a tag named in reasoning, not a block: the real reasoning closer after it is read
    as before). ``next_close`` caches the closer found, so the openers before one closer look for it
    once."""
    close = next_close[0]
    if close == -2 or 0 <= close < at:
        close = next_close[0] = text.find(_QUOTING_BLOCKS[opener], at)
    if close < 0 or text.find(opener, at, close) >= 0:
        return -1
    body = text[at:close]
    if opener != _OPEN:
        return close if body.lstrip().startswith(_INVOKES[opener]) else -1
    return close if body.lstrip().startswith(QWEN3_FUNCTION) or glm45_shaped(body.strip()) else -1


def _json_end(text: str, at: int) -> int:
    """Where the JSON value at ``at`` ends (a block without its closer: a stop string's), -1 if none."""
    try:
        return _JSON_DECODER.raw_decode(text, _JSON_START.match(text, at).end() - 1)[1]  # type: ignore[union-attr]
    except (ValueError, RecursionError):
        return -1


def _blocks(text: str, quoted: bool = False) -> list[str]:
    """The texts of the ``<tool_call>...</tool_call>`` blocks, in order (as a lazy regex search finds them,
    but in one pass: that search scanned to the end from every opener without a closer, quadratic), and
    a last block without its closer when what follows its opener is whole call JSON: a rollout stopped
    at ``</tool_call>`` as a stop string, which vLLM leaves out of the text (its Hermes parser reads such
    a block too), or a whole Qwen3-Coder call. A tail that is not (cut mid-call, prose) is no call.

    ``quoted``: a block of JSON cut by its first ``</tool_call>`` inside a string (a call writing a file
    or a prompt that quotes the tag) ends at the first closer after its JSON instead, when the text up
    to it is JSON (:func:`_quoted_block_end`). The first closer ended it, a broken call (0 format);
    :func:`_calls_of_blocks` reads the blocks so when they are broken, the plain block unchecked. A
    longer block that is no JSON is charged the whole window its scan read (up to the closer it found,
    which the scan leaves uncharged for a reading that goes on from there): this one goes on from its
    first closer, and the later blocks that open in that window would each read it again (blocks cut
    in a string before a far closer: reads growing as the text's length to the power 1.5)."""
    blocks: list[str] = []
    at = 0
    budget = [len(text) if quoted else 0]  # (what the scans past quoted closers may read, all together)
    while (start := text.find(_OPEN, at)) >= 0:
        start += len(_OPEN)
        end = text.find(_CLOSE, start)
        body = text[start:end]
        if end >= 0 and budget[0] > 0 and _cut_in_a_string(body):
            left = budget[0]
            quoted_end = _quoted_block_end(text, end, budget)
            if quoted_end == _NO_CLOSER and _json_block(text[start:]):  # (its own closer left out)
                blocks.append(text[start:])
                break
            if quoted_end >= 0:
                if _json_block(longer := text[start:quoted_end]):
                    end, body = quoted_end, longer
                else:  # (the reading goes on from the first closer: the scan's window charged whole)
                    budget[0] = left - (quoted_end - end)
        if end < 0:  # no closer after this opener: none after any later one either
            try:
                _block_calls(text[start:], closed=False)
            except ValueError:
                break
            blocks.append(text[start:])
            break
        blocks.append(body)
        at = end + len(_CLOSE)
    return blocks


# the rest of a JSON string, from inside it to its closing quote (an escaped quote does not close it)
_JSON_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"', re.DOTALL)
_JSON_ESCAPE = re.compile(r"\\.", re.DOTALL)
_JSON_START = re.compile(r"\s*[\[{]")
_NO_CLOSER, _NO_END = -1, -2


def _cut_in_a_string(body: str) -> bool:
    """Whether a block's text, up to its first ``</tool_call>``, is JSON cut inside a string: it starts
    as JSON does and holds an odd number of unescaped quotes (JSON text has an even number, and no
    backslash outside its strings). Counted at C speed, on every block: the plain block stays fast."""
    quotes = body.count('"')
    if "\\" in body:
        if "\\\\" in body:  # (a run of backslashes: an even one before a quote escapes none)
            quotes = _JSON_ESCAPE.sub("", body).count('"')
        else:  # (each backslash alone: one before a quote escapes it)
            quotes -= body.count('\\"')
    return quotes % 2 == 1 and _JSON_START.match(body) is not None


def _quoted_block_end(text: str, at: int, budget: list[int], closer: int | None = None) -> int:
    """Where a block whose JSON is cut inside a string at ``at`` ends: the first ``</tool_call>`` past
    ``at`` outside the JSON's strings (read as JSON reads them, an escaped quote inside); ``_NO_CLOSER``
    when its strings close but no closer follows them, ``_NO_END`` when a string never closes or the scan
    would read past ``budget``. One forward pass (each find starts at the cursor, the closer's found
    again only once the cursor is past it); what it reads is taken off ``budget``, which all the blocks
    of a response share: a response of many blocks each scanned to the end and given up (its text no
    JSON) stops being scanned once it has read as much as the text, so the reading stays linear.
    ``closer``: the first closer past ``at`` within the budget's window, when the caller found it already
    (:func:`_json_strings_end`). A quote is looked for up to the closer only: a quote past it changes
    nothing, and the text read past it would go uncharged."""
    start = at
    limit = min(len(text), at + budget[0])
    if closer is None:
        closer = text.find(_CLOSE, at, limit)
    result = _NO_END
    while True:  # (at is inside a string)
        string = _JSON_STRING_REST.match(text, at, limit)
        if string is None:
            at = limit
            break
        at = string.end()
        if 0 <= closer < at:  # (that closer was in the string)
            closer = text.find(_CLOSE, at, limit)
        quote = text.find('"', at, closer if closer >= 0 else limit)
        if quote < 0 and closer >= 0:
            result = closer
            break
        if quote < 0:
            result = _NO_CLOSER if limit == len(text) else _NO_END
            at = limit
            break
        at = quote + 1
    budget[0] -= at - start
    return result


def _json_block(block: str) -> bool:
    """Whether a block's text is JSON: a value, or values one after another (ToolRL's one call a line)."""
    try:
        _loads(block)
    except ValueError:
        return _json_objects(block, lines=True) is not None
    return True


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_JSON_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _mistral_v11_calls(text: str) -> list[Call]:
    """The calls of Mistral's v11+ form, ``[TOOL_CALLS]name[ARGS]{...}`` for each call (``[ARGS]`` is a
    control token, gone when they are skipped; some versions put ``[CALL_ID]id`` before it)."""
    pieces = text.split(_MISTRAL_MARKER)[1:]
    if len(pieces) > _MAX_CALLS:
        raise _Malformed(f"more than {_MAX_CALLS} tool calls")
    calls: list[Call] = []
    for piece in pieces:
        head, brace, _ = piece.partition("{")
        name = head.split("[CALL_ID]")[0].split("[ARGS]")[0].strip()
        if not brace:
            raise _Malformed(f"the call {name[:80]!r} has no arguments object")
        try:
            args, _end = _JSON_DECODER.raw_decode(piece, len(head))  # (what follows it: the next call's text)
        except (ValueError, RecursionError):
            raise _Malformed(f"the arguments of {name[:80]!r} are not JSON") from None
        if _depth(args) > _MAX_DEPTH:
            raise _Malformed(f"the arguments of {name[:80]!r} are nested more than {_MAX_DEPTH} levels deep")
        calls.append(_call({"name": name, "arguments": args}))
    return calls


def parse_calls(response: str) -> list[Call] | None:
    """The calls a response makes; None when it makes none.

    Raises:
        ValueError: the response's call blocks (or its JSON) are not valid tool calls.
    """
    token = _literal_budget.set([_MAX_LITERAL_TOTAL])
    try:
        return _parse_calls(response)
    finally:
        _literal_budget.reset(token)


def _parse_calls(response: str) -> list[Call] | None:
    response = xtml_unspaced(response)  # (K3's markers as its reasoning and calls are read)
    text, suspect = _model_output(response)
    if not suspect:
        return _calls_in(text)
    try:
        plain, broken = _calls_in(text), None
    except ValueError as exc:
        plain, broken = None, exc
    # a tag it was cut at may be quoted in a block's JSON string: that reading's calls, when it has some
    if (quoted := _model_output(response, quoted=True)[0]) != text:
        try:
            if (calls := _calls_in(quoted)) is not None:
                return calls
        except ValueError:
            pass
    if broken is not None:
        raise broken
    return plain


def _calls_in(text: str) -> list[Call] | None:
    """The calls of the model's output ``text`` (:func:`_parse_calls`)."""
    if HARMONY_MESSAGE in text:  # gpt-oss: its reasoning is its analysis messages, not a <think> block
        text = harmony_without_reasoning(text)
    blocks = _blocks(text)
    if blocks and not _native_first(text):
        return _calls_of_blocks(blocks, text)
    try:
        if (special := _special_token_calls(text)) is not None:
            return special
        if (invoked := _invoke_block_calls(text)) is not None and (invoked or not blocks):
            return invoked or None  # (empty blocks call nothing)
    except ValueError as broken:
        if blocks:  # (a tag of another form in the text before them, no call of that form)
            try:
                return _calls_of_blocks(blocks, text)
            except ValueError:
                raise broken from None  # (the form opened first: its error)
        # A JSON call whose string argument quotes one of these forms (a file written, a prompt quoted:
        # its quotes and newlines escaped in the JSON) is no call of that form, and broke its reading:
        # the JSON's calls, when the answer is one; else the form's error
        try:
            quoted = _json_calls(text)
        except ValueError:
            quoted = None
        if quoted is None:
            raise
        return quoted
    if blocks:  # (the form opened first read no call)
        return _calls_of_blocks(blocks, text)
    if _bare_qwen3_shaped(text):  # Qwen3-Coder's XML without its <tool_call>
        try:
            bare = qwen3_coder_bare_calls(text, _MAX_CALLS)
        except ValueError as exc:
            raise _Malformed(str(exc)) from None
        if bare:  # (only a cut-off one: no call in this form, the text read on)
            return [_xml_call(name, args, strings=False) for name, args in bare]
    return _json_calls(text)


def _calls_of_blocks(blocks: list[str], text: str) -> list[Call] | None:
    """The calls of the ``<tool_call>`` blocks (found in ``text``); None when they call nothing (blocks
    of empty lists, as ``{"tool_calls": []}``). Blocks that are not valid calls are found again with
    the ``</tool_call>`` quoted in a JSON string read past (a file or a prompt that quotes the tag): the
    calls of those when they differ and are valid (only on this path: a plain block is not checked).

    Raises:
        ValueError: a block that is not valid calls, or more than :data:`_MAX_CALLS` calls.
    """
    try:
        return _block_list_calls(blocks)
    except _Malformed as broken:
        requoted = _blocks(text, quoted=True)
        if requoted == blocks:
            raise
        try:
            return _block_list_calls(requoted)
        except _Malformed:
            raise broken from None


def _block_list_calls(blocks: list[str]) -> list[Call] | None:
    if len(blocks) > _MAX_CALLS:
        raise _Malformed(f"more than {_MAX_CALLS} tool calls")
    try:  # a block holds one call, or (some templates) a list of them, or one call a line
        calls = [call for b in blocks for call in _block_calls(b)]
    except ValueError as exc:
        raise _Malformed(str(exc)) from None
    if len(calls) > _MAX_CALLS:  # (the blocks' lists together: each block's alone is not the bound)
        raise _Malformed(f"more than {_MAX_CALLS} tool calls")
    return calls or None


# the tags that open a call (or a block of them) in the special-token and invoke forms
_NATIVE_OPENERS = (
    DEEPSEEK_CALL,
    KIMI_CALL,
    KIMI_K3_TOOLS,
    HARMONY_MESSAGE,
    MINIMAX.block,
    DSML.block,
    DSML_V4.block,
    MINIMAX_M3,
)


def _native_first(text: str) -> bool:
    """Whether a call of a special-token or invoke form opens before the text's first ``<tool_call>``:
    that form's call may quote a ``<tool_call>`` block in an argument (a file or a prompt written), which
    is then no call of its own, as a JSON call's argument may quote such forms. Each search stops at the
    first block."""
    first = text.find(_OPEN)
    return first > 0 and any(text.find(opener, 0, first) >= 0 for opener in _NATIVE_OPENERS)


def _json_calls(text: str) -> list[Call] | None:
    """The calls of the answer's JSON (or its Mistral, Llama or pythonic form: see the module's
    docstring); None when it makes none.

    Raises:
        ValueError: the JSON is not valid tool calls.
    """
    text = _without_end_of_turn(text)
    marker = text.find(_MISTRAL_MARKER)
    marked = marker >= 0
    if marked:
        if _MISTRAL_V11.match(text, marker + len(_MISTRAL_MARKER)):  # "[TOOL_CALLS]name[ARGS]{...}"
            return _mistral_v11_calls(text[marker:])
        text = text[text.rfind(_MISTRAL_MARKER) + len(_MISTRAL_MARKER) :]
    elif (tag := text.find(_PYTHON_TAG)) >= 0:  # Llama: "<|python_tag|>{...}"
        marked = True
        text = text[tag + len(_PYTHON_TAG) :]
    elif text.lstrip().startswith(_PYTHON_START):  # Llama 4: "<|python_start|>[f(x=1)]<|python_end|>"
        text = text.lstrip()[len(_PYTHON_START) :].partition(_PYTHON_END)[0]
    raw = json_in_answer(text, "auto")  # (text is the answer already: one pass over the reasoning)
    if raw and raw[0] not in "[{":
        raw = _last_fenced_json(raw) or raw  # a bare ``` fence (or one tagged otherwise) holding JSON
    if not raw or raw[0] not in "[{":
        return None
    try:
        value = _loads(raw)
    except ValueError:
        value = _json_objects(raw, lines=True)  # Llama 3.x's parallel calls: "{...}; {...}", one a line
        if value is None and marked:  # the call the marker opens, then text (vLLM reads the value alone)
            value = _first_json_value(raw)
        if value is None:  # pythonic calls, "[f(x=1)]", or prose that happens to start with a bracket
            return _pythonic_calls(raw) if not marked else None
    if not marked and not _call_shaped(value):
        return None  # a JSON answer (no call tags, no marker, nothing named): no call was made
    calls = _calls(value)
    return calls or None


def _first_json_value(text: str) -> Any:
    """The JSON value ``text`` starts with, whatever text follows it (nested up to :data:`_MAX_DEPTH`);
    None when it starts with none. After Mistral's ``[TOOL_CALLS]`` or Llama's ``<|python_tag|>`` the
    model has committed to a call: vLLM's mistral and llama3_json parsers read the value there and
    leave the text after it (``[TOOL_CALLS] [{...}]\nsome more words``) as content, the call made."""
    try:
        value = _JSON_DECODER.raw_decode(text)[0]
    except (ValueError, RecursionError):
        return None
    return None if _depth(value) > _MAX_DEPTH else value


def _without_end_of_turn(text: str) -> str:
    """``text`` without the end-of-turn tokens it ends with (:data:`_END_OF_TURN`; up to
    :data:`_MAX_END_TOKENS`), kept in a rollout decoded with its special tokens: after them the JSON was
    no whole value, the call none."""
    end = len(text.rstrip())
    for _ in range(_MAX_END_TOKENS):
        token = next((t for t in _END_OF_TURN if text.endswith(t, 0, end)), None)
        if token is None:
            break
        end = len(text[: end - len(token)].rstrip())
    return text[:end]


def _bare_qwen3_shaped(text: str) -> bool:
    """Whether ``text`` may hold Qwen3-Coder's functions without their block: no ``<tool_call>`` in it,
    and its first ``<function=`` starts a line (as the model writes it). One inside a JSON string (a
    call writing a file that holds such text) does not, and is no call of its own."""
    first = text.find(QWEN3_FUNCTION)
    if first < 0 or _OPEN in text:
        return False
    return not text[text.rfind("\n", 0, first) + 1 : first].strip()


def _special_token_calls(text: str) -> list[Call] | None:
    """The calls DeepSeek (``<｜tool▁call▁begin｜>``), Kimi-K2 (``<|tool_call_begin|>``), Kimi K3 (its
    ``<|open|>tools<|sep|>`` channel) or gpt-oss (a harmony message ``to=`` a function) write with special
    tokens; None when the text has none. A last call without its end token counts when its arguments
    are whole JSON (a rollout stopped at the token), as a ``<tool_call>`` block does (K3's: a call cut
    off before its closer is none).

    Raises:
        ValueError: a call in such a form that is not a valid call.
    """
    if KIMI_K3_TOOLS in text:  # (typed arguments, read as DSML's are)
        typed = kimi_k3_calls(text, _MAX_CALLS)
        strings = [{k: t == "string" for k, t in types.items()} for _, _, types in typed]
        return [
            _invoke_call(name, args, s) for (name, args, _), s in zip(typed, strings, strict=True)
        ] or None
    if DEEPSEEK_CALL in text:
        found = deepseek_calls(text, _MAX_CALLS)
    elif KIMI_CALL in text:
        found = kimi_calls(text, _MAX_CALLS)
    elif HARMONY_MESSAGE in text:
        found = harmony_calls(text, _MAX_CALLS)
    else:
        return None
    calls: list[Call] = []
    for name, args, closed in found:
        try:
            calls.append(_call({"name": name, "arguments": args}))
        except _Malformed:
            if closed:
                raise
    return calls or None


def _invoke_block_calls(text: str) -> list[Call] | None:
    """The calls of MiniMax-M2's ``<minimax:tool_call>``, DeepSeek V3.2's ``<｜DSML｜function_calls>`` or
    DeepSeek V4's ``<｜DSML｜tool_calls>`` blocks of ``<invoke name="f">`` elements; None when the text has
    no such block.

    Raises:
        ValueError: a block that is not whole invokes.
    """
    if MINIMAX_M3 in text and (m3 := minimax_m3_calls(text, _MAX_CALLS)) is not None:
        return [_m3_call(name, args) for name, args in m3]
    for form in (MINIMAX, DSML, DSML_V4):
        if form.block in text and (found := invoke_calls(text, form, _MAX_CALLS)) is not None:
            return [_invoke_call(name, args, strings) for name, args, strings in found]
    return None


def _m3_call(name: str, raw: dict[str, Any]) -> Call:
    """A MiniMax-M3 call: each argument's text read as Qwen3-Coder's are (a JSON value, and also the
    string it spells), its nested tags as the object or array they make, their texts read so too."""
    plain = _xml_call(name, {k: v for k, v in raw.items() if isinstance(v, str)}, strings=False)
    args = {k: plain.arguments[k] if isinstance(v, str) else _m3_nested(v) for k, v in raw.items()}
    return Call(name, args, plain.texts)


def _m3_nested(value: Any) -> Any:
    """A nested M3 argument with each text in it read as a JSON value where it is one."""
    if isinstance(value, str):
        return _xml_value(value)
    if isinstance(value, list):
        return [_m3_nested(v) for v in value]
    return {k: _m3_nested(v) for k, v in value.items()}


def _invoke_call(name: str, raw: dict[str, str], strings: dict[str, bool]) -> Call:
    """An invoke's call: a value its parameter says is a string (DSML's ``string="true"``) is the text as
    written, one it says is not (``"false"``) the JSON value it is (else the text), and one that says
    nothing is read as Qwen3-Coder's are (:func:`_xml_call`: a JSON value, and also the string it spells)."""
    plain = _xml_call(name, {k: v for k, v in raw.items() if k not in strings}, strings=False)
    args: dict[str, Any] = {}
    for key, value in raw.items():  # (in the order written)
        if key in strings:
            args[key] = value if strings[key] else _xml_value(value)
        else:
            args[key] = plain.arguments[key]
    return Call(name, args, plain.texts)


def _block_calls(block: str, closed: bool = True) -> list[Call]:
    """The calls of a ``<tool_call>`` block: one call, a list of them, or one call a line (ToolRL), or
    Qwen3-Coder's XML (a body that starts with ``<function=``), or GLM-4.5+'s call (a name, then
    ``<arg_key>``/``<arg_value>`` pairs). A block not ``closed`` by its ``</tool_call>`` is no GLM call:
    nothing in that form marks its end, so a cut one would read as whole.

    Raises:
        ValueError: the block is none of these.
    """
    if block.lstrip().startswith(QWEN3_FUNCTION):  # (no JSON or Python literal starts so)
        return [_xml_call(name, args, strings=False) for name, args in qwen3_coder_calls(block, closed)]
    if glm45_shaped(body := block.strip()):
        if not closed:
            raise _Malformed("a GLM call without its </tool_call> may be cut off")
        name, args = glm45_call(body)
        return [_xml_call(name, args, strings=True)]
    try:
        return _calls(_loads(block))
    except ValueError:
        objects = _json_objects(block, lines=True)
        if objects is None:
            objects = _python_literal(block)
        if objects is None:
            raise
    return _calls(objects)


def _xml_call(name: str, raw: dict[str, str], strings: bool) -> Call:
    """A call of an XML form: each value read by :func:`_xml_value`, and the text of each read as
    another value than that text kept (a ``94103`` is the string "94103" to a tool whose schema says so)."""
    args = {k: _xml_value(v, strings) for k, v in raw.items()}
    return Call(name, args, {k: raw[k] for k, v in args.items() if not isinstance(v, str)})


def _xml_value(raw: str, strings: bool = False) -> Any:
    """A parameter's value written as raw text (the XML forms): the JSON value it is when it is a number,
    ``true``/``false``, ``null``, an object or an array (or, ``strings``, GLM's reader: also a JSON
    string, ``"Paris"`` unquoted, and a Python literal, ``['a', 'b']``, ``True``, as vLLM's glm45 parser
    falls back to ``ast.literal_eval``), else the text itself. The call carries no schema to say which
    parameter is a string (vLLM reads them by the tool's schema), so ``3`` is 3 and ``Paris`` a string."""
    try:
        value = _loads(raw)
    except ValueError:  # (not JSON, or nested past the bound: the text, or GLM's Python literal)
        return _literal_value(raw) if strings else raw
    return raw if isinstance(value, str) and not strings else value


def _literal_value(raw: str) -> Any:
    """``raw`` as the Python literal it writes, as a JSON value (up to :data:`_MAX_LITERAL_CHARS`, nested
    up to :data:`_MAX_DEPTH`, and up to :data:`_MAX_LITERAL_TOTAL` read in the response), else ``raw``
    itself."""
    budget = _literal_budget.get()
    if len(raw) > _MAX_LITERAL_CHARS or (budget is not None and len(raw) > budget[0]):
        return raw
    if budget is not None:
        budget[0] -= len(raw)
    try:
        value = _as_json(ast.literal_eval(raw.strip()))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return raw
    return raw if _depth(value) > _MAX_DEPTH else value


def _python_literal(text: str) -> Any:
    """A block written as a Python literal, ``{'arguments': {...}, 'name': ...}`` (Hermes 2 Pro's prompt
    and data; its reader falls back to ``ast.literal_eval``), as JSON values; None when it is not one
    (or is longer than :data:`_MAX_LITERAL_CHARS`, or holds values JSON has no equal of)."""
    if len(text) > _MAX_LITERAL_CHARS:
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None  # (MemoryError: the parser's stack overflowing on deep nesting, not the host's memory)
    if not isinstance(value, dict | list) or _depth(value) > _MAX_DEPTH:
        return None
    try:
        return _as_json(value)
    except ValueError:
        return None


def _pythonic_calls(text: str) -> list[Call] | None:
    """The calls of a Python list of calls, ``[get_weather(city="Paris"), math.factorial(n=5)]`` (Llama
    3.2 and 4's pythonic format, ToolACE, BFCL's prompting mode; vLLM's pythonic parser), keyword
    arguments as Python literals; None when the text is no such list (up to :data:`_MAX_LITERAL_CHARS`).

    Raises:
        ValueError: a call in the list is not a function called with literal keyword arguments.
    """
    if len(text) > _MAX_LITERAL_CHARS:
        return None
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    elts = body.elts if isinstance(body, ast.List) else []
    nodes = [e for e in elts if isinstance(e, ast.Call)]
    if not nodes or len(nodes) < len(elts):  # (not a list of calls: a list of values, a comprehension)
        return None
    if len(nodes) > _MAX_CALLS:
        raise _Malformed(f"more than {_MAX_CALLS} tool calls")
    calls: list[Call] = []
    for node in nodes:
        name = _dotted_name(node.func)
        if name is None or node.args or any(k.arg is None for k in node.keywords):
            raise _Malformed(
                f"the call {ast.unparse(node.func)[:80]!r} is not a function given keyword arguments"
            )
        args: dict[str, Any] = {}
        for k in node.keywords:
            try:
                value = _as_json(ast.literal_eval(k.value))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise _Malformed(f"the argument {k.arg!r} of {name[:80]!r} is not a literal") from None
            if _depth(value) > _MAX_DEPTH:
                raise _Malformed(
                    f"the arguments of {name[:80]!r} are nested more than {_MAX_DEPTH} levels deep"
                )
            args[str(k.arg)] = value
        calls.append(Call(name, args))
    return calls


def _dotted_name(node: ast.expr) -> str | None:
    """``f`` or ``math.factorial``: a function's (dotted) name; None for any other callee."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted_name(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _as_json(value: Any) -> Any:
    """A Python literal as the JSON value it writes (tuples as arrays); ValueError for one it is not."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("an infinite number is not JSON")
        return value
    if isinstance(value, list | tuple):
        return [_as_json(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _as_json(v) for k, v in value.items()}
    raise ValueError(f"a {type(value).__name__} is not JSON")


def _json_objects(text: str, lines: bool) -> list[Any] | None:
    """The JSON objects of ``{...}; {...}`` (two or more, the whole text), as Llama 3.x writes parallel
    calls and vLLM's llama3_json parser reads them, or, ``lines``, also of objects one after the other
    (one a line, as ToolRL writes them in a block and Llama 3.x its parallel calls); None when the
    text is not that."""
    values: list[Any] = []
    at = len(text) - len(text.lstrip())
    while True:
        try:
            value, at = _JSON_DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict) or _depth(value) > _MAX_DEPTH:
            return None
        values.append(value)
        if len(values) > _MAX_CALLS:  # (too many calls: format, when they are calls)
            return values
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return values if len(values) > 1 else None
        if text[at] == ";":
            at += 1
        elif not lines:
            return None
        while at < len(text) and text[at].isspace():
            at += 1


def _last_fenced_json(text: str) -> str | None:
    """The text of the last closed ``` fence, whatever its tag, that starts with ``[`` or ``{``."""
    block: list[str] | None = None
    last: str | None = None
    for line in text.splitlines():
        if block is None:
            if line.strip().startswith("```"):
                block = []
        elif line.strip().startswith("```"):
            body = "\n".join(block).strip()
            if body[:1] in ("[", "{"):
                last = body
            block = None
        else:
            block.append(line)
    return last


_CALL_KEYS = (
    "name",
    "function",
    "tool_calls",
    "calls",
    "arguments",
    "parameters",
    "function_call",
    "tool_call",
    "functionCall",
)


def _call_shaped(value: Any) -> bool:
    """Whether a JSON value is a call attempt: an object, or a list holding one, with a call's keys."""
    items = value if isinstance(value, list) else [value]
    if isinstance(value, dict) and (blocks := _turn_blocks(value)) is not None:
        items = [value, *blocks]  # (a message's content blocks, or Gemini's parts)
    return any(isinstance(v, dict) and any(k in v for k in _CALL_KEYS) for v in items)


def reference_calls(reference: Any) -> list[Call] | None:
    """The reference's calls (possibly none: "call no tool"), or None when it is not a call reference."""
    if isinstance(reference, str):
        try:
            reference = _loads(reference)
        except ValueError:
            return _text_reference(reference)
    if not isinstance(reference, dict | list):
        return None
    try:
        return _calls(reference)
    except _Malformed:
        return None


def _text_reference(text: str) -> list[Call] | None:
    """The calls of a reference written as the assistant's text, read as a response's are
    (:func:`parse_calls`): ``<tool_call>`` blocks (Hermes function-calling data, ToolRL's ground truth),
    pythonic calls (ToolACE's data), or a model's native form (a DeepSeek, Kimi, gpt-oss, MiniMax or
    Qwen3-Coder transcript: SFT data in the chat template's own text); blocks of empty lists call no
    tool; None when it has no call or its calls are broken."""
    try:
        calls = parse_calls(text)
    except ValueError:
        return None
    if calls is None:  # (parse_calls: blocks of empty lists call nothing, a reference's "call no tool")
        return [] if _blocks(_model_output(text)[0]) else None
    return calls


def bfcl_reference(reference: Any) -> list[Call] | None:
    """The calls of a BFCL possible answer (``reference_format: "bfcl"``), or None when it is not one.

    BFCL's ``possible_answer`` files give each item's ``ground_truth``: a list of calls, each a one-key
    object ``{"func_name": {"arg": [value, ...]}}`` whose argument lists hold every acceptable value, ``""``
    among them for an argument that may be left out. Read here: that list (also as a JSON string), one such
    call alone, or the file's line ``{"id": ..., "ground_truth": [...]}``; ``[]`` calls no tool. An
    argument listing no value (``[]``: two of BFCL v4's items) is one no value satisfies, given or left
    out, as BFCL's checker finds it (no value is in the list, and ``""`` is not). Anything else (a call
    object, an argument whose values are not a list, a call object of several functions) is none: the
    reference format is chosen in the config, never guessed from the shape."""
    if isinstance(reference, str):
        try:
            reference = _loads(reference)
        except ValueError:
            return None
    if isinstance(reference, dict) and isinstance(reference.get("ground_truth"), list):
        reference = reference["ground_truth"]  # (a function's arguments are an object: no call named so)
    items = reference if isinstance(reference, list) else [reference]
    if len(items) > _MAX_CALLS:
        return None
    calls: list[Call] = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            return None
        [(name, arguments)] = item.items()
        if not name or not isinstance(arguments, dict):
            return None
        if not all(isinstance(values, list) for values in arguments.values()):
            return None
        calls.append(_Possible(name, arguments))
    return calls


def declared_defaults(reference: Any) -> dict[str, dict[str, Any]]:
    """The defaults the tools of a reference ``{"calls": [...], "tools": [...]}`` declare, by function and
    argument (``omit_defaults``): each tool OpenAI's ``{"type": "function", "function": {...}}`` or bare
    ``{"name", "parameters"}`` (Anthropic's ``input_schema`` too), a default its
    ``parameters.properties.<arg>.default``; none for any other reference or tool."""
    if isinstance(reference, str) and reference.lstrip().startswith("{"):
        try:
            reference = _loads(reference)
        except ValueError:
            return {}
    tools = reference.get("tools") if isinstance(reference, dict) else None
    defaults: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            tool = tool["function"]
        if not isinstance(tool, dict) or not isinstance(name := tool.get("name"), str):
            continue
        schema = tool.get("parameters", tool.get("input_schema"))
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(properties, dict):
            declared = {
                k: p["default"] for k, p in properties.items() if isinstance(p, dict) and "default" in p
            }
            if declared:
                defaults.setdefault(name, {}).update(declared)
    return defaults


def _without_defaults(
    calls: list[Call], defaults: dict[str, dict[str, Any]], cfg: ToolCallConfig
) -> list[Call]:
    """The calls without the arguments equal to their declared defaults (as :func:`_argument_equal` compares
    values: an XML-form argument also by the text it was written as)."""
    normalized, tol, coerce = cfg.string_match == "normalized", _tolerance(cfg), cfg.coerce_types

    def is_default(call: Call, key: str, default: Any) -> bool:
        if values_equal(call.arguments[key], default, tol, normalized, coerce):
            return True
        return key in call.texts and values_equal(call.texts[key], default, tol, normalized, coerce)

    out: list[Call] = []
    for call in calls:
        declared = defaults.get(call.name, {})
        dropped = {k for k, d in declared.items() if k in call.arguments and is_default(call, k, d)}
        if dropped:
            args = {k: v for k, v in call.arguments.items() if k not in dropped}
            call = Call(call.name, args, {k: t for k, t in call.texts.items() if k not in dropped})
        out.append(call)
    return out


# BFCL's checker compares strings lowercased, without spaces and these marks ("April 1, 2024" is
# "april 1 2024"), a single quote read as a double one
_BFCL_DROPPED = re.compile(r"[ ,./\-_*^]")


def _bfcl_string(text: str, normalized: bool) -> str:
    if normalized:  # (string_match normalized: also casefolded and Unicode NFC, whitespace collapsed)
        text = _folded(text)
    return _BFCL_DROPPED.sub("", text).lower().replace("'", '"')


def _omissible(values: Any, cfg: ToolCallConfig) -> bool:
    """Whether a BFCL argument's acceptable values let it be left out: ``""`` among them (or, with
    ``null_as_absent``, ``null``)."""
    return isinstance(values, list) and any(_is_mark(v) or (v is None and cfg.null_as_absent) for v in values)


def _bfcl_accepts(got: Any, values: Any, cfg: ToolCallConfig, typed: bool = True) -> bool:
    """Whether ``got`` is one of a BFCL argument's acceptable ``values`` (a list of them; anything else, in a
    nested object of a possible answer, the one value accepted); ``typed``: :func:`_bfcl_equal`'s."""
    if not isinstance(values, list):
        return _bfcl_equal(got, values, cfg, typed)
    return any(_bfcl_equal(got, want, cfg, typed) for want in values)


def _bfcl_argument_accepts(got: Any, values: list[Any], cfg: ToolCallConfig) -> bool:
    """Whether ``got``, given for an argument of a BFCL possible answer's call, is one of its acceptable
    ``values``, as BFCL's checker decides it: the parameter's type first, then the value. The type is the
    one the listed values say (the first that is not ``""`` or null: BFCL's ``get_possible_answer_type``;
    the possible answer carries no declared one): ``""``, the optional mark, is a value a string parameter
    takes (its listed strings hold it) and a type error for any other, so it is dropped from an integer's,
    a float's, a boolean's, an array's or an object's values; an array's take ``[]`` instead (BFCL's list
    checker reads the mark as an empty list). Values that say no type (``""`` alone, null and ``""``) keep
    it."""
    kind = next((type(v) for v in values if v is not None and not _is_mark(v)), None)
    if kind is not None and kind is not str:
        typed = [v for v in values if not _is_mark(v)]
        if kind is list and len(typed) < len(values):
            typed.append([])
        values = typed
    arrays = [v for v in values if isinstance(v, list)]
    if isinstance(got, list) and arrays and all(_ints_for_floats(got, a) for a in arrays):
        return False
    return _bfcl_accepts(got, values, cfg)


def _ints_for_floats(got: list[Any], listed: list[Any]) -> bool:
    """Whether an array argument's items hold an integer where the listed array's items are floats (its
    first that is not ``""``: BFCL's type for them): BFCL's nested type check finds that a type error, as
    Python's int-to-float it applies to an argument's own value only (``[2]`` is no value of ``[2.0]``)."""
    kind = next((type(v) for v in listed if not _is_mark(v)), None)
    return kind is float and any(type(g) is int for g in got)


def _is_mark(value: Any) -> bool:
    """Whether ``value`` is a BFCL possible answer's optional mark, ``""``."""
    return isinstance(value, str) and value == ""


def _bfcl_equal(got: Any, want: Any, cfg: ToolCallConfig, typed: bool = True) -> bool:
    """``got`` against one acceptable value, as BFCL's checker compares them: strings standardised, lists
    element by element in order, an object against an object whose keys each list their acceptable values
    (a key given that it lacks is extra; one it has that is not given must be omissible), any other value
    as :func:`values_equal` compares it (an integer equals the float it is, ``true`` is not ``1``), except
    that, ``typed`` (an argument, or an item of an array argument: BFCL's checker checks their types), a
    float is no value of an integer one (5.0 for 5: a type error), and not ``typed`` (a value inside an
    object: BFCL's dict checker checks no type and compares with Python's ``==``) a string is standardised
    and any other value equal as Python finds it (``true`` = ``1``; a list or object as it is), as is an
    array that is an array's item (BFCL's list checker standardises the array's own strings only)."""
    normalized = cfg.string_match == "normalized"
    if isinstance(got, str) and isinstance(want, str):
        return _bfcl_string(got, normalized) == _bfcl_string(want, normalized)
    if not typed:
        # a value of an object's key: BFCL's dict checker compares it with Python's == (a string
        # standardised, above): true is 1, 1.0 is 1, a list or object in it as it is (its strings exact,
        # an object's values not read as lists of acceptable ones)
        return values_equal(got, want, _tolerance(cfg), normalized, cfg.coerce_types, python_bools=True)
    if isinstance(got, list) and isinstance(want, list):
        # (an array's items: BFCL type-checks them, one level deep, and compares an array in it with ==)
        return len(got) == len(want) and all(
            _bfcl_equal(g, w, cfg, not isinstance(g, list)) for g, w in zip(got, want, strict=True)
        )
    if isinstance(got, dict) and isinstance(want, dict):
        return all(k in want and _bfcl_accepts(v, want[k], cfg, typed=False) for k, v in got.items()) and all(
            k in got or _omissible(values, cfg) for k, values in want.items()
        )
    if typed and isinstance(got, float) and isinstance(want, int) and not isinstance(want, bool):
        return False
    return values_equal(got, want, _tolerance(cfg), normalized, cfg.coerce_types)


def _bfcl_credit(pred: Call, ref: Call, cfg: ToolCallConfig) -> float:
    """A predicted call's credit against a BFCL possible answer's call: the share of argument keys (the
    predicted ones and the reference's that may not be left out) given one of their acceptable values."""
    if pred.name != ref.name:
        return 0.0
    required = {k for k, values in ref.arguments.items() if not _omissible(values, cfg)}
    keys = pred.arguments.keys() | required
    if not keys:
        return 1.0
    same = 0
    for key, got in pred.arguments.items():
        if key not in ref.arguments:
            continue
        values = ref.arguments[key]
        if _bfcl_argument_accepts(got, values, cfg) or (
            key in pred.texts and _bfcl_argument_accepts(pred.texts[key], values, cfg)
        ):
            same += 1
    return same / len(keys)


def _tolerance(cfg: ToolCallConfig) -> float:
    """The float tolerance: the config's, or unset, 0 for ``reference_format: "bfcl"`` (BFCL's checker
    compares numbers with ``==``: 2.5000001 is not 2.5) and :data:`_FLOAT_TOLERANCE` otherwise."""
    if cfg.float_tolerance is not None:
        return cfg.float_tolerance
    return 0.0 if cfg.reference_format == "bfcl" else _FLOAT_TOLERANCE


def _folded(text: str) -> str:
    """``text`` as ``string_match: normalized`` compares it: Unicode's canonical caseless form (NFD, casefold,
    then NFC: "é" as one code point or as "e" and a combining accent are one spelling, and a casefold that
    decomposes stays comparable), whitespace runs one space. Canonical, not compatibility (NFKC): "m²" and
    "m2", "½" and "1/2", a full-width "１" and "1" are other values, not other spellings of one."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFD", text).casefold())
    return " ".join(folded.split())


def values_equal(
    got: Any, want: Any, tol: float, normalized: bool, coerce: bool = False, python_bools: bool = False
) -> bool:
    """JSON equality with a numeric tolerance (and, ``normalized``, folded strings); bools are not numbers
    unless ``python_bools`` (then, as Python's ``==`` has it, ``true`` is ``1`` and ``false`` ``0``).
    ``coerce``: a string equals the number or boolean it spells, ``"10"`` = 10, ``"true"`` = true (the JSON
    text of an object or array is read before, per call: :func:`_comparable`)."""
    if coerce and isinstance(got, str) != isinstance(want, str):
        got, want = _spelled(got, want), _spelled(want, got)
    if python_bools:
        got, want = (int(v) if isinstance(v, bool) else v for v in (got, want))
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and got == want
    if isinstance(want, int | float) and isinstance(got, int | float):
        if isinstance(want, int) and isinstance(got, int):
            return got == want
        if isinstance(want, int) or isinstance(got, int):
            # an integer and a float: equal only when the float rounds to it (then within the tolerance).
            # The tolerance is relative, so without this a float within 1e-6 of an id or a timestamp
            # (1700000500.0 for 1700000000) equalled it, where the integer 1700000500 does not
            whole, other = (want, got) if isinstance(want, int) else (got, want)
            if not math.isfinite(other) or round(other) != whole:
                return False
        try:
            x, y = float(got), float(want)
        except OverflowError:  # an integer past a float's range: no float is within tolerance of it
            return False
        return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= tol * max(1.0, abs(y))
    if isinstance(want, str) and isinstance(got, str):
        if normalized:
            return _folded(got) == _folded(want)
        return got == want
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(
            values_equal(g, w, tol, normalized, coerce, python_bools) for g, w in zip(got, want, strict=True)
        )
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(
            values_equal(got[k], want[k], tol, normalized, coerce, python_bools) for k in want
        )
    return got is None and want is None


# a number as a string spells it (JSON's grammar), and no longer than a float's repr or an id
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_NUMBER_CHARS = 64


def _spelled(value: Any, like: Any) -> Any:
    """``value``, when it is a string spelling a number (``like`` is one) or a boolean (``like`` is one),
    as that number or boolean; else ``value`` unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if isinstance(like, bool):
        return {"true": True, "false": False}.get(text.casefold(), value)
    if isinstance(like, int | float) and len(text) <= _MAX_NUMBER_CHARS and _NUMBER.fullmatch(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    return value


def _comparable(calls: list[Call], cfg: ToolCallConfig) -> list[Call]:
    """The calls as they are compared: without their null arguments (``null_as_absent``), and with every
    string that is the JSON text of an object or array read as that value (``coerce_types``; once per
    call, not per pair: a long string would be read again against every call it is paired with)."""
    if not (cfg.null_as_absent or cfg.coerce_types):
        return calls
    out: list[Call] = []
    for call in calls:
        if isinstance(call, _Possible):  # (its lists of acceptable values are read as they are)
            out.append(call)
            continue
        args = call.arguments
        if cfg.null_as_absent:
            args = {k: v for k, v in args.items() if v is not None}
        if cfg.coerce_types:
            args = {k: _decoded(v) for k, v in args.items()}
        out.append(Call(call.name, args, call.texts))
    return out


def _decoded(value: Any) -> Any:
    """``value`` with each string in it that is the JSON text of an object or array replaced by that value
    (strings inside what was decoded are left as they are: one level of encoding, as parsers add it)."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] not in ("{", "["):
            return value
        try:
            decoded = _loads(text)
        except ValueError:
            return value
        return decoded if isinstance(decoded, dict | list) else value
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    return value


def _credit(pred: Call, ref: Call, cfg: ToolCallConfig) -> float:
    if isinstance(ref, _Possible):
        return _bfcl_credit(pred, ref, cfg)
    if pred.name != ref.name:
        return 0.0
    keys = pred.arguments.keys() | ref.arguments.keys()
    if not keys:
        return 1.0
    same = sum(1 for k in ref.arguments.keys() & pred.arguments.keys() if _argument_equal(pred, ref, k, cfg))
    return same / len(keys)


def _argument_equal(pred: Call, ref: Call, key: str, cfg: ToolCallConfig) -> bool:
    """Whether the calls' argument ``key`` is equal: as values, or (an XML-form argument) as the text it
    was written as against the other side's string: ``<parameter=zip>94103`` is 94103 and "94103"."""
    normalized, tol, coerce = cfg.string_match == "normalized", _tolerance(cfg), cfg.coerce_types
    got, want = pred.arguments[key], ref.arguments[key]
    if values_equal(got, want, tol, normalized, coerce):
        return True
    if key not in pred.texts and key not in ref.texts:
        return False
    return values_equal(pred.texts.get(key, got), ref.texts.get(key, want), tol, normalized, coerce)


def _pair(preds: list[Call], refs: list[Call], cfg: ToolCallConfig) -> list[float]:
    """The credits of the reference/predicted pairs: position by position, or the pairing with the best
    total credit (greedily, best pair first, past :data:`_OPTIMAL_PAIRING_WORK`). With ``reference_format:
    "bfcl"`` the calls that match are paired first as BFCL's parallel checker pairs them: each reference
    call in turn with the first predicted call not yet paired that it accepts whole, though another
    pairing could match them all (then not every call matches: exact 0, as BFCL scores it); the calls
    left are paired for the best total credit (partial mode's, as BFCL has none)."""
    if cfg.order == "strict":
        return [_credit(p, r, cfg) for p, r in zip(preds, refs, strict=False)]
    credit = [[_credit(p, r, cfg) for r in refs] for p in preds]
    if not credit or not refs:
        return []
    if cfg.reference_format != "bfcl":
        return _best_credits(credit)
    paired: list[float] = []
    left_p = list(range(len(preds)))
    left_r: list[int] = []
    for j in range(len(refs)):
        i = next((i for i in left_p if credit[i][j] == 1.0), None)
        if i is None:
            left_r.append(j)
        else:
            left_p.remove(i)
            paired.append(1.0)
    if left_p and left_r:
        paired += _best_credits([[credit[i][j] for j in left_r] for i in left_p])
    return paired


def _best_credits(credit: list[list[float]]) -> list[float]:
    """The credits of the pairing of predicted (rows) and reference calls (columns) with the best total
    credit (greedily, best pair first, past :data:`_OPTIMAL_PAIRING_WORK`)."""
    n, m = min(len(credit), len(credit[0])), max(len(credit), len(credit[0]))
    if n * n * m <= _OPTIMAL_PAIRING_WORK:
        rows = credit if len(credit) <= len(credit[0]) else [list(col) for col in zip(*credit, strict=True)]
        return [rows[i][j] for i, j in _best_assignment(rows)]
    scored = sorted(
        ((credit[i][j], i, j) for i in range(len(credit)) for j in range(len(credit[0]))), key=lambda t: -t[0]
    )
    used_p: set[int] = set()
    used_r: set[int] = set()
    credits: list[float] = []
    for c, i, j in scored:
        if i in used_p or j in used_r:
            continue
        used_p.add(i)
        used_r.add(j)
        credits.append(c)
    return credits


def _best_assignment(weight: list[list[float]]) -> list[tuple[int, int]]:
    """The (row, column) pairs of a maximum-weight assignment of every row (rows <= columns): the
    Hungarian algorithm with potentials, O(rows^2 x columns)."""
    n, m = len(weight), len(weight[0])
    inf = math.inf
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    owner = [0] * (m + 1)  # owner[j]: the row (1-based) assigned to column j, 0 for none
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        owner[0] = i
        j0 = 0
        minv = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = owner[j0], inf, 0
            row, ui0 = weight[i0 - 1], u[owner[j0]]
            for j in range(1, m + 1):
                if not used[j]:
                    cur = -row[j - 1] - ui0 - v[j]  # minimising the negated credit
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if owner[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    return [(owner[j] - 1, j - 1) for j in range(1, m + 1) if owner[j]]


def _name_f1(preds: list[Call], refs: list[Call]) -> float:
    if not preds and not refs:
        return 1.0
    common = sum((Counter(c.name for c in preds) & Counter(c.name for c in refs)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(preds), common / len(refs)
    return 2 * precision * recall / (precision + recall)


@register
class ToolCallReward(Reward[ToolCallConfig]):
    name: ClassVar[str] = "tool_call"
    # 1.0.3: a call inside a <tool_response> block (a tool's output in a multi-turn transcript) is not read
    # 1.1.0: Qwen3-Coder's and GLM-4.5+'s XML calls, DeepSeek's and gpt-oss's special-token calls are read;
    # coerce_types and null_as_absent
    # 1.1.1: an XML value that reads as JSON (94103) also equals the reference's string it spells ("94103");
    # a gpt-oss message to its python tool (code, not JSON) is no call
    # 1.2.0: Kimi-K2's special-token calls, MiniMax-M2's <minimax:tool_call> and DeepSeek V3.2's DSML
    # blocks, and Qwen3-Coder's <function=...> without its <tool_call> (starting a line) are read
    # 1.2.1: a JSON call whose string argument quotes a special-token or invoke-block form is read as JSON
    # 1.3.0: DeepSeek V4's <｜DSML｜tool_calls> blocks are read; a call in gpt-oss's analysis messages (its
    # reasoning) or in a harmony message of another role (a tool's output) is none; a MiniMax/DSML parameter
    # without its closer is a broken call; a reference text is read in every form a response is; a closed
    # <tool_call> block ends its last Qwen3-Coder function left without </function>; a GLM value is stripped;
    # every turn of a transcript is read after its own reasoning (not the text after its last </think>);
    # Kimi K3's XTML calls are read; DeepSeek V4's calls right after its unclosed reasoning are read; a
    # special-token or invoke call opened before the first <tool_call> is read in its form; Llama 4's
    # <|python_start|> pythonic calls are read; a GLM value written as a Python literal is that value;
    # MiniMax-M3's namespaced calls are read
    # 1.3.1: GLM values are read as Python literals up to a bound for the whole response (past it, a value
    # that is no JSON is its text)
    # 1.3.2: a <tool_call> block of JSON whose string quotes </tool_call> ends at the closer after its JSON;
    # Kimi K3's markers with whitespace inside (<|open|> tools <|sep|>) are read
    # and a MiniMax-M3 leaf argument closed by its tag without the namespace token
    # 1.3.3: a <think>, </think> or <tool_response> quoted in a <tool_call> block's JSON string (or a
    # Qwen3-Coder, GLM, MiniMax-M2 or DSML value) is its text;
    # end-of-turn tokens after a JSON answer (a rollout decoded with its special tokens) are dropped
    # 1.3.4: the scans past a <tool_call> block's JSON strings charge their shared budget with all they
    # read, so a response read again for a quoted tag may give up a later block's scan sooner
    # 1.3.5: a <tool_call> block whose longer reading past a quoted closer is no JSON is charged the whole
    # window its scan read, so a later block's scan may be given up sooner
    # and a JSON answer of call objects one a line (Llama 3.x's parallel calls, as vLLM reads them) is read
    # and the JSON value after [TOOL_CALLS] or <|python_tag|> is read whatever text follows it
    # 1.3.6: a Kimi-K2 call whose id lacks its :INDEX (functions.invalid.0) is no call, as vLLM reads it
    # (it was a call named invalid.0)
    # 1.3.7: an integer and a float are equal only when the float rounds to the integer (1700000500.0 was
    # within the relative tolerance of the id 1700000000)
    # 1.3.8: string_match normalized also normalises Unicode canonically (NFC): a precomposed "é" equals "e"
    # and a combining accent (it scored 0)
    # 1.3.9: a call's arguments under "args" (LangChain, Gemini) or "input" (Anthropic's tool_use) are read
    # (they were dropped: a wrong call equalled a reference in the same shape), and Gemini's functionCall;
    # an OpenAI message with "tool_calls": null calls no tool (a reference: parse_error; a response: format);
    # reference_format "bfcl" reads BFCL's possible answers (they were parse_error), scored as its AST checker;
    # omit_defaults: an argument equal to its default, declared by the reference's tools, counts as not given
    # 1.4.0: underscore_to_dot (reference_format bfcl): a possible answer's dotted name is called with '_'
    # for each '.', as BFCL's function-calling models are shown it (math.factorial -> math_factorial);
    # a "" given matches the optional mark only for an argument whose listed values are strings (or say
    # no type), as BFCL type-checks it first, and an array's optional mark takes []; a float is no value of
    # an argument (or array item) listed as an integer (5.0 for [5]: BFCL's type error)
    # and an Anthropic, Responses API or Gemini turn's calls are read past its text, thinking and reasoning
    # blocks (a text block beside tool_use made the calls broken: format, parse_error)
    # 1.4.1: reference_format bfcl compares numbers exactly unless float_tolerance is set (BFCL's ==; the
    # default 1e-6 applied: 2.5000001 equalled a listed 2.5); an argument listing no value ([]) is read
    # (the possible answer was parse_error): no call satisfies it, as BFCL's checker finds; a value inside
    # an object compares with Python's == as BFCL's dict checker does (true = 1; a list or object in it as
    # it is, its strings exact: they were standardised, and an inner object read as acceptable values);
    # parallel calls are paired as BFCL pairs them, each reference call with the first predicted one it
    # accepts (the best pairing matched calls BFCL's order leaves unmatched), the rest for the best credit;
    # an integer item of an array argument listed with floats is a type error ([2] for [2.0], as BFCL finds);
    # an array in an array argument compares with Python's == (its strings exact, true = 1)
    version: ClassVar[str] = "1.4.1"
    description: ClassVar[str] = (
        "The response's tool calls (<tool_call> blocks or JSON) against the reference's: names and "
        "arguments as JSON values; exact (1/0) or partial per-argument credit."
    )
    config_model = ToolCallConfig

    async def score(
        self, items: Sequence[ScoreItem], config: ToolCallConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        pool = self.runtime.cpu_pool
        chars = sum(len(item.response) + _text_size(item.reference) for item in items)
        if chars > _INLINE_CHARS:
            # Reading the calls is linear but Python (a 1 MB response of nested arrays took ~1 s): a big
            # batch is read and paired in the CPU workers, each item under the request's deadline.
            done = await pool.run(score_in_worker, [(item, config) for item in items], ctx.deadline_s)
            return [r.value if r.ok else Outcome.pool_failure(r.error, r.message or r.error) for r in done]
        parsed = [self._parse(item, config) for item in items]
        pairs = sum(len(p[0]) * len(p[1]) for p in parsed if isinstance(p, tuple))
        if pairs <= _INLINE_PAIRS:
            return [p if isinstance(p, Outcome) else _compare(p[0], p[1], config) for p in parsed]
        # Pairing is pure Python, pairs x the size of their arguments (0.8 s an item of 256 calls against
        # 256): past the bound, the calls are paired in the CPU workers.
        todo = [(i, p) for i, p in enumerate(parsed) if isinstance(p, tuple)]
        results = await pool.run(compare_in_worker, [(p[0], p[1], config) for _, p in todo], ctx.deadline_s)
        out = [p if isinstance(p, Outcome) else Outcome.invalid(Reason.INTERNAL_ERROR) for p in parsed]
        for (i, _), r in zip(todo, results, strict=True):
            out[i] = r.value if r.ok else Outcome.pool_failure(r.error, r.message or r.error)
        return out

    @staticmethod
    def _parse(item: ScoreItem, config: ToolCallConfig) -> Outcome | tuple[list[Call], list[Call]]:
        """The item's predicted and reference calls, or its outcome when there is nothing to pair."""
        if item.reference is None:
            return Outcome.invalid(
                Reason.MISSING_REFERENCE, "tool_call needs the expected calls as reference"
            )
        if config.reference_format == "bfcl":
            refs = bfcl_reference(item.reference)
            if refs is None:
                return Outcome.invalid(
                    Reason.PARSE_ERROR,
                    'the reference is not a BFCL possible answer, [{"f": {"x": [acceptable values]}}]',
                )
            if config.underscore_to_dot:  # (BFCL's convert_func_name: every '.' of the name, '_')
                refs = [_Possible(r.name.replace(".", "_"), r.arguments) for r in refs]
        elif (refs := reference_calls(item.reference)) is None:
            hint = ""
            if bfcl_reference(item.reference) is not None:
                hint = ' (it is shaped as a BFCL possible answer: set reference_format: "bfcl")'
            return Outcome.invalid(
                Reason.PARSE_ERROR,
                "the reference is not a tool call, a list of them, or {'calls': [...]}" + hint,
            )
        try:
            preds = parse_calls(item.response)
        except ValueError as exc:
            return Outcome(0.0, Reason.FORMAT, components=dict(_EMPTY), details={"error": str(exc)[:300]})
        if preds is None:
            if not refs:  # "call no tool", and none was called
                return Outcome(1.0, components={"exact": 1.0, "name_f1": 1.0, "calls": 0.0})
            return Outcome(0.0, Reason.NO_ANSWER, components=dict(_EMPTY), details={"calls": []})
        # (a BFCL possible answer lists an argument's default among its values, "" with it: read as it is)
        if (
            config.reference_format == "calls"
            and config.omit_defaults
            and (defaults := declared_defaults(item.reference))
        ):
            preds, refs = (
                _without_defaults(preds, defaults, config),
                _without_defaults(refs, defaults, config),
            )
        return preds, refs


_EMPTY: dict[str, float | None] = {"exact": 0.0, "name_f1": 0.0, "calls": 0.0}
# A batch is paired on the event loop up to this many call pairs and response characters (about 0.3 s at
# worst); past either, in the CPU workers.
_INLINE_PAIRS = 50_000
_INLINE_CHARS = 200_000


def _compare(preds: list[Call], refs: list[Call], cfg: ToolCallConfig) -> Outcome:
    credits = _pair(_comparable(preds, cfg), _comparable(refs, cfg), cfg)
    exact = len(preds) == len(refs) and all(c == 1.0 for c in credits)
    score = (1.0 if exact else 0.0) if cfg.mode == "exact" else sum(credits) / max(len(preds), len(refs), 1)
    return Outcome(
        score,
        components={
            "exact": 1.0 if exact else 0.0,
            "name_f1": _name_f1(preds, refs),
            "calls": float(len(preds)),
        },
        details={"calls": [{"name": c.name, "arguments": c.arguments} for c in preds][:32]},
    )


def _text_size(reference: Any) -> int:
    return len(reference) if isinstance(reference, str) else 0


def score_in_worker(payload: tuple[ScoreItem, ToolCallConfig]) -> Outcome:
    """One item's outcome, read and paired in a CPU worker (module level: pickled by reference)."""
    item, config = payload
    parsed = ToolCallReward._parse(item, config)
    return parsed if isinstance(parsed, Outcome) else _compare(parsed[0], parsed[1], config)


def compare_in_worker(payload: tuple[list[Call], list[Call], ToolCallConfig]) -> Outcome:
    """One item's outcome, in a CPU worker (a module-level function: the pool pickles it by reference)."""
    return _compare(*payload)
