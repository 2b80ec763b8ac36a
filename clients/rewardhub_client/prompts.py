"""Reading a trainer's prompt as the question: the user turn of a chat-templated string, or the last user
message of a conversation.

It lives in the client package because both sides read trainers' prompts the same way: the service's
compat endpoints (``rewardhub.compat``: OpenRLHF posts its dataset's rendered prompt, slime its
``Sample.prompt``) and the client's adapters (:mod:`rewardhub_client.slime`) send the same question for
the same prompt. The client cannot import the service (it needs only httpx and pydantic); the service
ships in the same distribution and imports it from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["USER_TURNS", "prompt_text", "user_turn"]

# A user turn in the chat templates trainers render prompts with (the policy's template): ChatML (Qwen,
# SmolLM...), Llama 3, Gemma, Phi-3, DeepSeek V3/R1, Mistral/Llama 2 [INST].
USER_TURNS = (
    re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.S),
    re.compile(r"<\|start_header_id\|>user<\|end_header_id\|>\n\n(.*?)<\|eot_id\|>", re.S),
    re.compile(r"<start_of_turn>user\n(.*?)<end_of_turn>", re.S),
    re.compile(r"<\|user\|>\n?(.*?)<\|end\|>", re.S),
    re.compile(r"<｜User｜>(.*?)<｜Assistant｜>", re.S),
    re.compile(r"\[INST\](.*?)\[/INST\]", re.S),
)


def user_turn(prompt: str) -> str:
    """A prompt rendered with a chat template as its last user turn's text; any other string as is.

    Model rewards (judges, reward models) put ``prompt`` into their own template as the user turn: the
    policy's rendered conversation there (its control tokens, its system turn) is not the question."""
    for pattern in USER_TURNS:
        turns = pattern.findall(prompt)
        if turns:
            return str(turns[-1]).strip()
    return prompt


def prompt_text(prompt: Any, *, json_types: bool = False) -> str | None:
    """A prompt as text: a string as is (a chat-templated one as its last user turn, see
    :func:`user_turn`); a list of chat messages as its last user message (a string, or the ``text`` of
    its content parts); a list of content parts with no role (one message's, ``[{"type": "text", ...},
    {"type": "image", ...}]``) as its text parts; None for anything else.

    ``json_types``: take messages only as ``list``/``dict`` (what a JSON body holds: the service's
    compat endpoints), not as any ``Sequence``/``Mapping`` (the in-process objects an adapter is given).
    """
    seq: Any = list if json_types else Sequence
    obj: Any = dict if json_types else Mapping
    if isinstance(prompt, str):
        return user_turn(prompt)
    if isinstance(prompt, seq):
        for msg in reversed(prompt):
            if isinstance(msg, obj) and msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, seq):
                    return _parts_text(content, obj)
        if prompt and all(isinstance(p, obj) and "type" in p and "role" not in p for p in prompt):
            # one message's content parts without the message (slime's multimodal prompt when no chat
            # template is applied): its text parts are the question
            return _parts_text(prompt, obj) or None
    return None


def _parts_text(content: Any, obj: Any) -> str:
    return "".join(str(c.get("text", "")) for c in content if isinstance(c, obj) and c.get("text"))
