"""Imported once by the CPU pool's forkserver: loads and *warms* SymPy and Math-Verify.

SymPy imports many submodules lazily and fills caches on first use, so a fresh worker's first few
hundred milliseconds go to one-off work. Doing that work here, in the forkserver, means every worker
forked from it (the first ones and every replacement after a timeout) starts with it already done,
shared copy-on-write. The inputs are fixed and simple, so this cannot hang the server's start.
"""

from __future__ import annotations

import logging

from rewardhub.runtime import heap
from rewardhub.runtime.cpu_tasks import warm_up

# Math-Verify warns once per process that its own timeouts are off; the pool enforces deadlines.
logging.getLogger("math_verify").setLevel(logging.ERROR)

warm_up()
# Frozen before the workers fork (gc.freeze's documented use): their collections never walk SymPy's
# heap, nor write to its objects' headers, which kept those pages shared copy-on-write.
heap.settle()
