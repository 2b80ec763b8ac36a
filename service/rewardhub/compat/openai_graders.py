"""OpenAI grader JSON: ``POST /compat/openai/graders/run {grader, model_sample, item}``.

Graders are translated into rewardhub rewards (no scoring logic here):

* ``string_check`` → the ``string_check`` reward; ``text_similarity`` → ``text_similarity``;
* ``score_model`` → the ``score_model`` reward: the rendered messages go to the configured judge backend
  and the number it answers is the reward;
* ``python`` → the ``python_grader`` reward, which runs ``grade(sample, item)`` in the sandbox (when the
  sandbox is available);
* ``multi`` → each sub-grader as one item of a single request, then ``calculate_output`` with
  rewardhub's safe formula evaluator (never ``eval``).

Templates ``{{ sample.output_text }}``, ``{{ sample.output_json.<path> }}`` and ``{{ item.<path> }}``
are filled from the request. The answer has OpenAI's shape, ``{reward, metadata: {name, type, errors,
execution_time, scores, token_usage, sampled_model_name}, sub_rewards, model_grader_token_usage_per_model}``;
a failure is reported in ``metadata.errors`` with reward 0, as the hosted endpoint does, never as an
HTTP error.
"""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import BaseModel, Field, field_validator

from rewardhub import jsonutil
from rewardhub.formula import OPENAI_FUNCTIONS, Formula, FormulaError, FormulaEvalError, parse_formula
from rewardhub.protocol import RewardSpec, ScoreItem
from rewardhub.rewards.string_check import StringCheckConfig
from rewardhub.rewards.text_similarity import TextSimilarityConfig

__all__ = [
    "GraderError",
    "GraderRunRequest",
    "TemplateError",
    "error_flags",
    "flag_error",
    "plan_items",
    "render",
]

ERROR_KEYS = (
    "formula_parse_error",
    "invalid_variable_error",
    "model_grader_parse_error",
    "model_grader_refusal_error",
    "model_grader_server_error",
    "other_error",
    "python_grader_runtime_error",
    "python_grader_server_error",
    "sample_parse_error",
    "truncated_observation_error",
    "unresponsive_reward_error",
)

# A placeholder: a dotted name, or anything after the ``sample``/``item`` namespace up to ``}}`` (read by
# _path: dotted keys with any characters but ``.[]``, and ``[0]``/``["key"]`` subscripts).
_TEMPLATE = re.compile(r"\{\{\s*((?:sample|item)\b[^{}]*?|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}")
_PATH_STEP = re.compile(r"""\s*(?:\.([^.\[\]\s]+)|\[\s*(\d+)\s*\]|\[\s*(?:"([^"]*)"|'([^']*)')\s*\])""")
_PATH_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class GraderRunRequest(BaseModel):
    grader: dict[str, Any] = Field(
        description="An OpenAI grader object (type string_check, text_similarity, ...)."
    )
    model_sample: str = Field(description="The model's output for this item.")
    # OpenAI types it `unknown` and makes it optional: null (a client passing item=None) is no item
    item: Any = Field(default_factory=dict, description="The dataset row ({{item.*}} in templates).")

    @field_validator("item", mode="before")
    @classmethod
    def _no_item(cls, value: Any) -> Any:
        return {} if value is None else value


class TemplateError(ValueError):
    """A template names a variable the sample or item does not have."""


class GraderError(ValueError):
    """The grader object is malformed; ``flag`` is the OpenAI error key to set."""

    def __init__(self, message: str, flag: str = "other_error", kind: str | None = None):
        super().__init__(message)
        self.flag = flag
        self.kind = kind  # python_grader_server_error_type


# The detail fields of OpenAI's ``metadata.errors``: always present, null unless their flag is set.
DETAIL_KEYS = {
    "model_grader_server_error": "model_grader_server_error_details",
    "python_grader_runtime_error": "python_grader_runtime_error_details",
    "python_grader_server_error": "python_grader_server_error_type",
}


def error_flags(**set_: bool) -> dict[str, Any]:
    flags: dict[str, Any] = {key: bool(set_.get(key, False)) for key in ERROR_KEYS}
    flags.update(dict.fromkeys(DETAIL_KEYS.values()))
    return flags


