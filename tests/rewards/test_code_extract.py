"""Finding the program in a response (rewards.code_extract): the fence cases found in review."""

from __future__ import annotations

from rewardhub.rewards.code_extract import extract_code
from rewardhub.sandbox.languages import LANGUAGES

PY = LANGUAGES["python"]


def test_an_indented_fence_loses_its_indentation() -> None:
    # a fence inside a Markdown list item: its lines carry the item's indentation, which made the
    # program start with '   def f():' (an IndentationError in Python)
    text = "Steps:\n1. The code:\n   ```python\n   def f():\n       return 1\n   print(f())\n   ```\n"
    found = extract_code(text, PY)
    assert found is not None and found.source == "fenced"
    assert found.code == "def f():\n    return 1\nprint(f())\n"
    # only up to the fence's own indentation is removed, never more (CommonMark)
    shallow = extract_code("  ```python\nx = 1\n   y = 2\n  ```\n", PY)
    assert shallow is not None and shallow.code == "x = 1\n y = 2\n"
