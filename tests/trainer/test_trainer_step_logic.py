"""The trainer's per-step bookkeeping on hand-made reward results: metrics and dynamic sampling.

A real :class:`Trainer` on a tiny random model (real generation); the reward service is replaced at its
transport boundary (the dispatcher's submit/wait), so the results it answers are exactly the ones the
expected values below are worked out from.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from rewardhub_client import ItemResult
from rewardhub_trainer.advantages import grpo_advantages
from rewardhub_trainer.checkpoint import latest_checkpoint
from rewardhub_trainer.config import TrainConfig
from rewardhub_trainer.data import Problem
from rewardhub_trainer.generation import Completion, HFGenerator
from rewardhub_trainer.rewards import REQUEST_FAILED, Group
from rewardhub_trainer.trainer import Trainer, _Collected, _samples

os.environ.setdefault("HF_HUB_OFFLINE", "1")

Result = tuple[float | None, bool, dict[str, float | None]]  # score, valid, components


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def make_trainer(tiny_model_dir: Path, tmp_path: Path) -> Callable[..., Trainer]:
    def factory(
        output: dict[str, Any] | None = None, reward: dict[str, Any] | None = None, **algorithm: Any
    ) -> Trainer:
        cfg = TrainConfig.model_validate(
            {
                "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
                "data": {"use_chat_template": False, "prompt_template": "{question}"},
                "generation": {"group_size": 3, "max_new_tokens": 2, "prompts_per_generate": 2},
                "reward": reward or {},
                "algorithm": algorithm,
                "training": {"prompts_per_step": 2},
                "output": {
                    "run_dir": str(tmp_path / "run"),
                    "progress": False,
                    "tensorboard": False,
                    **(output or {}),
                },
            }
        )
        return Trainer(cfg)

    return factory


def result(k: int, score: float | None, valid: bool, components: dict[str, float | None]) -> ItemResult:
    return ItemResult(id=str(k), reward="composite", score=score, valid=valid, components=components)


def group(index: int, results: Sequence[Result]) -> Group:
    comps = [Completion([1], [5, 6], [-1.0, -1.0], "ab", False) for _ in results]
    return Group(
        f"g{index}",
        Problem(index, f"q{index}", "1"),
        comps,
        [result(k, *r) for k, r in enumerate(results)],
    )


def step_metrics(trainer: Trainer, groups: list[Group]) -> dict[str, float]:
    """The metrics of a step of one sampling round that kept every group of ``groups``, with plain GRPO
    advantages of their scores: what the step's bookkeeping makes of these results, whatever the
    trainer's estimator would have made of them."""
    col = _Collected(groups=groups, scored=groups, rounds=1, dropped=0, gen_s=0.0)
    rewards = torch.tensor([g.scores() for g in groups], dtype=torch.float64)
    return trainer._step_metrics(col, grpo_advantages(rewards))


def failed_request(groups: Sequence[Group]) -> list[ItemResult]:
    """The results the trainer makes of a request of ``groups`` that failed past the client's retries."""
    items = [it for g in groups for it in g.items()]
    return [
        ItemResult(id=it.id or "", reward="r", score=None, valid=False, reason=REQUEST_FAILED) for it in items
    ]


class CannedDispatcher:
    """The reward service's answers, fixed in advance, one list of items per submitted request."""

    def __init__(self, answers: list[list[Result]]):
        self.answers = answers

    def group_id(self, step: int, index: int) -> str:
        return f"s{step}-p{index}"

    def submit(self, groups: Sequence[Group]) -> concurrent.futures.Future[list[ItemResult]]:
        fut: concurrent.futures.Future[list[ItemResult]] = concurrent.futures.Future()
        fut.set_result([result(k, *r) for k, r in enumerate(self.answers.pop(0))])
        return fut

    def wait(self, fut: concurrent.futures.Future[list[ItemResult]]) -> list[ItemResult]:
        return fut.result()


