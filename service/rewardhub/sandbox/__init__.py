"""Running untrusted, model-written code: the sandbox.

Threat model
============

The adversary is the *program*: code a policy wrote while being optimised to get reward. It may be
merely buggy (infinite loops, memory blow-ups, 500 MB of output, fork bombs) or, because RL finds every
loophole, actively hostile to the *scorer*: exiting with status 0 before the tests run, printing a fake
success line, overriding ``__eq__`` to be always true, monkeypatching builtins, editing or reading the
test file, killing its parent, leaving a daemon behind. It must not be able to

1. read or change anything of the host: the service's files, environment and secrets, the network;
2. exhaust the host: CPU, memory, processes, disk, output, or time beyond its limits;
3. outlive its run;
4. make a failing solution score as passing.

The trainer's data (the reference: tests, cases, schemas) is trusted not to attack the service, but is
still only ever executed inside the sandbox.

Layers
======

* **Namespaces** (:mod:`.runner`, ``bwrap --unshare-all``): no network (an empty network namespace), its
  own PID namespace (it cannot see or signal host processes; when its PID 1 exits the kernel kills every
  process in it, daemons included), a user namespace with no capabilities and no nested namespaces.
* **Filesystem**: only ``/usr`` (and the ``/bin``, ``/lib*`` links), the dynamic-linker cache and the
  guest program, all read-only; a private tmpfs as ``/tmp``, capped in bytes and in files (an empty file
  costs ~1 KB of kernel memory and no tmpfs bytes; ``/dev/shm`` alike): the guest mounts it itself with
  two capabilities ``bwrap`` lends it and drops them before any untrusted code exists
  (``rh_guest._private_tmpfs``); fresh ``/proc`` and ``/dev``.
  The service's code, its home, the repository, ``/etc/shadow``: not there.
* **Environment**: cleared (``--clearenv``) and rebuilt with ``PATH``, ``HOME``, ``LANG`` only.
* **Identity** (when the service runs as root): each concurrent run has its own unused host uid, so
  ``RLIMIT_NPROC`` bounds *that run* (root is exempt from it) and runs cannot signal each other.
* **Resource limits** (:mod:`.guest`): address space, processes, file size, open files, core dumps
  off, CPU seconds; per test/case a CPU-time limit with a wall-clock cap (3x it) inside, and a
  wall-clock deadline per run outside (the service kills the process group, which takes the namespace
  with it); output read incrementally and cut at a cap.
* **Unforgeable verdicts** (:mod:`.guest`, :mod:`.harness`): Python tests are executed by a *judge*
  process that the solution's process cannot read, trace or signal (non-dumpable PID 1); the solution
  is forked before the judge reads the tests and the run's random nonce, so neither was ever in its
  memory; values returned by the solution are rebuilt from builtin types only before any comparison, so
  no override of ``__eq__``/``__bool__``/``__float__`` takes part in a verdict (a list, dict or set
  argument a call changed in place is written back into the tests' object the same way, rebuilt, never
  into a namespace or the interpreter's own containers; ``isinstance``/``issubclass`` against a class
  of the solution is the solution's answer, about its own class); a name of the solution
  that would shadow a builtin or a standard module the tests use (``def abs(x): return 0``, a fake
  ``math``) is not visible to the tests, unless it is the function under test; only lines that carry the
  nonce count, and a test without a verdict line has failed. For stdin/stdout cases the expected output
  never enters the sandbox: the service compares. A seccomp filter in the untrusted process refuses
  ``kill``/``tgkill``/``sigqueue``/``prlimit`` aimed at the judge, its group, PID 1 or everyone,
  ``pidfd_send_signal`` and ``F_SETOWN``-style file ownership (SIGIO, or any signal via ``F_SETSIG``):
  a judge killed mid-run would turn a failing run into an incomplete one; POSIX message queues and
  keyring keys, which outlive the processes of a warm slot's run; memfds (``memfd_secret``'s too) and
  System V IPC objects, memory outside the address space that ``RLIMIT_AS`` bounds; ``sched_setaffinity``, which would
  take a run off its pinned core onto those of concurrent runs; and the mount API and namespace calls
  (the capped ``/tmp`` lies over an uncapped one in a mount namespace the program's user namespace
  owns), ``bpf``, ``perf_event_open`` and ``userfaultfd``, whatever the capabilities; and ``io_uring``,
  whose polling thread the kernel puts on any core its creator names.
* **Warm sandboxes** (:mod:`.warm`): one long-lived sandbox per slot whose PID 1 forks the guest per
  run, saving bwrap and interpreter start-up; between runs it kills every leftover process, wipes
  ``/tmp`` and checks for IPC objects, and anything it cannot reset ends the slot.

Known limits (documented, not hidden): assert-style tests for C, C++, JavaScript and bash run in the
same process as the solution (a completion marker catches an early ``exit(0)``). For JavaScript a
trusted harness runs first (``rewards/code.py``'s ``_JS_HARNESS``: the marker only in the run's stdin,
read and closed before the solution runs; ``assert`` frozen; the tests' ``require``, ``assert``,
``console`` and ``process`` parameters the solution cannot shadow), but a program that reads its own
memory (``v8.getHeapSnapshot()``, ``/proc/self/mem``, the inspector), hooks another module the tests
require or reads the tests' file still forges a pass (an async test's failure, or a wait on a promise
that never settles, fails). For bash the
shell is put back after the solution (``_bash_program``: its functions, aliases and disabled builtins
named as builtins, its DEBUG/RETURN/ERR and signal traps), the marker only in the run's stdin, but a
program that reads it there (``/proc/self/fd``) or reads its own memory, a function shadowing an
external command the tests call (``grep``, ``diff``), an attribute on a variable the tests assign
(``declare -l result``: lowercased), or a function the tests call directly (not in ``$( )``) that
breaks the shell again still forges one; use stdin/stdout cases for those languages when that matters);
helpers the tests take from the solution's namespace (HumanEval's ``poly``, ``encode_cyclic``: given
in the prompt, so part of the response) are the solution's to redefine, as in any harness that runs
prompt, completion and tests together; ``rlimits_only`` mode has no filesystem or network isolation; memory is bounded per process
(``RLIMIT_AS``) and tmpfs size, not per run as a cgroup would.

Modules: :mod:`.probe` (start-up capability check), :mod:`.runner` (one run), :mod:`.warm` (warm
sandboxes), :mod:`.pool` (concurrency, queue, uids, jobs), :mod:`.languages`, :mod:`.harness` (protocol, service side), :mod:`.guest` (the
program inside the sandbox).
"""

from __future__ import annotations

from rewardhub.sandbox.harness import ExecReport, PytestReport, RunReport
from rewardhub.sandbox.languages import LANGUAGES, Language, resolve_language
from rewardhub.sandbox.pool import Limits, SandboxPool, SandboxUnavailable
from rewardhub.sandbox.runner import IsolationLevel, RawRun

__all__ = [
    "LANGUAGES",
    "ExecReport",
    "IsolationLevel",
    "Language",
    "Limits",
    "PytestReport",
    "RawRun",
    "RunReport",
    "SandboxPool",
    "SandboxUnavailable",
    "resolve_language",
]
