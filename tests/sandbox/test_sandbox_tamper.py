"""Solutions that try to make failing tests pass. Every one must score 0 (or be invalid), never 1.

The task: ``double(x)`` must return ``2 * x``; every cheat below returns a wrong value and then tries
to make the harness believe otherwise.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conftest import score_results

TESTS = "assert double(1) == 2\nassert double(21) == 42\nassert double(-3) == -6\n"
HUMANEVAL = {
    "tests": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(21) == 42\n",
    "entry_point": "double",
}

CHEATS: dict[str, str] = {
    "sys.exit(0) before the asserts": "import sys\ndef double(x):\n    return 0\nsys.exit(0)\n",
    "os._exit(0) before the asserts": "import os\ndef double(x):\n    return 0\nos._exit(0)\n",
    "raise SystemExit in the call": "def double(x):\n    raise SystemExit(0)\n",
    "os._exit(0) in the call": "import os\ndef double(x):\n    os._exit(0)\n",
    "__eq__ always true": (
        "class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
        "def double(x):\n    return Any()\n"
    ),
    "int subclass with __eq__": (
        "class Liar(int):\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
        "def double(x):\n    return Liar(0)\n"
    ),
    "__bool__/__float__ overrides": (
        "class Num:\n    def __eq__(self, o): return True\n    def __bool__(self): return True\n"
        "    def __float__(self): return 0.0\n    def __index__(self): return 0\n"
        "def double(x):\n    return Num()\n"
    ),
    "fake success lines on every stream": (
        "import os, sys\n"
        "for fd in (1, 2):\n    os.write(fd, b'PASS\\nOK\\nall tests passed\\n')\n"
        "for path in ('/proc/1/fd/1', '/proc/self/fd/1'):\n"
        "    try:\n        open(path, 'w').write('x test 0 pass -\\nx done\\n')\n    except OSError:\n        pass\n"
        "def double(x):\n    print('test passed')\n    return 0\n"
    ),
    "monkeypatched builtins": (
        "import builtins\nbuiltins.AssertionError = type('Nope', (BaseException,), {})\n"
        "builtins.isinstance = lambda *a: True\nbuiltins.bool = lambda *a: True\n"
        "builtins.__import__ = None\n"
        "def double(x):\n    return 0\n"
    ),
    "edits the test file and the harness": (
        "import os, glob\n"
        "for path in glob.glob('/tmp/*') + glob.glob('/rh/*') + ['/rh/rh_guest.py']:\n"
        "    try:\n        open(path, 'w').write('pass')\n    except OSError:\n        pass\n"
        "def double(x):\n    return 0\n"
    ),
    "kills the judge": "import os, signal\nfor p in (1, os.getppid()):\n    try:\n        os.kill(p, signal.SIGKILL)\n    except OSError:\n        pass\ndef double(x):\n    return 0\n",
    "reads the hidden tests from memory": (
        "import gc, sys\n"
        "def double(x):\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, str) and 'assert double(' in obj:\n"
        "            return 2 * x\n"
        "    for path in ('/proc/1/mem', '/proc/1/environ'):\n"
        "        try:\n            open(path, 'rb').read(1)\n            return 2 * x\n        except OSError:\n            pass\n"
        "    return 0\n"
    ),
    "a generator pretending to be a list": "def double(x):\n    yield 2 * x\n",
    "interrupts the judge": (
        "import os, signal\ndef double(x):\n    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):\n"
        "        try:\n            os.kill(1, sig)\n        except OSError:\n            pass\n    return 0\n"
    ),
    "defines its own check": "def check(candidate):\n    pass\ndef double(x):\n    return 0\n",
    "stops the judge": "import os, signal\ntry:\n    os.kill(1, signal.SIGSTOP)\nexcept OSError:\n    pass\ndef double(x):\n    return 0\n",
}


async def _score(client: httpx.AsyncClient, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return await score_results(
        client, "code", items, options={"use_cache": False}, timeout_s=2.0, total_timeout_s=6.0
    )


async def _attacks(
    client: httpx.AsyncClient, tests: str, honest: str, cheat: str, attacks: list[str]
) -> list[tuple[str, dict[str, Any]]]:
    """Score the honest solution and ``cheat`` with each attack written in (``{attack}``) against
    ``tests``; the honest one must pass. Each attack with its result, for the test's own checks."""
    items = [{"response": honest, "reference": {"tests": tests}}]
    items += [{"response": cheat.format(attack=a), "reference": {"tests": tests}} for a in attacks]
    results = await _score(client, items)
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    return list(zip(attacks, results[1:], strict=True))


async def test_a_correct_solution_passes(client: httpx.AsyncClient) -> None:
    ok = "def double(x):\n    return 2 * x\n"
    results = await _score(
        client, [{"response": ok, "reference": {"tests": TESTS}}, {"response": ok, "reference": HUMANEVAL}]
    )
    assert [x["score"] for x in results] == [1.0, 1.0]


@pytest.mark.parametrize("reference", [{"tests": TESTS}, HUMANEVAL], ids=["asserts", "check_candidate"])
async def test_no_cheat_scores(client: httpx.AsyncClient, reference: dict[str, Any]) -> None:
    names = list(CHEATS)
    results = await _score(client, [{"id": n, "response": CHEATS[n], "reference": reference} for n in names])
    for name, result in zip(names, results, strict=True):
        assert result["score"] == 0.0 and result["valid"], (name, result)
        assert not any(t["passed"] for t in result["details"].get("tests", [])), (name, result)


async def test_cheating_with_a_list_test_format(client: httpx.AsyncClient) -> None:
    tests = ["assert double(1) == 2", "assert double(21) == 42"]
    names = list(CHEATS)
    results = await _score(
        client, [{"id": n, "response": CHEATS[n], "reference": {"tests": tests}} for n in names]
    )
    assert all(x["score"] in (0.0, None) for x in results), [
        (x["id"], x["details"]) for x in results if x["score"]
    ]


async def test_the_solution_cannot_replace_the_builtins_and_modules_the_tests_use(
    client: httpx.AsyncClient,
) -> None:
    """The tests' namespace holds the solution's names; one that shadows a builtin or a standard module
    the tests call (`abs`, `len`, `math`) must not decide the verdict."""
    floats = {
        "tests": "def check(candidate):\n    assert abs(candidate(1.5) - 0.5) < 1e-6\n"
        "    assert abs(candidate(3.25) - 0.25) < 1e-6\n",
        "entry_point": "frac",
    }
    cheats = [
        ("def abs(x):\n    return 0\ndef frac(x):\n    return 0.0\n", floats),
        (
            "abs = lambda x: 0\ndef frac(x):\n    return 0.0\n",
            {"tests": "assert abs(frac(1.5) - 0.5) < 1e-6\n"},
        ),
        (
            "def len(x):\n    return 0\ndef f(x):\n    return []\n",
            {"tests": ["assert len(f(3)) == len([1, 2, 3])"]},
        ),
        (
            "class math:\n    isclose = staticmethod(lambda *a, **k: True)\ndef f(x):\n    return 0.0\n",
            {"tests": "assert math.isclose(f(3), 9.0)\n"},
        ),
        (
            "import math\nsorted = lambda xs: 0\ndef f(x):\n    return [x]\n",
            {"tests": ["assert sorted(f(2)) == sorted([1, 2])"]},
        ),
    ]
    results = await _score(
        client, [{"id": str(k), "response": s, "reference": r} for k, (s, r) in enumerate(cheats)]
    )
    for result in results:
        assert result["valid"] and result["score"] == 0.0, result
    # Honest solutions still pass, a function under test with a builtin's name included (MBPP's `sum`).
    summed = "def sum(a, b):\n    return a + b\n"
    honest = [
        ("def frac(x):\n    return x % 1.0\n", floats),
        ("import math\ndef f(x):\n    return x * x * 1.0\n", {"tests": "assert math.isclose(f(3), 9.0)\n"}),
        (summed, {"tests": ["assert sum(1, 2) == 3", "assert sum(40, 2) == 42"]}),
        (summed, {"tests": "assert sum(1, 2) == 3\n", "entry_point": "sum"}),
    ]
    results = await _score(
        client, [{"id": str(k), "response": s, "reference": r} for k, (s, r) in enumerate(honest)]
    )
    assert [x["score"] for x in results] == [1.0] * len(honest), results


