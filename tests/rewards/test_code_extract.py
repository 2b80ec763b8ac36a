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


def test_a_fence_tag_with_attributes_names_its_language() -> None:
    # 'python:main.py', '{python}' (Quarto, R Markdown), '{.python ...}' (pandoc), 'python,linenos': the
    # whole word was the tag, named no language, and the whole Markdown response was run as the program
    for info in ("python:main.py", "{python}", "{.python .numberLines}", "python,linenos", "Python {a=1}"):
        found = extract_code(f"Solution:\n```{info}\nprint(1)\n```\nDone.", PY)
        assert found is not None and (found.code, found.source) == ("print(1)\n", "fenced"), info
    cpp = extract_code("```c++:main.cpp\nint main(){}\n```\n", LANGUAGES["cpp"])
    assert cpp is not None and cpp.source == "fenced"
    # a fence tag for another language is still not taken for this one
    assert extract_code("```javascript:a.js\nconsole.log(1)\n```\n", PY, "fenced") is None


def test_an_empty_last_block_does_not_hide_the_program() -> None:
    # an empty block after the program (a template left unfilled) was taken as the last python block,
    # found empty, and the whole Markdown response was run as the program instead
    text = "```python\nprint(1)\n```\nFill in below if needed:\n```python\n```\n"
    found = extract_code(text, PY)
    assert found is not None and (found.code, found.source) == ("print(1)\n", "fenced")
    untagged = extract_code("```\nprint(2)\n```\nand\n```\n\n```\n", PY)
    assert untagged is not None and (untagged.code, untagged.source) == ("print(2)\n", "untagged_fence")
    assert extract_code("```python\n```\n", PY, "fenced") is None


def test_a_fence_line_deeper_inside_the_program_does_not_end_it() -> None:
    # any line of ``` closed the block, whatever its indentation: one inside an indented string literal
    # cut the program there (a SyntaxError); a closing fence is indented at most 3 columns past the
    # opening one (CommonMark)
    program = 'def fence():\n    return """\n    ```\n    """\n'
    found = extract_code(f"Here:\n```python\n{program}```\nDone.", PY)
    assert found is not None and (found.code, found.source) == (program, "fenced")
    # a list item's fence still closes at its own indentation, and up to 3 columns past it
    listed = extract_code("1. Code:\n   ```python\n   x = 1\n   ```\n2. Done\n", PY)
    assert listed is not None and listed.code == "x = 1\n"
    loose = extract_code("```python\nx = 1\n   ```\nDone.", PY)
    assert loose is not None and loose.code == "x = 1\n"


def test_a_fence_tag_with_a_language_standard_or_version_names_its_language() -> None:
    # ```c++17, ```cpp20, ```c11 and ```py3 (how models label a block written for a standard) named no
    # language: the block was passed over, and in auto mode the whole Markdown response ran as the program
    for tag, name in (
        ("c++17", "cpp"),
        ("cpp17", "cpp"),
        ("C++20", "cpp"),
        ("cxx14", "cpp"),
        ("gnu++17", "cpp"),
        ("cpp11:main.cpp", "cpp"),
        ("c11", "c"),
        ("c99", "c"),
        ("gnu17", "c"),
        ("py3", "python"),
    ):
        found = extract_code(f"Solution:\n```{tag}\nX\n```\nDone.", LANGUAGES[name], "fenced")
        assert found is not None and (found.code, found.source) == ("X\n", "fenced"), tag
    # still only its own language's: a C++17 block is not a C program, nor the reverse
    assert extract_code("```c++17\nX\n```\n", LANGUAGES["c"], "fenced") is None
    assert extract_code("```c11\nX\n```\n", LANGUAGES["cpp"], "fenced") is None
    # tags of languages the sandbox does not run, or runs otherwise (zsh is not bash), name none, as before
    for tag in ("zsh", "golang", "c++1", "py2", "c++17x"):
        assert extract_code(f"```{tag}\nX\n```\n", LANGUAGES["bash"], "fenced") is None, tag
        assert extract_code(f"```{tag}\nX\n```\n", LANGUAGES["cpp"], "fenced") is None, tag
        assert extract_code(f"```{tag}\nX\n```\n", PY, "fenced") is None, tag


def test_a_tagged_fence_opened_inside_a_line_is_a_block() -> None:
    # "Final: ```python" opens the block after text on its line (CommonMark wants the fence to open the
    # line; models write it inline): the fence was not seen and the whole response, prose and backticks,
    # was run as the program (a SyntaxError, or for SQL a parse error)
    text = "Reasoning done.\nFinal: ```python\nprint(2)\n```\nThat is all."
    found = extract_code(text, PY)
    assert found is not None and found.source == "fenced"
    assert found.code == "print(2)\n"
    # the block's language still decides: an inline sql fence is not the python program
    both = "Try: ```sql\nSELECT 1\n```\nor in code: ```python\nprint(3)\n```\n"
    got = extract_code(both, PY)
    assert got is not None and got.code == "print(3)\n"
    # prose that names a fence before the real block: the inline fence must end its line (it took the
    # rest of the text, the real fence line with it, as its program)
    prose = "I'll write it in a ```python block:\n```python\nprint(5)\n```\n"
    real = extract_code(prose, PY)
    assert real is not None and real.code == "print(5)\n"
    # inline code spans on one line are not fences
    span = extract_code("Use ```x``` here\nprint(4)\n", PY)
    assert span is not None and span.source == "raw"
