"""``string_check``: OpenAI's string-check grader as a reward.

Operations, comparing the response with the reference string: ``eq`` (equal), ``ne`` (not equal),
``like`` (the response contains the reference, case-sensitive), ``ilike`` (contains, "not case-sensitive"
in OpenAI's graders guide: SQL's ILIKE, both sides lower-cased with ``str.lower``, not case-folded, so
"ß" is not "ss" and "ﬁ" not "fi").
Score 1 when the operation holds, else 0. No normalisation: this is the exact semantics of the hosted
grader, so configs carried over from OpenAI RFT give the same rewards here. Like the hosted grader, which
sees a reasoning model's ``output_text`` and not its reasoning, it reads the response after its last
``</think>`` and before a ``<think>`` that never closes (:func:`~.text.answer_text`), without the
whitespace that separates it from the reasoning ("</think>\n\n", as R1 and Qwen3 emit it; their chat
templates strip it from the message content too).

A blank reference (``""``, or only whitespace and invisible characters such as a zero-width space:
:func:`~.text.blank`) is no reference: ``missing_reference``, as for
``exact_match``, ``f1`` and ``regex``. Compared as written, ``like``/``ilike`` hold for every response and
``eq`` for an empty one, so a row whose gold was lost would reward a policy for saying nothing (and
``ne`` for saying anything). ``compare_blank_reference`` compares it as written, as the hosted grader
does: OpenAI documents the operations without an exception for an empty reference, and the
``/compat/openai`` graders route sets it so that a grader carried over from OpenAI scores there as it
does at OpenAI (a ``multi`` grader is not failed whole by one sub-grader's empty ``{{ item.x }}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.text import after_think_at, answer_text, blank

__all__ = ["StringCheckConfig", "StringCheckReward", "string_check"]


class StringCheckConfig(RewardConfig):
    operation: Literal["eq", "ne", "like", "ilike"] = Field("eq", description="eq | ne | like | ilike.")
    compare_blank_reference: bool = Field(
        False,
        description="A blank reference ('', whitespace or invisible characters) is a data error (missing_reference) by default: "
        "like/ilike would hold for every response and eq for an empty one, rewarding a policy for saying "
        "nothing. true compares it as written, as OpenAI's hosted grader does (the /compat/openai graders "
        "route sets it).",
    )


def string_check(operation: str, text: str, reference: str) -> bool:
    if operation == "eq":
        return text == reference
    if operation == "ne":
        return text != reference
    if operation == "like":
        return reference in text
    return reference.lower() in text.lower()


@register
class StringCheckReward(Reward[StringCheckConfig]):
    name: ClassVar[str] = "string_check"
    # 1.0.1: the answer outside the reasoning is compared, not drafts inside <think>
    # 1.0.2: without the whitespace separating it from the reasoning ("</think>\n\nParis" eq "Paris")
    # 1.0.3: a blank reference is missing_reference unless compare_blank_reference (like/ilike scored 1.0
    # for every response against it, eq 1.0 for an empty one)
    # 1.0.4: so is a reference of invisible characters only (a zero-width space: ne scored every response 1.0)
    # 1.0.5: ilike lower-cases both sides, as SQL's ILIKE, instead of case-folding ("straße" was found in
    # "STRASSE")
    version: ClassVar[str] = "1.0.5"
    description: ClassVar[str] = (
        "OpenAI string_check grader: eq / ne / like (contains) / ilike (contains, any case)."
    )
    config_model = StringCheckConfig

    async def score(
        self, items: Sequence[ScoreItem], config: StringCheckConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out = []
        for item in items:
            if not isinstance(item.reference, str):
                out.append(Outcome.invalid(Reason.MISSING_REFERENCE, "string_check needs a reference string"))
                continue
            if blank(item.reference) and not config.compare_blank_reference:
                out.append(
                    Outcome.invalid(
                        Reason.MISSING_REFERENCE,
                        "string_check: the reference is blank; to compare it as written (like '' holds for "
                        "every response), set compare_blank_reference",
                    )
                )
                continue
            text = answer_text(item.response)
            if after_think_at(item.response) > 0:
                text = text.lstrip()  # the separator after </think>, not part of the answer
            ok = string_check(config.operation, text, item.reference)
            out.append(Outcome(1.0 if ok else 0.0, details={"operation": config.operation}))
        return out