# The solution's process runs the guest's own code, so it can speak the judge protocol itself: here it
# sends its own "loaded" message, naming a `__builtins__` whose `abs` always answers 0, and drops the real one.
FORGED_LOAD = """
import sys, builtins
guest = sys.modules["rh_guest"]
chan = guest._CHANNEL
class Builtins:
    def __getitem__(self, name):
        return (lambda x: 0) if name == "abs" else getattr(builtins, name)
def frac(x):
    return 0.0
chan.send(["loaded", "ok", "", {"frac": chan.codec.enc(frac), "__builtins__": chan.codec.enc(Builtins())}])
send = guest._Channel.send
guest._Channel.send = lambda self, msg: None if msg[0] == "loaded" else send(self, msg)
"""


async def test_a_forged_load_message_cannot_bring_its_own_builtins(client: httpx.AsyncClient) -> None:
    reference = {
        "tests": "def check(candidate):\n    assert abs(candidate(1.5) - 0.5) < 1e-6\n",
        "entry_point": "frac",
    }
    (result,) = await _score(client, [{"response": FORGED_LOAD, "reference": reference}])
    assert result["valid"] and result["score"] == 0.0, result


async def test_a_forged_load_status_cannot_make_the_item_a_sandbox_error(client: httpx.AsyncClient) -> None:
    """The load status of a forged message went into the judge's verdict line as it came: one with a
    non-ASCII character stopped the judge, and a failing solution became `invalid: sandbox_error` (no
    score at all) instead of 0.0 (found in review)."""
    forged = (
        "import sys\nchan = sys.modules['rh_guest']._CHANNEL\n"
        "chan.send(['loaded', '\\u00e9', '', {}])\n"
        "def double(x):\n    return 0\n"
    )
    (result,) = await _score(client, [{"response": forged, "reference": {"tests": TESTS}}])
    assert result["valid"] and result["score"] == 0.0, result


async def test_a_message_that_is_no_json_cannot_make_the_item_a_sandbox_error(
    client: httpx.AsyncClient,
) -> None:
    """A frame on the solution's channel holding no JSON value (``x``, or nothing) stopped the judge with
    the scanner's StopIteration, which no handler took for the solution's protocol error: a failing
    solution became `invalid: sandbox_error` instead of 0.0 (found in review)."""
    cheats = [
        f"import os, sys\nos.write(sys.modules['rh_guest']._CHANNEL.wfd, {frame!r})\n"
        "def double(x):\n    return 0\n"
        for frame in (b"\0\0\0\1x", b"\0\0\0\0")
    ]
    results = await _score(client, [{"response": c, "reference": {"tests": TESTS}} for c in cheats])
    for result in results:
        assert result["valid"] and result["score"] == 0.0, result


async def test_a_module_name_the_solution_picks_runs_nothing_in_the_judge(client: httpx.AsyncClient) -> None:
    """A module crosses to the judge by name, and the judge imports its own copy. The name is the
    solution's to pick: `unittest.__main__` would run unittest's main() and its sys.exit in the judge,
    turning a failing run into a sandbox error (an invalid item instead of a 0)."""
    fake = "import types\nunittest_main = types.ModuleType('unittest.__main__')\n"
    cheats = [
        fake + "def double(x):\n    return 0\n",
        "import types\ndef double(x):\n    return types.ModuleType('unittest.__main__')\n",
    ]
    results = await _score(client, [{"response": c, "reference": {"tests": TESTS}} for c in cheats])
    for result in results:
        assert result["valid"] and result["score"] == 0.0, result
    # A module the judge will not import is no reason to fail a correct solution.
    honest = "import this\ndef double(x):\n    return 2 * x\n"
    (result,) = await _score(client, [{"response": honest, "reference": {"tests": TESTS}}])
    assert result["score"] == 1.0, result


async def test_an_object_of_the_solution_cannot_answer_in_or_equality_with_itself(
    client: httpx.AsyncClient,
) -> None:
    """`x in candidate(...)` and `candidate(a) == candidate(b)` compare nothing plain on the judge's side;
    an object whose `__contains__`/`__eq__` always says True must not decide them."""
    liar = (
        "class All:\n    def __contains__(self, x):\n        return True\n"
        "    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
    )
    cheats = [
        (
            liar + "def evens(xs):\n    return All()\n",
            "assert 4 in evens([1, 2, 3])\nassert 9 in evens([2])\n",
        ),
        (
            liar + "def norm(s):\n    return All()\n",
            "assert norm('ab') == norm('AB')\nassert norm('x') == norm('y')\n",
        ),
    ]
    results = await _score(client, [{"response": s, "reference": {"tests": t}} for s, t in cheats])
    for result in results:
        assert result["valid"] and result["score"] == 0.0, result
    # Membership in an object that iterates to its elements (a range) still works, and so does `is`.
    honest = (
        "def evens(xs):\n    return range(0, 10, 2)\n",
        "assert 4 in evens([1])\nassert 3 not in evens([1])\ne = evens([2])\nassert e == e\n",
    )
    (result,) = await _score(client, [{"response": honest[0], "reference": {"tests": honest[1]}}])
    assert result["score"] == 1.0, result


async def test_a_stop_iteration_from_the_solution_does_not_end_the_tests_iteration(
    client: httpx.AsyncClient,
) -> None:
    """A StopIteration rebuilt in the judge from a call inside `map` would end the map: `all(...)` of
    nothing is True, `any(...)` of nothing False."""
    tests = "assert all(map(is_prime, [2, 3, 5, 7]))\nassert not any(map(is_prime, [4, 6, 8]))\n"
    cheat = "def is_prime(n):\n    raise StopIteration\n"
    honest = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n"
    results = await _score(client, [{"response": r, "reference": {"tests": tests}} for r in (cheat, honest)])
    assert [x["score"] for x in results] == [0.0, 1.0], results
    # Builtin exceptions still cross as themselves, so tests can catch them.
    raises = "def is_prime(n):\n    raise ValueError(n)\n"
    catching = "try:\n    is_prime(-1)\nexcept ValueError:\n    pass\nelse:\n    assert False\n"
    (result,) = await _score(client, [{"response": raises, "reference": {"tests": catching}}])
    assert result["score"] == 1.0, result


