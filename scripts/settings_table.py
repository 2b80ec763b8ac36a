"""Print the README's configuration table from rewardhub.config.Settings (the single source of truth).

    .venv/bin/python scripts/settings_table.py > /tmp/table.md
"""

from __future__ import annotations

from rewardhub.config import Settings


def main() -> None:
    print("| variable | default | meaning |")
    print("| --- | --- | --- |")
    for name, field in Settings.model_fields.items():
        default = field.default if field.default_factory is None else "(computed)"
        if name in ("cpu_workers", "sandbox_workers"):
            default = "cores (÷ uvicorn workers)"
        shown = "unset" if default is None else f"`{default}`"
        description = (field.description or "").replace("|", "\\|")
        print(f"| `REWARDHUB_{name.upper()}` | {shown} | {description} |")


if __name__ == "__main__":
    main()