def test_component_metrics_leave_invalid_items_out(make_trainer: Callable[..., Trainer]) -> None:
    """`reward/{name}` averaged the components of items the service marked invalid, which `reward`
    itself leaves out (an invalid item's partial parts are not a score). Found in review."""
    trainer = make_trainer()
    groups = [
        group(0, [(1.0, True, {"a": 1.0, "b": 1.0}), (0.5, True, {"a": 0.0, "b": 1.0})]),
        group(1, [(None, False, {"a": 1.0, "b": 0.0}), (0.0, True, {"a": 0.0, "b": None})]),
    ]
    out = step_metrics(trainer, groups)
    assert out["reward"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3, the invalid item left out
    assert out["invalid_frac"] == pytest.approx(0.25)
    # a over the valid items: (1 + 0 + 0) / 3 (not (1 + 0 + 1 + 0) / 4); b: (1 + 1) / 2 (not 2/3)
    assert out["reward/a"] == pytest.approx(1 / 3)
    assert out["reward/b"] == pytest.approx(1.0)


def test_invalid_frac_is_over_answered_items_and_failed_requests_have_their_own(
    make_trainer: Callable[..., Trainer],
) -> None:
    """Items of a reward request that failed (the trainer's own ``request_failed``, the service never
    answered them) were counted in ``invalid_frac``, the fraction the service answered ``valid: false``,
    so an outage read as a reward that cannot score its items, and a failed group (all NaN) as a
    zero-variance one in ``frac_zero_std_groups``. Found in review. Both are now over the answered items
    and groups; ``request_failed_frac`` is the share of items whose request failed."""
    trainer = make_trainer()
    answered = group(0, [(1.0, True, {}), (None, False, {}), (0.0, True, {}), (0.0, True, {})])
    failed = group(1, [(None, False, {})] * 4)
    for r in failed.results:
        r.reason = REQUEST_FAILED
    groups = [answered, failed]
    out = step_metrics(trainer, groups)
    assert out["invalid_frac"] == pytest.approx(0.25)  # 1 of the 4 answered items, not 5 of 8
    assert out["request_failed_frac"] == pytest.approx(0.5)
    assert out["frac_zero_std_groups"] == pytest.approx(0.0)  # group 0 varies; group 1 was not scored
    assert out["reward"] == pytest.approx(1 / 3)
    # no answer at all: nothing to say about the reward, all of it about the requests
    out = step_metrics(trainer, [failed])
    assert math.isnan(out["invalid_frac"]) and math.isnan(out["frac_zero_std_groups"])
    assert out["request_failed_frac"] == 1.0


def test_logged_samples_say_why_a_completion_has_no_score() -> None:
    """samples.jsonl wrote a completion's score alone: None for an item the service could not score and
    for one whose request failed (the service never saw it) alike, the outage indistinguishable from the
    reward's own verdict. Found in review. Each row now carries the item's reason (None when valid)."""
    failed = group(2, [(None, False, {})])
    failed.results[0].reason = REQUEST_FAILED
    invalid = group(1, [(None, False, {})])
    invalid.results[0].reason = "timeout"
    rows = _samples([group(0, [(1.0, True, {})]), invalid, failed], 3)
    assert [(r["score"], r["reason"]) for r in rows] == [
        (1.0, None),
        (None, "timeout"),
        (None, REQUEST_FAILED),
    ]


# One request of two groups of 3: group 0's items score 0.5 each from different components (a, b);
# group 1's valid items agree on every component, and its invalid item's differing parts do not count.
TIED_TOTALS: list[Result] = [
    (0.5, True, {"a": 1.0, "b": 0.0}),
    (0.5, True, {"a": 0.0, "b": 1.0}),
    (0.5, True, {"a": 1.0, "b": 0.0}),
    (1.0, True, {"a": 1.0, "b": 1.0}),
    (1.0, True, {"a": 1.0, "b": 1.0}),
    (None, False, {"a": 0.0, "b": 0.0}),
]


def test_gdpo_dynamic_sampling_keeps_groups_whose_components_differ(
    make_trainer: Callable[..., Trainer],
) -> None:
    """Dynamic sampling filtered on the summed score, so under GDPO a group whose components differ but
    whose totals tie was dropped, although GDPO normalises each component on its own and that group has
    signal (a: [1,0,1], b: [0,1,0]). Found in review."""
    trainer = make_trainer(estimator="gdpo", dynamic_sampling=True, max_sampling_rounds=1)
    col = trainer._collect(CannedDispatcher([TIED_TOTALS]))  # type: ignore[arg-type]
    assert [g.problem.index for g in col.groups] == [0] and col.dropped == 1
    assert len(col.scored) == 2
    # a component of weight 0 is no signal: with b weightless, group 0 has none either
    trainer = make_trainer(
        estimator="gdpo", dynamic_sampling=True, max_sampling_rounds=1, gdpo_weights={"b": 0.0}
    )
    only_b: list[Result] = [(0.5, True, {"a": 1.0, "b": float(k % 2)}) for k in range(3)]
    answers = [only_b + [(0.5, True, {"a": 1.0, "b": 1.0})] * 3]
    col = trainer._collect(CannedDispatcher(answers))  # type: ignore[arg-type]
    assert col.groups == [] and col.dropped == 2
    # a round in which every item came back invalid and without components has no signal, no error
    trainer = make_trainer(estimator="gdpo", dynamic_sampling=True, max_sampling_rounds=1)
    col = trainer._collect(CannedDispatcher([[(None, False, {})] * 6]))  # type: ignore[arg-type]
    assert col.groups == [] and col.dropped == 2
    # every other estimator trains on the total: a tie is no signal there
    trainer = make_trainer(estimator="grpo", dynamic_sampling=True, max_sampling_rounds=1)
    col = trainer._collect(CannedDispatcher([TIED_TOTALS]))  # type: ignore[arg-type]
    assert col.groups == [] and col.dropped == 2


class DownDispatcher(CannedDispatcher):
    """A service that is down: every request fails past the client's retries (request_failed items)."""

    def __init__(self) -> None:
        super().__init__([])
        self.sent = 0

    def submit(self, groups: Sequence[Group]) -> concurrent.futures.Future[list[ItemResult]]:
        self.sent += 1
        fut: concurrent.futures.Future[list[ItemResult]] = concurrent.futures.Future()
        fut.set_result(failed_request(groups))
        return fut


def test_dynamic_sampling_takes_no_more_rounds_once_a_round_got_no_answer(
    make_trainer: Callable[..., Trainer],
) -> None:
    """With dynamic sampling, a round whose reward requests all failed dropped its groups as having no
    signal and sampled another round of fresh prompts, up to max_sampling_rounds: a step with the
    service down generated and sent three times over and moved the data cursor past three rounds of
    prompts that none was trained on. Found in review. A round with no answer at all ends the rounds."""
    trainer = make_trainer(dynamic_sampling=True, max_sampling_rounds=3)
    down = DownDispatcher()
    col = trainer._collect(down)  # type: ignore[arg-type]
    assert (col.rounds, down.sent, trainer.data_pos) == (1, 1, 2)
    assert col.groups == [] and col.dropped == 0 and len(col.scored) == 2  # failed, not dropped
    # a round with some answers is a round like any other: the next one is sampled
    answers: list[list[Result]] = [[(1.0, True, {})] * 6, [(1.0, True, {}), (0.0, True, {})] * 3]
    col = trainer._collect(CannedDispatcher(answers))  # type: ignore[arg-type]
    assert col.rounds == 2 and [g.problem.index for g in col.groups] == [4, 5]


def test_frac_zero_std_groups_counts_what_dynamic_sampling_would_drop(
    make_trainer: Callable[..., Trainer],
) -> None:
    """Under GDPO the metric judged a group by its weighted totals, so a group whose components differ
    but whose totals tie (signal for GDPO, kept by dynamic sampling) was reported as zero-variance: the
    metric said 100% for a batch the filter kept half of. Found in review."""
    groups = [group(0, TIED_TOTALS[:3]), group(1, TIED_TOTALS[3:])]
    for estimator, expected in (("gdpo", 0.5), ("grpo", 1.0)):
        out = step_metrics(make_trainer(estimator=estimator), groups)
        assert out["frac_zero_std_groups"] == pytest.approx(expected), estimator


def test_shaped_reward_is_over_the_groups_reward_is_over(make_trainer: Callable[..., Trainer]) -> None:
    """``shaped_reward`` was the mean of the kept groups' shaped rewards, ``reward`` that of every group
    scored: with dynamic sampling (and DAPO's overlong shaping, both on for dapo) the gap between the two
    was the shaping plus the difference between the groups kept and all, and read as a length penalty
    that was not there. Found in review. Both are over every group scored."""
    # every completion is 2 tokens, on the ramp from 1 to L_max 3 (cache 2): shaping -0.5 each
    trainer = make_trainer(
        dynamic_sampling=True, overlong={"enabled": True, "max_length": 3, "cache_length": 2}
    )
    signal = group(0, [(1.0, True, {}), (0.0, True, {}), (0.0, True, {})])
    flat = group(1, [(1.0, True, {})] * 3)  # no signal: dynamic sampling drops it
    failed = group(2, [(None, False, {})] * 3)  # its request failed: out of both
    for r in failed.results:
        r.reason = REQUEST_FAILED
    col = _Collected(groups=[signal], scored=[signal, flat, failed], rounds=1, dropped=1, gen_s=0.0)
    out = trainer._step_metrics(col, trainer._advantages(col.groups)[0])
    assert out["reward"] == pytest.approx(4 / 6)
    assert out["shaped_reward"] == pytest.approx(4 / 6 - 0.5)  # not 1/3 - 0.5, the kept group's
    # without dynamic sampling every scored group is kept: the same
    trainer = make_trainer(overlong={"enabled": True, "max_length": 3, "cache_length": 2})
    col = _Collected(
        groups=[signal, flat, failed], scored=[signal, flat, failed], rounds=1, dropped=0, gen_s=0.0
    )
    out = trainer._step_metrics(col, trainer._advantages(col.groups)[0])
    assert out["shaped_reward"] == pytest.approx(4 / 6 - 0.5)


def test_gdpo_overlong_penalty_factor_weights_its_component(make_trainer: Callable[..., Trainer]) -> None:
    """Under GDPO the overlong shaping is a component of its own, normalised within the group like the
    others, which divides its scale away: `penalty_factor` changed nothing (the component always had
    weight 1). The factor is now the component's weight. Found in review."""

    def lengths_group(index: int, lengths: Sequence[int]) -> Group:
        comps = [Completion([1], [5] * n, [-1.0] * n, "a" * n, False) for n in lengths]
        results = [result(k, 0.5, True, {"a": float(k % 2), "b": 1.0}) for k in range(len(lengths))]
        return Group(f"g{index}", Problem(index, f"q{index}", "1"), comps, results)

    groups = [lengths_group(0, [1, 3, 4]), lengths_group(1, [4, 2, 3])]
    overlong = {"enabled": True, "max_length": 3, "cache_length": 2}  # the ramp from 1 (max_new_tokens 2)

    def advantages(factor: float) -> torch.Tensor:
        trainer = make_trainer(estimator="gdpo", overlong={**overlong, "penalty_factor": factor})
        return trainer._advantages(groups)[0].values

    off = make_trainer(estimator="gdpo")._advantages(groups)[0].values
    assert torch.allclose(advantages(0.0), off)  # factor 0: as if there were no shaping
    assert not torch.allclose(advantages(0.2), advantages(1.0), rtol=1e-2, atol=1e-2)  # not just eps
    assert not torch.allclose(advantages(1.0), off)


def test_batch_reward_scaling_reaches_the_advantages(make_trainer: Callable[..., Trainer]) -> None:
    groups = [
        group(0, [(1.0, True, {}), (0.0, True, {}), (0.0, True, {})]),
        group(1, [(1.0, True, {}), (None, False, {}), (0.5, True, {})]),
    ]
    adv, _ = make_trainer(scale_rewards="batch")._advantages(groups)
    # valid rewards [1, 0, 0, 1, 0.5]: mean 0.5, Σ(r−m)² = 4·0.25 = 1, /4 → std 0.5
    s = 0.5 + 1e-4
    expected = [[(2 / 3) / s, (-1 / 3) / s, (-1 / 3) / s], [0.25 / s, 0.0, -0.25 / s]]
    assert torch.allclose(adv.values, torch.tensor(expected, dtype=torch.float64))
    adv, _ = make_trainer(scale_rewards="none")._advantages(groups)
    assert torch.allclose(adv.values, torch.tensor([[2 / 3, -1 / 3, -1 / 3], [0.25, 0.0, -0.25]]).double())


def test_a_misspelt_gdpo_weight_stops_the_run_at_its_first_batch(
    make_trainer: Callable[..., Trainer],
) -> None:
    """A weight for a component the service does not return was ignored: the intended component kept
    weight 1 for the whole run, with nothing said. Found in review."""
    trainer = make_trainer(estimator="gdpo", gdpo_weights={"bb": 0.0})
    with pytest.raises(ValueError, match=r"gdpo_weights names \['bb'\].*components are \['a', 'b'\]"):
        trainer._gdpo_components([group(0, TIED_TOTALS[:3])])
    trainer = make_trainer(estimator="gdpo", gdpo_weights={"b": 0.0})
    _, weights = trainer._gdpo_components([group(0, TIED_TOTALS[:3])])
    assert weights == [1.0, 0.0]


def test_a_misspelt_gdpo_component_stops_the_run_at_its_first_batch(
    make_trainer: Callable[..., Trainer],
) -> None:
    """An explicit ``gdpo_components`` entry the service does not return was read as "null in every
    item": no signal from it, with nothing said. With every entry misspelt each advantage was exactly 0
    and the run trained on nothing (no sequence forwarded, no update) for all its steps; with one, the
    intended component was left out of the advantages. The config check only compares gdpo_weights with
    the list, and the check against the service's answer covered gdpo_weights alone. Found in review."""
    trainer = make_trainer(estimator="gdpo", gdpo_components=["a", "bb"])
    with pytest.raises(ValueError, match=r"gdpo_components names \['bb'\].*components are \['a', 'b'\]"):
        trainer._advantages([group(0, TIED_TOTALS[:3])])
    # valid items without a single component: nothing it names is returned
    trainer = make_trainer(estimator="gdpo", gdpo_components=["a"])
    with pytest.raises(ValueError, match=r"gdpo_components names \['a'\].*components are \[\]"):
        trainer._advantages([group(0, [(1.0, True, {}), (0.0, True, {})])])
    # a batch of invalid items without components says nothing yet: masked, the check waits
    trainer = make_trainer(estimator="gdpo", gdpo_components=["bb"])
    adv, _ = trainer._advantages([group(0, [(None, False, {})] * 3)])
    assert not adv.mask.any()
    with pytest.raises(ValueError, match=r"gdpo_components names \['bb'\]"):
        trainer._advantages([group(0, TIED_TOTALS[:3])])
    # named sub-components ('a.b', left out by default) and components null in the whole batch are
    # returned: no error, and the advantages are those of the named components
    parts: list[Result] = [
        (1.0, True, {"a": 1.0, "a.x": 1.0, "c": None}),
        (0.0, True, {"a": 0.0, "a.x": 0.0, "c": None}),
    ]
    adv, _ = make_trainer(estimator="gdpo", gdpo_components=["a.x", "c"])._advantages([group(0, parts)])
    assert adv.values[0, 0] > 0 > adv.values[0, 1]


def test_gdpo_dynamic_sampling_checks_the_components_before_it_drops_groups(
    make_trainer: Callable[..., Trainer],
) -> None:
    """Dynamic sampling looks at the components before the advantages do, and it looked without the
    checks: a misspelt gdpo_components entry, or a reward with no components at all, made every group
    "no signal" there, so every group was dropped, the advantages (where the errors are raised) were
    never computed, and the run trained on nothing with nothing said, where without dynamic sampling it
    stops at its first batch. Found in review."""
    trainer = make_trainer(
        estimator="gdpo", dynamic_sampling=True, max_sampling_rounds=1, gdpo_components=["bb"]
    )
    with pytest.raises(ValueError, match=r"gdpo_components names \['bb'\]"):
        trainer._collect(CannedDispatcher([TIED_TOTALS]))  # type: ignore[arg-type]
    trainer = make_trainer(estimator="gdpo", dynamic_sampling=True, max_sampling_rounds=1)
    no_components: list[Result] = [(float(k % 2), True, {}) for k in range(6)]
    with pytest.raises(ValueError, match="gdpo needs reward components"):
        trainer._collect(CannedDispatcher([no_components]))  # type: ignore[arg-type]
    trainer = make_trainer(
        estimator="gdpo", dynamic_sampling=True, max_sampling_rounds=1, gdpo_weights={"bb": 1.0}
    )
    with pytest.raises(ValueError, match=r"gdpo_weights names \['bb'\]"):
        trainer._collect(CannedDispatcher([TIED_TOTALS]))  # type: ignore[arg-type]


def test_gdpo_a_batch_with_no_valid_item_trains_on_nothing(make_trainer: Callable[..., Trainer]) -> None:
    """A batch in which every item came back invalid without components (each one past its deadline,
    say) stopped a gdpo run with "gdpo needs reward components, and the service returned none", where
    every other estimator masks such a batch out (no gradient, the run goes on). Found in review."""
    trainer = make_trainer(estimator="gdpo", gdpo_weights={"c": 2.0})
    groups = [group(0, [(None, False, {})] * 3), group(1, [(None, False, {})] * 3)]
    adv, rewards = trainer._advantages(groups)
    assert adv.mask.tolist() == [[False] * 3] * 2 and adv.values.abs().sum().item() == 0.0
    assert torch.isnan(rewards).all()
    assert trainer._optimize(groups, adv) == {"seqs_in_loss": 0.0, "seqs_forwarded": 0.0}
    # the check of gdpo_weights waits for a batch that has components: 'c' is still caught there
    with pytest.raises(ValueError, match=r"gdpo_weights names \['c'\]"):
        trainer._advantages([group(0, TIED_TOTALS[:3])])
    # valid items without a single component: a reward GDPO cannot train on, still refused
    with pytest.raises(ValueError, match="gdpo needs reward components"):
        make_trainer(estimator="gdpo")._advantages([group(0, [(1.0, True, {}), (0.0, True, {})])])


def test_a_gdpo_weight_of_a_component_null_in_the_whole_first_batch_is_not_misspelt(
    make_trainer: Callable[..., Trainer],
) -> None:
    """A composite component the service returns as null for every item of the first batch (a judge or
    code part with on_invalid zero/skip whose backend timed out while it warmed up) was taken for a
    misspelt gdpo_weights entry: the run stopped with "gdpo_weights names ['b'], which the reward
    service does not return". The service does return it; it has no signal in that batch. Found in
    review."""
    null_b: list[Result] = [(1.0, True, {"a": 1.0, "b": None}), (0.0, True, {"a": 0.0, "b": None})]
    trainer = make_trainer(estimator="gdpo", gdpo_weights={"b": 0.5})
    adv, _ = trainer._advantages([group(0, null_b)])
    a = 0.5 / (0.5**0.5 + 1e-4)  # a = [1, 0]: mean .5, std √.5; b is no signal; then the batch step
    assert adv.values[0].tolist() == pytest.approx([a / (2**0.5 * a + 1e-4), -a / (2**0.5 * a + 1e-4)])
    # every component null in a valid item's batch is no signal either, not "no components"
    adv, _ = make_trainer(estimator="gdpo")._advantages([group(0, [(0.0, True, {"a": None})] * 2)])
    assert adv.values.abs().sum().item() == 0.0 and adv.mask.all()


def test_a_fresh_run_in_a_used_run_dir_keeps_its_own_checkpoints(
    make_trainer: Callable[..., Trainer],
) -> None:
    """With ``resume: false`` in a run directory that an earlier, longer run had used, the new run's
    checkpoint sorted before the old run's and was pruned as the oldest the moment it was written, and
    the old run's step_000010 stayed "latest": a later resume continued the *old* run. Found in review."""
    old = make_trainer()
    for step in (8, 10):
        old.step = step
        old._save()
    fresh = make_trainer(output={"resume": False})
    fresh._resume()
    assert fresh.step == 0
    fresh.step = 2
    fresh._save()
    found = sorted(p.name for p in (fresh.run_dir / "checkpoints").glob("step_*"))
    assert found == ["step_000002"]
    assert latest_checkpoint(fresh.run_dir) == fresh.run_dir / "checkpoints" / "step_000002"
    resumed = make_trainer()
    resumed._resume()
    assert resumed.step == 2


def test_resume_continues_the_lr_schedule_from_the_updates_made(make_trainer: Callable[..., Trainer]) -> None:
    """The warmup follows the optimizer updates, not the steps (a step that trained on nothing is no
    update): a resumed run takes the count from its checkpoint, not from the step. Found in review."""
    old = make_trainer()
    old.config.training.warmup_steps = 4
    old.step, old.updates = 3, 1
    old._save()
    resumed = make_trainer()
    resumed.config.training.warmup_steps = 4
    resumed._resume()
    assert (resumed.step, resumed.updates) == (3, 1)
    assert resumed._set_lr() == pytest.approx(resumed.config.training.learning_rate * 2 / 4)


def test_resume_from_a_checkpoint_without_updates_counts_a_step_as_an_update(
    make_trainer: Callable[..., Trainer],
) -> None:
    """A checkpoint written before the updates were counted has no ``updates`` in its state.json: it
    resumes (no KeyError), each of its steps taken as an update, so its warmup goes on where it was."""
    import json

    old = make_trainer()
    old.config.training.warmup_steps = 8
    old.step, old.updates = 3, 3
    old._save()
    state_path = latest_checkpoint(old.run_dir) / "state.json"  # type: ignore[operator]
    state = json.loads(state_path.read_text())
    del state["updates"]
    state_path.write_text(json.dumps(state))
    resumed = make_trainer()
    resumed.config.training.warmup_steps = 8
    resumed._resume()
    assert (resumed.step, resumed.updates) == (3, 3)
    assert resumed._set_lr() == pytest.approx(resumed.config.training.learning_rate * 4 / 8)


class SyncRecorder(HFGenerator):
    """The transformers sampler, recording the weights each ``sync_weights`` hands it (vLLM loads them)."""

    def __init__(self, inner: HFGenerator):
        super().__init__(inner.model, inner.tokenizer, inner.config)
        self.synced: list[dict[str, torch.Tensor]] = []

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.synced.append({k: v.detach().clone() for k, v in model.state_dict().items()})


def test_resume_hands_the_checkpoint_weights_to_the_sampler(make_trainer: Callable[..., Trainer]) -> None:
    """A resumed run loaded the checkpoint into the policy but not into a separate sampler (vLLM, which
    starts from ``model.path`` and is only synced after an optimizer step): the first step after resume
    sampled from the base model, off-policy, with its ratios against the wrong logprobs. Found in review."""
    old = make_trainer()
    with torch.no_grad():
        for p in old.model.parameters():
            p.add_(0.5)
    old.step = 3
    old._save()
    resumed = make_trainer()
    recorder = SyncRecorder(resumed.generator)  # type: ignore[arg-type]
    resumed.generator = recorder
    resumed._resume()
    assert resumed.step == 3 and len(recorder.synced) == 1
    expected = old.model.state_dict()
    assert all(torch.equal(recorder.synced[0][k], expected[k]) for k in expected)


def test_resume_refuses_a_checkpoint_of_another_run(
    make_trainer: Callable[..., Trainer], tmp_path: Path
) -> None:
    """``output.resume`` (on by default, with a default run_dir) picked up whatever checkpoint the run
    directory held: a second experiment with another reward, dataset or model resumed the first one's
    weights and data position, and one whose step count the old run had reached trained not at all,
    reporting success. Found in review."""
    old = make_trainer()
    old.step = 3
    old._save()
    other_data = make_trainer()
    other_data.config.data.arithmetic.seed = 99
    with pytest.raises(ValueError, match=r"data\.arithmetic\.seed.*output\.resume: false"):
        other_data._resume()
    other_reward = make_trainer()
    other_reward.config.reward.name = "regex"
    with pytest.raises(ValueError, match=r"reward\.name"):
        other_reward._resume()
    with_lora = make_trainer()
    with_lora.config.model.lora.enabled = True  # named before its parameter names fail to match
    with pytest.raises(ValueError, match=r"model\.lora\.enabled: False -> True"):
        with_lora._resume()
    # what may change between a run and its continuation: step count, learning rate, output...
    same = make_trainer()
    same.config.training.steps = 100
    same.config.training.learning_rate = 1e-3
    same._resume()
    assert same.step == 3


def test_resume_keeps_the_streak_of_steps_with_every_reward_request_failed(
    make_trainer: Callable[..., Trainer],
) -> None:
    """The count of consecutive steps in which every reward request failed was not in the checkpoint:
    a run stopped (or preempted) after max_failed_steps - 1 such steps resumed with the streak at 0 and
    trained on nothing for max_failed_steps more before it ended; restarted on each stop with a
    checkpoint every step, it got that far each time, and could reach its last step as a success having
    trained on nothing. Found in review. The streak is saved and restored."""
    import json

    old = make_trainer()
    old.config.reward.max_failed_steps = 3
    old.step, old.failed_steps = 4, 2
    old._save()
    resumed = make_trainer()
    resumed.config.reward.max_failed_steps = 3
    resumed._resume()
    assert resumed.failed_steps == 2
    down = SimpleNamespace(last_error=None)  # what _check_failures reads of the dispatcher
    with pytest.raises(RuntimeError, match="failed for 3 consecutive steps"):
        resumed._check_failures(down, 2, 2)  # type: ignore[arg-type]
    # a checkpoint written before the streak was saved resumes with none
    state_path = latest_checkpoint(old.run_dir) / "state.json"  # type: ignore[operator]
    state = json.loads(state_path.read_text())
    del state["failed_steps"]
    state_path.write_text(json.dumps(state))
    older = make_trainer()
    older._resume()
    assert (older.step, older.failed_steps) == (4, 0)


class FlakyDispatcher(CannedDispatcher):
    """Canned answers, where ``None`` is a request that failed past the client's retries."""

    def __init__(self, answers: list[list[Result] | None]):
        super().__init__([])
        self.script = answers

    def submit(self, groups: Sequence[Group]) -> concurrent.futures.Future[list[ItemResult]]:
        answer = self.script.pop(0)
        if answer is not None:
            self.answers = [answer]
            return super().submit(groups)
        fut: concurrent.futures.Future[list[ItemResult]] = concurrent.futures.Future()
        fut.set_result(failed_request(groups))
        return fut


def test_groups_dropped_counts_only_what_dynamic_sampling_drops_and_failed_groups_have_their_own(
    make_trainer: Callable[..., Trainer],
) -> None:
    """``groups_dropped`` counted the groups dynamic sampling dropped for having no signal (DAPO) and
    the groups whose reward request failed together: an outage read as a batch of too-easy or too-hard
    prompts, and a real zero-variance drop was hidden in the failures. Found in review. ``groups_dropped``
    now counts the answered groups dropped for no signal, ``groups_failed`` the groups whose request
    failed (with or without dynamic sampling)."""
    trainer = make_trainer(dynamic_sampling=True, max_sampling_rounds=3)
    # round 1: group 0 has signal, group 1 none (dropped); round 2 (one prompt): its request fails
    signal_and_flat: list[Result] = [(1.0, True, {}), (0.0, True, {}), (0.0, True, {})] + [
        (1.0, True, {})
    ] * 3
    col = trainer._collect(FlakyDispatcher([signal_and_flat, None]))  # type: ignore[arg-type]
    assert col.rounds == 2 and [g.problem.index for g in col.groups] == [0]
    assert col.dropped == 1 and len(col.scored) == 3
    adv, _ = trainer._advantages(col.groups)
    out = trainer._step_metrics(col, adv)
    assert (out["groups_trained"], out["groups_dropped"], out["groups_failed"]) == (1.0, 1.0, 1.0)
    # without dynamic sampling a failed group stays in the batch (masked), still counted as failed
    trainer = make_trainer()
    col = trainer._collect(FlakyDispatcher([None]))  # type: ignore[arg-type]
    adv, _ = trainer._advantages(col.groups)
    out = trainer._step_metrics(col, adv)
    assert (out["groups_dropped"], out["groups_failed"]) == (0.0, 2.0)


def test_resume_keeps_the_run_s_reward_request_counts(make_trainer: Callable[..., Trainer]) -> None:
    """summary.json's reward_requests and reward_requests_failed were the dispatcher's, which counts the
    requests of its own process only: a resumed run reported those since the resume beside the whole
    run's steps and times. Found in review. The counts are saved with the checkpoint (a checkpoint
    written before they were starts them at 0)."""
    import json

    old = make_trainer()
    old.step = 3
    old.requests = {"reward_requests": 6, "reward_requests_failed": 2, "reward_requests_unanswered": 1}
    old._save()
    resumed = make_trainer()
    resumed._resume()
    assert resumed.requests == {
        "reward_requests": 6,
        "reward_requests_failed": 2,
        "reward_requests_unanswered": 1,
    }
    state_path = latest_checkpoint(old.run_dir) / "state.json"  # type: ignore[operator]
    state = json.loads(state_path.read_text())
    # a checkpoint written before the unanswered requests were counted: those count from the resume on
    del state["requests"]["reward_requests_unanswered"]
    state_path.write_text(json.dumps(state))
    old_counts = make_trainer()
    old_counts._resume()
    assert old_counts.step == 3
    assert old_counts.requests == {
        "reward_requests": 6,
        "reward_requests_failed": 2,
        "reward_requests_unanswered": 0,
    }
    del state["requests"]
    state_path.write_text(json.dumps(state))
    older = make_trainer()
    older._resume()
    assert older.requests == {
        "reward_requests": 0,
        "reward_requests_failed": 0,
        "reward_requests_unanswered": 0,
    }


def test_groups_trained_counts_only_groups_in_the_loss_with_or_without_dynamic_sampling(
    make_trainer: Callable[..., Trainer],
) -> None:
    """Without dynamic sampling ``groups_trained`` was the batch size, so a group whose reward request
    failed (masked out of the loss, and counted in ``groups_failed``) also counted as trained, while
    dynamic sampling drops such a group and does not count it: the metric meant two things. Found in
    review. It now counts the groups with an item in the loss, in both modes."""
    signal = group(0, [(1.0, True, {}), (0.0, True, {}), (0.0, True, {})])
    failed = group(1, [(None, False, {})] * 3)
    for r in failed.results:
        r.reason = REQUEST_FAILED
    invalid = group(2, [(None, False, {})] * 3)  # answered, every item invalid: masked too
    trainer = make_trainer()
    col = _Collected(
        groups=[signal, failed, invalid], scored=[signal, failed, invalid], rounds=1, dropped=0, gen_s=0.0
    )
    adv, _ = trainer._advantages(col.groups)
    out = trainer._step_metrics(col, adv)
    assert (out["groups_trained"], out["groups_failed"]) == (1.0, 1.0)
    # dynamic sampling keeps the signal group only: the same count
    trainer = make_trainer(dynamic_sampling=True)
    col = _Collected(groups=[signal], scored=[signal, failed, invalid], rounds=1, dropped=1, gen_s=0.0)
    adv, _ = trainer._advantages(col.groups)
    out = trainer._step_metrics(col, adv)
    assert (out["groups_trained"], out["groups_dropped"], out["groups_failed"]) == (1.0, 1.0, 1.0)


def test_unknown_sampler_logprobs_are_recomputed_with_the_policy(
    make_trainer: Callable[..., Trainer],
) -> None:
    """A sequence whose sampler logprobs are unknown (NaN: vLLM reported fewer than it sampled) used to
    reach the loss with 0.0 in their place, a wrong ratio under ``old_logprobs: sampler``. Found in
    review. Its old logprobs are now the policy's first-epoch forward (ratio 1 on the one epoch), the
    loss and the update stay finite, and ``logprob_mismatch`` leaves it out (no known token: NaN)."""
    trainer = make_trainer(old_logprobs="sampler", num_epochs=1)
    comps = [Completion([1], [5, 6], [math.nan, math.nan], "ab", False) for _ in range(3)]
    g = Group("g0", Problem(0, "q0", "1"), comps, [result(k, float(k), True, {}) for k in range(3)])
    adv, _ = trainer._advantages([g])
    stats = trainer._optimize([g], adv)
    assert stats["ratio_mean"] == pytest.approx(1.0)
    assert math.isfinite(stats["loss"]) and math.isfinite(stats["grad_norm"])
    assert math.isnan(stats["logprob_mismatch"])
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


class CountingDispatcher(CannedDispatcher):
    """Canned answers, with what the run loop reads of a dispatcher between steps."""

    wait_s = 0.0
    requests = failed_requests = unanswered_requests = 0
    last_error = None

    def close(self) -> None:
        return None


def test_the_run_directory_does_not_keep_the_reward_service_key(
    make_trainer: Callable[..., Trainer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """RUN_DIR/config.json is the whole config, and it held ``reward.api_key`` in clear: a run directory
    is shared, uploaded and committed with its results, the service's bearer key with it. Found in
    review. The key is redacted there (the run itself still sends it)."""
    import json

    import rewardhub_trainer.trainer as trainer_module

    answers: list[list[Result]] = [[(float(k % 2), True, {}) for k in range(6)]]
    monkeypatch.setattr(trainer_module, "check_service", lambda config: None)
    monkeypatch.setattr(trainer_module, "RewardDispatcher", lambda *a, **k: CountingDispatcher(answers))
    trainer = make_trainer(output={"save_final_model": False})
    trainer.config.reward.api_key = "sk-secret-123"
    trainer.config.training.steps = 1
    trainer.run()
    written = (trainer.run_dir / "config.json").read_text()
    assert "sk-secret-123" not in written
    assert json.loads(written)["reward"]["api_key"] == "<redacted>"
    assert trainer.config.reward.api_key == "sk-secret-123"
    assert not any("sk-secret-123" in p.read_text() for p in trainer.run_dir.rglob("*.json*"))


def test_a_misspelt_accuracy_key_stops_the_run_at_its_first_batch_with_a_valid_item(
    make_trainer: Callable[..., Trainer],
) -> None:
    """``reward.accuracy_key`` naming a component the service does not return was read as "absent in
    every item": the accuracy metric was NaN for the whole run, with nothing said. Found in review."""
    trainer = make_trainer(reward={"accuracy_key": "mth"})
    # invalid items may lack their components (missing_reference...): nothing to judge by yet
    trainer._check_accuracy_key([group(0, [(None, False, {})] * 3)])
    assert math.isnan(step_metrics(trainer, [group(0, [(None, False, {})] * 3)])["accuracy"])
    with pytest.raises(ValueError, match=r"accuracy_key 'mth' is not a component.*\['format', 'math'\]"):
        trainer._check_accuracy_key(
            [group(0, [(1.0, True, {"math": 1.0, "format": 1.0}), (None, False, {})])]
        )
    # a valid item without a single component: nothing it names is returned
    with pytest.raises(ValueError, match=r"accuracy_key 'mth'.*components are \[\]"):
        make_trainer(reward={"accuracy_key": "mth"})._check_accuracy_key([group(0, [(0.0, True, {})])])


def test_an_accuracy_key_the_service_returns_is_not_misspelt(make_trainer: Callable[..., Trainer]) -> None:
    """Returned by an invalid item only, or null in every item, or a sub-component of a part that scored
    nothing in this batch (it has no sub-components then): not a misspelling."""
    trainer = make_trainer(reward={"accuracy_key": "math"})
    trainer._check_accuracy_key([group(0, [(0.0, True, {"format": 0.0}), (None, False, {"math": None})])])
    assert trainer._accuracy_key_checked
    trainer = make_trainer(reward={"accuracy_key": "code.passed_all"})
    trainer._check_accuracy_key([group(0, [(0.0, True, {"code": None, "fmt": 0.0})])])
    assert not trainer._accuracy_key_checked  # the part was skipped: the check waits
    with pytest.raises(ValueError, match=r"accuracy_key 'code.passed_all'"):
        trainer._check_accuracy_key([group(0, [(0.5, True, {"code": 0.5, "code.pass_rate": 0.5})])])
    trainer = make_trainer(reward={"accuracy_key": "code.passed_all"})
    groups = [group(0, [(1.0, True, {"code": 1.0, "code.passed_all": 1.0}), (0.0, True, {"code": None})])]
    trainer._check_accuracy_key(groups)
    assert step_metrics(trainer, groups)["accuracy"] == 1.0


def test_the_accuracy_filter_drops_groups_outside_its_bounds_and_samples_more(
    make_trainer: Callable[..., Trainer],
) -> None:
    """PRIME's filter: a group whose accuracy (the share of its valid items that are accurate, as the
    ``accuracy`` metric counts them) is outside ``[low, high]`` is dropped and replaced in another
    round, as dynamic sampling's are; ``groups_accuracy_filtered`` counts them and ``groups_dropped``
    too. Invalid items are left out of a group's accuracy; a group without one is not judged."""
    trainer = make_trainer(accuracy_filter=[0.2, 0.8], max_sampling_rounds=3)
    # round 1: accuracy 1/3 (kept), 3/3 (dropped)
    round1: list[Result] = [(1.0, True, {}), (0.0, True, {}), (0.0, True, {})] + [(1.0, True, {})] * 3
    answers: list[list[Result]] = [
        round1,
        # round 2 (one prompt): 1 of its 1 valid item (1.0, dropped: not 1 of 3)
        [(1.0, True, {}), (None, False, {}), (None, False, {})],
        # round 3: 1 of 2 valid items (0.5, kept)
        [(0.0, True, {}), (None, False, {}), (1.0, True, {})],
    ]
    col = trainer._collect(CannedDispatcher(answers))  # type: ignore[arg-type]
    assert col.rounds == 3 and [g.problem.index for g in col.groups] == [0, 3]
    assert (col.dropped, col.filtered, len(col.scored), trainer.data_pos) == (2, 2, 4, 4)
    adv, _ = trainer._advantages(col.groups)
    out = trainer._step_metrics(col, adv)
    assert (out["groups_trained"], out["groups_dropped"], out["groups_accuracy_filtered"]) == (2.0, 2.0, 2.0)
    assert out["sampling_rounds"] == 3.0
    # the filter's bounds are inclusive: at [1/3, 1] both groups of round 1 are kept, in one round
    trainer = make_trainer(accuracy_filter=[1 / 3, 1.0], max_sampling_rounds=3)
    col = trainer._collect(CannedDispatcher([round1]))  # type: ignore[arg-type]
    assert (col.rounds, [g.problem.index for g in col.groups], col.dropped, col.filtered) == (1, [0, 1], 0, 0)
    # no accuracy, not judged: an all-invalid group stays in the batch (masked, as without the filter)
    # and a failed one is counted as failed, not as filtered; a round with no answer is the last
    trainer = make_trainer(accuracy_filter=[0.2, 0.8], max_sampling_rounds=3)
    col = trainer._collect(FlakyDispatcher([[(None, False, {})] * 3 + [(1.0, True, {})] * 3, None]))  # type: ignore[arg-type]
    assert [g.problem.index for g in col.groups] == [0, 2] and (col.dropped, col.filtered) == (1, 1)
    adv, _ = trainer._advantages(col.groups)
    out = trainer._step_metrics(col, adv)
    assert (out["groups_trained"], out["groups_failed"], out["groups_accuracy_filtered"]) == (0.0, 1.0, 1.0)
    # off: no rounds beyond the first, nothing filtered, the metric null
    trainer = make_trainer()
    col = trainer._collect(CannedDispatcher([round1]))  # type: ignore[arg-type]
    assert (len(col.groups), col.dropped, col.filtered) == (2, 0, 0)
    assert math.isnan(
        trainer._step_metrics(col, trainer._advantages(col.groups)[0])["groups_accuracy_filtered"]
    )


def test_the_accuracy_filter_reads_the_run_s_accuracy_key_and_threshold(
    make_trainer: Callable[..., Trainer],
) -> None:
    """A group's accuracy is the ``accuracy`` metric's: ``reward.accuracy_key``'s component (a composite's
    correctness), not its score, against ``reward.accuracy_threshold``."""
    composite = {"name": "composite", "accuracy_key": "a"}
    # the scores are all 0.5 (never >= 1: accuracy 0 on the score); the component a is 1, 0, 0
    answer: list[Result] = [(0.5, True, {"a": float(k == 0)}) for k in range(3)] * 2
    trainer = make_trainer(reward=composite, accuracy_filter=[0.2, 0.8], max_sampling_rounds=1)
    col = trainer._collect(CannedDispatcher([answer]))  # type: ignore[arg-type]
    assert [g.problem.index for g in col.groups] == [0, 1] and col.filtered == 0
    # the score against a threshold of 0.5: every item accurate, accuracy 1, both dropped
    trainer = make_trainer(
        reward={"accuracy_threshold": 0.5}, accuracy_filter=[0.2, 0.8], max_sampling_rounds=1
    )
    col = trainer._collect(CannedDispatcher([answer]))  # type: ignore[arg-type]
    assert col.groups == [] and (col.dropped, col.filtered) == (2, 2)
    # a misspelt key stops the run before the filter reads it (no group would have an accuracy)
    trainer = make_trainer(
        reward={**composite, "accuracy_key": "b"}, accuracy_filter=[0.2, 0.8], max_sampling_rounds=1
    )
    with pytest.raises(ValueError, match=r"accuracy_key 'b' is not a component"):
        trainer._collect(CannedDispatcher([answer]))  # type: ignore[arg-type]


def test_with_dynamic_sampling_on_too_a_group_either_drops_is_dropped(
    make_trainer: Callable[..., Trainer],
) -> None:
    """Both on: a group is dropped if dynamic sampling drops it (no signal) or the accuracy filter does
    (outside the bounds); ``groups_dropped`` counts every group dropped, ``groups_accuracy_filtered``
    those outside the bounds, whether or not dynamic sampling would have dropped them too."""
    trainer = make_trainer(dynamic_sampling=True, accuracy_filter=[0.2, 0.5], max_sampling_rounds=2)
    answers: list[list[Result]] = [
        # accuracy 2/3: signal, but outside the bounds; 0/3: flat and outside the bounds
        [(1.0, True, {}), (1.0, True, {}), (0.0, True, {})] + [(0.0, True, {})] * 3,
        # 1/3 and 1/3 (0.5 is not accurate), both with signal: kept
        [(1.0, True, {}), (0.0, True, {}), (0.0, True, {})]
        + [(1.0, True, {}), (0.5, True, {}), (0.0, True, {})],
    ]
    col = trainer._collect(CannedDispatcher(answers))  # type: ignore[arg-type]
    assert [g.problem.index for g in col.groups] == [2, 3]
    assert (col.rounds, col.dropped, col.filtered) == (2, 2, 2)
    # flat but within the bounds (0.5 everywhere: accuracy 0, in [0, 0.5]): dynamic sampling alone
    # drops it, and it is not counted as filtered
    trainer = make_trainer(dynamic_sampling=True, accuracy_filter=[0.0, 0.5], max_sampling_rounds=1)
    flat_and_signal: list[Result] = [(0.5, True, {})] * 3 + [
        (1.0, True, {}),
        (0.0, True, {}),
        (0.0, True, {}),
    ]
    col = trainer._collect(CannedDispatcher([flat_and_signal]))  # type: ignore[arg-type]
    assert [g.problem.index for g in col.groups] == [1] and (col.dropped, col.filtered) == (1, 0)


def test_mc_grpo_judges_a_group_s_accuracy_on_all_its_g_plus_1_samples_the_pivot_s_included(
    make_trainer: Callable[..., Trainer],
) -> None:
    """MC-GRPO samples G+1 (here 4) and leaves the pivot, a member at the median, out of the loss. The
    accuracy filter and the ``accuracy`` and ``reward`` metrics still count it, on purpose (pinned after
    review of "accuracy includes pivot"): a group's accuracy estimates its prompt's pass rate under the
    policy, and the G+1 samples are i.i.d. draws of it, while the pivot is picked *by its reward*: left
    out, the estimate is pulled toward the middle (binary rewards, most right: the pivot is a right one,
    so the accuracy drops; most wrong: it rises), and the filter would keep prompts PRIME's filter calls
    too easy or too hard. The pivot's reward also sets every other member's advantage (it is the
    baseline), and the metrics stay comparable with a GRPO run's over all sampled completions."""
    mostly_right: list[Result] = [(1.0, True, {})] * 3 + [(0.0, True, {})]  # 3/4; the trained 3: 2/3
    mostly_wrong: list[Result] = [(1.0, True, {})] + [(0.0, True, {})] * 3  # 1/4; the trained 3: 1/3
    # [0.7, 1]: 3/4 is kept (2/3 would not be); [0.3, 1]: 1/4 is dropped (1/3 would not be)
    for bounds, kept in (([0.7, 1.0], [0]), ([0.3, 1.0], [0])):
        trainer = make_trainer(estimator="mc_grpo", accuracy_filter=bounds, max_sampling_rounds=1)
        col = trainer._collect(CannedDispatcher([mostly_right + mostly_wrong]))  # type: ignore[arg-type]
        assert [g.problem.index for g in col.groups] == kept and (col.dropped, col.filtered) == (1, 1)
    adv, _ = trainer._advantages(col.groups)
    assert adv.mask.tolist() == [[False, True, True, True]]  # the pivot (the first 1) is out of the loss
    out = trainer._step_metrics(col, adv)
    assert out["accuracy"] == 4 / 8 and out["reward"] == 4 / 8  # every sample scored, pivots included
    assert out["groups_trained"] == 1.0 and out["groups_accuracy_filtered"] == 1.0


def test_a_run_whose_every_update_is_skipped_ends_after_max_skipped_steps(
    make_trainer: Callable[..., Trainer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy's training forward overflows on every step (one hidden unit inf: every log-prob NaN;
    generation, without gradients, is left alone): each step is skipped with the weights unchanged and
    logged with ``updates_skipped`` and ``nonfinite_tokens``, and ``training.max_skipped_steps`` such steps
    in a row end the run instead of a run of steps that train on nothing."""
    import json

    import rewardhub_trainer.trainer as trainer_module

    answers: list[list[Result]] = [[(float(k % 2), True, {}) for k in range(6)] for _ in range(3)]
    monkeypatch.setattr(trainer_module, "check_service", lambda config: None)
    monkeypatch.setattr(trainer_module, "RewardDispatcher", lambda *a, **k: CountingDispatcher(answers))
    trainer = make_trainer(output={"save_final_model": False})
    trainer.config.training.steps = 3
    trainer.config.training.max_skipped_steps = 2

    def overflow(module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor | None:
        if not torch.is_grad_enabled():
            return None
        bad = torch.zeros_like(output)
        bad[..., 0] = math.inf
        return output + bad

    trainer.model.model.norm.register_forward_hook(overflow)  # type: ignore[union-attr,operator]
    before = [p.detach().clone() for p in trainer.model.parameters()]
    with pytest.raises(RuntimeError, match=r"every optimizer step of 2 consecutive steps was skipped"):
        trainer.run()
    rows = [json.loads(line) for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["updates_skipped"] for r in rows] == [1.0, 1.0] and all(r["nonfinite_tokens"] > 0 for r in rows)
    assert [r["updates"] for r in rows] == [0.0, 0.0] and trainer.updates == 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