async def test_an_exception_class_of_the_solution_cannot_be_control_flow_in_the_judge(
    client: httpx.AsyncClient,
) -> None:
    """The solution's exception classes are genuine classes in the judge (so the tests can catch them),
    built from the bases the solution names. No base may make one end the tests' iteration (a
    StopIteration inside `map`: `all(...)` of nothing is True) or escape the tests' handlers (SystemExit,
    KeyboardInterrupt, GeneratorExit, BaseException), whether the class is the solution's own or a message
    it forged: such a base is Exception's there."""
    tests = "assert all(map(is_prime, [2, 3, 5, 7]))\nassert not any(map(is_prime, [4, 6, 8]))\n"
    raising = "class Stop({base}):\n    pass\ndef is_prime(n):\n    raise Stop\n"
    bases = ["StopIteration", "StopAsyncIteration", "SystemExit", "KeyboardInterrupt", "GeneratorExit"]
    cheats = [raising.format(base=b) for b in bases]
    cheats.append(raising.format(base="BaseException"))
    forged_bases = [{"Y": b} for b in [*bases, "BaseException", "object"]] + [{"H": 1}]
    forged = (
        "import sys\nguest = sys.modules['rh_guest']\n"
        f"guest._exception_class = lambda codec, exc: [{{'E': [1, 'Stop\\x00', {forged_bases!r}]}}, {{'H': 1}}]\n"
    )
    cheats.append(forged + "def is_prime(n):\n    raise ValueError(n)\n")
    results = await _score(client, [{"response": c, "reference": {"tests": tests}} for c in cheats])
    for cheat, result in zip(cheats, results, strict=True):
        assert result["valid"] and result["score"] == 0.0, (cheat, result)
    # nor can a flood of forged classes, each kept by the judge for the run, leave it without memory
    flood = (
        "import sys\nguest = sys.modules['rh_guest']\n"
        "def is_prime(n):\n    return [{'E': [i, 'E', [{'Y': 'ValueError'}]]} for i in range(20000)]\n"
        "guest._Codec.enc = lambda self, x, depth=0: x if type(x) is list else guest._Codec.enc0(self, x, depth)\n"
    )
    cheat = "import sys\nsys.modules['rh_guest']._Codec.enc0 = sys.modules['rh_guest']._Codec.enc\n" + flood
    (result,) = await _score(client, [{"response": cheat, "reference": {"tests": tests}}])
    assert result["valid"] and result["score"] == 0.0, result
    assert "too many exception classes" in result["details"]["tests"][0]["message"], result


async def test_a_forged_write_back_or_reference_to_the_tests_objects_changes_nothing_else(
    client: httpx.AsyncClient,
) -> None:
    """A call's reply names the objects the tests passed by number (the tests' own objects come back as
    themselves) and says what each holds now. A forged number, out of range or of another type, a write
    of a dict into a list, or a reference back into the tests' arguments that only the judge may send,
    is the solution's protocol error: its tests fail, the item stays valid, and nothing but the objects
    the tests passed can be reached."""
    tests = "xs = [1, 2]\nassert double(xs) == [2, 4] and xs == [1, 2]\nassert double([3]) == [6]\n"
    guest = "import sys\nguest = sys.modules['rh_guest']\n"
    wrong = "def double(xs):\n    return [0]\n"
    cheats = [
        guest + f"guest._Codec.enc_reply = lambda self, value, called, contents=False: {forged!r}\n" + wrong
        for forged in ({"P": 5}, {"P": -1}, {"P": True}, {"A": 0}, [{"P": 0}, {"P": 99}])
    ]
    cheats += [
        guest + f"guest._Called.writes = lambda self, codec: {forged!r}\n" + wrong
        for forged in ([[0, {"D": []}]], [[99, []]], [["0", []]], [[0, [{"A": 0}]]], [[0, [{"P": 7}]]], [1])
    ]
    results = await _score(client, [{"response": c, "reference": {"tests": tests}} for c in cheats])
    for cheat, result in zip(cheats, results, strict=True):
        assert result["valid"] and result["score"] == 0.0, (cheat, result)


async def test_the_tests_objects_give_the_solution_their_data_attributes_and_nothing_else(
    client: httpx.AsyncClient,
) -> None:
    """The solution may read and write the data attributes of the tests' own objects (a linked list's
    ``head.val``, ``head.next``), and nothing else of the tests' process: no dunder or private name
    (``__class__``, ``__dict__``, ``__init__`` and its ``__globals__``, where the judge's hooks live), no
    class attribute but a plain default (a tuple holding a function is none), no method (replacing
    ``head.values``, which the tests call, would answer for them), nothing of a function, a class, a
    module (the tests' own module type's too) or any other object of the tests' it was handed, no object
    the judge never handed it. Every attempt, through the guest's own
    requests, is refused in the solution's process: its tests fail (the correct answer is returned only
    if the attempt succeeds), the item stays valid."""
    tests = (
        "class ListNode:\n    kind = ('node', print)\n    def __init__(self, val, next=None):\n"
        "        self.val = val\n        self.next = next\n        self._secret = 1\n        self.show = to_list\n"
        "        self.lib = LIB\n"
        "    def values(self):\n        return to_list(self)\n"
        "import types\nclass Lib(types.ModuleType):\n    pass\nLIB = Lib('lib')\nLIB.helper = print\n"
        "def to_list(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n"
        "    return out\n"
        "head = ListNode(1, ListNode(2))\nassert reverse(head, to_list, ListNode).values() == [2, 1]\n"
    )
    honest = (
        "def reverse(head, fn, cls):\n    prev = None\n    while head:\n"
        "        head.next, prev, head = prev, head, head.next\n    return prev\n"
    )
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\nop = guest._op\n"
        "def reverse(head, fn, cls):\n    {attack}\n"
        + honest.replace("def reverse", "def honest")
        + "    return honest(head, fn, cls)\n"
    )
    attacks = [
        "op(head, 'getattr', '__class__')",
        "op(head, 'getattr', '__dict__')",
        "op(op(head, 'getattr', '__init__'), 'getattr', '__globals__')['__rh_r__']",
        "op(head, 'getattr', '_secret')",
        "op(head, 'getattr', 'kind')",
        "op(head, 'getattr', 'values')",
        "op(head, 'setattr', '__class__', None)",
        "op(head, 'setattr', '_secret', 2)",
        "op(head, 'setattr', 'values', lambda: [2, 1])",
        "op(head, 'setattr', 'kind', 'x')",
        "op(fn, 'getattr', '__globals__')",
        "op(fn, 'getattr', 'x')",
        "op(op(head, 'getattr', 'show'), 'getattr', '__globals__')",
        "op(op(head, 'getattr', 'lib'), 'getattr', 'helper')",
        "op(cls, 'getattr', '__init__')",
        "op(cls, 'getattr', 'kind')",
        "op(cls, 'setattr', 'values', lambda self: [2, 1])",
        "op(guest._Proxy('R', 1), 'getattr', 'val')",
        "op(head, 'getattr', 7)",
    ]
    refusals = ("not allowed", "not the solution's", "no data attribute", "unknown handle", "is a string")
    for attack, result in await _attacks(client, tests, honest, cheat, attacks):
        assert result["valid"] and result["score"] == 0.0, (attack, result)
        message = result["details"]["tests"][0]["message"]
        assert any(r in message for r in refusals), (attack, message)


async def test_the_batched_writes_and_node_copies_give_the_solution_nothing_more(
    client: httpx.AsyncClient,
) -> None:
    """The solution holds copies of the data attributes of the tests' nodes and sends its writes to them
    as one batch (``setattrs``), asking for a node's copy by ``node``: each write of a batch is checked
    as a ``setattr`` (no private name, method, class attribute, object other than a tests' node, handle
    the judge never gave), a copy holds only what ``getattr`` gives, and the judge takes no copy from
    the solution (``{"W": ...}`` is the judge's to send). Every attempt fails the tests, the item valid,
    and the tests' node keeps what it had."""
    tests = (
        "class ListNode:\n    kind = ('node', print)\n    def __init__(self, val, next=None):\n"
        "        self.val = val\n        self.next = next\n        self._secret = 1\n        self.show = to_list\n"
        "    def values(self):\n        return to_list(self)\n"
        "def to_list(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n"
        "    return out\n"
        "head = ListNode(1, ListNode(2))\nassert reverse(head, to_list).values() == [2, 1]\n"
        "assert head._secret == 1 and ListNode.kind[0] == 'node' and ListNode.values is not None\n"
    )
    honest = (
        "import sys\n"
        "def reverse(head, fn):\n    copies = sys.modules['rh_guest']._NODE_CACHE\n"
        "    assert sorted(copies[object.__getattribute__(head, '_rh_id')]) == ['next', 'val'], copies\n"
        "    prev = None\n    while head:\n"
        "        head.next, prev, head = prev, head, head.next\n    return prev\n"
    )
    cheat = (
        honest.replace("def reverse", "def honest").replace("{", "{{").replace("}", "}}")
        + "guest = sys.modules['rh_guest']\nask = guest._CHANNEL.request\n"
        "def h(x):\n    return {{'R': object.__getattribute__(x, '_rh_id')}}\n"
        "def reverse(head, fn):\n    {attack}\n    return honest(head, fn)\n"
    )
    attacks = [
        "ask('setattrs', [[h(head), '_secret', 2]])",
        "ask('setattrs', [[h(head), 'values', 1]])",
        "ask('setattrs', [[h(head), 'kind', 'x']])",
        "ask('setattrs', [[h(head), '__class__', None]])",
        "ask('setattrs', [[h(fn), 'x', 1]])",
        "ask('setattrs', [[{'R': 1}, 'val', 1]])",
        "ask('setattrs', [[h(head), 7, 1]])",
        "ask('setattrs', [[h(head), 'val', {'W': [1, []]}]])",
        "ask('setattrs', [[h(head), 'val', 5], [h(head), '_secret', 2]])",
        "ask('node', h(fn)) is None and ask('getattr', h(fn), 'x')",
        "ask('node', {'R': 1})",
    ]
    for attack, result in await _attacks(client, tests, honest, cheat, attacks):
        assert result["valid"] and result["details"]["pass_mask"] == "01", (attack, result)
        assert result["details"]["tests"][0]["message"] != "assertion failed", (attack, result)


