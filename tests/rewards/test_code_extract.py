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


def test_a_crlf_response_ends_its_fence() -> None:
    # with \r\n line ends the closing fence line is '```\r', which did not close the block: the fence
    # and all text after it ran into the program (a SyntaxError)
    found = extract_code("Here:\r\n```python\r\nprint(1)\r\n```\r\nThat prints 1.\r\n", PY)
    assert found is not None and found.code == "print(1)\r\n"
