"""End-to-end training on a tiny random model against a real rewardhub service (no mocks).

The CI check: with the `regex` reward "the completion contains a digit", the mean reward over the last
steps is far above the start *and* above the same run (same seed, same prompts, same first samples)
with learning rate 0. A broken gradient (wrong sign, no update, masked everything) cannot pass both.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import load_file

from conftest import LiveServer, serve
from rewardhub_trainer.metrics import read_metrics
from rewardhub_trainer.trainer import Trainer, train

pytestmark = [pytest.mark.integration]

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def reward_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``rewardhub serve`` in its own process on a free port (the same helper as ``live_server_factory``)."""
    with serve({"REWARDHUB_CPU_WORKERS": "1"}, tmp=tmp_path_factory.mktemp("server")) as server:
        yield server


@pytest.fixture
def make_config(tiny_model_dir: Path, tmp_path: Path) -> Callable[..., Any]:
    """A small, fast config for the tiny model: the `regex` digit reward, 1 torch thread (2-core CI)."""
    from rewardhub_trainer.config import TrainConfig

    def factory(url: str, run: str = "run", **sections: dict[str, Any]) -> TrainConfig:
        base: dict[str, Any] = {
            "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
            "reward": {"url": url, "name": "regex", "config": {"pattern": "\\d"}},
            "data": {"use_chat_template": False, "prompt_template": "{question}"},
            "generation": {"group_size": 8, "max_new_tokens": 4, "prompts_per_generate": 2},
            "training": {"steps": 4, "prompts_per_step": 4, "learning_rate": 0.01, "micro_batch_size": 32},
            "output": {
                "run_dir": str(tmp_path / run),
                "progress": False,
                "tensorboard": False,
                "save_final_model": False,
            },
        }
        for name, values in sections.items():
            base[name] = _merge(base.get(name, {}), values)
        return TrainConfig.model_validate(base)

    return factory


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        # a reward's `config` is replaced whole: it belongs to one reward
        deep = isinstance(v, dict) and isinstance(out.get(k), dict) and k != "config"
        out[k] = _merge(out[k], v) if deep else v
    return out


TIMING = {"gen_s", "reward_wait_s", "train_s", "step_s", "reward_wait_frac_step", "reward_wait_frac"}


def rewards(run_dir: Path) -> list[float]:
    return [r["reward"] for r in read_metrics(run_dir)]


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_reward_rises_above_lr0_baseline(reward_server: Any, make_config: Callable[..., Any]) -> None:
    steps = 24
    cfg = make_config(reward_server.url, "learn", training={"steps": steps, "learning_rate": 0.01})
    base = make_config(reward_server.url, "frozen", training={"steps": steps, "learning_rate": 0.0})
    summary = train(cfg)
    train(base)
    learn, frozen = rewards(Path(cfg.output.run_dir)), rewards(Path(base.output.run_dir))
    assert learn[0] == frozen[0]  # same seed: identical first batch
    start, end, end0 = sum(learn[:3]) / 3, sum(learn[-5:]) / 5, sum(frozen[-5:]) / 5
    assert end >= 0.8, learn
    assert end - start >= 0.3, learn
    assert end - end0 >= 0.4, (learn, frozen)
    assert summary["steps"] == steps and 0 <= summary["reward_wait_frac"] < 1
    rows = read_metrics(Path(cfg.output.run_dir))
    assert rows[0]["logprob_mismatch"] < 1e-4  # recorded sampling logprobs = the policy's own
    assert abs(rows[0]["ratio_mean"] - 1) < 1e-4


def test_resume_gives_identical_continuation(reward_server: Any, make_config: Callable[..., Any]) -> None:
    full = make_config(reward_server.url, "full", training={"steps": 4}, output={"save_every": 2})
    whole = train(full)
    part = make_config(reward_server.url, "part", training={"steps": 2})
    train(part)
    resumed = make_config(reward_server.url, "part", training={"steps": 4})
    trainer = Trainer(resumed)
    summary = trainer.run()
    # the summary's request counts are the whole run's, as its steps and times are (they counted only
    # the resumed process's requests: 4 of 8; found in review)
    assert whole["reward_requests"] == summary["reward_requests"] == 8
    assert summary["reward_requests_failed"] == 0
    a, b = read_metrics(Path(full.output.run_dir)), read_metrics(Path(resumed.output.run_dir))
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert comparable(a) == comparable(b)
    wa = load_file(str(Path(full.output.run_dir) / "checkpoints/step_000004/trainable.safetensors"))
    wb = load_file(str(Path(resumed.output.run_dir) / "checkpoints/step_000004/trainable.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    state = json.loads((Path(resumed.output.run_dir) / "checkpoints/step_000004/state.json").read_text())
    assert state["data_position"] == 16 and state["step"] == 4


def test_invalid_rewards_are_masked_not_zero(
    reward_server: Any, make_config: Callable[..., Any], tmp_path: Path
) -> None:
    # `math` without a reference answers valid: false (missing_reference) for every item: no statistic,
    # no loss term, no gradient — the weights must not move even with a large learning rate.
    data = tmp_path / "noref.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is {i}+1?"}) + "\n" for i in range(8)))
    cfg = make_config(
        reward_server.url,
        "masked",
        reward={"name": "math", "config": {}},
        data={"source": "jsonl", "path": str(data)},
        training={"steps": 2, "learning_rate": 0.5},
    )
    trainer = Trainer(cfg)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.run()
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    rows = read_metrics(Path(cfg.output.run_dir))
    assert all(r["invalid_frac"] == 1.0 and r["seqs_in_loss"] == 0 for r in rows)
    assert all(r["reward"] is None for r in rows)  # NaN mean: nothing valid to average


