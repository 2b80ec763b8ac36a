"""Scoring one item with a reward in process, without the service: for the unit tests of a reward under
``tests/rewards``, which check what the reward itself answers (its config parsed as a request's would
be, a generous deadline), the serving layer's cache, batching and workers left out.
"""

from __future__ import annotations

from typing import Any

from rewardhub.protocol import ScoreItem
from rewardhub.rewards.base import Outcome, Reward, ScoreContext


async def score_item(reward: Reward[Any], item: ScoreItem, /, **config: Any) -> Outcome:
    """What ``reward`` answers for ``item`` alone under ``config``.

    The reward and the item are positional-only, so a config key may take any name.

    Raises:
        InvalidRequest: ``config`` is not a valid config of the reward.
    """
    [out] = await reward.score([item], reward.parse_config(config), ScoreContext(deadline_s=5))
    return out


async def score_text(reward: Reward[Any], response: str, reference: Any = None, /, **config: Any) -> Outcome:
    """What ``reward`` answers for an item of this ``response`` and ``reference`` (:func:`score_item`)."""
    return await score_item(reward, ScoreItem(response=response, reference=reference), **config)