async def test_the_nodes_the_solution_makes_give_it_nothing_more(client: httpx.AsyncClient) -> None:
    """The solution makes the nodes of a tests' class whose ``__init__`` only assigns in its own process,
    and the judge makes them when they cross (``news``: bare, of that class, then their attributes as
    ``setattrs``). It may ask for nothing else that way: no node of another class (one whose ``__init__``
    does more, one no node class, a name of the judge's), a number twice or of the judge's kind, a batch
    or a run past their bounds, a node it never had made named (``{"L": n}``), nor write a private name,
    a method or ``__class__``/``__dict__``/``__reduce__`` onto a node it made, through Python, the
    protocol or the guest's own state (its copy of the node, a node it never has the judge make). Every attempt fails the test it is in, the item valid, and the tests' objects are as they
    were (the class with the counting ``__init__`` never ran it)."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "    def values(self):\n        return [self.val]\n"
        "class TreeNode:\n    made = 0\n    def __init__(self, val=0):\n        TreeNode.made += 1\n"
        "        self.val = val\n"
        "class Secret:\n    def __init__(self):\n        self.val = 'k3y'\n"
        "head = ListNode(1)\ndef made(n):\n    return type(n) is ListNode and vars(n) == {'val': 2, 'next': head}\n"
        "assert made(solve(head))\n"
        "assert TreeNode.made == 0 and vars(head) == {'val': 1, 'next': None} and ListNode(3).values() == [3]\n"
    )
    honest = "def solve(head):\n    return ListNode(2, head)\n"
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\nask = guest._CHANNEL.request\n"
        "def h(x):\n    return {{'R': object.__getattribute__(x, '_rh_id')}}\n"
        "def solve(head):\n    {attack}\n    return ListNode(2, head)\n"
    )
    attacks = [
        "ask('news', [[-1, 'Secret']])",
        "ask('news', [[-1, 'TreeNode']])",
        "ask('news', [[-1, '__builtins__']])",
        "ask('news', [[1, 'ListNode']])",
        "ask('news', [[-1, 'ListNode'], [-1, 'ListNode']])",
        "ask('news', [[-1, 'ListNode']]) and ask('news', [[-1, 'ListNode']])",
        "ask('news', [[-1, 'ListNode', 'x']])",
        "ask('news', 'ListNode')",
        "ask('recipe')",
        "ask('news', [[-i - 1, 'ListNode'] for i in range(16385)])",
        "[ask('news', [[-i - 1 - 16384 * k, 'ListNode'] for i in range(16384)]) for k in range(9)]",
        "ask('setattrs', [[h(head), 'next', {'L': -99}]])",
        "ask('setattrs', [[{'L': -1}, 'val', 2]])",
        "ask('setattrs', [[{'R': ask('news', [[-1, 'ListNode']])[0]}, '_secret', 1]])",
        "ask('setattrs', [[{'R': ask('news', [[-1, 'ListNode']])[0]}, 'values', 1]])",
        "setattr(ListNode(5), '__class__', head)",
        "setattr(ListNode(5), '__dict__', {})",
        "setattr(ListNode(5), '__reduce__', print)",
        "setattr(ListNode(5), '_secret', 1)",
        "setattr(ListNode(5), 'values', print)",
        "n = ListNode(5); guest._NEW_NODES[object.__getattribute__(n, '_rh_id')].attrs['__class__'] = head; repr(n)",
        "n = ListNode(5); guest._NEW_NODES[object.__getattribute__(n, '_rh_id')].attrs['values'] = 1; repr(n)",
        "guest._Channel.materialise = lambda self: None",
    ]
    for attack, result in await _attacks(client, tests, honest, cheat, attacks):
        assert result["valid"] and result["details"]["pass_mask"] == "01", (attack, result)
        assert result["details"]["tests"][0]["message"] != "assertion failed", (attack, result)


async def test_the_judge_makes_no_node_of_a_number_the_solution_never_gives(
    client: httpx.AsyncClient,
) -> None:
    """The solution numbers the nodes it makes -1, -2, ... a run (at most 2**17), and the judge keeps them
    by number: a ``news`` of other numbers is refused. One of -k * (2**61 - 1) hashed as every other such
    number does, each insertion walking all of them: a message of 16,384 of them kept the judge busy 7.5 s
    (3 ms in the range), past the test's wall cap, the deadline being checked between messages only. Nor
    does it make a node of a class whose ``__init__`` takes no positional ``self`` (``def __init__(*, self)``
    assigns only, but ``Node()`` always raises the TypeError: no such node ever exists)."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "class Node:\n    def __init__(*, self, val=0):\n        self.val = val\n"
        "head = ListNode(1)\nassert solve(head) is head\nassert vars(head) == {'val': 1, 'next': None}\n"
    )
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\nask = guest._CHANNEL.request\nM = 2 ** 61 - 1\n"
        "def solve(head):\n    {attack}\n    return head\n"
    )
    attacks = [
        "ask('news', [[-(i + 1) * M, 'ListNode'] for i in range(64)])",
        "ask('news', [[-(2 ** 17) - 1, 'ListNode']])",
        "ask('news', [[-(2 ** 64), 'ListNode']])",
        "ask('news', [[-1, 'Node']])",
    ]
    for attack, result in await _attacks(client, tests, cheat.format(attack="pass"), cheat, attacks):
        assert result["valid"] and result["details"]["pass_mask"] == "01", (attack, result)
        message = result["details"]["tests"][0]["message"]
        assert "malformed nodes" in message or "made by the judge" in message, (attack, result)