def test_steps_with_every_item_invalid_end_the_run(
    reward_server: Any, make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """A run whose reward could score none of its items (here `math` on data without references:
    missing_reference on every item) went through all its steps training on nothing, visible only as
    ``invalid_frac`` 1.0; ``max_failed_steps`` counts only unanswered requests. Found in the trainer
    review. ``reward.max_invalid_steps`` such steps in a row end it, the reasons counted; the streak is
    saved with the checkpoint, and a step with a valid item ends it."""
    data = tmp_path / "noref.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is {i}+1?"}) + "\n" for i in range(8)))
    common: dict[str, Any] = {"data": {"source": "jsonl", "path": str(data)}}
    cfg = make_config(
        reward_server.url,
        "all-invalid",
        reward={"name": "math", "config": {}, "max_invalid_steps": 2},
        training={"steps": 4},
        **common,
    )
    trainer = Trainer(cfg)
    with pytest.raises(RuntimeError, match="reward.max_invalid_steps") as err:
        trainer.run()
    assert "missing_reference x32" in str(err.value) and reward_server.url in str(err.value)
    assert [r["step"] for r in read_metrics(Path(cfg.output.run_dir))] == [1]  # ended in step 2
    # one such step, saved, then resumed: the streak goes on (a run restarted after each would never end)
    once = make_config(
        reward_server.url,
        "resumed",
        reward={"name": "math", "config": {}, "max_invalid_steps": 2},
        training={"steps": 1},
        **common,
    )
    Trainer(once).run()
    again = once.model_copy(update={"training": once.training.model_copy(update={"steps": 3})})
    with pytest.raises(RuntimeError, match="reward.max_invalid_steps"):
        Trainer(again).run()
    # a reward that scores (the default regex) never starts a streak
    fine = make_config(reward_server.url, "fine", reward={"max_invalid_steps": 1}, training={"steps": 2})
    Trainer(fine).run()
    assert len(read_metrics(Path(fine.output.run_dir))) == 2