def flag_error(flag: str, message: str, kind: str | None = None) -> dict[str, Any]:
    """``metadata.errors`` with ``flag`` set: OpenAI's own detail field for it (the message; for
    ``python_grader_server_error``, ``kind``: what failed), and ``<flag>_details`` with the message."""
    errors = error_flags(**{flag: True})
    if flag in DETAIL_KEYS:
        errors[DETAIL_KEYS[flag]] = (
            (kind or "server_error") if flag == "python_grader_server_error" else message
        )
    errors[f"{flag}_details"] = message
    return errors


def namespace(model_sample: str, item: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {"output_text": model_sample}
    try:
        sample["output_json"] = jsonutil.loads_exact(model_sample)  # big integers exact
    except (ValueError, RecursionError):
        pass
    return {"sample": sample, "item": item}


def render(template: Any, ns: dict[str, Any]) -> str:
    """Fill ``{{ a.b.c }}`` placeholders; a placeholder alone keeps nothing but the value's text."""
    if not isinstance(template, str):
        return "" if template is None else str(template)

    def lookup(match: re.Match[str]) -> str:
        parts = _path(match.group(1))
        if parts is None:
            raise TemplateError(f"template variable {match.group(1)!r} is not a variable path")
        value: Any = ns
        for part in parts:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise TemplateError(f"template variable {match.group(1)!r} is not in the sample or item")
        return value if isinstance(value, str) else jsonutil.dumps(value).decode()

    return _TEMPLATE.sub(lookup, template)


def _path(expr: str) -> list[str] | None:
    """``item.answers[0]`` / ``item["a-b"].c`` / ``sample.output_json.x`` as its keys (indices as digit
    strings); None when ``expr`` is not such a path."""
    head = _PATH_HEAD.match(expr)
    if head is None:
        return None
    parts, pos = [head.group()], head.end()
    while pos < len(expr):
        step = _PATH_STEP.match(expr, pos)
        if step is None:
            return None
        parts.append(next(g for g in step.groups() if g is not None))
        pos = step.end()
    return parts


def _messages(grader: dict[str, Any], ns: dict[str, Any]) -> list[dict[str, str]]:
    raw = grader.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": render(raw, ns)}]
    if not isinstance(raw, list):
        raise GraderError("score_model needs `input`: a list of messages")
    out = []
    for msg in raw:
        if not isinstance(msg, dict):
            raise GraderError("score_model input messages must be objects")
        out.append(
            {"role": str(msg.get("role", "user")), "content": render(_content_text(msg.get("content")), ns)}
        )
    return out


def _content_text(content: Any) -> Any:
    """A message's text: a string; one content part (``{"type": "input_text", "text": ...}``, which
    OpenAI accepts in place of a list); or a list of strings and parts. Parts without text (images,
    audio) have none to give a text judge."""
    if isinstance(content, dict):
        return _content_text([content])
    if isinstance(content, list):
        texts = (p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, str | dict))
        return "".join(t for t in texts if isinstance(t, str))
    return content


# the field of each grader that OpenAI requires besides input and reference, and the reward config
# field whose values it takes (another value is refused by that config, naming the choices)
_REQUIRED_CHOICE = {
    "string_check": ("operation", StringCheckConfig.model_fields["operation"]),
    "text_similarity": ("evaluation_metric", TextSimilarityConfig.model_fields["metric"]),
}