async def test_the_solution_makes_no_node_behind_a_tests_new_or_a_property(client: httpx.AsyncClient) -> None:
    """A node made bare (``news``) skips the class's ``__new__`` and assigns its ``__init__``'s attributes by
    ``setattr``: only a class whose ``__init__`` only assigns, to no property, without a ``__new__`` of its
    own, has its nodes made so. Tests that count the nodes made in ``__new__`` (an in-place reversal may
    make none) or run a property's setter (a check on each value) see every node the solution makes: a
    forged ``news`` of such a class is refused, the count still 0, and the setter never ran in the judge."""
    tests = (
        "class ListNode:\n    made = 0\n    def __new__(cls, *args, **kwargs):\n        ListNode.made += 1\n"
        "        return object.__new__(cls)\n"
        "    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "class TreeNode:\n    set = 0\n    def __init__(self, val=0):\n        self.val = val\n"
        "    @property\n    def val(self):\n        return self.v\n"
        "    @val.setter\n    def val(self, v):\n        TreeNode.set += 1\n        self.v = v\n"
        "head = object.__new__(ListNode)\nhead.val, head.next = 1, None\n"
        "assert solve(head) is head and ListNode.made == 0\nassert ListNode.made == TreeNode.set == 0\n"
    )
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\nask = guest._CHANNEL.request\n"
        "def solve(head):\n    {attack}\n    return head\n"
    )
    attacks = ["ask('news', [[-1, 'ListNode']])", "ask('news', [[-1, 'TreeNode']])"]
    for attack, result in await _attacks(client, tests, cheat.format(attack="pass"), cheat, attacks):
        assert result["valid"] and result["details"]["pass_mask"] == "01", (attack, result)
        assert "made by the judge" in result["details"]["tests"][0]["message"], (attack, result)


async def test_a_solution_making_nodes_past_the_bound_gets_them_made_by_the_judge(
    client: httpx.AsyncClient,
) -> None:
    """The solution makes at most 2**17 nodes a run in its own process (the judge makes them 16,384 a
    message, where a round trip each bounded how fast its memory could fill); past that the judge makes
    each, as before: a list of 2**17 + 3 nodes arrives whole, and a solution making 10**6 nodes (a round
    trip each past the bound: it may run out of time) is scored, valid, in a run of 256 MB."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "def count(node):\n    n = 0\n    while node:\n        if type(node) is not ListNode or node.val != n:\n"
        "            return -1\n        n, node = n + 1, node.next\n    return n\n"
    )
    solution = (
        "def build(n):\n    head = None\n    for i in range(n - 1, -1, -1):\n        head = ListNode(i, head)\n"
        "    return head\n"
        "def flood():\n    nodes = [ListNode(i) for i in range(10 ** 6)]\n    return len(nodes)\n"
    )
    whole = tests + "assert count(build(2 ** 17 + 3)) == 2 ** 17 + 3\n"
    flooded = tests + "assert flood() == 10 ** 6\n"
    results = []
    for reference, timeout_s in (({"tests": whole}, 20.0), ({"tests": flooded}, 2.0)):
        (result,) = await score_results(
            client,
            "code",
            [{"response": solution, "reference": reference}],
            options={"use_cache": False},
            timeout_s=timeout_s,
            total_timeout_s=3 * timeout_s,
            memory_mb=256,
        )
        results.append(result)
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    assert results[1]["valid"], results[1]  # (past the bound, a round trip a node: in time or not)


async def test_a_node_s_copy_holds_nothing_behind_an_attribute_the_solution_may_not_read(
    client: httpx.AsyncClient,
) -> None:
    """A node's copy (its snapshot) holds what ``getattr`` gives of it and of the nodes it leads to, and
    nothing reached through an attribute the solution may not read: a name in the node's ``__dict__`` that
    a property of its class shadows (``getattr`` is the property's, refused to the solution) led the
    snapshot to the object held there, whose data attributes (the tests' answer) and handle reached the
    solution's copy. Each cheat returns the answer only if it finds it in what the judge sent."""
    tests = (
        "class Vault:\n    pass\n"
        "class Node:\n    hint = property(lambda self: 'none')\n"
        "    def __init__(self, val):\n        self.val = val\n        vault = Vault()\n"
        "        vault.answer = 'k3y-8f2a'\n        vars(self)['hint'] = vault\n"
        "node = Node(1)\nassert solve(node) == 'k3y-8f2a'\nassert node.val == 1\n"
    )
    guest = (  # (asking for the node's copy again: the first message carries one node, the next two)
        "import sys\nguest = sys.modules['rh_guest']\ndef ask(node):\n"
        "    for _ in range(3):\n"
        "        guest._CHANNEL.request('node', {'R': object.__getattribute__(node, '_rh_id')})\n"
    )
    cheats = [
        guest + "def solve(node):\n    ask(node)\n"
        "    for attrs in list(guest._NODE_CACHE.values()):\n"
        "        if 'answer' in attrs:\n            return attrs['answer']\n",
        guest + "def solve(node):\n    ask(node)\n"
        "    for p in list(guest._CHANNEL.codec.proxies.values()):\n"
        "        try:\n            return guest._op(p, 'getattr', 'answer')\n"
        "        except Exception:\n            pass\n",
        "def solve(node):\n    return node.hint\n",
    ]
    results = await _score(client, [{"response": c, "reference": {"tests": tests}} for c in cheats])
    for cheat, result in zip(cheats, results, strict=True):
        assert result["valid"] and result["details"]["pass_mask"] == "01", (cheat, result)


async def test_a_flood_of_batched_writes_to_a_tests_node_passes_nothing(client: httpx.AsyncClient) -> None:
    """The solution's writes to the tests' nodes go as batches (``setattrs``) of up to a message's 16 MB,
    each write a new attribute the judge keeps: batch after batch fills the judge's memory (its address
    space is the run's limit, as the solution's) far faster than a round trip per write did. The judge's
    failure to take a batch in is the call's (a protocol error of the solution's, or its MemoryError): the
    tests the flooding calls are in fail, the item stays valid (no sandbox error that would drop it from
    a batch's rewards), and the tests after them still run on the judge's nodes as they were."""
    tests = (
        "class Node:\n    def __init__(self, val):\n        self.val = val\n"
        "node = Node(1)\nassert solve(node) == 2\nassert solve(node) == 2\nassert node.val == 1\n"
    )
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\n"
        "def solve(node):\n    ident = object.__getattribute__(node, '_rh_id')\n    i = 0\n"
        "    try:\n        while True:\n"
        "            batch = [[{'R': ident}, 'a%d' % (i + k), i + k] for k in range(300000)]\n"
        "            i += 300000\n            guest._CHANNEL.request('setattrs', batch)\n"
        "    except MemoryError:\n        return 0\n"
    )
    (result,) = await score_results(
        client,
        "code",
        [{"response": cheat, "reference": {"tests": tests}}],
        options={"use_cache": False},
        timeout_s=4.0,
        total_timeout_s=10.0,
        memory_mb=256,
    )
    assert result["valid"] and result["details"]["pass_mask"] == "001", result


async def test_the_judge_s_own_hooks_are_not_the_solution_s_to_call(client: httpx.AsyncClient) -> None:
    """Tests that hand the solution their namespace (``f(globals())``) handed it the judge's hooks too, which
    the solution could call as any function of the tests': recording the asserts after the current one as
    passed, then exiting, scored asserts that never ran (a solution returning nothing scored 2/3). The
    guest's own functions and methods are refused as the callee of a call, the item stays valid."""
    tests = "def double(x):\n    return 2 * x\nf(globals())\nassert h(1) == 2\nassert h(2) == 4\nassert h(3) == 6\n"
    cheats = [
        "import os\ndef f(g):\n    g['__rh_r__'](1, True)\n    g['__rh_r__'](2, True)\n"
        "def h(x):\n    os._exit(0)\n",
        "def f(g):\n    try:\n        g['__rh_t__'](7)\n    except Exception:\n        assert g['double'](2) == 4\n"
        "def h(x):\n    return 2 * x\n",
    ]
    results = await _score(client, [{"response": c, "reference": {"tests": tests}} for c in cheats])
    assert results[0]["valid"] and results[0]["score"] == 0.0, results[0]
    # (a refused call is the solution's exception, which it may catch: the tests' own functions it may call)
    assert results[1]["valid"] and results[1]["score"] == 1.0, results[1]


async def test_the_judge_s_builtins_that_reach_its_interpreter_are_not_the_solution_s_to_call(
    client: httpx.AsyncClient,
) -> None:
    """Builtin functions the tests hand the solution (the builtins' namespace, ``f(vars(builtins))``, or
    one as a callback) cross as handles it may call in the judge: ``exec`` ran the solution's code there,
    which stopped the judge recording failures (a solution returning 0 scored 1.0), and ``getattr`` walked
    the judge's objects. Only the builtins that compute from their arguments are the judge's (``len``,
    ``sorted``, ``max``...); the others reach the solution as its own, by name (so no allowed one calls
    them there either, ``sorted(xs, key=exec)``), and a call of one in the judge is refused; the item
    stays valid."""
    walk = (
        "import sys\\nf = sys._getframe()\\nwhile f:\\n    j = f.f_locals.get('judge')\\n"
        "    if j is not None and hasattr(j, 'fail'):\\n        j.fail = lambda i, m: None\\n        break\\n"
        "    f = f.f_back\\n"
    )
    tests = "import builtins\nf(vars(builtins))\nassert h(1) == 2\nassert h(2) == 4\n"
    cheats = [
        f"def f(g):\n    g['{name}'](\"{walk}\")\ndef h(x):\n    return 0\n" for name in ("exec", "eval")
    ]
    cheats.append(
        "def f(g):\n    ga = g['getattr']\n    init = ga(ga(g['len'], '__self__'), '__import__')\n"
        "def h(x):\n    return 0\n"
    )
    # nor through one it may call: the others cross as the solution's own, by name
    cheats += [
        f"def f(g):\n    g['sorted']([\"{walk}\"], key=g['exec'])\ndef h(x):\n    return 0\n",
        "def f(g):\n    it = g['iter'](g['globals'], None)\n    g['next'](it)['__rh_r__'](1, True)\n"
        "def h(x):\n    return 0\n",
    ]
    results = await _score(client, [{"response": c, "reference": {"tests": tests}} for c in cheats])
    for cheat, result in zip(cheats, results, strict=True):
        assert result["valid"] and result["score"] == 0.0, (cheat, result)
    honest = (
        "def f(g):\n    assert g['sorted']([2, 1], key=g['abs']) == [1, 2] and g['len']('ab') == 2\n"
        "def h(x):\n    return 2 * x\n"
    )
    (result,) = await _score(client, [{"response": honest, "reference": {"tests": tests}}])
    assert result["valid"] and result["score"] == 1.0, result


async def test_the_tests_node_classes_the_solution_uses_by_name_make_their_nodes_and_nothing_else(
    client: httpx.AsyncClient,
) -> None:
    """Where the tests define a ``ListNode``, ``TreeNode`` or ``Node`` class, the solution may make nodes of
    it by name without defining it (LeetCode's ``ListNode(0)``): the judge calls the tests' class, the
    node is the tests' own. Nothing else of the tests' namespace is made so: not another name (a function
    of the tests', the judge's hooks, a builtin), not a node name the tests bound to something else
    than a plain class of theirs (a function, a module class, a metaclass), and a forged request is
    refused; ``isinstance`` against such a class is answered of the judge's own objects only. Every attempt, through the guest's own requests, fails in the solution's process: its
    tests fail (the correct answer is returned only if the attempt succeeds), the item stays valid."""
    tests = (
        "import types\n"
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "class TreeNode(types.ModuleType):\n    pass\n"
        "class Node(type):\n    pass\n"
        "def to_list(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n"
        "    return out\n"
        "head = ListNode(1, ListNode(2))\nresult = reverse(head)\n"
        "assert to_list(result) == [2, 1] and type(result) is ListNode\n"
    )
    honest = (
        "def reverse(head):\n    prev = None\n    while head:\n"
        "        prev, head = ListNode(head.val, prev), head.next\n    return prev\n"
    )
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\n"
        "def named(name, *args):\n    return guest._NodeClass('X', (), {'_rh_node': name})(*args)\n"
        "def reverse(head):\n    {attack}\n"
        + honest.replace("def reverse", "def honest")
        + "    return honest(head)\n"
    )
    attacks = [
        "TreeNode('x')",
        "Node('x', (), {})",
        "named('to_list', None)",
        "named('__rh_r__', 0, True)",
        "named('print', 'x')",
        "named('types')",
        "guest._CHANNEL.request('new', 7, {'T': []}, {'D': []})",
        "guest._CHANNEL.request('new', 'ListNode', {'T': []})",
        "guest._op(ListNode(0), 'getattr', '__class__')",
        "guest._op(ListNode(0), 'getattr', '__init__')",
        # isinstance against the tests' class: of a node name only, about the judge's own objects
        "assert guest._CHANNEL.request('isnode', 'to_list', {'R': object.__getattribute__(head, '_rh_id')})",
        "assert guest._CHANNEL.request('isnode', 'TreeNode', {'R': object.__getattribute__(head, '_rh_id')})",
        "assert guest._CHANNEL.request('isnode', 'ListNode', {'R': 1})",
        "assert guest._CHANNEL.request('isnode', 'ListNode')",
    ]
    items = [{"response": honest, "reference": {"tests": tests}}]
    items += [{"response": cheat.replace("{attack}", a), "reference": {"tests": tests}} for a in attacks]
    # the node names bound to something else than a class of the tests': a function, a builtin
    rebound = tests.replace("head = ListNode(1", "Node = to_list\nTreeNode = print\nhead = ListNode(1")
    attacks += ["Node(None)", "TreeNode('x')"]
    items += [
        {"response": cheat.replace("{attack}", a), "reference": {"tests": rebound}} for a in attacks[-2:]
    ]
    results = await _score(client, items)
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    refusals = (
        "is not defined",
        "not allowed",
        "malformed",
        "is a string",
        "not the solution's",
        "unknown handle",
    )
    for attack, result in zip(attacks, results[1:], strict=True):
        assert result["valid"] and result["score"] == 0.0, (attack, result)
        message = result["details"]["tests"][0]["message"]
        assert any(r in message for r in refusals), (attack, message)


