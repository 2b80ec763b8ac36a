"""Removing control-token strings from user-written text before a model's tokenizer sees it.

A tokenizer turns ``<|im_end|>`` written *inside* a response into the real control token, which lets a
response close its own turn and forge the next one (a chat-template injection against a judge or reward
model), and a typed step tag into an extra step. Every model path cleans user text with a
:class:`Scrubber`: the in-process backends with their tokenizer's exact special tokens
(:func:`rewardhub.models.hf_compute.sanitize`), the remote pooling backend with the server's when it says
what they are, else the generic shapes of the common chat templates (:data:`GENERIC`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rewardhub.models.base import Message

__all__ = ["GENERIC", "Scrubber", "clean_messages", "scrub"]

_CONTROL = re.compile(
    r"<\|[^\s<>|]{1,40}\|>"  # ChatML / Qwen, Llama 3, Phi, gpt-oss
    r"|<｜[^\s<>｜]{1,40}｜>"  # DeepSeek (full-width bars)
    r"|</?(?:start_of_turn|end_of_turn|bos|eos|s)>"  # Gemma; Llama 2 / Mistral BOS and EOS
    r"|\[/?INST\]|<</?SYS>>"  # Llama 2 / Mistral turns
)
_OPENERS = ("<", "[")  # every generic shape starts with one of these: most text skips the regex


class Scrubber:
    """Removes control-token strings from text: exactly ``specials`` when given (none for an empty
    list), else the generic shapes of :data:`_CONTROL`. ``keep`` (a PRM's step tag): the occurrences in
    the text survive, and none is made by a removal.

    One regex pass per round, rounds until nothing changes: removing "<|im_end|>" once from
    "<|im_<|im_end|>end|>" leaves "<|im_end|>". (One alternation of the literals is also far faster than
    a substring scan per special token: Llama 3 has 256 of them.)
    """

    def __init__(self, specials: Sequence[str] | None):
        self.specials = None if specials is None else tuple(sorted(set(specials), key=len, reverse=True))
        if self.specials is None:
            self._pattern: re.Pattern[str] | None = _CONTROL
        elif self.specials:
            self._pattern = re.compile("|".join(re.escape(t) for t in self.specials))
        else:
            self._pattern = None

    def __call__(self, text: str, keep: str | None = None) -> str:
        if keep:
            # The tags already there stay; removing a special token between them must not make another
            # ("<extra<|im_end|>_0>" is "<extra_0>" once "<|im_end|>" is gone): an extra step, or a
            # step count the model input no longer matches.
            return keep.join(self._clean(part, keep) for part in text.split(keep))
        return self._clean(text, None)

    def _clean(self, text: str, also: str | None) -> str:
        if self._pattern is None or (self.specials is None and not any(c in text for c in _OPENERS)):
            return text
        while True:
            cleaned = self._pattern.sub("", text)
            if also:
                cleaned = cleaned.replace(also, "")
            if cleaned == text:
                return text
            text = cleaned

    def describe(self) -> str:
        if self.specials is None:
            return "generic control-token shapes (the server has no /tokenizer_info)"
        return f"the server's {len(self.specials)} special tokens (/tokenizer_info)"


GENERIC = Scrubber(None)


def scrub(text: str, keep: str | None = None) -> str:
    """``text`` without the generic control-token shapes (``keep``, a step tag, survives)."""
    return GENERIC(text, keep)


def clean_messages(
    clean: Scrubber, messages: Sequence[Message], keep: str | None = None
) -> list[dict[str, str]]:
    """The messages as a chat template (or a chat API) takes them, each content cleaned."""
    return [{"role": m.role, "content": clean(m.content, keep)} for m in messages]