def grader_item(grader: dict[str, Any], ns: dict[str, Any], available: set[str]) -> ScoreItem:
    """One grader (not multi) as one rewardhub item with its reward spec."""
    kind = grader.get("type")
    if kind in ("string_check", "text_similarity"):
        # OpenAI requires both; one missing (misspelled) was compared as "", so every sample scored as
        # against a blank and /validate accepted the grader
        for key in ("input", "reference"):
            if not isinstance(grader.get(key), str):
                raise GraderError(f"a {kind} grader needs `{key}`: a string (a template)")
        # OpenAI requires these too; one missing (misspelled, "operator") was scored as eq / fuzzy_match,
        # perhaps not what was meant, and /validate accepted the grader
        key, choices = _REQUIRED_CHOICE[kind]
        if not isinstance(grader.get(key), str):
            raise GraderError(
                f"a {kind} grader needs `{key}`: one of {', '.join(get_args(choices.annotation))}"
            )
    if kind == "string_check":
        op = grader["operation"]
        return ScoreItem(
            response=render(grader["input"], ns),
            reference=render(grader["reference"], ns),
            # OpenAI's semantics: a blank reference is compared as written (the native default refuses it)
            reward=RewardSpec(name="string_check", config={"operation": op, "compare_blank_reference": True}),
        )
    if kind == "text_similarity":
        metric = grader["evaluation_metric"]
        return ScoreItem(
            response=render(grader["input"], ns),
            reference=render(grader["reference"], ns),
            # OpenAI's semantics: a blank reference is scored as written (the native default refuses it)
            reward=RewardSpec(
                name="text_similarity", config={"metric": metric, "compare_blank_reference": True}
            ),
        )
    if kind == "score_model":
        if "score_model" not in available:
            raise GraderError("score_model needs a model backend", "model_grader_server_error")
        rng = grader.get("range")
        rng = [0, 1] if rng is None else rng
        if not (isinstance(rng, list) and len(rng) == 2):
            raise GraderError(f"score_model `range` must be [low, high], not {jsonutil.dumps(rng).decode()}")
        config: dict[str, Any] = {"range": rng}
        sampling = grader.get("sampling_params") or {}
        if not isinstance(sampling, dict):
            raise GraderError("score_model `sampling_params` must be an object")
        for key in ("temperature", "max_tokens", "seed"):
            if key in sampling:
                config[key] = sampling[key]
        if sampling.get("max_completions_tokens") is not None:
            config["max_tokens"] = sampling["max_completions_tokens"]
        return ScoreItem(
            response=ns["sample"]["output_text"],
            reference={"messages": _messages(grader, ns)},
            reward=RewardSpec(name="score_model", config=config),
        )
    if kind == "python":
        if "python_grader" not in available:
            raise GraderError(
                "python graders need the sandbox (bubblewrap)", "python_grader_server_error", "unavailable"
            )
        source = grader.get("source")
        if not isinstance(source, str) or "def grade" not in source:
            raise GraderError(
                "a python grader needs `source` defining grade(sample, item)", "python_grader_runtime_error"
            )
        return ScoreItem(
            response=ns["sample"]["output_text"],
            reference={"source": source, "item": ns["item"]},
            reward="python_grader",
        )
    raise GraderError(f"unsupported grader type {kind!r}")


def plan_items(
    grader: dict[str, Any], ns: dict[str, Any], available: set[str]
) -> tuple[list[str], list[ScoreItem]]:
    """Names and items to score: one item for a plain grader, one per sub-grader for ``multi``."""
    if grader.get("type") == "multi":
        subs = grader.get("graders")
        if not isinstance(subs, dict) or not subs:
            raise GraderError("a multi grader needs `graders`: {name: grader}")
        names, items = [], []
        for name, sub in subs.items():
            if not isinstance(sub, dict):
                raise GraderError(f"sub-grader {name!r} must be an object")
            names.append(str(name))
            items.append(grader_item(sub, ns, available))
        return names, items
    return [str(grader.get("name", grader.get("type", "grader")))], [grader_item(grader, ns, available)]


def output_formula(grader: dict[str, Any], names: list[str]) -> Formula:
    """The multi grader's parsed ``calculate_output``: OpenAI's operators ``+ - * / ^`` (``^`` a power)
    and functions min, max, abs, floor, ceil, exp, sqrt, log over the sub-graders' names."""
    source = grader.get("calculate_output")
    if not isinstance(source, str):
        raise GraderError("a multi grader needs `calculate_output`", "formula_parse_error")
    try:
        return parse_formula(source, names, functions=OPENAI_FUNCTIONS, caret_is_power=True)
    except FormulaError as exc:
        raise GraderError(str(exc), "formula_parse_error") from None


def combine(grader: dict[str, Any], names: list[str], scores: dict[str, float]) -> float:
    """The multi grader's ``calculate_output`` over sub-grader scores (or the single score)."""
    if grader.get("type") != "multi":
        return scores[names[0]]
    formula = output_formula(grader, names)
    try:
        return float(formula.evaluate(scores))
    except FormulaEvalError as exc:
        raise GraderError(str(exc), "formula_parse_error") from None