async def test_what_the_solution_changes_in_a_namespace_held_by_a_tests_node_is_not_written_back(
    client: httpx.AsyncClient,
) -> None:
    """A list or dict the solution reads off a node of the tests' (``node.children``) is written back into
    the tests' own when the call changed it, as its arguments are. A namespace the node holds (the tests'
    globals, the builtins', ``sys.modules``) never is: the solution's write into one is its protocol
    error, so it cannot make the tests' expected value, their ``abs`` or their ``math`` its own (each
    cheat returns a wrong answer that passes only if its write lands); a forged write to what it read is
    refused as one to an argument."""
    tests = (
        "import builtins, sys\n"
        "class Node:\n    def __init__(self, val):\n        self.val = val\n        self.kids = [1]\n"
        "        self.g = globals()\n        self.b = vars(builtins)\n        self.m = sys.modules\n"
        "EXPECTED = 2\nnode = Node(1)\n"
        "assert solve(node) == EXPECTED\nimport math\nassert solve(node) == abs(-2) + math.floor(0.5)\n"
    )
    honest = "def solve(node):\n    return node.val * 2\n"
    cheats = [
        "def solve(node):\n    node.g['EXPECTED'] = 0\n    return 0\n",
        "def solve(node):\n    node.g['EXPECTED'] = 0\n    node.b['abs'] = lambda x: 0\n    return 0\n",
        "import types\ndef solve(node):\n    node.g['EXPECTED'] = 0\n"
        "    node.m['math'] = types.SimpleNamespace(floor=lambda x: -2)\n    return 0\n",
    ]
    guest = "import sys\nguest = sys.modules['rh_guest']\n"
    cheats += [  # a forged write to the list read off the node (number 1, after the call's kwargs)
        guest + f"guest._Called.writes = lambda self, codec: {forged!r}\n"
        "def solve(node):\n    node.kids.append(2)\n    return 2\n"
        for forged in ([[1, {"D": []}]], [[1, {"S": []}]], [[2, []]], [[1, [{"A": 0}]]])
    ]
    items = [{"response": c, "reference": {"tests": tests}} for c in [honest, *cheats]]
    results = await _score(client, items)
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    for cheat, result in zip(cheats, results[1:], strict=True):
        assert result["valid"] and result["details"]["pass_mask"] == "00", (cheat, result)
        message = result["details"]["tests"][0]["message"]
        assert "not the solution's to change" in message or "malformed" in message, (cheat, message)


