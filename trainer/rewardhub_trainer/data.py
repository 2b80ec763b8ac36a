"""Prompts and references: a seeded arithmetic word-problem generator and a JSONL dataset.

Both are *indexed* streams: ``problem(i)`` depends only on the seed and ``i``. The trainer's data
position is therefore one integer, and a resumed run sees exactly the prompts it would have seen (no
iterator state to pickle). The generator's answers are integers, checked by the service's ``math``
reward; the default prompt asks for ``\\boxed{}``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rewardhub_trainer.config import ArithmeticConfig, DataConfig

__all__ = [
    "ArithmeticProblems",
    "JsonlProblems",
    "Problem",
    "ProblemSource",
    "encode_prompt",
    "make_source",
    "render_prompt",
]

_NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo", "Kofi", "Lena"]
_THINGS = [
    "apples",
    "marbles",
    "stickers",
    "books",
    "coins",
    "pencils",
    "cards",
    "shells",
    "stamps",
    "cookies",
]


@dataclass(frozen=True)
class Problem:
    """One prompt: the question text and the reference answer the reward checks against."""

    index: int
    question: str
    # A string, or JSON for rewards that take structured references; None: no reference (the service
    # answers missing_reference, which the trainer masks).
    reference: str | dict[str, Any] | list[Any] | None


class ProblemSource(Protocol):
    def problem(self, index: int) -> Problem: ...


class ArithmeticProblems:
    """Arithmetic problems with difficulty knobs (operands, value range, operations, curriculum).

    Every problem is a left-to-right chain ``a op b op c ...`` whose intermediate results stay integral
    (``/`` is only drawn when it divides exactly) and, unless ``allow_negative``, non-negative, so the
    story ("gives away", "shares equally") always makes sense. With ``curriculum_steps = N`` the largest
    value and the operand count ramp linearly from their minimum to their maximum over the first N
    problems: early steps are easy, so a small model gets reward signal from the start.
    """

    def __init__(self, config: ArithmeticConfig):
        self.config = config

    def _limits(self, index: int) -> tuple[int, int]:
        c = self.config
        if c.curriculum_steps <= 0:
            return c.max_value, c.max_operands
        frac = min(1.0, index / c.curriculum_steps)
        hi_value = max(c.min_value + 1, round(c.min_value + frac * (c.max_value - c.min_value)))
        hi_ops = round(c.min_operands + frac * (c.max_operands - c.min_operands))
        return min(hi_value, c.max_value), hi_ops

    def problem(self, index: int) -> Problem:
        c = self.config
        rng = random.Random(f"{c.seed}:{index}")
        max_value, max_ops = self._limits(index)
        n = rng.randint(c.min_operands, max_ops)
        start = value = rng.randint(c.min_value, max_value)
        steps: list[tuple[str, int]] = []
        for _ in range(n - 1):
            op, operand = self._next(rng, value, max_value)
            steps.append((op, operand))
            value = _apply(value, op, operand)
        question = self._story(rng, start, steps) if c.word_problems else _expression(start, steps)
        return Problem(index=index, question=question, reference=str(value))

    def _next(self, rng: random.Random, value: int, max_value: int) -> tuple[str, int]:
        c = self.config
        for _ in range(20):
            op = rng.choice(c.operations)
            if op == "/":
                divisors = [d for d in range(2, max(3, min(max_value, abs(value)) + 1)) if value % d == 0]
                if not divisors or value == 0:
                    continue
                return op, rng.choice(divisors)
            operand = rng.randint(max(c.min_value, 1), max(max_value, 1))
            if op == "*":
                operand = rng.randint(2, max(2, min(max_value, 12)))
            if op == "-" and not c.allow_negative and operand > value:
                operand = rng.randint(0, value) if value > 0 else 0
            return op, operand
        return "+", rng.randint(max(c.min_value, 1), max(max_value, 1))

    def _story(self, rng: random.Random, start: int, steps: list[tuple[str, int]]) -> str:
        name, other = rng.sample(_NAMES, 2)
        thing = rng.choice(_THINGS)
        parts = [f"{name} has {start} {thing}."]
        for op, x in steps:
            parts.append(
                {
                    "+": f"{other} gives {name} {x} more.",
                    "-": f"{name} gives {x} to {other}.",
                    "*": f"Then the number of {thing} {name} has becomes {x} times as large.",
                    "/": f"{name} shares them equally among {x} friends and keeps one share.",
                }[op]
            )
        parts.append(f"How many {thing} does {name} have now?")
        return " ".join(parts)


def _apply(value: int, op: str, x: int) -> int:
    if op == "+":
        return value + x
    if op == "-":
        return value - x
    if op == "*":
        return value * x
    return value // x


def _expression(start: int, steps: list[tuple[str, int]]) -> str:
    text = str(start)
    for i, (op, x) in enumerate(steps):
        sym = {"*": "\\times", "/": "\\div"}.get(op, op)
        text = f"({text}) {sym} {x}" if i > 0 and op in "*/" else f"{text} {sym} {x}"
    return f"Compute ${text}$."


class JsonlProblems:
    """A JSONL file of ``{prompt, reference}`` rows, reshuffled each pass with a seed derived from the pass."""

    def __init__(self, config: DataConfig):
        assert config.path is not None
        self.config = config
        self.rows: list[dict[str, Any]] = []
        # Every row is checked now: a bad one would otherwise stop the run at whichever step drew it.
        for lineno, line in enumerate(Path(config.path).read_text().splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{config.path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: not a JSON object")
            prompt = row.get(config.prompt_field)
            if prompt is None:
                raise ValueError(f"{where}: no {config.prompt_field!r} (data.prompt_field)")
            if not isinstance(prompt, str):
                # str() of a message list would be trained on as if it were the question
                raise ValueError(
                    f"{where}: {config.prompt_field!r} is a {type(prompt).__name__}, not text (chat-message "
                    "lists are not supported: give the question as a string; data.system_prompt and the "
                    "chat template build the messages)"
                )
            self.rows.append(row)
        if not self.rows:
            raise ValueError(f"{config.path} has no rows")
        if "reference_field" in config.model_fields_set and not any(
            config.reference_field in row for row in self.rows
        ):
            # A reference field named in the config and in no row is a misspelling: every reference
            # would be None, a reward that needs one answers every item invalid (missing_reference), and
            # the run trains on nothing for all its steps. (Left at its default, no reference column is
            # a dataset for a reward without references: regex, format, a judge.)
            raise ValueError(
                f"{config.path}: no row has {config.reference_field!r} (data.reference_field); "
                f"the first row's keys are {sorted(self.rows[0])}"
            )
        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            order = list(range(len(self.rows)))
            if self.config.shuffle:
                random.Random(f"{self.config.seed}:{epoch}").shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def problem(self, index: int) -> Problem:
        epoch, pos = divmod(index, len(self.rows))
        row = self.rows[self._order(epoch)[pos]]
        ref = row.get(self.config.reference_field)
        return Problem(
            index=index,
            question=str(row[self.config.prompt_field]),
            reference=ref if isinstance(ref, str | dict | list) or ref is None else str(ref),
        )


def make_source(config: DataConfig) -> ProblemSource:
    return ArithmeticProblems(config.arithmetic) if config.source == "arithmetic" else JsonlProblems(config)


def _templated(config: DataConfig, tokenizer: Any) -> bool:
    return config.use_chat_template and getattr(tokenizer, "chat_template", None) is not None


def render_prompt(config: DataConfig, question: str, tokenizer: Any) -> str:
    """The text the model continues: the user message through the chat template (or raw)."""
    user = config.prompt_template.format(question=question)
    if not _templated(config, tokenizer):
        if config.system_prompt:
            # the raw prompt is the user message alone: the system message would be dropped silently
            raise ValueError(
                "data.system_prompt is set but the model's tokenizer has no chat template to put it in "
                "(the raw prompt is the user message alone): put the text in data.prompt_template instead"
            )
        return user + config.response_prefix
    messages = [{"role": "user", "content": user}]
    if config.system_prompt:
        messages.insert(0, {"role": "system", "content": config.system_prompt})
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return str(text) + config.response_prefix


def encode_prompt(config: DataConfig, question: str, tokenizer: Any) -> list[int]:
    """The prompt's token ids: :func:`render_prompt`'s text, at most ``max_prompt_tokens`` of them.

    Special tokens as the model was trained to see them. Through a chat template, none are added: the
    template writes its own BOS (``{{ bos_token }}``, ``<|begin_of_text|>``), so adding the tokenizer's
    would put a second one in front (transformers' ``apply_chat_template(tokenize=True)`` and TRL
    tokenize the rendered text without them too). Raw text gets what the tokenizer puts *before* it by
    default (its BOS, where it is configured to add one: Llama, Mistral, Gemma; nothing for Qwen or
    SmolLM2), as TRL's raw prompts and vLLM's text prompts do, unless the text already starts with it;
    not what it puts after (a tokenizer set to append EOS would end the prompt before the reply).

    Left-truncation keeps a leading BOS: cut away, the model would continue text it never saw
    without one."""
    text = render_prompt(config, question, tokenizer)
    ids: list[int] = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not _templated(config, tokenizer):
        full: list[int] = list(tokenizer(text, add_special_tokens=True)["input_ids"])
        lead = next((k for k in range(len(full) - len(ids) + 1) if full[k : k + len(ids)] == ids), 0)
        if ids[:lead] != full[:lead]:
            ids = full[:lead] + ids
    limit = config.max_prompt_tokens
    if len(ids) <= limit:
        return ids
    bos = getattr(tokenizer, "bos_token_id", None)
    keep = ids[:1] if bos is not None and ids[0] == bos else []
    return keep + ids[len(ids) - (limit - len(keep)) :]