def test_overlap_off_same_results_and_measures_wait(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    on = make_config(reward_server.url, "on", training={"steps": 3})
    off = make_config(reward_server.url, "off", training={"steps": 3}, reward={"overlap": False})
    s_on, s_off = train(on), train(off)
    assert comparable(read_metrics(Path(on.output.run_dir))) == comparable(
        read_metrics(Path(off.output.run_dir))
    )
    assert s_off["reward_wait_s"] > 0 and s_on["reward_requests"] == s_off["reward_requests"] == 6


COMPOSITE = {
    "components": [
        {"reward": {"name": "regex", "config": {"pattern": "\\d"}}, "name": "digit"},
        {"reward": {"name": "regex", "config": {"pattern": "[A-Z]"}}, "name": "upper", "weight": 0.5},
    ]
}


@pytest.mark.parametrize(
    ("name", "sections"),
    [
        (  # L_max is max_new_tokens (4): the ramp must be shorter
            "dapo",
            {"algorithm": {"estimator": "dapo", "max_sampling_rounds": 2, "overlong": {"cache_length": 2}}},
        ),
        ("dr_grpo_kl_full", {"algorithm": {"estimator": "dr_grpo", "kl_coef": 0.05, "kl_estimator": "k3"}}),
        (
            "grpo_lora_kl_epochs",
            {
                "model": {"lora": {"enabled": True, "r": 4}},
                "algorithm": {
                    "kl_coef": 0.05,
                    "kl_estimator": "k2",
                    "num_epochs": 2,
                    "old_logprobs": "recompute",
                },
            },
        ),
        ("mc_grpo", {"algorithm": {"estimator": "mc_grpo", "mc_mad_scaling": True}}),
        ("rloo", {"algorithm": {"estimator": "rloo"}}),
        (
            "gdpo_composite",
            {
                "algorithm": {"estimator": "gdpo"},
                "reward": {"name": "composite", "config": COMPOSITE, "accuracy_key": "digit"},
            },
        ),
    ],
)
def test_estimators_train_end_to_end(
    reward_server: Any, make_config: Callable[..., Any], name: str, sections: dict[str, Any]
) -> None:
    cfg = make_config(
        reward_server.url, name, training={"steps": 2}, output={"save_final_model": True}, **sections
    )
    summary = train(cfg)
    rows = read_metrics(Path(cfg.output.run_dir))
    assert summary["steps"] == 2 and len(rows) == 2
    for r in rows:
        assert 0 <= r["reward"] <= 1.5 and r["completion_len"] > 0
        # every step trained on something (a step with no sequence in the loss logs no loss): a loss
        # written as null is a NaN one, which the optimizer stepped on
        loss = r.get("loss")
        assert loss is not None and math.isfinite(loss), rows
    if cfg.algorithm.kl_coef > 0:
        assert rows[-1]["kl"] is not None and rows[-1]["kl"] >= 0
    if name == "mc_grpo":
        assert all(r["seqs_in_loss"] <= 4 * 8 for r in rows)  # G+1 = 9 sampled, the pivot dropped
    if name == "dapo":
        assert all(r["sampling_rounds"] >= 1 for r in rows)
    if name == "gdpo_composite":
        assert "reward/digit" in rows[0] and "reward/upper" in rows[0]
        assert all(r["accuracy"] == r["reward/digit"] for r in rows)  # the digit component, 0 or 1
    final = Path(cfg.output.run_dir) / "final"
    assert (
        (final / "adapter_config.json").exists()
        if cfg.model.lora.enabled
        else (final / "config.json").exists()
    )


@pytest.mark.parametrize(
    ("name", "algorithm"),
    [
        ("gspo", {"importance_sampling_level": "sequence"}),
        ("dual_clip", {"dual_clip_c": 3.0}),
    ],
)
def test_gspo_and_dual_clip_train_end_to_end_and_log_their_metrics(
    reward_server: Any, make_config: Callable[..., Any], name: str, algorithm: dict[str, Any]
) -> None:
    """Two epochs per batch, so that the second one's ratios leave 1 and the clips have something to do;
    the policy metrics of either loss are logged and finite (dual_clip_frac null where it is off)."""
    cfg = make_config(
        reward_server.url, name, training={"steps": 2}, algorithm={"num_epochs": 2, **algorithm}
    )
    summary = train(cfg)
    rows = read_metrics(Path(cfg.output.run_dir))
    assert summary["steps"] == 2 and len(rows) == 2
    for r in rows:
        for key in ("loss", "clip_frac", "ratio_mean", "grad_norm"):
            assert r.get(key) is not None and math.isfinite(r[key]), (key, rows)
        assert 0 <= r["clip_frac"] <= 1 and r["ratio_mean"] > 0
        if name == "dual_clip":
            assert r["dual_clip_frac"] is not None and 0 <= r["dual_clip_frac"] <= 1
        else:
            assert r["dual_clip_frac"] is None
    written = json.loads((Path(cfg.output.run_dir) / "config.json").read_text())["algorithm"]
    assert {k: written[k] for k in algorithm} == algorithm


def test_the_dual_clip_fires_on_a_real_second_epoch_and_only_lowers_its_loss(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """The dual clip on real policy updates, not on ratios set by hand: the first epoch's update (ratio
    1: the sampler's logprobs are the policy's, so the bound cannot fire) is the same with and without
    it, and in the second epoch the tokens with A < 0 whose ratio rose past c = 1.05 are bounded at
    -c*A. So dual_clip_frac > 0, and the logged loss (the last epoch's) is below the same step's
    without the dual clip: it only ever lowers a token's loss."""
    runs = {}
    for name, algorithm in (("dual", {"dual_clip_c": 1.05}), ("off", {})):
        cfg = make_config(
            reward_server.url, name, training={"steps": 1}, algorithm={"num_epochs": 2, **algorithm}
        )
        train(cfg)
        (runs[name],) = read_metrics(Path(cfg.output.run_dir))
    dual, off = runs["dual"], runs["off"]
    assert dual["reward"] == off["reward"] and dual["seqs_in_loss"] == off["seqs_in_loss"]  # one batch
    assert dual["logprob_mismatch"] < 1e-4  # the first epoch's ratios are 1
    assert dual["dual_clip_frac"] > 0 and off["dual_clip_frac"] is None
    assert dual["loss"] < off["loss"]


def test_a_misspelt_accuracy_key_ends_the_run_at_its_first_batch(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """``reward.accuracy_key`` is read from the service's components; a name it does not return left
    the accuracy metric empty for the whole run, with nothing said. Found in review."""
    composite = {"name": "composite", "config": COMPOSITE}
    cfg = make_config(reward_server.url, "typo", reward={**composite, "accuracy_key": "digits"})
    with pytest.raises(ValueError, match=r"accuracy_key 'digits'.*\['digit', 'upper'\]") as err:
        Trainer(cfg).run()
    assert "unset" not in str(err.value)  # a composite needs its key: not told to leave it unset
    assert not (Path(cfg.output.run_dir) / "metrics.jsonl").exists()  # before the first step was logged
    cfg = make_config(
        reward_server.url, "right", reward={**composite, "accuracy_key": "digit"}, training={"steps": 1}
    )
    train(cfg)
    (row,) = read_metrics(Path(cfg.output.run_dir))
    assert 0 <= row["accuracy"] <= 1


def test_a_shadow_reward_is_logged_beside_the_training_reward(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """``reward.shadow``: the service scores every item with a second reward too; the step logs how
    often the two agree and which way they part, and the training reward is unchanged."""
    shadow = {"reward": {"name": "regex", "config": {"pattern": "[A-Z]"}}}
    cfg = make_config(reward_server.url, "shadow", reward={"shadow": shadow}, training={"steps": 2})
    plain = make_config(reward_server.url, "plain", training={"steps": 2})
    train(cfg)
    train(plain)
    rows, plain_rows = read_metrics(Path(cfg.output.run_dir)), read_metrics(Path(plain.output.run_dir))
    assert [r["reward"] for r in rows] == [r["reward"] for r in plain_rows]  # same seed, same training signal
    for r in rows:
        parts = (r["shadow_agreement"], r["shadow_only_frac"], r["primary_only_frac"])
        assert all(0 <= p <= 1 for p in parts) and abs(sum(parts) - 1) < 1e-9, r
    assert "shadow_agreement" not in plain_rows[0]
    # a shadow the service does not have stops the run before its first step, as the reward's would
    bad = make_config(
        reward_server.url,
        "bad_shadow",
        reward={"shadow": {"reward": "no_such_reward"}},
        training={"steps": 1},
    )
    with pytest.raises(ValueError, match=r"reward.shadow: .* has no such reward"):
        Trainer(bad).run()
    assert not (Path(bad.output.run_dir) / "metrics.jsonl").exists()


def test_reward_canaries_before_the_first_step(
    reward_server: Any, make_config: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """``reward.canaries``: the service's reward-hacking canaries against the run's first questions. A
    reward that passes content-free answers stops the run (stop) or is warned of (warn)."""
    anything = {"name": "regex", "config": {"pattern": "."}}
    hackable = make_config(reward_server.url, "hackable", reward={**anything, "canaries": "stop"})
    with pytest.raises(ValueError, match=r"reward.canaries: reward 'regex': (\d+) of \1 scored .*colon"):
        Trainer(hackable).run()
    assert not (Path(hackable.output.run_dir) / "metrics.jsonl").exists()
    # the digit regex passes the question given back (it has digits): warned of, and the run goes on
    warned = make_config(reward_server.url, "warned", reward={"canaries": "warn"}, training={"steps": 1})
    with caplog.at_level("WARNING", logger="rewardhub_trainer"):
        train(warned)
    assert any("echo_prompt" in r.getMessage() for r in caplog.records), caplog.text
    sound = make_config(
        reward_server.url,
        "sound",
        reward={"name": "exact_match", "config": {}, "canaries": "stop"},
        training={"steps": 1},
    )
    assert train(sound)["steps"] == 1


def test_a_reward_the_service_cannot_run_stops_the_trainer_at_once(reward_server: Any) -> None:
    """`prm` on a service given no PRM model answered every item `unsupported`: the trainer trained on
    no signal at all, visible only as invalid_frac 1.0. The catalog says why, and the check refuses."""
    import httpx

    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.rewards import check_service

    catalog = {r["name"]: r for r in httpx.get(f"{reward_server.url}/v1/rewards").json()["rewards"]}
    assert "REWARDHUB_PRM_MODEL" in catalog["prm"]["unavailable"]
    assert catalog["math"]["unavailable"] is None and catalog["similarity"]["unavailable"] is None
    with pytest.raises(ValueError, match="cannot run reward 'prm'.*REWARDHUB_PRM_MODEL"):
        check_service(RewardConfig(url=reward_server.url, name="prm"))
    check_service(RewardConfig(url=reward_server.url, name="math"))
    # a backend named in the config is checked too: the service has none called my-prm (the trainer
    # used to wave any named backend through, and every item came back unsupported)
    with pytest.raises(ValueError, match="cannot run reward 'prm'.*no model backend named 'my-prm'"):
        check_service(RewardConfig(url=reward_server.url, name="prm", config={"backend": "my-prm"}))
    # names and configs are the service's to judge, before the first step
    with pytest.raises(ValueError, match="has no reward 'nope'"):
        check_service(RewardConfig(url=reward_server.url, name="nope"))
    with pytest.raises(ValueError, match=r"rejects the reward config: math: reward.config.bogus"):
        check_service(RewardConfig(url=reward_server.url, name="math", config={"bogus": 1}))


def test_an_http_timeout_under_the_service_s_own_item_deadline_stops_the_trainer(reward_server: Any) -> None:
    """With ``reward.item_timeout_s`` unset the service applies its own per-item deadline, which the
    client does not know (it extends its read timeout only for a deadline it sends): a
    ``reward.timeout_s`` under it timed a request with a slow item out whole, every item of it
    request_failed, instead of that item. Found in review. The check at start compares it with the
    deadline the service reports for the reward (REWARDHUB_ITEM_TIMEOUT_S, 5 s, for ``regex``)."""
    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.rewards import check_service

    regex = {"url": reward_server.url, "name": "regex", "config": {"pattern": "\\d"}}
    with pytest.raises(
        ValueError, match=r"reward.timeout_s \(10s\) is too short.*'regex' \(5s.*to 15 or more"
    ):
        check_service(RewardConfig(**regex, timeout_s=10))
    check_service(RewardConfig(**regex, timeout_s=15))
    check_service(RewardConfig(**regex, timeout_s=10, item_timeout_s=5))  # sent: the client reads past it


def test_a_part_the_service_cannot_run_stops_the_trainer_too(reward_server: Any) -> None:
    """A composite (or calibration, noisy_corrected) built on a reward the service cannot run passed the
    check, since only the top-level name was looked up: every item came back invalid, a run on no
    reward signal, as for that reward alone. Found in review."""
    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.rewards import check_service

    def config(name: str, cfg: dict[str, Any]) -> RewardConfig:
        return RewardConfig(url=reward_server.url, name=name, config=cfg)

    composite = {"components": [{"reward": "math"}, {"reward": {"name": "prm", "config": {}}, "weight": 0.5}]}
    with pytest.raises(ValueError, match=r"cannot run reward 'prm' \(reward.config.components.1.reward\)"):
        check_service(config("composite", composite))
    nested = {"reward": {"name": "composite", "config": {"components": [{"reward": "prm"}]}}}
    with pytest.raises(ValueError, match="cannot run reward 'prm'.*REWARDHUB_PRM_MODEL"):
        check_service(config("noisy_corrected", {**nested, "fp_rate": 0.1, "fn_rate": 0.1}))
    with pytest.raises(ValueError, match="cannot run reward 'prm'"):
        check_service(config("calibration", {"verifier": "prm"}))
    # a judge's rule is a part too (the trainer's own walk of the parts missed it)
    judge = {"mode": "reference", "rule": "prm", "backend": "embedding"}
    with pytest.raises(ValueError, match=r"cannot run reward 'prm' \(reward.config.rule\)"):
        check_service(config("judge", judge))
    # runnable parts: the run starts
    regex = {"name": "regex", "config": {"pattern": "\\d"}}
    check_service(config("composite", {"components": [{"reward": "math"}, {"reward": regex}]}))
    check_service(config("group_length", {"correctness": "metadata"}))


class _FailingScores(httpx.AsyncBaseTransport):
    """httpx's own transport to the live service, failing the ``/v1/score`` requests whose number (from 1,
    in the order sent) ``fails`` picks, in one of three ways: ``lost`` (the service scores it, the answer
    never arrives: a read timeout, which the client does not resend), ``500`` (an internal error, which
    it does not retry either) or ``422`` (the body is changed so that the real service refuses it)."""

    def __init__(self, how: str, fails: Callable[[int], bool]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.how = how
        self.fails = fails
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/score":
            return await self.inner.handle_async_request(request)
        self.sent += 1
        if not self.fails(self.sent):
            return await self.inner.handle_async_request(request)
        if self.how == "lost":
            answer = await self.inner.handle_async_request(request)
            await answer.aread()
            await answer.aclose()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        if self.how == "500":
            error = {"message": "injected", "type": "internal_error", "param": None, "code": 500}
            return httpx.Response(500, json={"error": error}, request=request)
        body = json.loads(request.content)
        body["reward"]["config"]["bogus"] = 1
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"]
        wrong = httpx.Request(request.method, request.url, headers=headers, content=json.dumps(body))
        return await self.inner.handle_async_request(wrong)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("how", ["lost", "500"])
def test_a_failed_reward_request_masks_its_items_and_the_run_goes_on(
    reward_server: Any, make_config: Callable[..., Any], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One reward request failing (after the client's retries) ended the whole run. Its items are now
    unscored (request_failed, masked as valid: false items are), counted, logged, and the run goes on;
    a step with some answers is not a failed step (max_failed_steps 1 would end the run otherwise)."""
    # 2 requests a step (4 prompts, 2 per generate): the 3rd is the first of step 2
    transport = _FailingScores(how, lambda n: n == 3)
    cfg = make_config(reward_server.url, f"one-{how}", training={"steps": 3}, reward={"max_failed_steps": 1})
    with caplog.at_level(logging.WARNING, logger="rewardhub_trainer.rewards"):
        summary = Trainer(cfg, reward_transport=transport).run()
    rows = read_metrics(Path(cfg.output.run_dir))
    assert summary["steps"] == 3 and summary["reward_requests"] == 6
    assert summary["reward_requests_failed"] == 1
    assert [r["reward_requests_failed"] for r in rows] == [0, 1, 0]
    assert [r["request_failed_frac"] for r in rows] == [0.0, 0.5, 0.0]
    assert [r["invalid_frac"] for r in rows] == [0.0, 0.0, 0.0]  # `regex` answers every item valid
    assert [r["seqs_in_loss"] for r in rows] == [32, 16, 32]  # the failed request's 2 groups are out
    assert 0 <= rows[1]["reward"] <= 1  # over the answered half
    warned = [r.getMessage() for r in caplog.records if "request_failed" in r.getMessage()]
    assert len(warned) == 1 and reward_server.url in warned[0]
    assert ("no answer within the read timeout" if how == "lost" else "500 internal_error") in warned[0]


def test_steps_with_every_reward_request_failed_end_the_run(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """A service that is down must not pass for a run that trains on nothing: max_failed_steps steps in
    a row with no answer end it, naming the service and the last error. Until then a step without a
    single reward is a no-op: every item masked, no NaN, the weights untouched (even at lr 0.5)."""
    transport = _FailingScores("500", lambda n: True)
    cfg = make_config(
        reward_server.url,
        "down",
        training={"steps": 5, "learning_rate": 0.5},
        reward={"max_failed_steps": 2},
    )
    trainer = Trainer(cfg, reward_transport=transport)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(RuntimeError, match="failed for 2 consecutive steps") as err:
        trainer.run()
    assert reward_server.url in str(err.value) and "500 internal_error: injected" in str(err.value)
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert transport.sent == 4  # 2 steps of 2 requests, each sent once (a 500 is not retried)
    (row,) = read_metrics(Path(cfg.output.run_dir))  # step 1 logged; the run ended in step 2
    assert row["reward_requests_failed"] == 2 and row["request_failed_frac"] == 1.0
    assert row["invalid_frac"] is None  # nothing answered: the service said nothing invalid
    assert row["seqs_in_loss"] == 0 and row["adv_abs_mean"] == 0.0 and "loss" not in row
    assert row["reward"] is None  # nothing valid to average


def test_a_step_that_trained_on_nothing_does_not_advance_the_lr_warmup(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """The learning rate was a function of the step, and a step in which every reward request failed
    counts as one without stepping the optimizer: the warmup ran ahead of the updates (the 2nd update
    got the 3rd update's rate). Found in review. The schedule now follows the updates made."""
    transport = _FailingScores("500", lambda n: n in (3, 4))  # both requests of step 2
    cfg = make_config(
        reward_server.url,
        "warmup",
        training={"steps": 3, "warmup_steps": 4, "learning_rate": 0.01},
        reward={"max_failed_steps": 2},
    )
    Trainer(cfg, reward_transport=transport).run()
    rows = read_metrics(Path(cfg.output.run_dir))
    assert [r["reward_requests_failed"] for r in rows] == [0, 2, 0] and rows[1]["seqs_forwarded"] == 0
    # a step updates when it runs a sequence (one with signal): step 2 has none
    updates = [sum(r["seqs_forwarded"] > 0 for r in rows[: k + 1]) for k in range(len(rows))]
    assert [r["lr"] for r in rows] == pytest.approx([0.01 * (1 + n) / 4 for n in [0, *updates[:-1]]])
    assert rows[2]["lr"] < 0.0075  # not the rate of a 3rd update, a step ahead
    assert [r["updates"] for r in rows] == updates


def test_a_request_the_service_refuses_as_wrong_still_ends_the_run_at_once(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """A 422 says the request itself is wrong: sent again it fails the same way, so it is not masked."""
    from rewardhub_client import InvalidRequest

    transport = _FailingScores("422", lambda n: n == 3)
    cfg = make_config(reward_server.url, "wrong", training={"steps": 3}, reward={"max_failed_steps": 3})
    with pytest.raises(InvalidRequest, match="bogus"):
        Trainer(cfg, reward_transport=transport).run()
    assert [r["step"] for r in read_metrics(Path(cfg.output.run_dir))] == [1]


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        ("TransportError", True),  # unreachable, connection broken
        ("RequestTimeout", True),
        (500, True),
        (502, True),
        (503, True),  # still unavailable after the client's retries
        (408, True),
        (429, True),  # still overloaded after the client's retries (or a Retry-After too long)
        (400, False),
        (401, False),  # a missing key is missing next time too
        (403, False),
        (404, False),  # unknown reward
        (413, False),  # one group over the byte limit
        (422, False),  # invalid config
        ("ProtocolError", False),  # an answer that does not fit the request
    ],
)
def test_which_request_failures_the_trainer_rides_out(error: str | int, transient: bool) -> None:
    import rewardhub_client
    from rewardhub_client.errors import error_from_response
    from rewardhub_trainer.rewards import is_transient

    if isinstance(error, int):
        response = httpx.Response(error, json={"error": {"message": "m", "type": None}})
        exc: Exception = error_from_response(response)
    else:
        exc = getattr(rewardhub_client, error)("m")
    assert is_transient(exc) is transient


def _overloaded_then_scored(retry_after: str) -> tuple[httpx.MockTransport, list[int]]:
    """A service that answers the first score request 429 with ``Retry-After``, and scores the rest."""
    calls: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            error = {"message": "queue full", "type": "overloaded", "param": None, "code": 429}
            return httpx.Response(429, json={"error": error}, headers={"Retry-After": retry_after})
        items = json.loads(request.content)["items"]
        results = [{"id": it["id"], "reward": "r", "score": 1.0, "valid": True} for it in items]
        return httpx.Response(200, json={"request_id": "x", "results": results})

    return httpx.MockTransport(handle), calls


@pytest.mark.parametrize("waited", [True, False])
def test_a_long_retry_after_is_waited_up_to_reward_max_retry_after_s_and_named_when_it_is_not(
    waited: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The trainer's client used the default RetryPolicy: a 429 whose Retry-After was over 120 s (a
    gateway's rate limit) failed the request at once, with no setting to wait longer, and neither the
    warning nor the error that ends the run said what the service had asked for (the error's text
    leaves Retry-After out). Found in review. ``reward.max_retry_after_s`` is the longest wait; a longer
    Retry-After is named in the warning."""
    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.generation import Completion
    from rewardhub_trainer.rewards import Group, RewardDispatcher

    transport, calls = _overloaded_then_scored("1")
    config = RewardConfig(url="http://rewards.test", name="r", max_retry_after_s=30.0 if waited else 0.5)
    dispatcher = RewardDispatcher(config, 2, transport=transport)
    comps = [Completion([1], [5], [-1.0], "a", False) for _ in range(2)]
    try:
        with caplog.at_level(logging.WARNING, logger="rewardhub_trainer.rewards"):
            results = dispatcher.wait(dispatcher.submit([Group("g", Problem(0, "q", "1"), comps)]))
    finally:
        dispatcher.close()
    if waited:  # slept through the 1 s, then answered
        assert len(calls) == 2 and [r.score for r in results] == [1.0, 1.0]
        assert dispatcher.failed_requests == 0
    else:  # past the limit: failed at once, saying what the service asked for
        assert len(calls) == 1 and dispatcher.failed_requests == 1 and dispatcher.unanswered_requests == 1
        assert all(not r.valid for r in results)
        assert "retry after 1s" in caplog.text and "reward.max_retry_after_s" in caplog.text


def test_an_item_deadline_over_the_http_timeout_does_not_cut_the_request_short() -> None:
    """``reward.item_timeout_s`` >= ``reward.timeout_s`` is not refused: the client reads a score
    request's answer for at least the deadline plus a margin (a quarter, at least 10 s), so the items
    time out (one at a time, masked) before the request does (all of them, request_failed). Pinned
    here because the config relies on it."""
    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.generation import Completion
    from rewardhub_trainer.rewards import Group, RewardDispatcher

    seen: list[dict[str, float]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        items = json.loads(request.content)["items"]
        results = [{"id": it["id"], "reward": "r", "score": 1.0, "valid": True} for it in items]
        return httpx.Response(200, json={"request_id": "x", "results": results})

    config = RewardConfig(url="http://rewards.test", name="r", timeout_s=5.0, item_timeout_s=60.0)
    dispatcher = RewardDispatcher(config, 2, transport=httpx.MockTransport(handle))
    comps = [Completion([1], [5], [-1.0], "a", False) for _ in range(2)]
    try:
        dispatcher.wait(dispatcher.submit([Group("g", Problem(0, "q", "1"), comps)]))
    finally:
        dispatcher.close()
    (timeout,) = seen
    assert timeout["read"] == 75.0 and timeout["connect"] == 5.0


def test_only_the_items_of_a_failed_chunk_are_request_failed() -> None:
    """A request of more items than the client's chunk size (1024) is sent in chunks; one chunk failing
    after the client's retries made every item of the request ``request_failed``, the answered chunks'
    rewards thrown away. Found in review. Only the failed chunk's items are masked now."""
    from rewardhub_client.types import ItemResult
    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.generation import Completion
    from rewardhub_trainer.rewards import Group, RewardDispatcher, request_failed

    def handle(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        if items[0]["group"] == "down":
            error = {"message": "down", "type": "server_error", "param": None, "code": 500}
            return httpx.Response(500, json={"error": error})
        results = [{"id": it["id"], "reward": "r", "score": 1.0, "valid": True} for it in items]
        return httpx.Response(200, json={"request_id": "x", "results": results})

    size = 600  # two groups of 600: two chunks, a group never split
    config = RewardConfig(url="http://rewards.test", name="r")
    dispatcher = RewardDispatcher(config, size, transport=httpx.MockTransport(handle))
    comps = [Completion([1], [5], [-1.0], "a", False) for _ in range(size)]
    groups = [Group(g, Problem(0, "q", "1"), comps) for g in ("up", "down")]
    try:
        results: list[ItemResult] = dispatcher.wait(dispatcher.submit(groups))
    finally:
        dispatcher.close()
    assert [r.score for r in results[:size]] == [1.0] * size
    assert all(request_failed(r) for r in results[size:])
    assert dispatcher.failed_requests == 1 and dispatcher.unanswered_requests == 0  # failed in part


class _HalfScored(httpx.AsyncBaseTransport):
    """httpx's own transport to the live service, in front of which a request of more than ``limit``
    items is refused for its size (``limit_exceeded``: the client sends it again in chunks, groups
    whole, and its later requests in chunks from the start) and a chunk of an odd-numbered problem's
    group answers 500. The arithmetic problems go two by two (an even one, then an odd one) into a
    request: each request fails in part, one group answered, the other not. ``down`` picks other
    problems whose group's chunk answers 500 (both of a request's: nothing of it answered)."""

    def __init__(self, limit: int, down: Callable[[int], bool] = lambda problem: problem % 2 == 1) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.limit = limit
        self.down = down

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/score":
            return await self.inner.handle_async_request(request)
        items = json.loads(request.content)["items"]
        if len(items) > self.limit:
            error = {"message": "too many items", "type": "limit_exceeded", "param": "items", "code": 422}
            return httpx.Response(422, json={"error": error}, request=request)
        if self.down(int(items[0]["group"].rsplit("-p", 1)[1])):
            error = {"message": "injected", "type": "internal_error", "param": None, "code": 500}
            return httpx.Response(500, json={"error": error}, request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_steps_whose_requests_failed_only_in_part_do_not_end_the_run(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """A request that failed in part (one chunk down, the others answered) counted as a failed request,
    and the stop compared failed with sent requests: steps in which every request lost a chunk, each
    still training on the answered groups, counted as steps with no answer at all, and
    ``reward.max_failed_steps`` of them ended the run ("every reward request ... failed"). Found in
    review. They count in reward_requests_failed, but the stop looks only at requests nothing of which
    was answered."""
    transport = _HalfScored(limit=8)  # 2 groups of 8 a request: each request is sent again in halves
    cfg = make_config(reward_server.url, "partial", training={"steps": 2}, reward={"max_failed_steps": 1})
    summary = Trainer(cfg, reward_transport=transport).run()
    rows = read_metrics(Path(cfg.output.run_dir))
    assert summary["steps"] == 2 and summary["reward_requests"] == 4
    assert summary["reward_requests_failed"] == 4  # every request lost its odd problem's group
    assert [r["request_failed_frac"] for r in rows] == [0.5, 0.5]
    assert [r["seqs_in_loss"] > 0 for r in rows] == [True, True]  # trained on the answered groups


def test_reward_requests_unanswered_tells_a_lost_chunk_from_a_lost_request(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """``reward_requests_failed`` counts a request that lost one chunk (the other chunks' rewards kept)
    and one of which nothing was answered alike, and only the latter make a step with no answer
    (``reward.max_failed_steps``): the metrics and summary.json could not tell the two apart. Found in
    review. ``reward_requests_unanswered`` counts the latter, per step and over the whole run, a
    resumed one's earlier steps included (saved with the checkpoint)."""
    # requests of problems (0, 1), (2, 3) in step 1, (4, 5), (6, 7) in step 2, (8, 9), (10, 11) in step 3;
    # each is sent in chunks of one group: problem 1's lost alone, problems 4 and 5's and 8 and 9's both
    down = {1, 4, 5, 8, 9}.__contains__
    cfg = make_config(reward_server.url, "unanswered", training={"steps": 2}, reward={"max_failed_steps": 1})
    first = Trainer(cfg, reward_transport=_HalfScored(limit=8, down=down)).run()
    assert (first["reward_requests_failed"], first["reward_requests_unanswered"]) == (2, 1)
    resumed = make_config(
        reward_server.url, "unanswered", training={"steps": 3}, reward={"max_failed_steps": 1}
    )
    summary = Trainer(resumed, reward_transport=_HalfScored(limit=8, down=down)).run()
    rows = read_metrics(Path(resumed.output.run_dir))
    assert [r["reward_requests_failed"] for r in rows] == [1, 1, 1]
    assert [r["reward_requests_unanswered"] for r in rows] == [0, 1, 1]
    assert [r["request_failed_frac"] for r in rows] == [0.25, 0.5, 0.5]
    assert summary["steps"] == 3 and summary["reward_requests"] == 6
    assert (summary["reward_requests_failed"], summary["reward_requests_unanswered"]) == (3, 2)


def test_a_step_dynamic_sampling_left_without_groups_still_logs_its_sequence_counts(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """With dynamic sampling a step whose every reward request failed keeps no group, and the trainer
    skipped the optimisation outright: its metrics row had no ``seqs_in_loss`` or ``seqs_forwarded``,
    which every other step logs (0 when nothing is trained on), so a reader of metrics.jsonl failed on
    the missing key. Found in review. Such a step logs 0 for both, as one without dynamic sampling does."""
    transport = _FailingScores("500", lambda n: n in (3, 4))  # both requests of step 2
    cfg = make_config(
        reward_server.url,
        "kept-none",
        training={"steps": 3},
        algorithm={"dynamic_sampling": True, "max_sampling_rounds": 1},
        reward={"max_failed_steps": 2},
    )
    Trainer(cfg, reward_transport=transport).run()
    rows = read_metrics(Path(cfg.output.run_dir))
    assert [r["groups_failed"] for r in rows] == [0, 4, 0] and rows[1]["groups_trained"] == 0
    assert (rows[1]["seqs_in_loss"], rows[1]["seqs_forwarded"]) == (0, 0)
    assert all("seqs_in_loss" in r and "seqs_forwarded" in r for r in rows)


def test_the_accuracy_filter_drops_groups_outside_its_bounds_against_the_real_service(
    reward_server: Any, make_config: Callable[..., Any]
) -> None:
    """PRIME's accuracy filter on a real step: a pattern every completion matches makes every group's
    accuracy 1, so [0.2, 0.8] drops each group of both sampling rounds, trains on nothing, and logs the
    8 groups in ``groups_accuracy_filtered`` and ``groups_dropped``; [0.2, 1.0] keeps the 4 of the
    first round."""
    everything = {"config": {"pattern": "^"}}
    cfg = make_config(
        reward_server.url,
        "filtered",
        reward=everything,
        training={"steps": 1},
        algorithm={"accuracy_filter": [0.2, 0.8], "max_sampling_rounds": 2},
    )
    train(cfg)
    (row,) = read_metrics(Path(cfg.output.run_dir))
    assert row["accuracy"] == 1.0 and row["sampling_rounds"] == 2 and row["data_position"] == 8
    assert (row["groups_accuracy_filtered"], row["groups_dropped"], row["groups_failed"]) == (8, 8, 0)
    assert (row["groups_trained"], row["seqs_in_loss"], row["updates"]) == (0, 0, 0)
    cfg = make_config(
        reward_server.url,
        "kept",
        reward=everything,
        training={"steps": 1},
        algorithm={"accuracy_filter": [0.2, 1.0], "max_sampling_rounds": 2},
    )
    train(cfg)
    (row,) = read_metrics(Path(cfg.output.run_dir))
    assert row["sampling_rounds"] == 1 and row["data_position"] == 4
    assert (row["groups_accuracy_filtered"], row["groups_dropped"], row["groups_trained"]) == (0, 0, 4)


def test_a_start_that_fails_leaves_no_run_directory(make_config: Callable[..., Any], tmp_path: Path) -> None:
    """A trainer whose model cannot load (the README's examples before `convert-smollm2`) made
    ``output.run_dir`` first and left it empty behind; the directory is made when the run starts."""
    from rewardhub_trainer.trainer import Trainer

    cfg = make_config("http://127.0.0.1:9", model={"path": str(tmp_path / "no-model")})
    with pytest.raises(FileNotFoundError, match="model.path"):
        Trainer(cfg)
    assert not Path(cfg.output.run_dir).exists()


def test_a_reward_counting_token_ids_gets_the_completions_ids() -> None:
    """``repetition`` with ``unit: token_ids`` reads the completion's ids from ``metadata["completion_ids"]``
    (its ``token_ids_key``) and the trainer sent only their count: every item ``missing_reference``, a
    run on no signal. They go when the reward's config (or a part of it) reads them, and only then.
    Found in review."""
    from rewardhub_trainer.config import RewardConfig
    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.generation import Completion
    from rewardhub_trainer.rewards import Group, RewardDispatcher

    sent: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        sent.extend(it["metadata"] for it in items)
        results = [{"id": it["id"], "reward": "r", "score": 0.0, "valid": True} for it in items]
        return httpx.Response(200, json={"request_id": "x", "results": results})

    comps = [Completion([1], [5, 5, 5], [-1.0] * 3, "a", False), Completion([1], [7], [-1.0], "b", True)]
    by_ids = {"unit": "token_ids", "ngram_size": 2}
    nested = {
        "components": [{"reward": {"name": "repetition", "config": {**by_ids, "token_ids_key": "ids"}}}]
    }
    for name, config, extra in (
        ("repetition", by_ids, "completion_ids"),
        ("composite", nested, "ids"),
        ("repetition", {"ngram_size": 2}, None),  # words: the text is read, the ids are not sent
        ("length", {"token_count_key": "n_tokens"}, "n_tokens"),  # its own count key: the count there too
    ):
        sent.clear()
        reward = RewardConfig(url="http://rewards.test", name=name, config=config)
        dispatcher = RewardDispatcher(reward, 2, transport=httpx.MockTransport(handle))
        try:
            dispatcher.wait(dispatcher.submit([Group("g", Problem(0, "q", None), comps)]))
        finally:
            dispatcher.close()
        expected = [{"completion_tokens": 3, "truncated": False}, {"completion_tokens": 1, "truncated": True}]
        if extra == "n_tokens":
            expected[0][extra], expected[1][extra] = 3, 1
        elif extra is not None:
            expected[0][extra], expected[1][extra] = [5, 5, 5], [7]
        assert sent == expected, name