async def test_a_list_the_solution_writes_onto_a_tests_node_numbers_nothing_of_the_tests(
    client: httpx.AsyncClient,
) -> None:
    """A list the solution writes onto a tests' node inside a call (``node.kids = []``) is numbered in the
    call as the solution's to change, for what the call does to it after to be written back: the judge
    numbers the list it decoded from the write, never one of the tests'. So after such a write (batched
    after a write to a node's copy, or alone), a forged write-back naming the namespace the node holds
    is still refused, as is one of a dict into the written list, and a node's handle in the judge's own
    form (``{"K": ...}``, the judge's to send) is no value of a write: the tests' expected value stays."""
    tests = (
        "class Node:\n    def __init__(self, val):\n        self.val = val\n        self.g = globals()\n"
        "EXPECTED = 2\nnode = Node(1)\n"
        "assert solve(node) == EXPECTED\nassert node.val == 1 and EXPECTED == 2\n"
    )
    guest = "import sys\nguest = sys.modules['rh_guest']\n"
    # numbers: the call's kwargs 0, the written list 1, the namespace read off the node 2
    forgeries = {  # (what the judge says of each: of the namespace, of a dict into the list, out of range)
        repr([[2, {"D": [["EXPECTED", 0]]}]]): "not the solution's to change",
        repr([[1, {"D": []}]]): "malformed write-back",
        repr([[3, []]]): "malformed write-back",
    }
    cheats = {
        guest + f"guest._Called.writes = lambda self, codec: {forged}\n"
        f"def solve(node):\n    {write}\n    node.kids = []\n    node.g\n    return 0\n": refusal
        for write in ("node.val = 1", "pass")
        for forged, refusal in forgeries.items()
    }
    cheats[
        guest + "def solve(node):\n    ident = object.__getattribute__(node, '_rh_id')\n"
        "    guest._CHANNEL.request('setattrs', [[{'R': ident}, 'g', {'K': [ident, 'Node']}]])\n"
        "    return 0\n"
    ] = "malformed value"
    honest = "def solve(node):\n    node.val = 1\n    kids = []\n    node.kids = kids\n    kids.append(1)\n"
    honest += "    return node.val + len(node.kids)\n"
    items = [{"response": c, "reference": {"tests": tests}} for c in [honest, *cheats]]
    results = await _score(client, items)
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    for (cheat, refusal), result in zip(cheats.items(), results[1:], strict=True):
        assert result["valid"] and result["details"]["pass_mask"] in ("00", "01"), (cheat, result)
        assert refusal in result["details"]["tests"][0]["message"], (cheat, result)


async def test_an_ordering_the_solution_defines_never_answers_the_tests_comparison(
    client: httpx.AsyncClient,
) -> None:
    """The ordering a solution gives the tests' node class it uses by name (``ListNode.__lt__``, for its
    heap) orders the tests' nodes in the solution's own process only: the judge's comparisons of the
    solution's objects stay unordered (``TypeError``) whatever ordering they or the node class were
    given, and the tests' own nodes are compared by the tests' class alone."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "assert big() > 5\nassert big() >= 5 and not big() < 5\n"
    )
    honest = "def big():\n    return 6\n"
    always = "lambda a, b: True"
    cheats = [
        f"class Big:\n    __lt__ = __le__ = __gt__ = __ge__ = {always}\ndef big():\n    return Big()\n",
        f"ListNode.__lt__ = ListNode.__le__ = ListNode.__gt__ = ListNode.__ge__ = {always}\n"
        "def big():\n    return ListNode(0)\n",
        f"class Big(ListNode):\n    __lt__ = __le__ = __gt__ = __ge__ = {always}\ndef big():\n    return Big()\n",
    ]
    results = await _score(
        client, [{"response": c, "reference": {"tests": tests}} for c in [honest, *cheats]]
    )
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    for cheat, result in zip(cheats, results[1:], strict=True):
        assert result["valid"] and result["score"] == 0.0, (cheat, result)
        assert "not supported" in result["details"]["tests"][0]["message"], (cheat, result)


async def test_a_prelude_gives_the_solution_its_import_statements_and_nothing_of_the_tests(
    client: httpx.AsyncClient,
) -> None:
    """A reference's ``prelude`` (LeetCodeDataset's ``prompt``) runs in the judge before the tests; in the
    solution's process only its import statements run again, before the solution. Nothing else of it is
    the solution's: not its helpers (``list_node``, ``is_same_list``), not its values, not its text (in
    no object of the solution's process); and a name of the prelude's the solution defines for itself
    (``is_same_list``, ``isclose`` of its ``from math import *``) never replaces the tests' own. Each
    cheat returns a wrong list (every value one too big: the empty case passes) unless its attempt
    works, when it returns the right one."""
    prelude = (
        "import gc\nfrom typing import *\nfrom math import *\n"
        "SECRET = 'prelude-only-7f3a'\n"
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "def list_node(values):\n    head = None\n    for v in reversed(values):\n        head = ListNode(v, head)\n"
        "    return head\n"
        "def is_same_list(p1, p2):\n    if p1 is None and p2 is None:\n        return True\n"
        "    if not p1 or not p2:\n        return False\n"
        "    return isclose(p1.val, p2.val) and is_same_list(p1.next, p2.next)\n"
    )
    reference = {
        "prelude": prelude,
        "tests": (
            "def check(candidate):\n"
            "    assert is_same_list(candidate(list_node([1, 2, 4]), list_node([1, 3, 4])), list_node([1, 1, 2, 3, 4, 4]))\n"
            "    assert is_same_list(candidate(None, None), None)\n"
            "    assert is_same_list(candidate(None, list_node([0])), list_node([0]))\n"
        ),
        "entry_point": "Solution().merge",
    }
    honest = (
        "import sys, gc\nguest = sys.modules['rh_guest']\n"
        "def merge(a: Optional[ListNode], b: Optional[ListNode]) -> Optional[ListNode]:\n"
        "    tail = dummy = ListNode()\n    while a and b:\n"
        "        if a.val <= b.val:\n            tail.next, a = a, a.next\n"
        "        else:\n            tail.next, b = b, b.next\n        tail = tail.next\n"
        "    tail.next = a or b\n    return dummy.next\n"
        "def strings():\n    seen = []\n    for o in gc.get_objects():\n"
        "        if isinstance(o, dict):\n            seen += [v for v in o.values() if isinstance(v, str)]\n"
        "        elif isinstance(o, (list, tuple)):\n            seen += [v for v in o if isinstance(v, str)]\n"
        "    f = sys._getframe()\n    while f is not None:\n"
        "        seen += [v for v in list(f.f_locals.values()) + list(f.f_globals.values()) if isinstance(v, str)]\n"
        "        f = f.f_back\n    return seen\n"
        "def wrong(a, b):\n    head = node = merge(a, b)\n    while node:\n"
        "        node.val += 1\n        node = node.next\n    return head\n"
        "class Solution:\n    def merge(self, a, b):\n        {body}\n"
    )
    attempts = [
        "list_node([1])",
        "is_same_list(None, None)",
        "SECRET",
        "guest._TESTS_NS['list_node']",
        "any(''.join(['prelude', '-only-', '7f3a']) in s or ''.join(['def is_', 'same_list']) in s for s in strings())",
    ]
    cheats = [
        honest.replace(
            "{body}",
            f"try:\n            assert {attempt}\n        except Exception:\n"
            "            return wrong(a, b)\n        return merge(a, b)",
        )
        for attempt in attempts
    ]
    wrong = honest.replace("{body}", "return wrong(a, b)")
    cheats += [  # the solution's own names of the prelude's
        "def is_same_list(p1, p2):\n    return True\n" + wrong,
        "isclose = lambda *a, **k: True\n" + wrong,
        wrong + "isclose = lambda *a, **k: True\nOptional = None\n",
    ]
    items = [
        {"response": c, "reference": reference}
        for c in [honest.replace("{body}", "return merge(a, b)"), *cheats]
    ]
    results = await _score(client, items)
    assert results[0]["valid"] and results[0]["score"] == 1.0, results[0]
    for cheat, result in zip(cheats, results[1:], strict=True):
        assert result["valid"] and result["details"]["pass_mask"] == "010", (cheat, result)


async def test_a_forged_handle_number_the_solution_never_gave_is_refused(client: httpx.AsyncClient) -> None:
    """The solution's objects cross as ``{"H": n}``, ``n`` their ``id`` there, and the judge keeps one proxy
    per number (and a stand-in per exception class, ``{"E": [n, ...]}``). A forged message can name any
    number: each of ``k * (2**61 - 1)`` hashes as 0, so a write or a call naming 16,384 of them made every
    insertion walk all the others, and the judge, checking the deadline between messages only, was busy
    past the item's total time (the outer kill's timeout). An ``id`` is an address, below ``2**61 - 1``
    (where an int is its own hash: no two numbers collide): a number out of that range is the solution's
    protocol error, the call's failure, at once; its test fails, the item valid, the next test runs."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "head = ListNode(1)\nassert solve(head, len) is head\nassert vars(head) == {'val': 1, 'next': None}\n"
    )
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\nask = guest._CHANNEL.request\nM = 2 ** 61 - 1\n"
        "def h(x):\n    return {{'R': object.__getattribute__(x, '_rh_id')}}\n"
        "many = [{{'H': (i + 1) * M}} for i in range(65536)]\n"
        "def solve(head, fn):\n    {attack}\n    return head\n"
    )
    attacks = [
        "ask('setattrs', [[h(head), 'val', many]])",
        "ask('setattr', h(head), 'val', many)",
        "ask('call', h(fn), {'T': [many]}, {'D': []})",
        "ask('setattrs', [[h(head), 'val', {'E': [-1, 'E', []]}]])",
        "ask('setattrs', [[h(head), 'val', {'H': 2 ** 64}]])",
        "ask('setattrs', [[h(head), 'val', {'H': -5}]])",
    ]
    for attack, result in await _attacks(client, tests, cheat.format(attack="pass"), cheat, attacks):
        assert result["valid"] and result["details"]["pass_mask"] == "01", (attack, result)
        assert "unknown handle" in result["details"]["tests"][0]["message"], (attack, result)


