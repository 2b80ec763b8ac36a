"""The languages the sandbox runs: file name, compile command, run command, and their spellings.

One table, so the ``code`` reward, the SandboxFusion endpoint and the capability probe agree on what
``cpp`` means. Compilers run *inside* the sandbox under the compile timeout, like any untrusted step:
a program can attack its compiler (``#include "/dev/zero"``, template bombs) as easily as it can run.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

__all__ = [
    "COMPILER_MEMORY_MB",
    "LANGUAGES",
    "PYTHON_SYNTAX_CHECK",
    "Language",
    "available_languages",
    "resolve_language",
]


@dataclass(frozen=True, slots=True)
class Language:
    name: str  # canonical name, as results report it
    source: str  # the file the code is written to, in the sandbox's working directory
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    # How people spell it: SandboxFusion's names, Markdown fence tags, common aliases.
    aliases: tuple[str, ...] = ()
    # Executables that must exist for the language to be offered (checked once at start-up).
    needs: tuple[str, ...] = ()
    # Address space the runtime reserves for itself, added to the program's RLIMIT_AS: V8 (node)
    # reserves about 750 MiB before it runs anything and more as its heap grows, so under the plain limit
    # no program could start below 768 MiB, and one holding 150 MB of objects crashed under 1 GiB.
    # `heap_flag` (inserted after the run command's first word, "{mb}" the memory limit) then caps the
    # program's heap at the limit.
    reserved_address_space_mb: int = 0
    heap_flag: str | None = None
    # An interpreted language's parse-only check, run as the compile step when a syntax error must be
    # reported as one (see SandboxPool.run_program's syntax_check; Python has its own, below).
    syntax_check: tuple[str, ...] | None = None

    @property
    def compiled(self) -> bool:
        return self.compile is not None


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        # `-E -s`: no environment, no user site; site is kept so that `exit()` works as in any script.
        # Not `-I`: it also leaves the script's directory off sys.path, and a program could not import
        # the modules sent with it (SandboxFusion's `files`), as `python main.py` there does.
        Language(
            "python",
            "main.py",
            ("python3", "-E", "-s", "main.py"),
            None,
            ("python3", "py", "python"),
            ("python3",),
        ),
        Language(
            "c",
            "main.c",
            ("./main",),
            ("gcc", "-O2", "-std=gnu17", "-pipe", "-o", "main", "main.c", "-lm"),
            ("c", "gcc"),
            ("gcc",),
        ),
        Language(
            "cpp",
            "main.cpp",
            ("./main",),
            ("g++", "-O2", "-std=gnu++17", "-pipe", "-o", "main", "main.cpp"),
            ("cpp", "c++", "cxx", "cc", "g++"),
            ("g++",),
        ),
        Language(
            "javascript",
            "main.js",
            ("node", "main.js"),
            None,
            ("javascript", "js", "nodejs", "node"),
            ("node",),
            reserved_address_space_mb=1024,
            heap_flag="--max-old-space-size={mb}",
            syntax_check=("node", "--check", "main.js"),
        ),
        Language(
            "bash",
            "main.sh",
            ("bash", "main.sh"),
            None,
            ("bash", "sh", "shell"),
            ("bash",),
            # extglob on: a program that turns it on (shopt -s extglob) before its @(a|b) patterns
            # runs, but `bash -n` does not run the shopt and failed it as a syntax error
            syntax_check=("bash", "-O", "extglob", "-n", "main.sh"),
        ),
    )
}

# A compile step's address-space limit when the program's is lower: the compiler is not the program
# being judged, and g++ needs about 256 MiB for <bits/stdc++.h> (a lower limit failed every C++ program
# as a compile error).
COMPILER_MEMORY_MB = 1024

# Python has no compile step. This one compiles the program without running it, with the program's own
# interpreter (see SandboxPool.run_program's syntax_check).
PYTHON_SYNTAX_CHECK = (
    "python3",
    "-I",
    "-S",
    "-c",
    "import sys\ntry:\n    compile(open('main.py', 'rb').read(), 'main.py', 'exec')\n"
    "except (SyntaxError, ValueError) as e:\n    sys.exit(type(e).__name__ + ': ' + str(e))\n",
)

_BY_ALIAS: dict[str, Language] = {alias: lang for lang in LANGUAGES.values() for alias in lang.aliases}


def resolve_language(name: str) -> Language | None:
    """The language for a name in any accepted spelling (case-insensitive), or None."""
    return _BY_ALIAS.get(name.strip().lower())


def available_languages() -> dict[str, Language]:
    """The languages whose tools are installed (the sandbox sees the host's ``/usr`` read-only)."""
    return {name: lang for name, lang in LANGUAGES.items() if all(shutil.which(tool) for tool in lang.needs)}
