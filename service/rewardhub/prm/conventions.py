"""How known PRMs expect their input (docs/algorithms.md §1.2–1.5), as backend-independent queries.

A PRM only works on the exact format it was trained on, so each convention builds the model input from
the question and the steps and says where the verdicts are read:

* ``qwen`` — Qwen2.5-Math-PRM-7B/72B: a chat (system "Please reason step by step, and put your final
  answer within \\boxed{}.", user = question, assistant = steps joined by ``<extra_0>`` plus a trailing
  ``<extra_0>``) rendered with the model's chat template; a 2-label token classifier; the score of step k
  is the positive-class probability ``softmax(logits)[1]`` at the k-th ``<extra_0>``;
* ``math_shepherd`` — Math-Shepherd (peiyi9979/math-shepherd-mistral-7b-prm): plain text
  ``"{question} Step 1: ... ки\\nStep 2: ... ки"``; a causal LM; the score of step k is
  ``softmax([logit(+), logit(-)])[0]`` at the k-th ``ки``. A step that starts with its own "Step k:"
  label (a response in this format) loses it: the convention writes the labels;
* ``skywork`` — Skywork-o1-Open-PRM (Qwen2.5-1.5B/7B based): token ids, not a text: BOS + question +
  newline tokenized together, then each step tokenized on its own and followed by the newline token; a
  causal LM with a scalar value head; the score of step k is ``sigmoid(value)`` at the k-th of those
  newlines. Its steps are lines (Skywork splits a response on ``\n``), so the ``prm`` reward splits on
  a newline by default for it. The tag is a position, not text: nothing is removed from the steps;
* ``rlhflow`` — RLHFlow's Llama3.1-8B-PRM-Mistral-Data / -Deepseek-Data: a multi-turn chat, user
  ``question + " " + step 1``, assistant ``"+"``, then user = step k, assistant ``"+"`` for every later
  step, rendered with the model's chat template; a causal LM; the score of step k is
  ``softmax([logit(+), logit(-)])[0]`` at the token before the k-th assistant ``"+"`` (the position that
  predicts it; the model card's ``logits[:, -3]`` of the conversation cut after that turn). All steps
  are read from one pass over the whole conversation: under causal masking the same numbers as a pass
  per prefix, for a template that renders a conversation's start as it renders it alone (the backend
  checks). The assistant turns hold a placeholder tag (:data:`RLHFLOW_TAG`, removed from user text like
  every tag) that the backend replaces by ``"+"`` after rendering: a ``"+"`` in user text ("2 + 3") is
  no step.
* ``implicit`` — an implicit PRM (PRIME, arXiv 2502.01456; "Free Process Rewards without Process
  Labels", arXiv 2412.01981): a causal LM ``pi_phi`` trained as an outcome reward model with the reward
  parameterised as ``beta log pi_phi / pi_ref``, and its frozen reference ``pi_ref``. No tag and no
  head: the prompt in the model's chat template with its generation prompt, the response as written;
  each model gives each step's log-likelihood, and step k's process reward is ``beta`` times their
  difference. The pieces are the response before its first step (context, uncounted), then each step
  with the text between it and the step before, so that they are the response as the policy wrote it.

The step tag is removed from the question and the steps first (and the steps trimmed again): a
response that writes ``<extra_0>`` itself would otherwise create steps of its own choosing. A tag made of letters (``ки``) is a tag only
where it stands alone (:func:`tag_pattern`): inside a word (Russian "покупки") it is ordinary text, kept,
and a backend reading the tags' positions counts the same stand-alone occurrences, so the inserted tags
are still exactly one per step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rewardhub.models.base import Message, StepQuery
from rewardhub.models.specials import GENERIC, Scrubber
from rewardhub.prm.tags import tag_pattern
from rewardhub.rewards.text import blank as says_nothing

__all__ = ["CONVENTIONS", "RLHFLOW_TAG", "PRMConvention", "tag_pattern"]

QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
# Where an RLHFlow assistant turn's "+" goes (StepQuery.predicts): text no tokenizer treats as special
RLHFLOW_TAG = "<rewardhub:rlhflow:+>"


@dataclass(frozen=True, slots=True)
class PRMConvention:
    name: str
    step_tag: str
    label_tokens: tuple[str, str] | None  # (positive, negative) for LM-head PRMs
    tag_in_text: bool = True  # False: the tag token is placed between separately tokenized steps
    separator: str = "\n\n"  # how the prm reward splits a response for this model by default

    def clean(self, text: str) -> str:
        """``text`` without step tags (:func:`tag_pattern`), until none is left: "<ext<extra_0>ra_0>"
        without its inner tag is a tag. Unchanged for a convention whose tags are not text."""
        if not self.tag_in_text:
            return text
        rx = tag_pattern(self.step_tag)
        while True:
            cleaned = rx.sub("", text)
            if cleaned == text:
                return text
            text = cleaned

    def reaching(self, text: str, clean: Scrubber = GENERIC) -> str:
        """What of ``text`` reaches the model: without step tags and control-token strings.
        ``clean``: the backend's (:meth:`~rewardhub.models.base.ModelBackend.cleaner`), whose tokenizer
        may know more control tokens than the generic shapes ("<pad>", "<unk>")."""
        while True:
            cleaned = clean(self.clean(text))  # removing either may make the other: until neither does
            if cleaned == text:
                return text
            text = cleaned

    def blank(self, text: str, clean: Scrubber = GENERIC) -> bool:
        """Whether nothing of ``text`` reaches the model (:meth:`reaching`), or what does says nothing
        (:func:`~rewardhub.rewards.text.blank`): it is only step tags, control-token strings, whitespace
        and invisible format characters (a zero-width space). Such a "step" would be scored as an empty
        one: a score the response did not earn."""
        return says_nothing(self.reaching(text, clean))

    def query(self, question: str, steps: Sequence[str], scrub: Scrubber | None = None) -> StepQuery:
        """The model input for ``question`` and ``steps`` (for ``implicit``: the context piece first,
        then the steps as written, see the module docstring). ``scrub``: the backend's control-token
        scrubber (:meth:`reaching`), applied before the steps are trimmed (none: step tags only)."""
        q = self.clean(question)
        # trimmed again: a tag or a control token removed from a step's edge left the blank before it
        # ("5. <extra_0>" was "5. ", "5.\n<|im_end|>" was "5.\n"), an input the same step without it
        # never gives (steps are trimmed when split)
        clean = (
            [(self.reaching(s, scrub) if scrub is not None else self.clean(s)).strip() for s in steps]
            if self.tag_in_text
            else list(steps)
        )
        if self.name == "implicit":
            return StepQuery(
                step_tag="",
                steps=len(clean) - 1,
                messages=(Message("user", q),),
                pieces=tuple(clean),
                likelihood=True,
            )
        if self.name == "skywork":
            return StepQuery(
                step_tag=self.step_tag, steps=len(clean), pieces=(q + "\n", *clean), value_head=True
            )
        if self.name == "rlhflow":
            turns: list[Message] = []
            for k, step in enumerate(clean):
                turns += [
                    Message("user", f"{q} {step}" if k == 0 else step),
                    Message("assistant", self.step_tag),
                ]
            return StepQuery(
                step_tag=self.step_tag,
                steps=len(clean),
                messages=tuple(turns),
                label_tokens=self.label_tokens,
                predicts=self.label_tokens[0] if self.label_tokens else None,
            )
        if self.name == "qwen":
            body = self.step_tag.join(clean) + self.step_tag
            return StepQuery(
                step_tag=self.step_tag,
                steps=len(clean),
                messages=(
                    Message("system", QWEN_SYSTEM),
                    Message("user", q),
                    Message("assistant", body),
                ),
                positive_index=1,
            )
        body = "".join(
            f"Step {k}: {_unlabelled(s)} {self.step_tag}\n" for k, s in enumerate(clean, 1)
        ).strip()
        return StepQuery(
            step_tag=self.step_tag, steps=len(clean), text=f"{q} {body}", label_tokens=self.label_tokens
        )


# A step's own Math-Shepherd label ("Step 3:"), which the convention writes itself
_LABEL = re.compile(r"Step\s*\d+\s*:\s*")


def _unlabelled(step: str) -> str:
    """``step`` without its own leading "Step k:" label: a response in Math-Shepherd's format (split
    before each label) reached the model as "Step 1: Step 1: ...". A step of nothing but a label keeps
    it, rather than becoming an empty step."""
    m = _LABEL.match(step)
    return step[m.end() :] if m is not None and m.end() < len(step) else step


CONVENTIONS: dict[str, PRMConvention] = {
    "qwen": PRMConvention("qwen", "<extra_0>", None),
    "math_shepherd": PRMConvention("math_shepherd", "ки", ("+", "-")),
    "skywork": PRMConvention("skywork", "\n", None, tag_in_text=False, separator="\n"),
    "rlhflow": PRMConvention("rlhflow", RLHFLOW_TAG, ("+", "-")),
    "implicit": PRMConvention("implicit", "", None, tag_in_text=False),
}