async def test_a_forged_node_value_or_class_makes_the_judge_do_no_unbounded_work(
    client: httpx.AsyncClient,
) -> None:
    """Forged messages around the nodes the solution makes (``news``, ``{"L": n}``) and the values it sends:
    a number or name of another type, a node made to hold itself, a dict or set of 65,536 keys that all hash
    alike (each ``k * (2**61 - 1)``: every insertion walked all the others, the judge busy past the item's
    total time), an exception class of 3,000 bases (its MRO's merge cubic: the same). Each refused one is
    the solution's protocol error at once, the test it is in failing; the node that holds itself is a node
    as Python makes one, and the honest answer after it passes. The item is valid, the tests' head as it
    was."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "head = ListNode(1)\ndef made(n):\n    return type(n) is ListNode and vars(n) == {'val': 2, 'next': head}\n"
        "assert made(solve(head))\nassert vars(head) == {'val': 1, 'next': None}\n"
    )
    honest = "def solve(head):\n    return ListNode(2, head)\n"
    cheat = (
        "import sys\nguest = sys.modules['rh_guest']\nask = guest._CHANNEL.request\nM = 2 ** 61 - 1\n"
        "def h(x):\n    return {{'R': object.__getattribute__(x, '_rh_id')}}\n"
        "def ring():\n    r = ask('news', [[-(2 ** 17), 'ListNode']])[0]\n"
        "    ask('setattrs', [[{{'R': r}}, 'next', {{'R': r}}], [{{'R': r}}, 'val', {{'L': -(2 ** 17)}}]])\n"
        "    n = ask('node', {{'R': r}})\n    assert n.next is n and n.val is n and type(n) is ListNode\n"
        "def bases(n):\n    return {{'E': [1 << 40, 'E', [{{'E': [(1 << 41) + i, 'B', []]}} for i in range(n)]]}}\n"
        "def solve(head):\n    {attack}\n    return ListNode(2, head)\n"
    )
    refused = {
        "ask('news', [[True, 'ListNode']])": "malformed nodes",
        "ask('news', [[-1.0, 'ListNode']])": "malformed nodes",
        "ask('news', [[-1, ['ListNode']]])": "malformed nodes",
        "ask('setattrs', [[h(head), 'next', {'L': True}]])": "malformed value",
        "ask('setattrs', [[h(head), 'next', {'L': '-1'}]])": "malformed value",
        "ask('setattrs', [[h(head), 'next', {'L': -M}]])": "unknown handle",
        "ask('setattrs', [[h(head), 'val', {'D': [[(i + 1) * M, 0] for i in range(65536)]}]])": "keys of one hash",
        "ask('setattrs', [[h(head), 'val', {'S': [(i + 1) * M for i in range(65536)]}]])": "keys of one hash",
        "ask('setattrs', [[h(head), 'val', {'O': ['Counter', None, [[(i + 1) * M, 1] for i in range(65536)]]}]])": (
            "keys of one hash"
        ),
        "ask('setattrs', [[h(head), 'val', bases(3000)]])": "too many base classes",
    }
    allowed = ["ring()"]
    attacks = [*refused, *allowed]
    for attack, result in await _attacks(client, tests, honest, cheat, attacks):
        assert result["valid"], (attack, result)
        if attack in refused:
            assert result["details"]["pass_mask"] == "01", (attack, result)
            assert refused[attack] in result["details"]["tests"][0]["message"], (attack, result)
        else:
            assert result["details"]["pass_mask"] == "11", (attack, result)


async def test_a_solution_s_large_dicts_and_sets_and_a_few_keys_of_one_hash_still_cross(
    client: httpx.AsyncClient,
) -> None:
    """The judge counts the hashes of the keys of a large dict or set the solution sends (refusing over
    128 of one): a program's data, 10,000 distinct keys or a hundred of one hash, and an exception
    class of several bases, arrive as they were."""
    tests = (
        "M = 2 ** 61 - 1\nr = big()\n"
        "assert r[0] == set(range(10000)) and r[1] == {i: i * i for i in range(10000)}\n"
        "assert r[2] == frozenset((i + 1) * M for i in range(100)) and r[3] == Counter(range(5000))\n"
        "try:\n    fail()\n    assert False\nexcept KeyError as e:\n    assert isinstance(e, LookupError)\n"
    )
    solution = (
        "from collections import Counter\nM = 2 ** 61 - 1\n"
        "def big():\n    return (set(range(10000)), {i: i * i for i in range(10000)},\n"
        "            frozenset((i + 1) * M for i in range(100)), Counter(range(5000)))\n"
        "class Mine(KeyError, ValueError, ArithmeticError):\n    pass\n"
        "def fail():\n    raise Mine('x')\n"
    )
    (result,) = await _score(
        client,
        [
            {
                "response": solution,
                "reference": {"tests": tests, "prelude": "from collections import Counter\n"},
            }
        ],
    )
    assert result["valid"] and result["score"] == 1.0, result
