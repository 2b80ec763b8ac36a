"""The trusted program that runs *inside* the sandbox (the "guest"); standard library only.

The service never imports this module: :mod:`rewardhub.sandbox.pool` copies it into a private directory,
byte-compiles it once with the sandbox's interpreter and bind-mounts that directory read-only at
``/rh``. Each run starts ``python3 -E -s -S /rh/main.py`` as the sandbox's PID 1 (``bwrap --as-pid-1``).

Why a guest at all, instead of running the untrusted program directly: verdicts must travel through a
channel the untrusted code cannot forge, and some limits are best applied from inside. The guest

1. makes itself non-dumpable (``PR_SET_DUMPABLE=0``) before anything else: a same-uid process can then
   neither ``ptrace`` it nor open ``/proc/1/{mem,fd/*,environ}``, so its memory (the run's nonce, the
   hidden tests) and its stdout pipe (the verdict channel) are out of reach; as PID 1 of its namespace
   it also cannot be killed (``SIGKILL``/``SIGSTOP`` from inside the namespace are ignored for init);
2. mounts the run's ``/tmp`` and ``/dev/shm`` itself, capped in files as well as bytes, with the two
   capabilities ``bwrap`` lent it for that, and drops them (:func:`_private_tmpfs`);
3. applies the rlimits (address space, processes, file size, open files, core, CPU) before any
   untrusted code exists, i.e. it is the untrusted code's ``preexec``;
4. reads the *public* frame (solution, limits) from stdin, forks the solution process, and only then
   reads the *private* frame (nonce, tests) — so the nonce was never in the solution's memory.

Two modes:

* ``pytests`` (Python assert-style tests): the guest is the *judge*. It runs the reference's test code
  (its asserts rewritten by the service into recorded tests, :func:`rewardhub.sandbox.harness.rewrite_asserts`)
  in its own interpreter; every name the solution defines is a proxy into the solution process (but
  none replaces a builtin or standard module the tests use, :func:`_shadowing`). Values
  crossing back are rebuilt from builtin types only (a ``list`` subclass is read through
  ``list.__iter__``, so an overridden ``__eq__`` never reaches a comparison); anything else stays an
  opaque handle that compares equal only to itself and supports only structural access (call,
  attribute, item, iteration, ``len``, ``bool``, ``str``), but for an exception class the solution
  defines, which is a genuine class of the judge's for the tests to catch (:class:`_RemoteClass`); a
  list, dict or set argument a call changed in place comes back so too, written into the caller's object,
  and the caller's objects the call moved or returned come back as themselves (:class:`_Called`). The
  tests' objects reach the solution so too, as handles it may call, iterate and index; of an instance of a
  class the tests' code defines (a ``ListNode``, a ``TreeNode``) it may read and write the data
  attributes, names without a leading ``_`` held in the instance's own ``__dict__``, and nothing else
  (no class attribute, method or dunder, nothing of a function, class or module: :func:`_tests_data`),
  a list, dict or set it reads off one in a call being the tests' own to change (:meth:`_Codec.enc_more`),
  as is one it writes onto one (:func:`_tests_write`);
  it makes new nodes of its own class, or by calling the tests' class if the tests hand it over or, one
  of LeetCode's ``ListNode``/``TreeNode``/``Node`` the tests define, by its name (:func:`_node_class`). A
  node of a class without hooks (:func:`_plain_node`) crosses with the data attributes of the nodes after
  it, which the solution reads from its copy until the judge may run code again, its writes to them
  queued and sent before anything else it sends (:meth:`_Codec._snapshot`): a round trip per attribute
  access made a 100,000-node list cost seconds; its handle is of the solution's stand-in for its class
  where the solution uses that by name (``type(node) is ListNode``, :func:`_node_class`). A
  reference's ``prelude`` runs in the judge, in the tests' namespace after the solution's names, before
  the tests; its import statements alone (the service's :func:`rewardhub.sandbox.harness.prelude_imports`,
  in the public frame) run in the solution's before the solution, and names they bound that the solution
  did not rebind are not sent as the solution's. Every
  ``assert`` statement of the tests is one test; the judge writes each verdict, prefixed with the nonce,
  to its stdout. The solution's own stdout/stderr go to the sandbox's stderr, never to the verdict
  channel.
* ``exec`` (programs with stdin/stdout cases, and the SandboxFusion endpoint): compile once, then run
  the program once per case in a fresh process (own session, output caps, every leftover process killed
  between cases). A step's time limit is its CPU time, the wall clock capping it at ``_WALL_FACTOR``
  times the limit, as in ``pytests`` mode (:func:`_run_one`); ``wall_clock`` runs (the SandboxFusion
  endpoint, ``python_grader``) are limited by the wall clock instead, as they document. Outputs go back to the service, which
  compares them with the expected outputs the sandbox never sees.

Wire format, service -> guest (stdin): two frames, each an 8-byte big-endian length and a ``marshal``
payload (the service is trusted, so ``marshal`` is fine in this direction). Guest -> service (stdout):
lines ``<nonce> <kind> <field> ...``; free text is base64 so a field never holds a space or newline.
Between judge and solution: 4-byte length + JSON of a tagged tree of builtin values (never
``marshal``/``pickle``, which are unsafe on hostile input).

Start-up cost matters (it is paid once per scored item): the guest imports only built-in or C modules
(no ``ast``: the service rewrites the tests' asserts; ``_signal``, not ``signal``; no ``typing``,
``json`` or ``re``; ``ctypes`` only for the system calls Python lacks, the mounts above and the
untrusted process's seccomp filter, which share one import: the interpreter is started from an
execute-only copy, which the kernel makes non-dumpable at ``exec``, so ``prctl`` is only the fallback
there), which keeps it within a few milliseconds of a bare ``python3 -S`` start.
"""

from __future__ import annotations

import binascii
import builtins
import marshal
import posix as os  # the C module: `os` would import posixpath, stat and _collections_abc on every run
import resource
import select
import sys
import time
from _operator import is_ as _is  # (built in, as sys: no import cost)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs milliseconds per run
    import signal
    from collections import deque as Deque
    from collections.abc import Sequence
    from typing import Any, NoReturn
else:
    import _signal as signal  # `signal` itself imports enum

_OUT = 1  # the verdict channel: the sandbox's stdout
# True in a run forked from a warm sandbox (zygote_main): not PID 1, but alone in the namespace except
# for PID 1 (the zygote), so kill(-1) still reaches exactly the run's own processes.
_WARM = False
_MAX_FRAME = 64 << 20
_MAX_MSG = 16 << 20  # largest judge <-> solution message (a huge return value fails the test)
# Above the handle numbers either side gives (an object's ``id``, its address): each keys a dict of the
# other side's (its proxies, the judge's stand-ins for exception classes), and an int below it is its own
# hash, so no two numbers in range collide there. Out of range only in a forged message: the solution's
# ``{"H": k * (2**61 - 1)}``, each hashing as 0, made each insertion walk all the others (_Codec._dec).
_HANDLE_LIMIT = sys.hash_info.modulus
# (The judge's) the most keys of a dict, or elements of a set, the solution sends that may share one hash:
# ``k * (2**61 - 1)`` all hash as 0, and each insertion of one walks all those before it (65,536 of them,
# a forged message's 2 MB, kept the judge busy past the item's total time). No program's data has more
# than a few (the solution would have built its dict just as slowly); 128 bounds a 16 MB message's
# insertions to well under a second.
_SAME_HASH = 128
# The most bases of an exception class of the solution's (``{"E": ...}``): its stand-in's MRO is merged in
# time cubic in them (3,000 took ~25 s); a class has a few.
_MAX_BASES = 64
_PR_SET_DUMPABLE = 4


# --------------------------------------------------------------------------------------------------
# start-up: privileges, limits, frames
# --------------------------------------------------------------------------------------------------
def _undumpable() -> None:
    """Make sure no other process of the sandbox can read this one's memory or file descriptors.

    ``/proc/self`` of a non-dumpable process belongs to root (the overflow uid in a user namespace), so
    its owner tells whether the execute-only interpreter copy already did the job.
    """
    if os.stat("/proc/self/status").st_uid != os.getuid():
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


# Arguments ``tmpfs:PATH:BYTES:INODES`` after a guest script's own: the sandbox's size- and inode-capped
# tmpfs, mounted by the guest itself (see _private_tmpfs).
_TMPFS_ARG = "tmpfs:"
_CLONE_NEWNS = 0x00020000
_MS_NOSUID_NODEV = 2 | 4
_CAP_SETPCAP = 8
_CAP_SYS_ADMIN = 21
_PR_CAPBSET_DROP = 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _private_tmpfs(args: Sequence[str]) -> None:
    """Mount the writable tmpfs (``/tmp``, ``/dev/shm``) with a cap on their inodes, then drop every
    capability; nothing when ``args`` names no tmpfs (the sandbox then gave the guest none).

    ``bwrap`` (0.8) gives a tmpfs a size but no ``nr_inodes``, and an empty file costs no tmpfs bytes:
    a program creating files for its whole time limit pinned an inode and a dentry (~1 KB of kernel
    memory) each, hundreds of MB per run. So ``bwrap`` lends the guest ``CAP_SYS_ADMIN`` (and
    ``CAP_SETPCAP`` to drop it again) in the sandbox's user namespace, and the guest, before any
    untrusted code exists, mounts its own tmpfs over ``bwrap``'s. It needs a mount namespace of its
    own: ``--disable-userns`` puts it in a nested user namespace, which holds no capability over the
    one ``bwrap`` built (the kernel locks every mount inherited into the new one, so ``/`` and the
    system directories stay read-only). Then the bounding set loses both capabilities and
    ``capset`` clears the permitted, effective and inheritable sets (the ambient set with them):
    the untrusted code starts with no capability at all, exactly as without this step.
    """
    mounts = [a[len(_TMPFS_ARG) :].split(":") for a in args if a.startswith(_TMPFS_ARG)]
    if not mounts:
        return
    if os.uname().machine in _SIGNAL_SYSCALLS:
        _prepare_protection()  # ctypes, which the untrusted process's filter needs anyway (inherited)
        ctypes, libc = _FILTER[0], _FILTER[1]
    else:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"{what}: {os.strerror(errno)}")

    cwd = os.getcwd()
    check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    for path, size, inodes in mounts:
        options = f"size={int(size)},nr_inodes={int(inodes)},mode=755".encode()
        check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID_NODEV, options), f"mount {path}")
    os.chdir(cwd)  # bwrap's --chdir /tmp: the directory under the new mount would stay the cwd
    check(libc.prctl(_PR_CAPBSET_DROP, _CAP_SYS_ADMIN, 0, 0, 0), "dropping CAP_SYS_ADMIN")
    check(libc.prctl(_PR_CAPBSET_DROP, _CAP_SETPCAP, 0, 0, 0), "dropping CAP_SETPCAP")
    # {version, pid 0: this process}, and two all-zero {effective, permitted, inheritable}
    header = ctypes.create_string_buffer(_LINUX_CAPABILITY_VERSION_3.to_bytes(4, "little") + bytes(4), 8)
    check(libc.capset(header, ctypes.create_string_buffer(24)), "capset")


def _apply_limits(lim: dict[str, int]) -> None:
    pairs = (
        ("as_bytes", resource.RLIMIT_AS),
        ("nproc", resource.RLIMIT_NPROC),
        ("fsize_bytes", resource.RLIMIT_FSIZE),
        ("nofile", resource.RLIMIT_NOFILE),
        ("cpu_s", resource.RLIMIT_CPU),
    )
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, which in pairs:
        value = lim.get(key)
        if value:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))


def _read_exact(fd: int, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("short read")
        buf += chunk
    return bytes(buf)


def _read_frame(fd: int) -> dict[str, Any]:
    n = int.from_bytes(_read_exact(fd, 8), "big")
    if n > _MAX_FRAME:
        raise ValueError("frame too large")
    value = marshal.loads(_read_exact(fd, n))
    if type(value) is not dict:
        raise ValueError("frame is not a dict")
    return value


def _b64(text: str | bytes) -> str:
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return binascii.b2a_base64(data, newline=False).decode("ascii") if data else "-"


class _Emitter:
    """Writes nonce-prefixed lines to the verdict channel (unbuffered: a kill loses nothing written)."""

    def __init__(self, nonce: str):
        self._prefix = nonce + " "

    def __call__(self, *fields: object) -> None:
        line = self._prefix + " ".join(str(f) for f in fields) + "\n"
        data = line.encode("ascii")
        while data:
            data = data[os.write(_OUT, data) :]


def _fail_start(message: str) -> NoReturn:
    os.write(2, ("rewardhub guest: " + message + "\n").encode("utf-8", "replace"))
    os._exit(3)


def main() -> None:
    # PID 1 of a namespace only receives signals it handles; Python handles SIGINT, so without this the
    # solution could raise KeyboardInterrupt in the judge at a moment of its choosing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _undumpable()
        if not _WARM:  # a warm run's zygote mounted them for the slot
            _private_tmpfs(sys.argv[1:])
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(100_000)  # big results still cross; a 16 MB literal does not
        header = _read_frame(0)
        _apply_limits(header.get("limits") or {})
        cpu = header.get("cpu")
        if type(cpu) is int:
            # One core per run: judge and solution take turns, and a ping-pong between two processes
            # on one core costs a third of one that crosses cores (no inter-processor wake-ups).
            try:
                os.sched_setaffinity(0, {cpu})
            except OSError:
                pass
    except BaseException as exc:  # the service reports this run as a sandbox error
        _fail_start(f"start-up failed: {type(exc).__name__}: {exc}")
    mode = header.get("mode")
    if mode == "pytests":
        _pytests(header)
    elif mode == "exec":
        _exec(header)
    else:
        _fail_start(f"unknown mode {mode!r}")


# --------------------------------------------------------------------------------------------------
# values across the judge <-> solution boundary
# --------------------------------------------------------------------------------------------------
class _ProtocolError(Exception):
    pass


class _Codec:
    """Encodes values as a tree of JSON values; objects that are not plain data become handles.

    Scalars (``None``, ``bool``, ``int``, finite ``float``, ``str``) and ``list`` map to themselves;
    everything else is a one-key object: ``{"T": [...]}`` tuple, ``{"D": [[k, v], ...]}`` dict,
    ``{"S"|"Z": [...]}`` set/frozenset, ``{"B": latin-1}`` bytes, ``{"C": [re, im]}`` complex,
    ``{"F": "inf"}`` non-finite float, ``{"M": name}`` module, ``{"Y": name}`` builtin type, ``{"N": name}``
    (the judge's, :func:`_not_callable`) a builtin function the solution uses its own copy of, and handles
    ``{"H"|"R": number}``; within a call (:class:`_Called`), ``{"A": n}`` (the judge's arguments) is the
    same object as their ``n``-th list, dict, set or deque, and ``{"P": n}`` (the callee's reply) is the
    caller's own ``n``-th one; ``{"O": [kind, default_factory, [[k, v], ...]]}`` is an ``OrderedDict``,
    ``Counter`` or ``defaultdict`` (:data:`_DICTS`), ``{"Q": [maxlen, [...]]}`` a ``deque``; an exception class of the solution is ``{"E": [number, name, [bases...]]}``,
    for the judge to stand a genuine exception class in for it (:class:`_RemoteClass`).

    ``local`` holds this side's objects that the other side refers to by number. Builtin subclasses are
    read through the *base* type's methods, so their overrides are never called and the other side gets
    a genuine ``int``/``str``/``list``/...
    """

    def __init__(self, handle_tag: str, foreign_tag: str, make_proxy: Any, *, judge: bool = False):
        self.local: dict[int, Any] = {}
        self.handle_tag = handle_tag  # tag of our objects as the other side sees them
        self.foreign_tag = foreign_tag  # tag of the other side's objects
        self.make_proxy = make_proxy
        self.proxies: dict[int, Any] = {}
        # The judge's side takes the solution's exception classes in as classes of its own ("E"), and
        # the solution's side sends them so.
        self.judge = judge
        self.mirrors: dict[int, _RemoteClass] = {}
        # (The judge's) the tests' nodes whose data attributes the solution holds (:meth:`_snapshot`), and
        # which names of a class's nodes it may read; both forgotten as the solution forgets its copies.
        self.snapped: set[int] = set()
        self.readable: dict[tuple[type, str], bool] = {}
        # (The judge's) what the next message may carry of snapshots, nodes and characters, and the nodes
        # the one after it may: 1 after the solution forgot its copies, doubling with each message that
        # carried one, up to _SNAP_NODES (a solution that makes a node, which forgets them, and reads
        # one more is sent one more, not thousands; one walking a list soon gets thousands a message).
        self.snap_left = [1, _SNAP_CHARS]
        self.snap_next = 1
        # (The judge's) the nodes it made for the solution's ``ListNode(x)`` (``news``, :func:`_made_nodes`),
        # by the solution's (negative) number for them, ``{"L": n}`` in what it encoded before they were
        # made; (the solution's) whether it encoded such a node since it last had the judge make them.
        self.news: dict[int, Any] = {}
        self.met_new = False
        # A call's lists, dicts, sets and deques, numbered in the order they are encoded (see _Called):
        # the caller's, as it sends them (``sent``; the judge's shared ones once, with ``memo``); the
        # callee's, as it decodes them (``received``); ``origins``, their numbers by id as the callee
        # replies; ``back``, the caller's, as it decodes the reply. None outside a call's messages.
        self.tracking = False
        self.sent: list[Any] | None = None
        self.memo: dict[int, int] | None = None
        self.open: set[int] = set()
        self.received: list[Any] | None = None
        self.origins: dict[int, int] | None = None
        self.back: list[Any] | None = None

    def ref(self, obj: Any) -> dict[str, int]:
        key = id(obj)
        self.local[key] = obj
        return {self.handle_tag: key}

    def enc(self, x: Any, depth: int = 0) -> Any:
        if depth > 200:
            raise _ProtocolError("value nested too deeply")
        t = type(x)
        if x is None or t is bool or t is int or t is str:
            return x
        if t is float:
            return x if x - x == 0.0 else {"F": repr(x)}
        if self.tracking and _mutable(x, t):
            return self._tracked(x, t, depth)
        return self._enc(x, t, depth + 1)

    def _tracked(self, x: Any, t: type[Any], depth: int) -> Any:
        if self.origins is not None:  # replying: the caller's own objects by number
            n = self.origins.get(id(x))
            return self._enc(x, t, depth + 1) if n is None else {"P": n}
        sent = self.sent
        assert sent is not None
        if self.memo is not None:  # (the judge's: an object met again is itself, a cycle refused)
            n = self.memo.get(id(x))
            if n is not None:
                if n in self.open:
                    raise _ProtocolError("value nested too deeply")
                return {"A": n}
            self.memo[id(x)] = len(sent)
        n = len(sent)
        sent.append(x)
        self.open.add(n)
        out = self._enc(x, t, depth + 1)
        self.open.discard(n)  # (an exception ends the encoding: enc_call clears them)
        return out

    def enc_call(self, args: list[Any], sent: list[Any], memo: dict[int, int] | None = None) -> list[Any]:
        """A call's arguments, numbering their lists, dicts, sets and deques into ``sent`` (the judge's:
        by id into ``memo``, kept for :meth:`enc_more`)."""
        self.tracking, self.sent, self.memo = (
            True,
            sent,
            memo if memo is not None else {} if self.judge else None,
        )
        try:
            return [self.enc(a) for a in args]
        finally:
            self.tracking, self.sent, self.memo = False, None, None
            self.open.clear()

    def enc_more(self, value: Any, sent: list[Any], memo: dict[int, int]) -> Any:
        """(The judge's) ``value`` sent inside one of its calls to the solution (``sent``, ``memo``: the
        call's, as :meth:`enc_call` left them), its lists, dicts, sets and deques numbered on after the
        call's arguments, as the solution numbers them (see :class:`_Called`): a list the solution reads
        off a tests' node (``node.children``) and changes is written back into the tests' own."""
        start = len(sent)
        self.tracking, self.sent, self.memo = True, sent, memo
        try:
            return self.enc(value)
        except BaseException:  # (not sent: not numbered)
            for obj in sent[start:]:
                memo.pop(id(obj), None)
            del sent[start:]
            raise
        finally:
            self.tracking, self.sent, self.memo = False, None, None
            self.open.clear()

    def enc_reply(self, value: Any, called: _Called | None, contents: bool = False) -> Any:
        """A call's return value (``contents``: one of its arguments' objects, by what it holds), the
        caller's objects in it by number."""
        if called is None or value is None or type(value) in (bool, int, str, float):
            return self.enc(value)
        self.tracking, self.origins = True, called.origins()
        try:
            return self._enc(value, type(value), 1) if contents else self.enc(value)
        finally:
            self.tracking, self.origins = False, None

    def dec_call(self, args: list[Any]) -> tuple[list[Any], list[Any]]:
        """A call's arguments decoded, and their lists, dicts, sets and deques as numbered."""
        received: list[Any] = []
        self.received = received
        try:
            return [self.dec(a) for a in args], received
        finally:
            self.received = None

    def dec_reply(self, value: Any, sent: list[Any] | None, received: list[Any] | None = None) -> Any:
        """The callee's reply to a call: its numbers are objects of ``sent``; or (the solution's) a value
        the judge numbered on after the arguments of its call being served (``received``,
        :meth:`enc_more`)."""
        self.back, self.received = sent, received
        try:
            return self.dec(value)
        finally:
            self.back, self.received = None, None

    def _enc(self, x: Any, t: type[Any], d: int) -> Any:
        if t is list:
            return [self.enc(e, d) for e in x]
        if t is tuple:
            return {"T": [self.enc(e, d) for e in x]}
        if t is dict:
            return {"D": [[self.enc(k, d), self.enc(v, d)] for k, v in dict.items(x)]}
        if t is bytes:
            return {"B": x.decode("latin-1")}
        if t is set:
            return {"S": [self.enc(e, d) for e in x]}
        if t is frozenset:
            return {"Z": [self.enc(e, d) for e in x]}
        if t is complex:
            return {"C": [self.enc(x.real), self.enc(x.imag)]}
        if _handle_type(t):
            tag = object.__getattribute__(x, "_rh_tag")
            if tag == self.foreign_tag:
                return {self.foreign_tag: object.__getattribute__(x, "_rh_id")}
            if tag == "L" and not self.judge:  # (a node not yet made in the judge: before this is sent)
                self.met_new = True
                return {"L": object.__getattribute__(x, "_rh_id")}
        if t is type(sys):  # a module: the other side imports its own copy by name
            return {"M": x.__name__}
        if t is type:  # `int`, `str`...: by name, too; other classes are handles
            name = getattr(x, "__name__", "")
            if getattr(builtins, name, None) is x:
                return {"Y": name}
        if self.judge and t is type(len) and _not_callable(x):  # (`exec`: the solution's own, by name)
            return {"N": str(x.__name__)}
        if t is _RemoteClass and "_rh_id" in x.__dict__:  # (the judge's) a class of the solution's, back
            return {self.foreign_tag: x.__dict__["_rh_id"]}
        if type(t) is _RemoteClass:  # an exception the solution raised, going back as itself
            remote = x.__dict__.get("_rh_remote")
            if type(remote) is _Proxy:
                return self.enc(remote, d)
        if self.judge and _plain_node(t):  # a node of the tests', with what the solution may read of it
            return self._snapshot(x)
        if self.judge and _own_name(t) is not None:  # (one with hooks: of its class, at least)
            return {"K": [self.ref(x)[self.handle_tag], t.__name__]}
        if not self.judge and issubclass(t, type) and _is_exception_class(x):
            return {
                "E": [self.ref(x)[self.handle_tag], str(x.__name__), [self.enc(b, d) for b in x.__bases__]]
            }
        if t is _deque_type():
            return {"Q": [x.maxlen, [self.enc(e, d) for e in t.__iter__(x)]]}
        if t in _dict_types():  # collections' own (their subclasses: plain dicts, below)
            factory = self.enc(x.default_factory, d) if t.__name__ == "defaultdict" else None
            return {"O": [t.__name__, factory, [[self.enc(k, d), self.enc(v, d)] for k, v in t.items(x)]]}
        # Subclasses of builtins: read through the base type, never through the subclass's methods.
        if isinstance(x, int):
            return int.__int__(x)
        if isinstance(x, float):
            return self.enc(float.__float__(x), d)
        if isinstance(x, str):
            return str.__str__(x)
        if isinstance(x, bytes):
            return {"B": b"".join([x]).decode("latin-1")}
        if isinstance(x, list):
            return [self.enc(e, d) for e in list.__iter__(x)]
        if isinstance(x, tuple):
            return {"T": [self.enc(e, d) for e in tuple.__iter__(x)]}
        if isinstance(x, dict):
            return {"D": [[self.enc(k, d), self.enc(v, d)] for k, v in dict.items(x)]}
        if isinstance(x, set):
            return {"S": [self.enc(e, d) for e in set.__iter__(x)]}
        if isinstance(x, frozenset):
            return {"Z": [self.enc(e, d) for e in frozenset.__iter__(x)]}
        return self.ref(x)

    def _snapshot(self, root: Any) -> Any:
        """(The judge's) a node of the tests' (:func:`_plain_node`) as its handle, with the data attributes
        the solution may read (:func:`_tests_data`) of it and of the nodes they lead to, breadth first, as many
        as the message may carry (``snap_left``: up to :data:`_SNAP_NODES` nodes and :data:`_SNAP_CHARS`
        characters of strings): ``{"W": [handle,
        [[handle, [[name, value], ...]], ...]]}``, a value a plain one or another node's handle (others are
        left out, read as before). The solution reads them from its copy (:data:`_NODE_CACHE`) instead of
        asking for each (a round trip between the processes: reversing a 20,000-node list took ~2 s).
        The copy holds while the judge runs no code: the solution drops it whenever it sends anything
        but a read or its writes (:data:`_READS`), and the judge forgets which nodes it holds then too
        (:meth:`_Channel.recv`), so a node it holds goes as its bare handle."""
        ident = id(root)
        self.local[ident] = root
        left = self.snap_left
        if ident in self.snapped:
            return {self.handle_tag: ident}
        if left[0] <= -_SNAP_NODES or left[1] <= 0:  # (a node past them: of its class, at least)
            return {"K": [ident, _own_name(type(root))]}
        entries: list[Any] = []
        queue, queued, i = [root], {ident}, 0
        while i == 0 or (i < len(queue) and left[0] > 0 and left[1] > 0):  # (its own, past them too)
            node = queue[i]
            i += 1
            try:
                data = object.__getattribute__(node, "__dict__")
            except AttributeError:
                continue
            if type(data) is not dict:
                continue
            cls = type(node)
            attrs: list[Any] = []
            for name, value in list(dict.items(data)):
                if left[1] <= 0:  # (a node of very many attributes: the others are read as before)
                    break
                if type(name) is not str or name.startswith("_"):
                    continue
                left[1] -= len(name)
                # (first: what a name the solution may not read holds, a property's shadowed value, is
                # neither sent nor followed, its handle never made)
                key = (cls, name)
                readable = self.readable.get(key)
                if readable is None:
                    try:
                        _tests_data(node, name, "getattr")
                        readable = True
                    except AttributeError:
                        readable = False
                    self.readable[key] = readable
                if not readable:
                    continue
                t = type(value)
                if value is None or t is bool or (t is int and value.bit_length() <= 64):
                    enc: Any = value
                elif t is str and len(value) <= 4096:
                    enc = value
                    left[1] -= len(value)
                elif t is float:
                    enc = value if value - value == 0.0 else {"F": repr(value)}
                elif _plain_node(t):
                    other = id(value)
                    self.local[other] = value
                    enc = {"K": [other, _own_name(t)]}
                    if other not in queued and other not in self.snapped:
                        queued.add(other)
                        queue.append(value)
                else:
                    continue
                attrs.append([name, enc])
            # (and which of the node classes the solution uses by name it is of, _tests_node_class)
            kinds = [
                n for n in _NODE_NAMES if _tests_class(_TESTS_NS.get(n)) and isinstance(node, _TESTS_NS[n])
            ]
            self.snapped.add(id(node))
            entries.append([id(node), attrs, kinds, _own_name(cls)])
            left[0] -= 1
        return {"W": [ident, entries]}

    def _snapshot_in(self, root: Any, entries: Any, d: int) -> Any:
        """(The solution's) a node of the tests' with its snapshot (:meth:`_snapshot`), kept in
        :data:`_NODE_CACHE`; its handle."""
        if type(root) is not int or type(entries) is not list:
            raise _ProtocolError("malformed node")
        for entry in entries:
            if type(entry) is not list or len(entry) != 4 or type(entry[0]) is not int:
                raise _ProtocolError("malformed node")
            if type(entry[1]) is not list or type(entry[2]) is not list:
                raise _ProtocolError("malformed node")
            _NODE_KINDS[entry[0]] = frozenset(str(k) for k in entry[2])
            self._node_handle(entry[0], entry[3])
            attrs: dict[str, Any] = {}
            for pair in entry[1]:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                    raise _ProtocolError("malformed node")
                attrs[pair[0]] = self.dec(pair[1], d)
            _NODE_CACHE[entry[0]] = attrs
        return self._proxy(self.foreign_tag, root)

    def _node_handle(self, ident: int, name: Any) -> Any:
        """(The solution's) the handle of a tests' node of the class ``name`` (where it is one of the node
        classes the solution uses by name: of its stand-in, :func:`_node_class`)."""
        proxy = self._proxy(self.foreign_tag, ident)
        stand_in = _STAND_IN_NAMED.get(name) if type(name) is str else None
        if stand_in is not None and type(proxy) is _Proxy:  # (`type(node) is ListNode`, its methods)
            object.__setattr__(proxy, "__class__", stand_in)
        return proxy

    def dec(self, x: Any, depth: int = 0) -> Any:
        if depth > 200:
            raise _ProtocolError("value nested too deeply")
        t = type(x)
        if x is None or t is bool or t is int or t is str or t is float:
            return x
        d = depth + 1
        received = self.received
        if received is not None and (
            t is list or (t is dict and len(x) == 1 and _NUMBERED.get(next(iter(x))))
        ):
            n = len(received)  # (numbered before its elements, as the caller did)
            received.append(_OPEN)
            received[n] = out = self._dec(x, t, d)
            return out
        return self._dec(x, t, d)

    def _dec(self, x: Any, t: type, d: int) -> Any:
        if t is list:
            return [self.dec(e, d) for e in x]
        if t is not dict or len(x) != 1:
            raise _ProtocolError("malformed value")
        ((tag, v),) = x.items()
        tv = type(v)
        if tv is list:
            if tag == "T":
                return tuple([self.dec(e, d) for e in v])
            if tag == "D":
                out = {}
                counts = self._hashes(v)
                for pair in v:
                    if type(pair) is not list or len(pair) != 2:
                        raise _ProtocolError("malformed dict")
                    key = self.dec(pair[0], d)  # (the key first, as it was encoded)
                    _count_hash(counts, key)
                    out[key] = self.dec(pair[1], d)
                return out
            if tag == "S" or tag == "Z":
                elements = [self.dec(e, d) for e in v]
                counts = self._hashes(v)
                for e in elements:
                    _count_hash(counts, e)
                return set(elements) if tag == "S" else frozenset(elements)
            if tag == "C" and len(v) == 2 and all(type(e) in (int, float) for e in v):
                return complex(v[0], v[1])
            if tag == "Q" and len(v) == 2 and type(v[1]) is list:
                if v[0] is not None and (type(v[0]) is not int or not 0 <= v[0] <= sys.maxsize):
                    raise _ProtocolError("malformed deque")
                import collections

                return collections.deque([self.dec(e, d) for e in v[1]], v[0])
            if tag == "O" and len(v) == 3 and v[0] in _DICTS and type(v[2]) is list:
                return self._dict(v[0], v[1], v[2], d)
            if tag == "W" and not self.judge and len(v) == 2:  # (from the judge only)
                return self._snapshot_in(v[0], v[1], d)
            if tag == "K" and not self.judge and len(v) == 2 and type(v[0]) is int:  # (a node's handle)
                return self._node_handle(v[0], v[1])
            if tag == "E" and self.judge and len(v) == 3 and type(v[0]) is int and type(v[1]) is str:
                if not 0 <= v[0] < _HANDLE_LIMIT:
                    raise _ProtocolError("unknown handle")
                if type(v[2]) is list and len(v[2]) > _MAX_BASES:
                    raise _ProtocolError("too many base classes")
                if type(v[2]) is list:
                    return _mirror_class(self, v[0], v[1], [self.dec(e, d) for e in v[2]])
        elif tv is str:
            if tag == "B":
                return v.encode("latin-1")
            if tag == "F" and v in ("inf", "-inf", "nan"):
                return float(v)
            if tag == "Y" and isinstance(getattr(builtins, v, None), type):
                return getattr(builtins, v)
            if tag == "N" and not self.judge:
                fn = getattr(builtins, v, None)
                return fn if type(fn) is type(len) else self._proxy(self.foreign_tag, 0)
            if tag == "M":
                if not _importable(v):
                    return self._proxy(self.foreign_tag, 0)  # a name that cannot be used
                import importlib

                try:
                    return importlib.import_module(v)
                except Exception:  # not installed here, or its import fails
                    return self._proxy(self.foreign_tag, 0)
        elif tv is int:
            if tag == "P" and self.back is not None and 0 <= v < len(self.back):
                return self.back[v]  # (a reply's) the caller's own object
            received = self.received
            if tag == "A" and not self.judge and received is not None and 0 <= v < len(received):
                if received[v] is not _OPEN:  # (an object of the judge's arguments met again)
                    return received[v]
            if tag == self.handle_tag:  # one of ours, coming back
                try:
                    return self.local[v]
                except KeyError:
                    raise _ProtocolError("unknown handle") from None
            if tag == self.foreign_tag:  # (a number the other side gave: in range, _HANDLE_LIMIT)
                if not 0 <= v < _HANDLE_LIMIT:
                    raise _ProtocolError("unknown handle")
                return self._proxy(tag, v)
            if tag == "L" and self.judge:  # (a node made for the solution, named as it was before)
                try:
                    return self.news[v]
                except KeyError:
                    raise _ProtocolError("unknown handle") from None
        raise _ProtocolError("malformed value")

    def _dict(self, kind: str, factory: Any, pairs: list[Any], depth: int) -> dict[Any, Any]:
        import collections

        if kind == "defaultdict":
            default = self.dec(factory, depth)
            if default is not None and not callable(default):
                raise _ProtocolError("malformed defaultdict")
            out: dict[Any, Any] = collections.defaultdict(default)
        else:
            out = getattr(collections, kind)()
        counts = self._hashes(pairs)
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2:
                raise _ProtocolError("malformed dict")
            key = self.dec(pair[0], depth)
            _count_hash(counts, key)
            out[key] = self.dec(pair[1], depth)
        return out

    def _hashes(self, encoded: list[Any]) -> dict[int, int] | None:
        """(The judge's) a count of the hashes of a dict's keys or a set's elements as they are decoded
        (:func:`_count_hash`), where there are more of them than :data:`_SAME_HASH`; else None."""
        return {} if self.judge and len(encoded) > _SAME_HASH else None

    def _proxy(self, tag: str, ident: int) -> Any:
        p = self.proxies.get(ident)
        if p is None:
            p = self.proxies[ident] = self.make_proxy(tag, ident)
        return p


_VALUE_KEYS = frozenset({int, float, complex, str, bytes, tuple, frozenset})


def _count_hash(counts: dict[int, int] | None, key: Any) -> None:
    """Count ``key``'s hash in ``counts`` (:meth:`_Codec._hashes`), refusing the message past
    :data:`_SAME_HASH` of one (the counts' own keys, hashes, share one only by ``2**61 - 1`` apart: a few).
    Only of the builtin values whose hashes a message decides (another's, a proxy's or a tests' object's,
    is its identity or the tests' own ``__hash__``, which is not to run twice)."""
    if counts is None or type(key) not in _VALUE_KEYS:
        return
    h = hash(key)
    n = counts[h] = counts.get(h, 0) + 1
    if n > _SAME_HASH:
        raise _ProtocolError("too many keys of one hash")


# The dicts of ``collections`` that cross as themselves: a function of the solution's changing the
# Counter or defaultdict the tests passed (``counts[x] += 1``) got a plain dict (KeyError), and an
# OrderedDict's order (``move_to_end``) was lost.
_DICTS = ("OrderedDict", "Counter", "defaultdict")


# The tags of the encoded lists, dicts, sets and deques (a JSON list is a list): the objects a call's
# write-back numbers (_Codec.enc_call, _Called), as _mutable finds them before they are encoded.
_NUMBERED = {"D": True, "S": True, "Q": True, "O": True}
_OPEN = object()  # (a numbered object still being decoded: no "A" may refer to it, no cycle)


def _mutable(x: Any, t: type) -> bool:
    """Whether :meth:`_Codec.enc` encodes ``x`` (of type ``t``) as a list, dict, set or deque."""
    if t is list or t is dict or t is set:
        return True
    if t is tuple or t is frozenset or t is bytes or _handle_type(t) or t is type or type(t) is _RemoteClass:
        return False
    if t is _deque_type() or t in _dict_types():
        return True
    return isinstance(x, (list, dict, set)) and not isinstance(x, (int, float, str, bytes, type, type(sys)))


def _deque_type() -> type[Deque[Any]] | None:
    """``collections.deque``, if ``collections`` was imported: a test's BFS queue crossed as a handle, whose
    ``popleft`` the solution may not even look up, and every correct solution failed."""
    collections = sys.modules.get("collections")
    return None if collections is None else collections.deque


def _dict_types() -> tuple[type, ...]:
    """The classes of :data:`_DICTS`, if ``collections`` was imported (else no object is of them)."""
    collections = sys.modules.get("collections")
    if collections is None:
        return ()
    return tuple(getattr(collections, name) for name in _DICTS)


def _json_codec() -> tuple[Any, Any]:
    """``dumps``/``loads`` on the C accelerator of ``json`` directly: ``import json`` would pull in ``re``
    (milliseconds per run). Both only ever see trees built by :class:`_Codec` or hostile bytes, and the
    scanner builds nothing but JSON values."""
    import _json

    class _Ctx:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float
        memo: dict[str, str] = {}

    def no_default(obj: Any) -> Any:
        raise TypeError(f"{type(obj).__name__} is not encodable")

    scan = _json.make_scanner(_Ctx())  # type: ignore[arg-type]  # any object with these attributes
    encode = _json.make_encoder(
        None, no_default, _json.encode_basestring_ascii, None, ":", ",", False, False, True
    )

    def dumps(obj: Any) -> bytes:
        return "".join(encode(obj, 0)).encode("ascii")

    def loads(data: bytes) -> Any:
        text = data.decode("ascii")
        try:
            value, end = scan(text, 0)
        except StopIteration:  # the scanner's "no value here" (json.loads turns it into a ValueError)
            raise ValueError("no JSON value") from None
        if end != len(text):
            raise ValueError("trailing data")
        return value

    loads(dumps([1, {"T": [2.5, "x", None, True]}]))  # fail here, at start-up, if the C API differs
    return dumps, loads


_dumps, _loads = _json_codec()


# Modules (packages) whose import runs a program: `this`, `antigravity`, `idlelib.idle` (IDLE),
# `test.autotest` (the regression suite).
_NO_IMPORT = frozenset({"main", "rh_guest", "this", "antigravity", "idlelib", "test"})


def _importable(name: str) -> bool:
    """A module the solution imported, which the judge may import too (standard library only: ``-I``
    keeps the working directory and user paths off ``sys.path``). The name is the solution's to choose
    (``types.ModuleType("unittest.__main__")`` encodes as that name), so no part of it may be private:
    importing ``unittest.__main__`` runs unittest's ``main()`` and its ``sys.exit`` in the judge."""
    parts = name.split(".")
    # The judge finds site-packages too (for the tests' own imports): a name of the solution's picking
    # is still only a standard module, or one the tests imported already.
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    return (
        name.replace(".", "").replace("_", "").isalnum()
        and not any(part.startswith("_") for part in parts)
        and parts[0] not in _NO_IMPORT
        and (parts[0] in stdlib or name in sys.modules)
    )


# --------------------------------------------------------------------------------------------------
# the channel between judge and solution: requests and replies, either side may call the other
# --------------------------------------------------------------------------------------------------
class _Lost(BaseException):
    """A pytest-style test function lost the solution (:func:`_call_tests`); the message says why."""


class _Gone(BaseException):
    """The other side is dead or past its deadline. A BaseException, so test code's ``except
    Exception`` cannot swallow it and carry on as if the call had returned."""


class _Channel:
    """Length-prefixed JSON messages over two pipes; reads are buffered (one syscall per message)."""

    def __init__(self, rfd: int, wfd: int, codec: _Codec, on_request: Any):
        self.rfd, self.wfd = rfd, wfd
        self.codec = codec
        self.on_request = on_request
        self.deadline: float | None = None  # monotonic; None = wait forever (the solution side)
        # Called when the deadline passes: seconds more to wait (the other side has not used its time
        # yet), or 0 to give up. None: give up at once.
        self.extend: Any = None
        self.buf = bytearray()
        self.serving = 0  # requests of the other side being served (it waits for their replies)
        # (The judge's) its calls to the solution waiting for their replies, innermost last: their
        # arguments as numbered (``sent``) and by id, which what the solution reads meanwhile extends.
        self.calls: list[tuple[list[Any], dict[int, int]]] = []
        # (The solution's) its writes to the data attributes of the tests' nodes it holds copies of
        # (:func:`_node_write`), sent as one request (``setattrs``) before it sends anything else.
        self.pending: list[Any] = []
        self.pending_chars = 0
        self.materialising = False

    def flush(self) -> None:
        """(The solution's) send its pending writes to the tests' nodes, for the judge to make them."""
        while self.pending:
            batch, self.pending, self.pending_chars = self.pending, [], 0
            self.request("setattrs", batch)

    def flush_quietly(self) -> None:
        """:meth:`flush`, on the way out of a call that raised: its own exception is the call's."""
        try:
            self.flush()
        except _Gone:
            raise
        except BaseException:
            self.pending, self.pending_chars = [], 0

    def materialise(self) -> None:
        """(The solution's) have the judge make the nodes of the tests' classes it made in its own process
        (:func:`_new_node`), before it sends anything that may name one or lets the judge run the tests'
        code: ``news`` makes them bare (their ``__init__``'s plain defaults), a batch at a time, and their
        data attributes go as ``setattrs`` (each checked as a setattr); each node is then the handle of
        the judge's (its number and identity kept, the judge's ``{"L": n}`` for what named it before)."""
        if self.materialising or not _NEW_NODES:
            return
        self.materialising = True
        try:
            codec = self.codec
            records = list(_NEW_NODES.values())
            codec.met_new = False
            for start in range(0, len(records), _NEW_BATCH):
                chunk = records[start : start + _NEW_BATCH]
                self.send(["q", "news", [[[rec.number, rec.name] for rec in chunk]]])
                made = self._wait(None, None, None)
                if type(made) is not list or len(made) != len(chunk) or any(type(m) is not int for m in made):
                    raise _ProtocolError("malformed nodes")
                for rec, ident in zip(chunk, made, strict=True):
                    del _NEW_NODES[rec.number]
                    object.__setattr__(rec.node, "_rh_tag", codec.foreign_tag)
                    object.__setattr__(rec.node, "_rh_id", ident)
                    codec.proxies.setdefault(ident, rec.node)
            writes: list[Any] = []
            chars = 0
            for rec in records:
                target = {codec.foreign_tag: object.__getattribute__(rec.node, "_rh_id")}
                for name, value in rec.attrs.items():
                    writes.append([target, name, codec.enc(value)])
                    chars += len(name) + (len(value) if type(value) is str else 0)
                    if len(writes) >= _NEW_BATCH or chars >= _SNAP_CHARS:
                        self._set_all(writes)
                        writes, chars = [], 0
            if writes:
                self._set_all(writes)
        finally:
            self.materialising = False

    def materialise_quietly(self) -> None:
        """:meth:`materialise`, on the way out of a call that raised: its own exception is the call's (the
        nodes not made are dropped: what names them is the judge's protocol error)."""
        try:
            self.materialise()
        except _Gone:
            raise
        except BaseException:
            _NEW_NODES.clear()

    def _set_all(self, writes: list[Any]) -> None:
        self.send(["q", "setattrs", [writes]])
        self._wait(None, None, None)

    def send(self, msg: Any) -> None:
        if (
            _NEW_NODES
            and not self.materialising
            and not self.codec.judge
            and (self.codec.met_new or not (msg[0] == "q" and msg[1] in _READS))
        ):
            self.materialise()  # (the solution's nodes it may name, made first)
        if self.codec.judge:  # (the next message's snapshots, _Codec._snapshot)
            codec = self.codec
            if codec.snap_left[0] < codec.snap_next:  # (this one carried one)
                codec.snap_next = min(2 * codec.snap_next, _SNAP_NODES)
            codec.snap_left = [codec.snap_next, _SNAP_CHARS]
        try:
            data = _dumps(msg)
        except (ValueError, TypeError, RecursionError) as exc:
            raise _ProtocolError(f"unencodable message: {type(exc).__name__}: {_short(exc, 100)}") from None
        if len(data) > _MAX_MSG:
            raise _ProtocolError(f"message of {len(data)} bytes is too large")
        data = len(data).to_bytes(4, "big") + data
        try:
            while data:
                data = data[os.write(self.wfd, data) :]
        except OSError as exc:
            raise _Gone(f"the other process is gone ({exc.strerror})") from None

    def _fill(self, n: int) -> None:
        while len(self.buf) < n:
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([self.rfd], [], [], left)[0]:
                    more = self.extend() if self.extend is not None else 0.0
                    if more > 0:
                        self.deadline = time.monotonic() + more
                        continue
                    raise _Gone("timeout")
            try:
                chunk = os.read(self.rfd, max(1 << 16, n - len(self.buf)))
            except OSError as exc:
                raise _Gone(f"read failed ({exc.strerror})") from None
            if not chunk:
                raise _Gone("eof")
            self.buf += chunk

    def recv(self) -> Any:
        self._fill(4)
        n = int.from_bytes(self.buf[:4], "big")
        if n > _MAX_MSG:
            raise _ProtocolError("message too large")
        self._fill(4 + n)
        raw = bytes(self.buf[4 : 4 + n])
        del self.buf[: 4 + n]
        try:
            msg = _loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError, MemoryError) as exc:
            raise _ProtocolError(f"undecodable message: {type(exc).__name__}") from None
        if type(msg) is not list or not msg or type(msg[0]) is not str:
            raise _ProtocolError("malformed message")
        if self.codec.judge and not (msg[0] == "q" and len(msg) == 3 and msg[1] in _READS):
            # the solution dropped its copies of the tests' nodes as it sent this (see _Codec._snapshot),
            # and the tests' code may run before the judge sends one again (a class may change)
            self.codec.snapped.clear()
            self.codec.readable.clear()
            _PLAIN_NODES.clear()
            _INIT_RECIPES.clear()
            self.codec.snap_next = 1
            self.codec.snap_left = [1, _SNAP_CHARS]
        return msg

    def request(
        self,
        op: str,
        *args: Any,
        writes: list[Any] | None = None,
        sent: list[Any] | None = None,
        memo: dict[int, int] | None = None,
        received: list[Any] | None = None,
    ) -> Any:
        """Send a request and serve the other side's nested requests until our reply arrives.
        ``writes``: a call's, filled with what the callee left in its list, dict or set arguments;
        ``sent``: a call's, the objects of its arguments as numbered (:class:`_Called`), and (the judge's)
        ``memo``, them by id; ``received``: (the solution's) the objects of the judge's call being
        served, which the reply's numbered ones join (:meth:`_Codec.enc_more`)."""
        if not self.codec.judge:
            if op != "setattrs":
                self.flush()  # (the judge sees the solution's writes before anything else of it)
            if op not in _READS:  # (the judge may run code: the nodes the solution holds may change)
                _forget_copies()
        self.send(["q", op, list(args)])
        if sent is None or memo is None:
            return self._wait(writes, sent, received)
        self.calls.append((sent, memo))
        try:
            return self._wait(writes, sent, received)
        finally:
            self.calls.pop()

    def _wait(self, writes: list[Any] | None, sent: list[Any] | None, received: list[Any] | None) -> Any:
        while True:
            msg = self.recv()
            kind = msg[0]
            if kind == "r" and len(msg) in (2, 3):
                if len(msg) == 3 and writes is not None and type(msg[2]) is list:
                    writes.extend(msg[2])
                return self.codec.dec_reply(msg[1], sent, received)
            if kind == "x" and len(msg) in (3, 5, 6) and type(msg[1]) is str and type(msg[2]) is str:
                # what the call changed before it raised, as for a return (see _Called)
                if len(msg) == 6 and writes is not None and type(msg[5]) is list:
                    writes.extend(msg[5])
                # (the judge's) with the exception's class and the exception itself: the solution's own
                # exception classes are classes here too (see _RemoteClass)
                extra = [self.codec.dec(e) for e in msg[3:5]]
                if self.codec.judge:
                    raise _remote_exception(msg[1], msg[2], *extra)
                if extra and isinstance(extra[1], BaseException):
                    raise extra[1]  # (the solution's) its own exception, back through a test's callback
                raise _remote_exception(msg[1], msg[2])
            if kind == "q" and len(msg) == 3:
                self.serve_one(msg)
                continue
            raise _ProtocolError("unexpected message")

    def serve_one(self, msg: list[Any]) -> None:
        _, op, args = msg
        writes: list[Any] = []
        called = None
        try:
            self.serving += 1
            try:
                value = self.on_request(op, args)
            finally:
                self.serving -= 1
            raised = None
            if type(value) is _Called:
                called, raised = value, value.raised
                value, writes = value.value, value.writes(self.codec)
            if self.pending:  # (the solution's) its writes to the tests' nodes, made before it returns
                if raised is None:
                    self.flush()
                else:
                    self.flush_quietly()
            if _NEW_NODES and not self.codec.judge:  # (and the nodes it made: a failure is the call's)
                if raised is None:
                    self.materialise()
                else:
                    self.materialise_quietly()
            if raised is not None:
                raise raised
            if type(value) is _Numbered:
                reply: list[Any] = ["r", self.codec.enc_more(value.value, value.sent, value.memo)]
            else:
                reply = ["r", self.codec.enc_reply(value, called)]
        except _Gone:
            raise
        except BaseException as exc:  # the callee's failure is data for the caller
            reply = ["x", _builtin_name(exc), _short(exc)]
            if not self.codec.judge:
                reply += _exception_class(self.codec, exc)
            elif type(type(exc)) is _RemoteClass and type(exc.__dict__.get("_rh_remote")) is _Proxy:
                # the solution's own exception, out of a callback of the tests': back as itself
                reply += [None, self.codec.enc(exc.__dict__["_rh_remote"])]
            if writes and len(reply) == 3:
                reply += [None, None]  # (no class of the solution's: the writes go sixth)
            if self.pending:
                self.flush_quietly()
            if _NEW_NODES and not self.codec.judge:
                self.materialise_quietly()
        _forget_copies()  # (the judge runs code once it has the reply)
        if writes:
            try:
                self.send([*reply, writes])
                return
            except _ProtocolError:  # too large with them: the value alone, as before
                pass
        self.send(reply)


class _Called:
    """A call's return value, with the lists, dicts, sets and deques of its arguments as the callee
    received them (numbered in the order the caller encoded them, :meth:`_Codec.enc_call`) and left
    them.

    Arguments cross by value, so a function that changes a list, dict or set it was given in place
    (LeetCode's "rotate nums in place, return nothing") changed only its own copy, and the caller's
    tests saw no change: every correct solution failed them. :meth:`writes` says which of those objects
    the call changed and what each holds now, the caller's objects in it by number, for the caller to
    write back into its own objects (:func:`_write_back`), whether the call returned or raised
    (``raised``: what it raised, after changing them, as in one process). The return value names them
    by number too. So the caller's objects come back as themselves, wherever the call left them: a
    grid's rows it sorted, a list passed twice (the judge sends it once), an argument it returned."""

    __slots__ = ("_origins", "raised", "received", "snapshots", "value")

    def __init__(self, received: list[Any]):
        self.value: Any = None
        self.received = received
        self.snapshots = [
            [*obj] if type(obj) is list else _held(obj) for obj in received
        ]  # (before the call)
        self.raised: BaseException | None = None
        self._origins: dict[int, int] | None = None

    def took(self) -> None:
        """The objects the call received since (a value the judge numbered on, :meth:`_Codec.enc_more`),
        as they are now: the call's changes to them are written back too."""
        for obj in self.received[len(self.snapshots) :]:
            self.snapshots.append([*obj] if type(obj) is list else _held(obj))
        self._origins = None

    def origins(self) -> dict[int, int]:
        if self._origins is None:
            self._origins = {id(obj): n for n, obj in enumerate(self.received)}
        return self._origins

    def writes(self, codec: _Codec) -> list[Any]:
        """``[number, encoded contents]`` for each object of the arguments the call changed."""
        out: list[Any] = []
        for n, obj in enumerate(self.received):
            if _changed(obj, self.snapshots[n]):
                try:
                    out.append([n, codec.enc_reply(obj, self, contents=True)])
                except Exception:  # (nested too deeply: left as it was)
                    continue
        return out


class _Numbered:
    """(The judge's) a reply's value to send numbered on in the call ``sent`` (:meth:`_Codec.enc_more`)."""

    __slots__ = ("memo", "sent", "value")

    def __init__(self, value: Any, sent: list[Any], memo: dict[int, int]):
        self.value, self.sent, self.memo = value, sent, memo


# (The solution's) the judge's calls being served, innermost last (:meth:`_Called.took`).
_SERVED: list[_Called] = []


def _held(obj: Any) -> list[Any]:
    """What a list, dict, set or deque decoded for a call holds: its elements (a dict's keys, in order, and
    values). The objects themselves, kept until the call is over: an element's id could be a new one's."""
    if isinstance(obj, dict):
        return [*obj.keys(), _OPEN, *obj.values()]
    return [*obj]


def _changed(obj: Any, before: list[Any]) -> bool:
    """Whether the call changed ``obj`` (:func:`_held` before it: ``before``), by the identity of what it
    holds (a 1 the call made True is a change, and so is a row it swapped for an equal one)."""
    now = obj if type(obj) is list else _held(obj)
    if len(now) != len(before):
        return True
    if type(obj) is set:
        return set(map(id, now)) != set(map(id, before))
    return not all(map(_is, now, before))


def _write_back(sent: list[Any], writes: list[Any], codec: _Codec) -> None:
    """Write what a call left in the lists, dicts, sets and deques of its arguments (``writes``,
    :meth:`_Called.writes`) into the caller's own objects (``sent``, as numbered), which keep their
    places in one another as the call left them."""
    done: list[tuple[Any, Any]] = []
    for entry in writes:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int:
            raise _ProtocolError("malformed write-back")
        if not 0 <= entry[0] < len(sent):
            raise _ProtocolError("malformed write-back")
        target = sent[entry[0]]
        if _judges(target):
            raise _ProtocolError("a namespace of the tests is not the solution's to change")
        new = codec.dec_reply(entry[1], sent)
        if not _fits(target, new):
            raise _ProtocolError("malformed write-back")
        done.append((target, new))
    for target, new in done:  # (through the caller's own objects' methods: an OrderedDict's order)
        if isinstance(target, list):
            target[:] = new
        elif isinstance(target, dict):
            items = list(new.items())
            target.clear()
            for k, v in items:  # (one key at a time: a Counter's `update` adds)
                target[k] = v
        elif isinstance(target, set):
            target.clear()
            target.update(new)
        else:  # a deque
            target.clear()
            target.extend(new)


def _fits(target: Any, new: Any) -> bool:
    """Whether ``new`` (decoded) is what ``target`` (of the caller's) was sent as."""
    if isinstance(target, list):
        return type(new) is list
    if isinstance(target, dict):
        return type(new) is dict or type(new) in _dict_types()
    if isinstance(target, set):
        return type(new) is set
    deque = _deque_type()
    return deque is not None and type(target) is deque and type(new) is deque


def _judges(obj: Any) -> bool:
    """Whether ``obj`` is the interpreter's or a namespace (a dict holding ``__builtins__``: the tests'
    globals, a module's ``__dict__``): never the solution's to change."""
    if type(obj) is dict and "__builtins__" in obj:
        return True
    return any(obj is x for x in (builtins.__dict__, sys.modules, sys.meta_path, sys.path))


def _builtin_name(exc: BaseException) -> str:
    """The name of the nearest builtin class of ``exc`` (its own, or one it extends), as the caller
    rebuilds it (:func:`_remote_exception`): a solution's ``class NegativeError(ValueError)`` crossed by
    its own name, which no builtin has, and the tests' ``except ValueError`` did not catch it."""
    try:
        for cls in type(exc).__mro__:
            if getattr(builtins, cls.__name__, None) is cls:
                return str(cls.__name__)
    except BaseException:  # (a class whose name or MRO misbehaves: its own name, as before)
        pass
    return type(exc).__name__


def _short(exc: BaseException, limit: int = 300) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = "<unprintable>"
    return text[:limit]


class RemoteError(Exception):
    """An exception raised in the solution process whose type the judge cannot rebuild."""


# Exceptions that are control flow to the code that sees them: a StopIteration out of a call inside
# `map` ends the iteration, so `all(map(candidate, xs))` would be True and `any(...)` False.
_NOT_REBUILT = frozenset({"StopIteration", "StopAsyncIteration"})


def _exception_class(codec: _Codec, exc: BaseException) -> list[Any]:
    """(The solution's side) ``[class, exception]`` encoded, for an exception of a class the solution
    defined (the judge rebuilds it as an instance of its stand-in for the class, :class:`_RemoteClass`),
    else nothing."""
    try:
        cls = codec.enc(type(exc))
        if type(cls) is not dict or "E" not in cls:
            return []
        exc.__traceback__ = None  # (kept for the judge's attribute reads: not its frames)
        return [cls, codec.ref(exc)]
    except BaseException:  # (a class nested too deeply, a metaclass misbehaving: by name, as before)
        return []


def _remote_exception(name: str, message: str, cls: Any = None, remote: Any = None) -> BaseException:
    """The exception the caller raises for the callee's: an instance of the judge's stand-in for a class
    the solution defined (``cls``), which the tests' ``except SolutionError`` catches, with the solution's
    exception object (``remote``) behind its attributes; else the nearest builtin class (``name``)."""
    if type(cls) is _RemoteClass:
        try:
            exc: BaseException = type.__call__(cls, message)
        except Exception:  # (a base whose constructor wants more, UnicodeDecodeError's: by name)
            pass
        else:
            if type(remote) is _Proxy:
                exc.__dict__["_rh_remote"] = remote
            return exc
    # Only builtin Exception subclasses are rebuilt, so test code can still ``except ValueError``; a
    # SystemExit or KeyboardInterrupt in the solution must not stop the judge.
    cls = getattr(builtins, name, None)
    if (
        isinstance(cls, type)
        and issubclass(cls, Exception)
        and cls.__module__ == "builtins"
        and name not in _NOT_REBUILT
    ):
        try:
            return cls(message)
        except Exception:
            pass
    return RemoteError(f"{name}: {message}")


# --------------------------------------------------------------------------------------------------
# proxies
# --------------------------------------------------------------------------------------------------
_CHANNEL: _Channel | None = None


def _op(
    p: _Proxy, op: str, *args: Any, writes: list[Any] | None = None, sent: list[Any] | None = None
) -> Any:
    assert _CHANNEL is not None
    codec = _CHANNEL.codec
    if object.__getattribute__(p, "_rh_tag") == "L":  # (a node the solution made: the judge's now)
        _CHANNEL.materialise()
    target = {object.__getattribute__(p, "_rh_tag"): object.__getattribute__(p, "_rh_id")}
    memo: dict[int, int] | None = {} if codec.judge and sent is not None else None
    encoded = [codec.enc(a) for a in args] if sent is None else codec.enc_call(list(args), sent, memo)
    if op == "getattr" and _SERVED and not codec.judge:  # (a tests' attribute: numbered on, enc_more)
        called = _SERVED[-1]
        try:
            return _CHANNEL.request(op, target, *encoded, received=called.received)
        finally:
            called.took()
    return _CHANNEL.request(op, target, *encoded, writes=writes, sent=sent, memo=memo)


def _expect(value: Any, *types: type) -> Any:
    if type(value) not in types:
        raise TypeError("an object from the solution did not behave like a plain value")
    return value


class _Proxy:
    """An object that lives in the other process.

    In the judge these stand for the solution's objects, and deliberately support only structural
    access: ``==`` is True only for the same object (never for a plain value), ``in`` looks among the
    elements it iterates to, ordering and arithmetic raise ``TypeError``, and whatever comes back is
    again a genuine builtin value or another proxy.
    """

    __slots__ = ("_rh_id", "_rh_tag", "__weakref__")

    def __init__(self, tag: str, ident: int):
        object.__setattr__(self, "_rh_tag", tag)
        object.__setattr__(self, "_rh_id", ident)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        held = _node_copy(self)  # (the solution's copy of a tests' node, if it is one)
        if held is not None:
            value = held.get(name, _NOTHING)
            if value is not _NOTHING:
                return value
        return _op(self, "getattr", name)

    def __setattr__(self, name: str, value: Any) -> None:
        if object.__getattribute__(self, "_rh_tag") == "L":  # (a node the solution made, _new_node)
            if _new_write(self, name, value):
                return
            assert _CHANNEL is not None
            _CHANNEL.materialise()  # (one the judge must check: written there, as to its other nodes)
        held = _node_copy(self)
        if held is not None:
            _node_write(self, held, name, value)
        elif _CHANNEL is not None and not _CHANNEL.codec.judge and _SERVED:
            # (a tests' object's, inside a call: its lists numbered on, as the judge numbers them)
            target = {object.__getattribute__(self, "_rh_tag"): object.__getattribute__(self, "_rh_id")}
            enc, objs = _numbered_value(value)
            _CHANNEL.request("setattr", target, _CHANNEL.codec.enc(name), enc)
            _took(objs)
        else:
            _op(self, "setattr", name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        writes: list[Any] = []
        sent: list[Any] = []
        try:
            return _op(self, "call", args, kwargs, writes=writes, sent=sent)
        finally:
            if writes:  # the lists, dicts and sets it changed in place, returning or raising (_Called)
                assert _CHANNEL is not None
                _write_back(sent, writes, _CHANNEL.codec)

    def __eq__(self, other: object) -> Any:
        # Equal to itself only: asking the other side would let its `__eq__` (always True) decide
        # `candidate(a) == candidate(b)`. An object of this side's decides by its own `__eq__`, as on the
        # left (NotImplemented: Python asks it; a builtin's is identity): `result == expected`, a node the
        # solution made and the tests' ListNode with an `__eq__`, was False where `expected == result` held.
        if not _handle_type(type(other)):
            return NotImplemented
        mine = (object.__getattribute__(self, "_rh_tag"), object.__getattribute__(self, "_rh_id"))
        return mine == (object.__getattribute__(other, "_rh_tag"), object.__getattribute__(other, "_rh_id"))

    def __ne__(self, other: object) -> Any:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        # (by identity: each side has one proxy an object of the other's, and a node the solution made
        # keeps its hash, in the sets and dicts that hold it, once the judge made it, _new_node)
        return object.__hash__(self)

    def __lt__(self, other: object) -> Any:
        return _node_order(self, other, "__lt__")

    def __le__(self, other: object) -> Any:
        return _node_order(self, other, "__le__")

    def __gt__(self, other: object) -> Any:
        return _node_order(self, other, "__gt__")

    def __ge__(self, other: object) -> Any:
        return _node_order(self, other, "__ge__")

    def __bool__(self) -> bool:
        if _node_copy(self) is not None:
            return True  # (a node of a class without __bool__ or __len__, _plain_node)
        return bool(_expect(_op(self, "bool"), bool))

    def __len__(self) -> int:
        return int(_expect(_op(self, "len"), int))

    def __iter__(self) -> Any:
        return iter(_expect(_op(self, "list"), list))

    def __getitem__(self, key: Any) -> Any:
        return _op(self, "getitem", key)

    def __instancecheck__(self, instance: Any) -> bool:
        # isinstance(x, Stack), Stack a class of the other side: it answers (a proxy was refused, "arg
        # 2 must be a type"); only its own classes, and the answer a genuine bool
        return bool(_expect(_op(self, "isinstance", instance), bool))

    def __subclasscheck__(self, subclass: Any) -> bool:
        return bool(_expect(_op(self, "issubclass", subclass), bool))

    def __contains__(self, item: Any) -> bool:
        # Membership among the elements it iterates to, compared here: its own `__contains__` could
        # answer True to anything.
        return item in _expect(_op(self, "list"), list)

    def __str__(self) -> str:
        return str(_expect(_op(self, "str"), str))

    def __repr__(self) -> str:
        return str(_expect(_op(self, "repr"), str))


# (The solution's) its copies of the data attributes of the tests' nodes (handle -> name -> value), from
# the judge's snapshots (_Codec._snapshot), and its own writes to them (_node_write); dropped whenever
# the judge may run code, i.e. the solution sends anything but a request of _READS.
_NODE_CACHE: dict[int, dict[str, Any]] = {}
# (The solution's) which of the tests' node classes it uses by name (_node_class) each of them is of.
_NODE_KINDS: dict[int, frozenset[str]] = {}
# (The solution's) the judge's objects that are no such node (asked once while _NODE_CACHE holds).
_NOT_NODES: set[int] = set()
# The requests during which the judge runs none of the tests' code: reading a node's data attribute, a
# node's snapshot, and the batch of the solution's writes to them (``setattrs``; checked as ``setattr``,
# the nodes the solution holds copies of have no __setattr__, _plain_node); how a node class's nodes
# are made (``recipe``) and making the nodes the solution made (``news``, _made_nodes).
_READS = frozenset({"getattr", "node", "setattrs", "recipe", "news"})
# The most nodes in one snapshot, and characters of strings in it; the most writes in one batch.
_SNAP_NODES = 4096
_SNAP_CHARS = 1 << 20
# (The judge's) whether a class's nodes go with their snapshot (_plain_node), by class, while the tests'
# code does not run.
_PLAIN_NODES: dict[type, bool] = {}
# The most nodes the solution makes in its own process in a run (_new_node; its others are made by the
# judge, a round trip each, as before), and the most nodes or writes the judge makes in one message of
# them (_Channel.materialise).
_MAX_NEW_NODES = 1 << 17  # (~36 MB of the judge's for ListNodes of two attributes, LeetCode's 10^5 nodes)
_NEW_BATCH = 16384
# Methods that would run the tests' code where a plain node runs none: reading or writing an attribute
# (the snapshot reads the instance's __dict__ as it is), or its truth (always True for a plain node).
_NODE_HOOKS = (
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__bool__", "__len__", "__class__",
)  # fmt: skip


def _forget_copies() -> None:
    """(The solution's) drop its copies of the tests' nodes and how it makes their classes' nodes: the judge
    may run the tests' code (a class may change)."""
    _NODE_CACHE.clear()
    _NODE_KINDS.clear()
    _NOT_NODES.clear()
    _NEW_RECIPES.clear()


class _Recipe:
    """(The solution's) how a tests' node class's ``__init__`` makes a node (the judge's :func:`_init_recipe`):
    its parameters (``names``, the first ``positional`` of them positional, the first ``posonly`` only
    so), their plain defaults, and what it assigns (``[attribute, is a parameter, parameter or value]``);
    ``fixed``: the names the solution may not write there (the class's methods...); ``kinds``: which of
    the node classes the solution uses by name it is; ``own``: the name of the one whose stand-in its
    nodes are of (:func:`_own_name`; None: a bare handle), as the judge's nodes of it are."""

    __slots__ = ("assigns", "defaults", "fixed", "kinds", "names", "own", "positional", "posonly")

    def __init__(self, recipe: Any):
        names, self.posonly, self.positional, defaults, self.assigns, fixed, kinds, own = recipe
        self.own: str | None = own
        self.names: list[str] = names
        self.defaults: dict[str, Any] = dict(defaults)
        self.fixed = frozenset(fixed)
        self.kinds = frozenset(kinds)

    def make(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The data attributes ``cls(*args, **kwargs)`` gives a node, in its order; None where the call
        does not bind as Python binds it (the judge's call raises the TypeError) or passes a value that
        does not cross as a plain value or a handle (:func:`_new_value`: a list, for its identity)."""
        if len(args) > self.positional:
            return None
        bound = dict(zip(self.names, args, strict=False))
        for key, value in kwargs.items():
            if type(key) is not str or key in bound or key not in self.names[self.posonly :]:
                return None
            bound[key] = value
        if any(n not in bound and n not in self.defaults for n in self.names):
            return None
        attrs: dict[str, Any] = {}
        for attr, is_param, source in self.assigns:
            value = bound.get(source, self.defaults.get(source)) if is_param else source
            if is_param and not _new_value(value):
                return None
            attrs[attr] = value
        return attrs


class _NewNode:
    """(The solution's) a node of a tests' class it made in its own process (:func:`_new_node`)."""

    __slots__ = ("attrs", "name", "node", "number", "recipe")

    def __init__(self, node: Any, number: int, name: str, attrs: dict[str, Any], recipe: _Recipe):
        self.node, self.number, self.name, self.attrs, self.recipe = node, number, name, attrs, recipe


# (The solution's) the nodes it made not yet made in the judge, by their (negative) numbers; how it makes
# each node class's nodes (None: the judge makes them), while the judge runs none of the tests' code;
# and how many it made in its process this run.
_NEW_NODES: dict[int, _NewNode] = {}
_NEW_RECIPES: dict[str, _Recipe | None] = {}
_NEW_MADE = [0]


def _new_value(value: Any) -> bool:
    """(The solution's) whether a node it made may hold ``value`` before the judge makes it: a plain value
    or a handle (of the judge's object, or another such node); another (a list, an object of its own)
    is written where the judge made the node, as to its other nodes."""
    if _plain_value(value):
        return True
    return _handle_type(type(value)) and bool(object.__getattribute__(value, "_rh_tag") in ("R", "L"))


def _new_node(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """(The solution's) ``ListNode(x)``: a node of the tests' class ``name`` made in its own process (of the
    stand-in the judge's nodes of that class are of, :func:`_node_handle`), with the
    data attributes the tests' ``__init__`` gives it (its :class:`_Recipe`), which the judge makes (of the
    tests' own class) only when the solution sends anything that names it or lets the tests' code run
    (:meth:`_Channel.materialise`), many a message: making each node in the judge was a round trip (a
    20,000-node answer, ~80,000 of them). None where the judge makes it (a class whose ``__init__`` runs
    more than assignments, a call that does not bind, a value of another kind, past
    :data:`_MAX_NEW_NODES`)."""
    chan = _CHANNEL
    assert chan is not None
    if name not in _NEW_RECIPES:
        got = chan.request("recipe", name)
        try:
            _NEW_RECIPES[name] = _Recipe(got) if got is not None else None
        except (TypeError, ValueError):
            _NEW_RECIPES[name] = None
    recipe = _NEW_RECIPES[name]
    if recipe is None or _NEW_MADE[0] >= _MAX_NEW_NODES:
        return None
    attrs = recipe.make(args, kwargs)
    if attrs is None:
        return None
    _NEW_MADE[0] += 1
    number = -_NEW_MADE[0]
    stand_in = _STAND_IN_NAMED.get(recipe.own, _Proxy) if type(recipe.own) is str else _Proxy
    node: Any = object.__new__(stand_in)
    object.__setattr__(node, "_rh_tag", "L")
    object.__setattr__(node, "_rh_id", number)
    _NEW_NODES[number] = _NewNode(node, number, name, attrs, recipe)
    return node


def _new_write(node: Any, name: Any, value: Any) -> bool:
    """(The solution's) ``node.name = value``, ``node`` one it made (:func:`_new_node`), made in its copy
    where the judge would take it as it is (a data attribute of a plain value or handle); False for
    another (a name of ``_``, or the class's), written where the judge made the node, checked there."""
    new = _NEW_NODES.get(object.__getattribute__(node, "_rh_id"))
    if new is None or type(name) is not str or name.startswith("_") or len(name) > 4096:
        return False
    if name in new.recipe.fixed or not _new_value(value):
        return False
    new.attrs[name] = value
    return True


def _own_name(cls: type) -> str | None:
    """(The judge's) the name of ``cls`` where it is the tests' class of that name the solution uses by
    name (:func:`_tests_node_class`: its handles of such nodes are of its stand-in for it), else None."""
    if type(cls) is not type:  # (a metaclass of the tests' could answer its name, run their code)
        return None
    name = cls.__name__
    return name if type(name) is str and name in _NODE_NAMES and _TESTS_NS.get(name) is cls else None


def _plain_node(cls: Any) -> bool:
    """(The judge's) whether instances of ``cls`` go to the solution with their data attributes
    (:meth:`_Codec._snapshot`): a class the tests' code defines (:func:`_tests_class`) none of whose
    classes defines a method of :data:`_NODE_HOOKS`, so a copy of its nodes behaves as they do until
    the tests' code runs again, and writing their attributes runs no code of the tests'."""
    if type(cls) is not type:  # (nor hashing a class of a metaclass of the tests' for the lookup)
        return False
    known = _PLAIN_NODES.get(cls)
    if known is None:
        known = _tests_class(cls) and not any(
            name in klass.__dict__ for klass in cls.__mro__[:-1] for name in _NODE_HOOKS
        )
        _PLAIN_NODES[cls] = known
    return known


def _node_copy(p: _Proxy) -> dict[str, Any] | None:
    """(The solution's) its copy of the data attributes of ``p``, a node of the tests' (:data:`_NODE_CACHE`),
    asked for (one ``node`` request, a snapshot of it and the nodes after it) where it holds none; None
    for another object (and in the judge)."""
    ident = object.__getattribute__(p, "_rh_id")
    if ident < 0:  # (a node the solution made, not yet the judge's: _new_node)
        new = _NEW_NODES.get(ident)
        return None if new is None else new.attrs
    held = _NODE_CACHE.get(ident)
    if held is not None or ident in _NOT_NODES:
        return held
    chan = _CHANNEL
    if chan is None or chan.codec.judge or not chan.serving or object.__getattribute__(p, "_rh_tag") != "R":
        return None
    _op(p, "node")
    held = _NODE_CACHE.get(ident)
    if held is None:
        _NOT_NODES.add(ident)
    return held


def _node_write(p: _Proxy, held: dict[str, Any], name: str, value: Any) -> None:
    """(The solution's) ``node.name = value``, ``node`` a tests' node it holds a copy of (``held``): made in
    the copy and queued for the judge (:meth:`_Channel.flush`), a round trip for thousands of writes; a
    value that does not cross as a plain value or a handle (a list, for its identity), or a name it did
    not read there (one the judge may refuse, :func:`_tests_data`), is sent at once, with the queue."""
    chan = _CHANNEL
    assert chan is not None
    enc, objs = _numbered_value(value)
    t = type(enc)
    kept: Any = _NOTHING
    if name in held and not _mutable(value, type(value)):
        if enc is None or t is bool or t is float or (t is int and enc.bit_length() <= 64):
            kept = enc
        elif t is str:
            kept = enc
            chan.pending_chars += len(enc)
        elif t is dict and len(enc) == 1 and next(iter(enc)) in ("R", "H", "F", "L"):
            kept = float(enc["F"]) if "F" in enc else value
    chan.pending.append([{"R": object.__getattribute__(p, "_rh_id")}, name, enc])
    if kept is _NOTHING:
        held.pop(name, None)  # (read from the judge again)
        chan.flush()
        _took(objs)
        return
    held[name] = kept
    if len(chan.pending) >= _SNAP_NODES or chan.pending_chars >= _SNAP_CHARS:
        chan.flush()


# The classes of the handles: _Proxy, and (the solution's) its stand-ins for the tests' node classes,
# of which the tests' nodes it holds copies of are (_node_class).
_PROXY_TYPES: set[type] = {_Proxy}


def _handle_type(t: Any) -> bool:
    """Whether objects of the class ``t`` are handles (:data:`_PROXY_TYPES`), without hashing a class of
    another metaclass (the tests' could run their code)."""
    return t is _Proxy or (type(t) is _NodeClass and t in _PROXY_TYPES)


def _is_exception_class(cls: Any) -> bool:
    try:
        return issubclass(cls, BaseException)
    except Exception:  # (the solution's own metaclass misbehaving: a handle, as any other class)
        return False


def _rebuildable(cls: Any) -> bool:
    """Whether the judge may rebuild exceptions of ``cls``: a builtin Exception class that is not control
    flow to the code that catches it (see _NOT_REBUILT); a SystemExit must not stop the judge."""
    if type(cls) is not type or not issubclass(cls, Exception):
        return False
    name = cls.__name__
    return name not in _NOT_REBUILT and getattr(builtins, name, None) is cls


class _RemoteClass(type):
    """(The judge's) the metaclass of its stand-ins for the solution's exception classes.

    The tests' ``except SolutionError`` (SolutionError a class the solution defined) needs a genuine
    exception class: a proxy made Python raise ``TypeError: catching classes that do not inherit from
    BaseException is not allowed``, and every correct solution failed. So each such class of the solution
    is a class here too, built by the judge (:func:`_mirror_class`) from its name and bases, where a base
    is a builtin Exception class (:func:`_rebuildable`) or another such stand-in and nothing else (no
    method of the solution's runs here; a SystemExit, a StopIteration or a BaseException base is
    Exception's, as the solution's exceptions were). An exception the solution raises is an instance of
    its class's stand-in (:func:`_remote_exception`), its other attributes read from the solution's
    exception object. The class's own attributes are read from the solution's class, and
    ``isinstance``/``issubclass`` of the solution's objects are the solution's to answer, as a proxy's."""

    # (A subclass the tests define of one is a class of theirs: none of the below reaches the solution.)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        """``SolutionError("x")`` in the tests: the solution's own exception, made by its class (the
        tests' ``handle(NotFound())`` hands the solution an object it can inspect), as raised ones."""
        proxy = cls.__dict__.get("_rh_proxy")
        if proxy is None:
            return type.__call__(cls, *args, **kwargs)
        remote = proxy(*args, **kwargs)
        if type(remote) is not _Proxy:  # (a class whose __new__ returns something else: that)
            return remote
        return _remote_exception("Exception", str(remote), cls, remote)

    def __getattr__(cls, name: str) -> Any:
        if not name.startswith("__") and not name.startswith("_rh_"):
            for klass in cls.__mro__:  # (the nearest of the solution's classes: a subclass of the tests')
                proxy = klass.__dict__.get("_rh_proxy")
                if proxy is not None:
                    return getattr(proxy, name)
        raise AttributeError(name)

    def __instancecheck__(cls, instance: Any) -> bool:
        proxy = cls.__dict__.get("_rh_proxy")
        if proxy is not None and type(instance) is _Proxy:
            return _Proxy.__instancecheck__(proxy, instance)
        return type.__instancecheck__(cls, instance)

    def __subclasscheck__(cls, subclass: Any) -> bool:
        proxy = cls.__dict__.get("_rh_proxy")
        if proxy is not None and type(subclass) is _Proxy:
            return _Proxy.__subclasscheck__(proxy, subclass)
        return type.__subclasscheck__(cls, subclass)


def _remote_attribute(self: BaseException, name: str) -> Any:
    """``__getattr__`` of the stand-ins' instances: an attribute of the solution's exception object (of
    its class, for an instance of a subclass the tests defined)."""
    if name.startswith("__") or name.startswith("_rh_"):
        raise AttributeError(name)
    remote = self.__dict__.get("_rh_remote")
    return getattr(type(self) if remote is None else remote, name)


_MAX_MIRRORS = 10_000


def _mirror_class(codec: _Codec, ident: int, name: str, bases: list[Any]) -> _RemoteClass:
    """The judge's stand-in for the solution's exception class ``ident`` (see :class:`_RemoteClass`)."""
    known = codec.mirrors.get(ident)
    if known is not None:
        return known
    if len(codec.mirrors) >= _MAX_MIRRORS:  # (kept for the run: a flood of them is no program's)
        raise _ProtocolError("too many exception classes")
    if not name.isidentifier():
        name = "RemoteError"
    kept = tuple(b for b in bases if type(b) is _RemoteClass or _rebuildable(b)) or (Exception,)
    ns = {
        "__module__": "solution",
        "__qualname__": name,
        "__getattr__": _remote_attribute,
        "_rh_id": ident,
        "_rh_proxy": codec._proxy(codec.foreign_tag, ident),
    }
    try:
        cls = _RemoteClass(name, kept, ns)
    except TypeError:  # (bases whose layouts or orders conflict: only a forged message has them)
        cls = _RemoteClass(name, (Exception,), ns)
    codec.mirrors[ident] = cls
    return cls


def _foreign(obj: Any) -> bool:
    """Whether ``obj`` (in the judge) is the solution's: a proxy, or a stand-in for its exception class."""
    return type(obj) is _Proxy or (type(obj) is _RemoteClass and "_rh_proxy" in obj.__dict__)


def _serve(codec: _Codec, op: str, args: Any, allowed: frozenset[str]) -> Any:
    """Carry out a request on one of our objects (the other side named it by handle)."""
    if op not in allowed or type(args) is not list or not args:
        raise _ProtocolError(f"operation {op!r} is not allowed")
    if op == "new":  # (the judge's) a node of the tests' class the solution uses by name (_node_class)
        return _serve_call(codec, _tests_node_class(args[0]), args[1:])
    if op == "recipe":  # (the judge's) how the solution may make that class's nodes itself (_new_node)
        if not codec.judge or len(args) != 1:
            raise _ProtocolError("malformed recipe request")
        return _recipe_of(args[0])
    if op == "news":  # (the judge's) the nodes the solution made, made here (_Channel.materialise)
        return _made_nodes(codec, args)
    if op == "setattrs":  # (the judge's) the solution's writes to the tests' nodes (_node_write)
        if not codec.judge or len(args) != 1 or type(args[0]) is not list:
            raise _ProtocolError("malformed writes")
        for write in args[0]:
            if type(write) is not list or len(write) != 3 or type(write[0]) is not dict:
                raise _ProtocolError("malformed writes")
            if list(write[0]) != [codec.handle_tag]:
                raise _ProtocolError("a request must name one of the callee's own objects")
            _tests_write(codec, codec.dec(write[0]), write[1], write[2])  # (as a setattr request)
        return None
    if op == "node":  # (the judge's) a node's snapshot, for the solution to hold (_node_copy)
        if (
            not codec.judge
            or len(args) != 1
            or type(args[0]) is not dict
            or list(args[0]) != [codec.handle_tag]
        ):
            raise _ProtocolError("malformed node request")
        target = codec.dec(args[0])
        if not _plain_node(type(target)):
            return None
        codec.snapped.discard(id(target))  # (one the solution lacks: a message that was never sent)
        return target
    if op == "isnode":  # (the judge's) isinstance(obj, ListNode) in the solution, of the tests' class
        if len(args) != 2:
            raise _ProtocolError("malformed isinstance")
        return isinstance(codec.dec(args[1]), _tests_node_class(args[0]))
    if type(args[0]) is not dict or list(args[0]) != [codec.handle_tag]:
        raise _ProtocolError("a request must name one of the callee's own objects")
    target = codec.dec(args[0])
    if op == "call":
        if codec.judge and _not_callable(target):
            raise _ProtocolError("operation 'call' is not allowed on this function of the judge's")
        return _serve_call(codec, target, args[1:])
    if op == "setattr" and codec.judge:
        if len(args) != 3:
            raise _ProtocolError("malformed setattr")
        _tests_write(codec, target, args[1], args[2])
        return None
    rest = [codec.dec(a) for a in args[1:]]
    if op == "getattr":
        if codec.judge:  # (the tests' objects: their data attributes only)
            value = _tests_data(target, rest[0], op)
            calls = _CHANNEL.calls if _CHANNEL is not None else None
            t = type(value)
            if (
                not calls
                or value is None
                or t in (bool, int, float, str)
                or (_tests_class(t) and not _mutable(value, t))
            ):
                return value  # (nothing in it to number: a value, or a node of the tests', a handle)
            # inside a call to the solution: its lists... numbered on, the solution's changes written back
            return _Numbered(value, *calls[-1])
        return getattr(target, rest[0])
    if op == "setattr":
        if codec.judge:
            _tests_data(target, rest[0], op)
        setattr(target, rest[0], rest[1])
        return None
    if op == "bool":
        return bool(target)
    if op == "len":
        return len(target)
    if op == "list":
        return list(target)
    if op == "getitem":
        return target[rest[0]]
    if op == "isinstance":
        return isinstance(rest[0], target)
    if op == "issubclass":
        return issubclass(rest[0], target)
    if op == "str":
        return str(target)
    if op == "repr":
        return repr(target)
    raise _ProtocolError(f"unknown operation {op!r}")


def _tests_write(codec: _Codec, target: Any, name: Any, value: Any) -> None:
    """(The judge's) ``target.name = value`` (encoded) of the solution's, ``target`` a tests' object
    (:func:`_tests_data`). Inside a call to the solution, the value's lists, dicts, sets and deques are
    numbered on in it (as the solution numbers them, :func:`_numbered_value`): ``node.children = kids``
    sent a copy of ``kids``, so ``kids.append(x)`` after it changed the solution's list only; the call's
    changes to them are written back into the node's now (:class:`_Called`), and reading
    ``node.children`` again is ``kids`` there."""
    calls = _CHANNEL.calls if _CHANNEL is not None else None
    numbered: list[Any] = []
    codec.received = numbered if calls else None
    try:
        value = codec.dec(value)
    finally:
        codec.received = None
    name = codec.dec(name)
    _tests_data(target, name, "setattr")
    setattr(target, name, value)
    if calls and numbered:
        sent, memo = calls[-1]
        for obj in numbered:
            memo[id(obj)] = len(sent)
            sent.append(obj)


def _numbered_value(value: Any) -> tuple[Any, list[Any]]:
    """(The solution's) ``value`` encoded for a write to a tests' object inside a call of the judge's, and
    its lists, dicts, sets and deques in the order the judge numbers them (:func:`_tests_write`), for
    :meth:`_Called.took` once the write is made; outside a call, none."""
    assert _CHANNEL is not None
    codec = _CHANNEL.codec
    if not _SERVED:
        return codec.enc(value), []
    objs: list[Any] = []
    return codec.enc_call([value], objs)[0], objs


def _took(objs: list[Any]) -> None:
    """(The solution's) the objects of a write the judge made (:func:`_numbered_value`): the call's."""
    if objs and _SERVED:
        called = _SERVED[-1]
        called.received.extend(objs)
        called.took()


def _serve_call(codec: _Codec, target: Any, args: list[Any]) -> _Called:
    """Call ``target`` with a request's arguments (``[args, kwargs]``, encoded)."""
    rest, received = codec.dec_call(args)
    if len(rest) != 2:
        raise _ProtocolError("malformed call")
    call_args, call_kwargs = rest
    if (
        type(call_args) is not tuple
        or type(call_kwargs) is not dict
        or any(type(k) is not str for k in call_kwargs)
    ):
        raise _ProtocolError("malformed call")
    called = _Called(received)
    _SERVED.append(called)
    try:
        called.value = target(*call_args, **call_kwargs)
    except _Gone:
        raise
    except BaseException as exc:  # (raised by serve_one, with what the call changed)
        called.raised = exc
    finally:
        _SERVED.pop()
    return called


def _not_callable(obj: Any) -> bool:
    """Whether ``obj`` (in the judge) is a function the solution may not call there: one of the guest's own
    (the hooks the tests' code calls to record a test's verdict, ``__rh_r__``, sit in the tests'
    namespace, which tests may hand the solution, ``f(globals())``: a solution calling them recorded
    asserts that never ran as passed), or a builtin function outside :data:`_CALLABLE_BUILTINS` (``exec``
    of the builtins' namespace, ``f(vars(builtins))``, ran the solution's code in the judge, and
    ``getattr`` walks the judge's object graph). Such a builtin never even crosses as a handle (which an
    allowed one, ``sorted(xs, key=exec)``, would call): the solution gets its own, by name."""
    if type(obj) is type(len):
        return getattr(obj, "__self__", None) is builtins and obj.__name__ not in _CALLABLE_BUILTINS
    fn = getattr(obj, "__func__", obj)  # (a bound method's function)
    return getattr(fn, "__globals__", None) is globals()


# The builtin functions a solution may call in the judge (handed one, as a callback): those that only
# compute from their arguments, run no code of the solution's choosing there, reach no other object and
# write nothing (the judge's `print` writes to the verdict channel).
_CALLABLE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash", "hex", "id",
        "isinstance", "issubclass", "len", "max", "min", "next", "oct", "ord", "pow", "repr", "round",
        "sorted", "sum",
    }
)  # fmt: skip


_NOTHING = object()


def _tests_data(obj: Any, name: Any, op: str) -> Any:
    """(The judge's) the value of ``obj``'s attribute ``name`` when it is a data attribute the solution may
    read (``op`` ``getattr``: one it holds), or None when one it may write (``setattr``); else the
    refusal, raised in the solution's process as its own failure.

    LeetCode-style tests build their linked lists and trees of a ``ListNode``/``TreeNode`` class of their
    own, whose nodes reach the solution as handles: a solution that could not read ``head.val`` or set
    ``head.next`` failed every such task. So the solution may use the data attributes of the instances
    of the classes the tests' code defines (``__module__`` ``"__main__"``, plain ``type`` their metaclass:
    not a builtin's, a module's, the guest's own or a stand-in for the solution's) and nothing else: the
    names that do not start with ``_`` held in the instance's own ``__dict__`` (read from it directly, no
    code of the tests runs), or, to write, a name its class does not define; and a class's plain default
    (``class TreeNode: left = None``, :func:`_plain_default`), which the instance's own value shadows
    once written, as in Python. Never another class attribute, a method, property or slot (a method the
    tests call would otherwise be the solution's to replace), nor, through them, a class, function,
    module, frame or the judge's globals: the values read cross as any others (builtins by value, other
    objects by handle, on which this holds again)."""
    cls = type(obj)
    if not _tests_class(cls):
        raise _ProtocolError(f"operation {op!r} is not allowed on this object")
    if type(name) is not str:
        raise _ProtocolError("an attribute's name is a string")
    if name.startswith("_"):
        raise AttributeError(f"attribute {name[:60]!r} of the tests' objects is not the solution's to use")
    try:
        data = object.__getattribute__(obj, "__dict__")
    except AttributeError:  # (a class with __slots__)
        data = None
    defined = _NOTHING
    for klass in cls.__mro__:
        defined = klass.__dict__.get(name, _NOTHING)
        if defined is not _NOTHING:
            break
    default = defined is not _NOTHING and _plain_default(defined)
    if (
        type(data) is not dict
        or (defined is not _NOTHING and not default and (name not in data or _data_descriptor(defined)))
        or (op == "getattr" and name not in data and not default)
    ):
        raise AttributeError(f"{cls.__name__!r} object of the tests has no data attribute {name[:60]!r}")
    if op != "getattr":
        return None
    return data[name] if name in data else defined


# The types of a class attribute the solution may read off the tests' objects as their default (and
# shadow by writing its own): values only, none that holds or runs anything of the tests'.
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def _plain_default(attr: Any) -> bool:
    """Whether the class attribute ``attr`` is a plain default of its instances' (``left = None``)."""
    return type(attr) in _PLAIN


def _tests_class(cls: Any) -> bool:
    """Whether ``cls`` is a class the tests' code defines (``__module__`` ``"__main__"``, plain ``type`` its
    metaclass: not a builtin's, a module's, the guest's own or a stand-in for the solution's)."""
    return (
        type(cls) is type
        and cls.__dict__.get("__module__") == "__main__"
        and not issubclass(cls, (type, type(sys)))  # (classes of a tests' metaclass, modules of theirs)
    )


# (The judge's) the tests' namespace, and the names of :data:`harness.NODE_CLASSES` the tests define
# (the public frame's ``nodes``): the classes the solution may make nodes of by name (_node_class).
_TESTS_NS: dict[str, Any] = {}
_NODE_NAMES: frozenset[str] = frozenset()


def _tests_node_class(name: Any) -> type:
    """(The judge's) the tests' class ``name`` (a ``ListNode``), which the solution uses by that name
    without defining it, as LeetCode's solutions do; a NameError in the solution's process when the
    tests define no such class (now: a ``ListNode`` the solution defined, a proxy, is none)."""
    if type(name) is not str:
        raise _ProtocolError("a class's name is a string")
    cls = _TESTS_NS.get(name) if name in _NODE_NAMES else None
    if not _tests_class(cls):
        raise NameError(f"name {name[:60]!r} is not defined (the tests define no such class)")
    return cls  # type: ignore[return-value]


# (The judge's) each tests' node class's recipe (_init_recipe), while the tests' code does not run.
_INIT_RECIPES: dict[type, Any] = {}
# Code flags of an ``__init__`` that is not a plain function of fixed parameters: *args, **kwargs,
# generator, coroutine, async generator.
_NOT_PLAIN_CODE = 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200


def _recipe_of(name: Any) -> Any:
    """(The judge's) the ``recipe`` request: how the solution may make the nodes of the tests' class
    ``name`` in its own process (:func:`_init_recipe`), or None (the judge makes them, ``new``)."""
    cls = _TESTS_NS.get(name) if type(name) is str and name in _NODE_NAMES else None
    return _init_recipe(cls) if _tests_class(cls) else None


def _init_recipe(cls: Any) -> Any:
    """(The judge's) how ``cls(...)`` makes a node, for the solution to make them in its process
    (:class:`_Recipe`) and the judge to make them bare (:func:`_made_nodes`), where that is all it does:
    a class of :func:`_plain_node` (no attribute hooks) based on ``object`` alone, without ``__new__``
    or ``__slots__``, whose ``__init__`` only assigns its parameters and plain constants to attributes
    of ``self`` the solution may write (:func:`_tests_data`), its defaults plain values
    (:func:`_new_value`). Read from its bytecode: nothing of the tests' runs. None for another class
    (also where the bytecode has an instruction not known here, as in another Python)."""
    if type(cls) is not type:
        return None
    if cls not in _INIT_RECIPES:
        _INIT_RECIPES[cls] = _read_init(cls) if _plain_node(cls) else None
    return _INIT_RECIPES[cls]


def _read_init(cls: type) -> Any:
    """:func:`_init_recipe` of a plain node class."""
    ns = cls.__dict__
    init = ns.get("__init__")
    if (
        cls.__mro__ != (cls, object)
        or "__slots__" in ns
        or "__new__" in ns
        or type(init) is not type(_read_init)
    ):
        return None
    code = init.__code__
    count = code.co_argcount + code.co_kwonlyargcount
    if (
        code.co_flags & _NOT_PLAIN_CODE
        or code.co_freevars
        or code.co_cellvars
        or code.co_argcount < 1  # (no positional ``self``: ``cls()`` raises the TypeError, makes none)
        or count != code.co_nlocals
    ):
        return None
    names = list(code.co_varnames[:count])
    given = init.__defaults__ or ()
    defaults = list(zip(names[code.co_argcount - len(given) : code.co_argcount], given, strict=True))
    defaults += list(dict.items(init.__kwdefaults__ or {}))
    if not all(_plain_value(v) for _, v in defaults):
        return None
    assigns = _init_assigns(code, names, ns)
    if assigns is None:
        return None
    fixed = [k for k, v in dict.items(dict(ns)) if type(k) is str and not _plain_default(v)]
    kinds = sorted(n for n in _NODE_NAMES if _TESTS_NS.get(n) is cls)
    return [
        names[1:],
        max(code.co_posonlyargcount - 1, 0),
        code.co_argcount - 1,
        defaults,
        assigns,
        fixed,
        kinds,
        _own_name(cls),
    ]


def _plain_value(value: Any) -> bool:
    """Whether ``value`` is one a node made in the solution's process holds as it is (:func:`_new_value`)."""
    t = type(value)
    if value is None or t is bool or t is float:
        return True
    return bool((t is int and value.bit_length() <= 64) or (t is str and len(value) <= 4096))


def _init_assigns(code: Any, names: list[str], ns: Any) -> list[Any] | None:
    """The ``[attribute, is a parameter, parameter or value]`` an ``__init__``'s bytecode assigns, in order,
    where it does nothing else; else None."""
    import dis

    stack: list[tuple[bool, Any]] = []
    assigns: list[Any] = []
    for ins in dis.get_instructions(code):
        op, arg = ins.opname, ins.argval
        if op in ("RESUME", "NOP", "CACHE", "EXTENDED_ARG"):
            continue
        if op in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW"):
            stack.append((True, arg))
        elif op in ("LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW") and type(arg) is tuple:
            stack += [(True, a) for a in arg]
        elif op in ("LOAD_CONST", "LOAD_SMALL_INT") and _plain_value(arg):
            stack.append((False, arg))
        elif op == "SWAP" and type(ins.arg) is int and 2 <= ins.arg <= len(stack):
            stack[-1], stack[-ins.arg] = stack[-ins.arg], stack[-1]
        elif op == "STORE_ATTR" and len(stack) >= 2 and stack[-1] == (True, names[0]) and type(arg) is str:
            stack.pop()
            is_param, source = stack.pop()
            defined = ns.get(arg, _NOTHING)
            if arg.startswith("_") or (defined is not _NOTHING and not _plain_default(defined)):
                return None
            if is_param and (source == names[0] or source not in names):
                return None
            assigns.append([arg, is_param, source])
        elif (op == "RETURN_CONST" and arg is None) or (
            op == "RETURN_VALUE" and stack[-1:] == [(False, None)]
        ):
            return assigns
        else:
            return None
    return None


def _made_nodes(codec: _Codec, args: Any) -> list[int]:
    """(The judge's) the ``news`` request: make the nodes the solution made in its process (``[[number,
    class name], ...]``), bare (what their ``__init__`` assigns of constants and defaults, None for a
    parameter without one), for its ``setattrs`` that follow to give them their data attributes, checked
    as any setattr; the handles of them. Only of a tests' node class of :func:`_init_recipe` (no code of
    the tests' runs), each number once and of ``-1`` to ``-_MAX_NEW_NODES``, at most
    :data:`_MAX_NEW_NODES` a run."""
    if not codec.judge or len(args) != 1 or type(args[0]) is not list or len(args[0]) > _NEW_BATCH:
        raise _ProtocolError("malformed nodes")
    entries = args[0]
    if len(codec.news) + len(entries) > _MAX_NEW_NODES:
        raise _ProtocolError("too many nodes made in the solution's process")
    out: list[int] = []
    for entry in entries:
        if (
            type(entry) is not list
            or len(entry) != 2
            or type(entry[0]) is not int
            or type(entry[1]) is not str
        ):
            raise _ProtocolError("malformed nodes")
        number, name = entry
        # (the solution numbers them -1, -2, ... a run: a number of its choosing out of that range, one of
        # -k * (2**61 - 1), hashes as the others do, so that each made the dict's insertion walk them all)
        if not -_MAX_NEW_NODES <= number < 0 or number in codec.news:
            raise _ProtocolError("malformed nodes")
        cls = _tests_node_class(name)
        recipe = _init_recipe(cls)
        if recipe is None:
            raise _ProtocolError("this class's nodes are made by the judge")
        node: Any = object.__new__(cls)
        defaults = dict(recipe[3])
        for attr, is_param, source in recipe[4]:
            setattr(node, attr, defaults.get(source) if is_param else source)
        codec.news[number] = node
        codec.local[id(node)] = node
        out.append(id(node))
    return out


def _data_descriptor(attr: Any) -> bool:
    """Whether the class attribute ``attr`` takes its instances' attribute of its name (a property, a slot)."""
    t = type(attr)
    return hasattr(t, "__set__") or hasattr(t, "__delete__")


# The solution may do anything to the judge's objects it was handed except walk its object graph: of
# the tests' own objects, it may read and write the data attributes (_tests_data).
_JUDGE_SERVES = frozenset(
    {
        "call",
        "new",
        "news",
        "recipe",
        "isnode",
        "node",
        "getattr",
        "setattr",
        "setattrs",
        "list",
        "len",
        "bool",
        "getitem",
        "str",
        "repr",
    }
)
_SOLUTION_SERVES = frozenset(
    {
        "call",
        "getattr",
        "setattr",
        "bool",
        "len",
        "list",
        "getitem",
        "str",
        "repr",
        "isinstance",
        "issubclass",
    }
)


# --------------------------------------------------------------------------------------------------
# pytests mode: the solution process
# --------------------------------------------------------------------------------------------------
def _solution_main(rfd: int, wfd: int, header: dict[str, Any]) -> NoReturn:
    global _CHANNEL
    codec = _Codec("H", "R", _Proxy)
    chan = _Channel(rfd, wfd, codec, lambda op, args: _serve(codec, op, args, _SOLUTION_SERVES))
    _CHANNEL = chan

    def _exit(code: object = None) -> NoReturn:
        raise SystemExit(code)

    builtins.exit = _exit  # type: ignore[assignment]  # `-S` skipped site, which defines these
    builtins.quit = _exit  # type: ignore[assignment]
    sys.stdout = sys.stderr = _dropping_output()
    sys.meta_path.append(_SitePackages())
    g: dict[str, Any] = {"__name__": "__solution__", "__builtins__": builtins}
    nodes = {str(name): _node_class(str(name)) for name in header.get("nodes") or ()}
    g.update(nodes)
    status, message = "ok", ""
    try:
        code = compile(header["solution"], "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        status, message = "syntax", f"{type(exc).__name__}: {exc}"
    given = dict(g)  # what the solution did not define: the node stand-ins, the prelude's imports
    if status == "ok":
        try:
            imports = header.get("prelude_imports")
            if imports:  # (the reference's prelude's import statements: LeetCode's `Optional`, `heapq`)
                exec(compile(str(imports), "prelude.py", "exec", dont_inherit=True), g)
                given = dict(g)
            exec(code, g)
            setup = header.get("setup")
            if setup:
                exec(compile(setup, "setup.py", "exec"), g)
        except BaseException as exc:
            status, message = "error", f"{type(exc).__name__}: {_short(exc)}"
    try:
        if status == "ok":
            # (not the tests' node classes nor what the prelude's imports bound, unless the solution
            # made the name its own)
            names = {
                k: codec.enc(v)
                for k, v in g.items()
                if not k.startswith("__") and v is not given.get(k, _NOTHING)
            }
            chan.send(["loaded", "ok", "", names])
        else:
            chan.send(["loaded", status, message, {}])
        while True:
            msg = chan.recv()
            if len(msg) != 3 or msg[0] != "q":
                raise _ProtocolError("unexpected message")
            chan.serve_one(msg)
    except BaseException:
        pass
    os._exit(0)


class _NodeClass(type):
    """(The solution's) the metaclass of its stand-ins for the tests' node classes (:func:`_node_class`)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kw: Any) -> Any:
        if "_rh_node" not in ns:  # (a class of the solution's extending a stand-in: of its plain twin)
            bases = tuple(b.__dict__.get("_rh_plain", b) if type(b) is _NodeClass else b for b in bases)
        return super().__new__(mcls, name, bases, ns, **kw)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        name = cls.__dict__.get("_rh_node")
        if type(name) is not str:  # (a subclass the solution defines: a class of its own)
            return type.__call__(cls, *args, **kwargs)
        chan = _CHANNEL
        if chan is None or not chan.serving:
            raise NameError(
                f"{name} is the tests' class: its nodes can be made while the tests call the solution"
            )
        node = _new_node(name, args, kwargs)
        if node is not None:
            return node
        writes: list[Any] = []
        sent: list[Any] = []
        try:
            encoded = chan.codec.enc_call([args, kwargs], sent)
            return chan.request("new", name, *encoded, writes=writes, sent=sent)
        finally:
            if writes:
                _write_back(sent, writes, chan.codec)

    def __instancecheck__(cls, instance: Any) -> bool:
        # isinstance(node, ListNode), node the tests' (a handle): the judge answers, about its class
        name = cls.__dict__.get("_rh_node")
        chan = _CHANNEL
        if not _handle_type(type(instance)):  # (an object of the solution's: of a subclass, its twin's)
            twin = cls.__dict__.get("_rh_plain")
            return type.__instancecheck__(cls, instance) or (
                type(twin) is type and type.__instancecheck__(twin, instance)
            )
        if type(name) is not str or chan is None or not chan.serving:
            return type.__instancecheck__(cls, instance)
        new = _NEW_NODES.get(object.__getattribute__(instance, "_rh_id"))
        if new is not None and object.__getattribute__(instance, "_rh_tag") == "L":
            return name in new.recipe.kinds  # (a node it made, of the class it named)
        if _node_copy(instance) is not None and name in _NODE_KINDS.get(
            object.__getattribute__(instance, "_rh_id"), ()
        ):
            return True  # (a node it holds a copy of, of that class, as the judge said with it)
        return bool(_expect(chan.request("isnode", name, chan.codec.enc(instance)), bool))

    def __subclasscheck__(cls, subclass: Any) -> bool:
        twin = cls.__dict__.get("_rh_plain")
        return type.__subclasscheck__(cls, subclass) or (
            type(twin) is type and type.__subclasscheck__(twin, subclass)
        )


# (The solution's) its stand-ins for the tests' node classes (_node_class), and by name.
_STAND_INS: list[type] = []
_STAND_IN_NAMED: dict[str, type] = {}


def _node_order(a: _Proxy, b: object, op: str) -> Any:
    """``a < b`` (``op``), ``a`` a proxy: in the solution, of a node of the tests' whose class's stand-in
    the solution gave that method (``ListNode.__lt__ = lambda a, b: a.val < b.val``, for ``heapq``, as
    LeetCode's solutions do), the method's answer; else unordered (``TypeError``), as in the judge."""
    chan = _CHANNEL
    if chan is None or chan.codec.judge:
        return NotImplemented
    for cls in _STAND_INS:
        method = cls.__dict__.get(op)
        if method is not None and isinstance(a, cls):
            return method(a, b)
    return NotImplemented


def _node_class(name: str) -> type:
    """(The solution's) its ``ListNode``, ``TreeNode`` or ``Node`` where the tests define that class: LeetCode's
    solutions use them without defining them (``dummy = ListNode(0)``, ``Optional[ListNode]`` in an
    annotation), and got a NameError. Calling it makes a node of the tests' own class, in the tests'
    process (the judge's ``new``, :func:`_tests_node_class`; for a class whose ``__init__`` only assigns,
    in the solution's, made in the judge's when it crosses, :func:`_new_node`): the solution holds it as
    any other object of the tests' (its data attributes the solution's to read and write), and the tests
    get their own node back, as in one process; ``isinstance(node, ListNode)`` is the judge's answer about its class
    (``isnode``), and an ordering the solution gives the class orders them (:func:`_node_order`). A class
    the solution defines of that name is its own, as before.

    The stand-in is a class of handles (:class:`_Proxy`): a node of the tests' of that very class, once
    the solution holds its copy (:meth:`_Codec._snapshot_in`), is an instance of it, so ``type(node) is
    ListNode`` holds and a method the solution gives the class (``ListNode.__eq__``, ``__hash__``,
    ``__lt__``) is the node's in its process, as in one (they were the handle's, and ``type(node)`` its
    class). A class of the solution's extending the stand-in extends its plain twin instead (its objects
    are the solution's own), ``isinstance`` and ``issubclass`` against the stand-in true of them."""
    twin = type(name, (), {"__module__": "__solution__", "__qualname__": name})
    ns = {"__module__": "__solution__", "__qualname__": name, "_rh_node": name, "_rh_plain": twin}
    cls: type = _NodeClass(name, (_Proxy,), {**ns, "__slots__": ()})
    _STAND_INS.append(cls)
    _PROXY_TYPES.add(cls)
    _STAND_IN_NAMED[name] = cls
    return cls


class _SitePackages:
    """The last import finder of the solution process: on its first import that nothing else found, it
    puts the interpreter's site-packages on ``sys.path`` (as ``site`` does at start-up) and looks again.

    The guest starts with ``-S`` (``site`` costs milliseconds per run), so the solution could import the
    standard library only, while the same program run as a stdin/stdout case (``python3 -E -s main.py``)
    imports whatever is installed for the sandbox's interpreter (numpy, say): a correct solution failed
    every assert-style test with ``ModuleNotFoundError``. Only a run that imports such a module pays."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if path is not None:  # a submodule: its package was found already
            return None
        sys.meta_path.remove(self)
        import site
        from importlib.machinery import PathFinder

        for directory in site.getsitepackages():
            if directory not in sys.path:
                site.addsitedir(directory)
        return PathFinder.find_spec(name, None, target)


def _dropping_output() -> Any:
    """The solution's ``sys.stdout``/``sys.stderr``: its prints go to the sandbox's stderr (fd 2) until the
    service stops reading it at its cap, and are dropped from then on. With the interpreter's own streams,
    the closed pipe made every later ``print`` raise ``BrokenPipeError`` inside the function under test:
    a correct solution that prints a lot of debug output failed its tests."""
    import io

    class _Raw(io.RawIOBase):
        gone = False

        def writable(self) -> bool:
            return True

        def fileno(self) -> int:
            return 2

        def write(self, data: Any) -> int:
            if not self.gone:
                try:
                    return os.write(2, data)
                except OSError:  # EPIPE: the service keeps no more of this output
                    self.gone = True
            return len(data)

    return io.TextIOWrapper(
        io.BufferedWriter(_Raw()), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )


# --------------------------------------------------------------------------------------------------
# pytests mode: the judge
# --------------------------------------------------------------------------------------------------
def _cpu_seconds(pid: int, children: bool = False) -> float | None:
    """User + system CPU seconds ``pid`` has used (``/proc/<pid>/stat``), or None when unreadable;
    ``children``: with those of the children it has waited for (what ``wait4`` will report)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        if children:
            ticks += int(fields[13]) + int(fields[14])
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# A test's wall-clock allowance, in multiples of its CPU-time limit (as programming judges give).
_WALL_FACTOR = 3.0


class _Judge:
    """Runs the tests against the solution process. A test's time limit is the solution's *CPU* time
    (read from /proc), so a correct solution on a loaded host is not a timeout, and a cached timeout is
    the solution's own; the wall clock only caps it at ``_WALL_FACTOR`` times the limit (a solution
    that sleeps or waits), within the total deadline."""

    def __init__(self, emit: _Emitter, secret: dict[str, Any], child: int, chan: _Channel):
        self.emit = emit
        self.child = child
        self.chan = chan
        self.test_timeout = float(secret.get("test_timeout_s") or 5.0)
        self.total_deadline = time.monotonic() + float(secret.get("total_timeout_s") or 30.0)
        self.passed: set[int] = set()
        self.failed: set[int] = set()
        self.current: int | None = None
        self.armed_at = 0.0
        self.cpu_at: float | None = None
        # whether the last test cut off was stopped by the wall clock (its cap, the total deadline) with
        # CPU time to spare, not by its CPU time limit: a verdict a loaded host can decide
        self.wall_cut = False
        chan.extend = self.extend

    def arm(self) -> None:
        self.armed_at = time.monotonic()
        self.cpu_at = _cpu_seconds(self.child)
        self.chan.deadline = min(self.armed_at + self.test_timeout, self.total_deadline)

    def extend(self) -> float:
        """More seconds to wait for the current test: what is left of its CPU time, if the solution has
        not used it up (it was waiting for the cores), within the wall cap and the total deadline."""
        now = time.monotonic()
        cpu = _cpu_seconds(self.child)
        self.wall_cut = True  # (CPU time unknown: not the CPU limit's, as far as anyone can tell)
        if cpu is None or self.cpu_at is None:
            return 0.0
        left_cpu = self.test_timeout - (cpu - self.cpu_at)
        left_wall = min(self.armed_at + _WALL_FACTOR * self.test_timeout, self.total_deadline) - now
        if left_cpu <= 0:
            self.wall_cut = False
            return 0.0
        if left_wall <= 0:
            return 0.0
        return min(max(left_cpu, 0.05), left_wall)

    # hooks called by the rewritten test code
    def begin(self, i: int) -> None:
        self.current = i
        self.arm()

    def result(self, i: int, outcome: Any) -> None:
        self.current = None
        if outcome is True:
            if i not in self.failed:
                self.passed.add(i)
        else:
            msg = "assertion failed" if outcome is False else f"{type(outcome).__name__}: {_short(outcome)}"
            self.fail(i, msg)
        self.arm()

    def fail(self, i: int, message: str) -> None:
        self.passed.discard(i)
        if i not in self.failed:
            self.failed.add(i)
            self.emit("test", i, "fail", _b64(message))

    def gone_message(self, why: str) -> str:
        if why == "timeout":
            if time.monotonic() >= self.total_deadline:
                return "total time limit"
            # the wall clock's cap (3x the limit) with CPU time to spare: a solution that sleeps or
            # waits, or one a loaded host kept off the cores, which on an idle one would have passed
            return "timeout (wall clock)" if self.wall_cut else "timeout"
        # A dying process closes its pipe before it can be reaped: give it a moment to finish dying
        # (without it, a solution killed by a signal was often one that "stopped answering").
        give_up = time.monotonic() + 0.5
        pid, status = os.waitpid(self.child, os.WNOHANG)
        while pid == 0 and time.monotonic() < give_up:
            time.sleep(0.005)
            pid, status = os.waitpid(self.child, os.WNOHANG)
        if pid == 0:
            return "the solution process stopped answering"
        if os.WIFSIGNALED(status):
            return f"the solution process was killed by signal {os.WTERMSIG(status)}"
        return f"the solution process exited with status {os.WEXITSTATUS(status)}"


def _pytests(header: dict[str, Any]) -> None:
    global _CHANNEL
    j2s_r, j2s_w = os.pipe()
    s2j_r, s2j_w = os.pipe()
    pid = _fork_untrusted(70)
    if pid == 0:
        try:
            os.close(j2s_w)
            os.close(s2j_r)
            devnull = os.open("/dev/null", os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(2, 1)  # the solution's prints never reach the verdict channel
            keep = sorted({0, 1, 2, j2s_r, s2j_w})
            last = 2
            for fd in keep[3:]:
                os.closerange(last + 1, fd)
                last = fd
            os.closerange(last + 1, 1 << 16)
            _solution_main(j2s_r, s2j_w, header)
        finally:
            os._exit(70)
    os.close(j2s_r)
    os.close(s2j_w)
    # Only now, in the judge alone, read what the solution must never see.
    try:
        secret = _read_frame(0)
        os.close(0)
        emit = _Emitter(str(secret["nonce"]))
    except BaseException as exc:
        os.kill(pid, signal.SIGKILL)
        _fail_start(f"bad private frame: {type(exc).__name__}: {exc}")
    emit("ready")
    try:
        _run_judge(header, secret, emit, pid, j2s_w, s2j_r)
    except BaseException as exc:
        emit("error", _b64(f"judge failed: {type(exc).__name__}: {_short(exc)}"))
    finally:
        _kill_tree(pid)
    emit("done")


def _run_judge(
    header: dict[str, Any], secret: dict[str, Any], emit: _Emitter, child: int, wfd: int, rfd: int
) -> None:
    global _CHANNEL
    codec = _Codec("R", "H", _Proxy, judge=True)
    chan = _Channel(rfd, wfd, codec, lambda op, args: _serve(codec, op, args, _JUDGE_SERVES))
    _CHANNEL = chan
    judge = _Judge(emit, secret, child, chan)
    tests: Any = secret.get("tests")
    entry_point = secret.get("entry_point")
    calls = list(secret.get("calls") or [])

    # Compile the tests before anything runs: a reference that does not compile is not the model's fault.
    # A string of tests arrives with its asserts already rewritten into recorded tests (the service did
    # it, see harness.rewrite_asserts); a list is one test per string.
    blocks: list[tuple[Any, str]] = []
    synthetic = False  # tests without a single assert: one test, "runs without an exception"
    try:
        if isinstance(tests, list):
            labels = [str(t) for t in tests]
            for k, t in enumerate(labels):
                blocks.append((compile(t, f"test_{k}.py", "exec"), t))
        else:
            source = str(tests["source"])
            labels = [str(label) for label in tests["labels"]] or ["the tests run without an exception"]
            synthetic = not tests["labels"]
            blocks.append((compile(source, "tests.py", "exec"), source))
    except (SyntaxError, ValueError, KeyError, TypeError) as exc:
        emit("refbad", _b64(f"the reference tests do not compile: {type(exc).__name__}: {exc}"))
        return
    # The reference's prelude (LeetCodeDataset's `prompt`: imports, ListNode, list_node()): the tests'
    # code, run before them; only its import statements ran in the solution's process too.
    prelude: Any = None
    if secret.get("prelude"):
        try:
            prelude = compile(str(secret["prelude"]), "prelude.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            emit("refbad", _b64(f"the reference prelude does not compile: {type(exc).__name__}: {exc}"))
            return
    # The setup runs in the solution's process, whose report of it the judge cannot trust: whether it
    # compiles is decided here (it failing to was the solution's load error, a valid 0.0).
    setup = header.get("setup")
    if setup:
        try:
            compile(str(setup), "setup.py", "exec")
        except (SyntaxError, ValueError) as exc:
            emit("refbad", _b64(f"the reference setup does not compile: {type(exc).__name__}: {exc}"))
            return
    per_assert = not isinstance(tests, list)
    emit("plan", len(labels), *(_b64(label[:300]) for label in labels))

    judge.arm()
    try:
        loaded = chan.recv()
        # The status goes into a verdict line as it is: only the solution side's own words (a forged
        # one with a space, a newline or a non-ASCII character would break the line, or stop the judge).
        # (Checked here: the judge's own "died" below, a load cut off or crashed, was made a "protocol
        # error" too, hiding why.)
        if len(loaded) != 4 or loaded[0] != "loaded" or loaded[1] not in ("ok", "syntax", "error"):
            loaded = ["loaded", "died", "protocol error", {}]
    except _Gone as exc:
        loaded = ["loaded", "died", judge.gone_message(str(exc)), {}]
    except _ProtocolError as exc:
        loaded = ["loaded", "died", f"protocol error: {exc}", {}]
    _, status, message, names = loaded
    if type(names) is not dict:
        status, message = "died", "protocol error"
    if status == "error" and header.get("prelude_imports"):
        # The prelude's imports ran in the solution's process before it: whether one of them failed
        # there (a module the sandbox lacks) is decided here, by running them (the solution's report
        # could say anything).
        sys.meta_path.append(_SitePackages())
        try:
            exec(compile(str(header["prelude_imports"]), "prelude.py", "exec", dont_inherit=True), {})
        except BaseException as exc:
            _prelude_failed(emit, exc, "the reference prelude's imports fail")
            return
    emit("load", status, _b64(str(message)))
    if status != "ok":
        return

    # The tests run as the program, as in any harness that runs solution and tests as one script: an
    # `if __name__ == "__main__": check(f)` at their end must run, or no assert would.
    global _TESTS_NS, _NODE_NAMES
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    _TESTS_NS, _NODE_NAMES = ns, frozenset(str(n) for n in header.get("nodes") or ())
    try:
        for k, v in names.items():
            # The solution's side filters dunders too, but it runs untrusted code that can send its own
            # "loaded": a `__builtins__` from it would answer every builtin the tests look up.
            if not k.startswith("__"):
                ns[k] = codec.dec(v)
    except BaseException as exc:  # the solution's values could not be taken in: its failure, not ours
        emit("load", "died", _b64(f"protocol error: {type(exc).__name__}: {_short(exc)}"))
        return
    # `from solution import f` (KodCode's and AceCoder's tests): the solution's names, as a module.
    solution_module = type(sys)("solution")
    solution_module.__dict__.update({k: v for k, v in ns.items() if not k.startswith("__")})
    sys.modules["solution"] = solution_module
    for name in _shadowing(ns, entry_point, [code for code, _ in blocks]):
        del ns[name]
    sys.meta_path.append(_SitePackages())  # the tests may import what is installed, as the solution may
    ns["__rh_t__"] = judge.begin
    ns["__rh_r__"] = judge.result

    abort: str | None = None
    if prelude is not None:
        # after the solution's names: the prelude's (its helpers, its imports) are the tests' own
        judge.arm()
        try:
            exec(prelude, ns)
        except _Gone as exc:
            abort = judge.gone_message(str(exc))
        except _ProtocolError as exc:
            abort = f"protocol error: {exc}"
        except BaseException as exc:
            # the prelude runs before any test and calls nothing of the solution's: its failure is the
            # reference's (a 0.0 for every solution would read as a wrong answer)
            _prelude_failed(emit, exc, "the reference prelude failed")
            return
    for k, (code, _) in enumerate(blocks if abort is None else ()):
        judge.arm()
        try:
            exec(code, ns)
            # Only a `check` the tests define (one from the solution would be a proxy).
            if per_assert and entry_point and callable(ns.get("check")) and not _foreign(ns["check"]):
                ns["check"](_candidate(ns, str(entry_point)))
            if per_assert and calls:
                _call_tests(judge, ns, calls)
            if not per_assert:
                judge.result(k, True)
        except _Gone as exc:
            abort = judge.gone_message(str(exc))
        except _ProtocolError as exc:
            abort = f"protocol error: {exc}"
        except _Lost as exc:  # a pytest-style function lost the solution (see _call_tests)
            abort = str(exc)
        except BaseException as exc:  # an exception outside an assert ends the test code
            missing = _missing_module(exc)
            if missing is not None:  # the tests' own import: this sandbox cannot run them
                emit(
                    "refmissing",
                    _b64(f"the tests import {missing!r}, which the sandbox's Python does not have"),
                )
                return
            if not per_assert:
                text = _short(exc)
                judge.fail(k, f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
                judge.current = None
                continue
            abort = f"{type(exc).__name__}: {_short(exc)}"
        if abort is not None:
            if judge.current is not None:
                judge.fail(judge.current, abort)
            elif not per_assert:  # a test of a list: it lost the solution (the ones after it "not run")
                judge.fail(k, abort)
            break
    if synthetic and abort is None:
        judge.result(0, True)
    # As in plain Python: when the test code ran to its end, every assert that did not fail passed
    # (one in an untaken branch too). After an abort, only those that had passed count.
    for i in range(len(labels)):
        if i in judge.failed:
            continue
        if i in judge.passed or abort is None:
            emit("test", i, "pass", "-")
        else:
            emit("test", i, "fail", _b64(f"not run: {abort}"))


def _candidate(ns: dict[str, Any], entry_point: str) -> Any:
    """What ``check(candidate)`` is called with: the entry point's function, or of one written
    ``Solution().name`` (LeetCodeDataset's), that method of a new ``Solution``, as that dataset's own
    evaluation calls ``check(Solution().name)``."""
    head, _, method = entry_point.rpartition(".")
    if head.endswith("()") and head[:-2].isidentifier() and method.isidentifier():
        cls = ns.get(head[:-2])
        if cls is None:
            raise NameError(f"the solution does not define {head[:-2]!r}")
        return getattr(cls(), method)
    candidate = ns.get(entry_point)
    if candidate is None:
        raise NameError(f"the solution does not define {entry_point!r}")
    return candidate


def _call_tests(judge: _Judge, ns: dict[str, Any], calls: list[Any]) -> None:
    """Call the pytest-style test functions the tests define and nothing calls
    (:func:`rewardhub.sandbox.harness.pytest_style_tests`), each on its own: an exception outside an assert
    fails the asserts of that function not passed yet, and the next function runs (as in pytest). The
    judge's own failures (the solution gone or past its time) end the tests as elsewhere."""
    for cls, name, first, end in calls:
        judge.arm()
        try:
            if cls:
                owner = ns.get(cls)
                if type(owner) is not type:  # the tests' own class only (a solution's would be a proxy)
                    continue
                fn = getattr(owner(), name)
            else:
                fn = ns.get(name)
                if not callable(fn) or _foreign(fn):
                    continue
            fn()
        except (_Gone, _ProtocolError) as exc:
            # This function lost the solution: its asserts not decided yet fail with why (not "not run":
            # the service runs the functions after it again, in a fresh sandbox), and the tests end.
            why = judge.gone_message(str(exc)) if type(exc) is _Gone else f"protocol error: {exc}"
            for i in range(int(first), int(end)):
                if i not in judge.passed and i not in judge.failed:
                    judge.fail(i, why)
            judge.current = None
            raise _Lost(why) from None
        except BaseException as exc:
            if _missing_module(exc) is not None:
                raise
            text = _short(exc)
            why = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            if judge.current is not None:
                judge.fail(judge.current, why)
                judge.current = None
            for i in range(int(first), int(end)):
                if i not in judge.passed and i not in judge.failed:
                    judge.fail(i, f"not run: {why}")


def _missing_module(exc: BaseException) -> str | None:
    """The module a failed import in the judge could not find, or None. Only the import machinery sets
    ``name``: an exception the solution raised crosses rebuilt from its type and message, without one."""
    if type(exc) is ModuleNotFoundError and isinstance(exc.name, str) and exc.name:
        return exc.name
    return None


def _global_names(code: Any) -> set[str]:
    """Every name the code (and the functions, classes and comprehensions in it) may look up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is type(code):
            names |= _global_names(const)
    return names


def _shadowing(ns: dict[str, Any], entry_point: Any, codes: list[Any]) -> list[str]:
    """The solution's names that must not reach the tests: those that would replace a builtin or a
    standard module the tests use. ``def abs(x): return 0`` would otherwise pass every
    ``assert abs(candidate(x) - y) < 1e-6``, ``len = lambda x: 0`` every ``len(a) == len(b)``, a fake
    ``math`` every ``math.isclose``: the verdict would be the solution's, not the tests'.

    The exception is the function under test itself when it has a builtin's name (MBPP's ``sum``): the
    entry point, or without one, a solution name the tests call while calling no other of its objects.
    """
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    shadowing = []
    for k, v in ns.items():
        if k.startswith("__"):
            continue
        if k in builtins.__dict__ or (k in stdlib and not (type(v) is type(sys) and v.__name__ == k)):
            shadowing.append(k)
    if not shadowing:
        return []
    if entry_point:
        return [k for k in shadowing if k != entry_point]
    used = set().union(*(_global_names(code) for code in codes))
    if any(_foreign(ns.get(k)) for k in used if k not in shadowing):
        return shadowing
    return []


def _sole_tenant() -> bool:
    """Whether kill(-1) reaches only this run's processes (PID 1 of the sandbox, or a warm run)."""
    return _WARM or os.getpid() == 1


def _kill_leftovers() -> None:
    """Kill every process of the run but this one and reap them (this process is their reaper: PID 1,
    or a warm run's subreaper). Killed but not reaped, they stayed zombies counting against the run's
    process limit: a program whose children forked while it exited filled the limit, and the runner's
    fork for the next case failed, turning a failing program's item into a sandbox error."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # a zombie counts: ESRCH once all are reaped
        except OSError:
            return
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return  # not ours to reap (no subreaper): nothing more to do here


def _kill_tree(pid: int) -> None:
    if _sole_tenant():
        # PID 1 of the sandbox's namespace: kill(-1) reaches every other process in it, wherever it went.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    else:
        for target in (-pid, pid):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass


# --------------------------------------------------------------------------------------------------
# exec mode: compile once, run once per case
# --------------------------------------------------------------------------------------------------
def _prelude_failed(emit: _Emitter, exc: BaseException, what: str) -> None:
    """Report a reference prelude that raised: a module the sandbox lacks is ``refmissing``
    (unsupported), anything else ``refbad`` (parse_error); either way the reference's, not the solution's."""
    missing = _missing_module(exc)
    if missing is not None:
        emit("refmissing", _b64(f"the prelude imports {missing!r}, which the sandbox's Python does not have"))
    else:
        emit("refbad", _b64(f"{what}: {type(exc).__name__}: {_short(exc)}"))


def _exec(header: dict[str, Any]) -> None:
    try:
        secret = _read_frame(0)
        os.close(0)
        emit = _Emitter(str(secret["nonce"]))
    except BaseException as exc:
        _fail_start(f"bad private frame: {type(exc).__name__}: {exc}")
    try:
        _run_exec(header, secret, emit)
    except BaseException as exc:
        emit("error", _b64(f"runner failed: {type(exc).__name__}: {_short(exc)}"))
    emit("done")


def _safe_path(name: str) -> str:
    parts = name.split("/")
    if name.startswith("/") or not name or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad file name {name!r}")
    return name


def _run_exec(header: dict[str, Any], secret: dict[str, Any], emit: _Emitter) -> None:
    env = {str(k): str(v) for k, v in (header.get("env") or {}).items()}
    out_cap = int(header.get("out_cap") or (1 << 20))
    err_keep = int(header.get("stderr_keep") or 0)
    for name, content in (header.get("files") or {}).items():
        path = _safe_path(str(name))
        parts = path.split("/")[:-1]
        for k in range(1, len(parts) + 1):
            try:
                os.mkdir("/".join(parts[:k]))
            except FileExistsError:
                pass
        with open(path, "wb") as f:
            f.write(content)
    emit("ready")
    compile_argv = header.get("compile")
    precheck = header.get("syntax_check")
    wall_clock = bool(header.get("wall_clock"))
    total_s = float(header.get("total_timeout_s") or 60.0)
    compile_s = float(header.get("compile_timeout_s") or 10.0) if compile_argv else 0.0
    # The service kills the sandbox at compile_s + total_s (and a start-up slack): a compile judged by its
    # CPU time may take more wall time than compile_s, which then comes out of the runs' total.
    end = time.monotonic() + compile_s + total_s
    if compile_argv and precheck and _compiles(str(precheck)):
        compile_argv = None  # compiles here: the program's interpreter need not be started to say so
    compile_as = int(header.get("compile_as_bytes") or 0)
    modules_argv = header.get("modules_check")
    if modules_argv:
        # the reference's modules, resolved before any of the program runs: a check it cannot have
        # prepared for (a node_modules of its own), so its answer is the sandbox's
        r = _run_one(
            [str(a) for a in modules_argv],
            b"",
            compile_s or 10.0,
            env,
            out_cap,
            compile_as,
            err_keep=err_keep,
            until=end - 0.01,
        )
        emit("modules", *r)
        if r[0] != "exited" or r[1] != 0:
            return
    if compile_argv:
        r = _run_one(
            list(compile_argv),
            b"",
            compile_s,
            env,
            out_cap,
            compile_as,
            err_keep=err_keep,
            until=end - 0.01,
            wall_clock=wall_clock,
        )
        emit("compile", *r)
        if r[0] != "exited" or r[1] != 0:
            check = header.get("reference_check")
            if check:
                emit("refcheck", *_check_reference(check, compile_s, env, out_cap, compile_as, err_keep, end))
            return
    run_argv = list(header["run"])
    timeout = float(header.get("run_timeout_s") or 5.0)
    total_deadline = min(time.monotonic() + total_s, end)
    stdins = list(secret.get("stdins") or [b""])
    run_as = int(header.get("run_as_bytes") or 0)
    stdout_caps = list(secret.get("stdout_caps") or [])
    for i, data in enumerate(stdins):
        left = total_deadline - time.monotonic()
        if left <= 0.01:
            emit("run", i, "skipped", 0, 0, "0", "0", 0, 0, "-", _b64("total time limit"))
            continue
        stdout_cap = int(stdout_caps[i]) if i < len(stdout_caps) else out_cap
        r = _run_one(
            run_argv,
            data,
            timeout,
            env,
            out_cap,
            run_as,
            stdout_cap=stdout_cap,
            err_keep=err_keep,
            until=total_deadline,
            wall_clock=wall_clock,
        )
        emit("run", i, *r)
    for name in secret.get("fetch") or []:
        try:
            with open(_safe_path(str(name)), "rb") as f:
                content = f.read(out_cap + 1)
            emit(
                "file",
                _b64(str(name)),
                "ok" if len(content) <= out_cap else "truncated",
                _b64(content[:out_cap]),
            )
        except (OSError, ValueError):
            emit("file", _b64(str(name)), "missing", "-")


def _check_reference(
    check: dict[str, Any],
    timeout: float,
    env: dict[str, str],
    out_cap: int,
    as_bytes: int,
    err_keep: int,
    end: float,
) -> tuple[Any, ...]:
    """After a program that did not parse: the same parse-only check of the reference's part of it alone
    (its tests and setup, wrapped as in the program), so the service can tell whose syntax error it was.
    Its file is written only now: no run of the program follows, so the program never sees it."""
    name = _safe_path(str(check["file"]))
    with open(name, "wb") as f:
        f.write(check["source"])
    return _run_one(
        [str(a) for a in check["argv"]],
        b"",
        timeout,
        env,
        out_cap,
        as_bytes,
        err_keep=err_keep,
        until=end - 0.01,
    )


def _compiles(path: str) -> bool:
    """Whether the Python program at ``path`` compiles in this interpreter (it is compiled, not run)."""
    try:
        with open(_safe_path(path), "rb") as f:
            compile(f.read(), path, "exec", dont_inherit=True)
    except BaseException:  # SyntaxError, ValueError (a NUL byte), MemoryError, RecursionError, OSError
        return False
    return True


def _run_one(
    argv: list[str],
    stdin: bytes,
    timeout: float,
    env: dict[str, str],
    cap: int,
    as_bytes: int = 0,
    *,
    stdout_cap: int = 0,
    err_keep: int = 0,
    until: float | None = None,
    wall_clock: bool = False,
) -> tuple[Any, ...]:
    """Run one program to completion, its time limit, or its output cap; ``as_bytes``: its address-space
    limit (the guest's own is the largest of its steps'); ``stdout_cap``: a smaller cap for its stdout
    (what the comparison of this case can need); ``err_keep``: report only this many last bytes of its
    stderr (still read, and capped, up to ``cap``). Every run's output is held by the service until the
    item is scored, so these bound what one item costs it.

    ``timeout`` is the program's CPU time (its own and its waited-for children's, what ``wait4``
    reports), as :class:`_Judge` times a test: a correct program on a loaded host is not a timeout, so a
    cached timeout is the program's own. ``RLIMIT_CPU`` kills it at the whole second above; the wall
    clock is read against its CPU time from /proc, killing it once that passes ``timeout``, and caps it
    at ``_WALL_FACTOR`` times ``timeout`` (a program that sleeps or waits for input), never past
    ``until`` (monotonic: the item's total deadline). A program that finished with more CPU time than
    ``timeout`` is a timeout too, as judges count it. ``wall_clock``: ``timeout`` is wall-clock time
    instead (and ``RLIMIT_CPU`` its whole second above).

    Returns (status, return code, signal, wall s, cpu s, max rss KiB, truncated, stdout b64, stderr b64);
    status is ``exited`` | ``signaled`` | ``timeout`` | ``output_limit``. Output is read as it comes
    (``select`` over both pipes, at most ``cap`` bytes kept per stream): a program that floods its
    stdout is killed at the cap instead of being buffered.
    """
    in_fd = _stdin_file(stdin)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu = max(1, int(timeout + 0.999))
    cpu_limits = (cpu, cpu + 1)
    if cpu_hard != resource.RLIM_INFINITY:
        cpu_limits = (min(cpu, cpu_hard), min(cpu + 1, cpu_hard))
    t0 = time.monotonic()
    pid = _fork_untrusted(127)
    if pid == 0:
        try:
            os.dup2(in_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (0, 1, 2):
                os.set_inheritable(fd, True)  # dup2 onto itself keeps close-on-exec set
            os.closerange(3, 1 << 16)
            # Python ignores these; an exec'd program must get the default actions back.
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_CPU, cpu_limits)
            if as_bytes > 0:
                _, as_hard = resource.getrlimit(resource.RLIMIT_AS)
                if as_hard != resource.RLIM_INFINITY:
                    as_bytes = min(as_bytes, as_hard)
                resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
            _execvpe(argv, env)
        except BaseException as exc:
            os.write(2, f"cannot start {argv[0]}: {exc}".encode("utf-8", "replace"))
        os._exit(127)
    for fd in (in_fd, out_w, err_w):
        os.close(fd)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = -1
    bufs = {out_r: bytearray(), err_r: bytearray()}
    caps = {out_r: min(stdout_cap or cap, cap), err_r: cap}
    open_fds = [out_r, err_r]
    reaped: tuple[int, Any] | None = None
    status = ""
    wall_cap = t0 + (timeout if wall_clock else _WALL_FACTOR * timeout)
    if until is not None:
        wall_cap = min(wall_cap, until)
    deadline = min(t0 + timeout, wall_cap)
    while open_fds and not status:
        now = time.monotonic()
        left = deadline - now
        if left <= 0 and reaped is None and now < wall_cap:
            # the wall clock says the time is up; the program's CPU time may not (it waited for a core)
            used = _cpu_seconds(pid, children=True)
            if used is not None and used < timeout:
                deadline = min(now + max(timeout - used, 0.05), wall_cap)
                continue
        if left <= 0:
            status = "timeout"
            break
        if reaped is not None or (pidfd < 0 and _poll_reap(pid)):
            left = min(left, 0.05)  # exited, but a leftover child holds the pipes: drain briefly
        watch = open_fds + ([pidfd] if pidfd >= 0 and reaped is None else [])
        ready = select.select(watch, [], [], left if pidfd >= 0 else min(left, 0.005))[0]
        if not ready and (reaped is not None or _exited(pid)):
            break
        for fd in ready:
            if fd == pidfd:
                reaped = _reap(pid, block=True)
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.remove(fd)
                continue
            buf, limit = bufs[fd], caps[fd]
            if len(buf) + len(chunk) > limit:
                buf += chunk[: limit - len(buf)]
                status = "output_limit"
                break
            buf += chunk
    if status or reaped is None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    if reaped is None:
        reaped = _reap(pid, block=True)
    wall = time.monotonic() - t0
    if _sole_tenant():
        _kill_leftovers()  # nothing from this case survives into the next one
    for fd in (out_r, err_r, pidfd):
        if fd >= 0:
            os.close(fd)
    wait_status, usage = reaped
    cpu_used = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    rc, sig = 0, 0
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
    else:
        rc = os.WEXITSTATUS(wait_status)
    if not status:
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_used >= cpu_limits[0]):
            status = "timeout"  # the CPU-seconds limit, the load-independent form of a time limit
        elif cpu_used > timeout and not wall_clock:
            status = "timeout"  # finished, but past its limit (RLIMIT_CPU only counts whole seconds)
        else:
            status = "signaled" if sig else "exited"
    return (
        status,
        rc,
        sig,
        f"{wall:.4f}",
        f"{cpu_used:.4f}",
        usage.ru_maxrss if usage is not None else 0,
        1 if status == "output_limit" else 0,
        _b64(bytes(bufs[out_r])),
        _b64(bytes(bufs[err_r][-err_keep:] if err_keep else bufs[err_r])),
    )


def _stdin_file(data: bytes) -> int:
    """A read-only fd of a file holding ``data``, at offset 0: a program's stdin (a file, so it can seek).

    In memory (``memfd_create``), not in the working directory: the previous case's program, or the
    compiler, had the run of ``/tmp`` and could leave a directory or a symlink where the file would go, or
    a full disk, and the runner's failure to write it was reported as a sandbox error (an invalid item)
    instead of that program's failed cases."""
    try:
        fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # no memfd (an old kernel): a file in /tmp, unlinked at once
        path = ".rh_stdin"
        with open(path, "wb") as f:
            f.write(data)
        fd = os.open(path, os.O_RDONLY)
        os.unlink(path)  # the next case's program cannot find this case's input
        return fd
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, 0)
    return fd


def _execvpe(argv: list[str], env: dict[str, str]) -> NoReturn:
    if "/" in argv[0]:
        os.execve(argv[0], argv, env)
    error: OSError = FileNotFoundError(2, "not found", argv[0])
    for directory in env.get("PATH", "/usr/bin:/bin").split(":"):
        try:
            os.execve(f"{directory}/{argv[0]}", argv, env)
        except OSError as exc:
            error = exc
    raise error


_REAPED: dict[int, tuple[int, Any]] = {}


def _reap(pid: int, block: bool = False) -> tuple[int, Any]:
    if pid in _REAPED:
        return _REAPED.pop(pid)
    _, status, usage = os.wait4(pid, 0 if block else os.WNOHANG)
    return status, usage


def _poll_reap(pid: int) -> bool:
    """Without pidfds (old kernels): reap by polling, remembering the status for :func:`_reap`."""
    if pid in _REAPED:
        return True
    got, status, usage = os.wait4(pid, os.WNOHANG)
    if got:
        _REAPED[pid] = (status, usage)
    return bool(got)


def _exited(pid: int) -> bool:
    return pid in _REAPED


# --------------------------------------------------------------------------------------------------
# a seccomp filter keeps the untrusted code's signals (and prlimit) off the judge
# --------------------------------------------------------------------------------------------------
# (audit arch, signal-sending syscalls whose first argument is the target pid, syscalls refused outright)
_SIGNAL_SYSCALLS = {
    # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, prlimit64
    # | pidfd_send_signal, mq_open, add_key, request_key, keyctl, memfd_create, shmget, semget, msgget,
    #   sched_setaffinity, mount, umount2, pivot_root, unshare, setns, open_tree, move_mount, fsopen,
    #   fsconfig, fsmount, fspick, mount_setattr, open_tree_attr, bpf, perf_event_open, userfaultfd,
    #   io_uring_setup, io_uring_enter, io_uring_register, memfd_secret
    # | fcntl, ioctl
    "x86_64": (
        0xC000003E,
        (62, 200, 234, 129, 297, 302),
        (424, 240, 248, 249, 250, 319, 29, 64, 68, 203)
        + (165, 166, 155, 272, 308, 428, 429, 430, 431, 432, 433, 442, 467, 321, 298, 323)
        + (425, 426, 427, 447),
        (72, 16),
    ),
    "aarch64": (
        0xC00000B7,
        (129, 130, 131, 138, 240, 261),
        (424, 180, 217, 218, 219, 279, 194, 190, 186, 122)
        + (40, 39, 41, 97, 268, 428, 429, 430, 431, 432, 433, 442, 467, 280, 241, 282)
        + (425, 426, 427, 447),
        (25, 29),
    ),
}
# fcntl F_SETOWN, F_SETSIG, F_SETOWN_EX and ioctl FIOSETOWN, SIOCSPGRP: a file's owner gets its SIGIO
# (or any signal F_SETSIG picks, SIGKILL included), checked only against the uid
_SETOWN_FCNTL = (8, 10, 15)
_SETOWN_IOCTL = (0x8901, 0x8902)
# (ctypes, libc, arch entry); a warm sandbox's zygote loads it once per slot, a one-shot guest per run
_FILTER: Any = None


def _fork_untrusted(failure_status: int) -> int:
    """``fork()``; the child, where untrusted code will run, gets its own session and the filter (or
    exits with ``failure_status`` if it cannot have them)."""
    judge = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            _protect(judge)
        except BaseException as exc:
            os.write(2, ("rewardhub guest: cannot isolate the program: " + _short(exc) + "\n").encode())
            os._exit(failure_status)
    return pid


def _prepare_protection() -> None:
    """In the zygote (or a one-shot guest that mounts its tmpfs): load what :func:`_protect` needs, so a
    run pays microseconds, not an import."""
    global _FILTER
    import ctypes

    machine = os.uname().machine
    if machine not in _SIGNAL_SYSCALLS:
        raise RuntimeError(f"no seccomp table for {machine}: warm sandboxes need one")
    _FILTER = (ctypes, ctypes.CDLL(None, use_errno=True), _SIGNAL_SYSCALLS[machine])


def _protect(judge: int) -> None:
    """In the untrusted process, before any untrusted code: no signal to the judge or PID 1.

    The solution runs as the judge's uid, so it could kill or stop its judge and turn a failing run into
    an incomplete one. A fork of the warm zygote is not PID 1, and even PID 1 (which ignores ``kill``
    from inside its namespace) dies of a CPU limit another same-uid process sets with ``prlimit``. This
    filter makes ``kill``/``tkill``/``tgkill``/``rt_(tg)sigqueueinfo``/``prlimit64``
    aimed at the judge, its process group, PID 1 or ``-1`` fail with ``EPERM``, refuses
    ``pidfd_send_signal`` (a pidfd can name any process), making a file signal an owner (``F_SETOWN``,
    ``F_SETSIG``, ``F_SETOWN_EX``, ``FIOSETOWN``, ``SIOCSPGRP``: SIGIO, or SIGKILL via ``F_SETSIG``, is
    delivered to any same-uid owner) and every syscall of a foreign ABI (i386 or x32 entry points with
    other numbers). Signals to the program's own children still work.

    It also refuses ``mq_open`` and the keyring calls (``add_key``, ``request_key``, ``keyctl``): a POSIX
    message queue lives in the IPC namespace and a key in the user keyring in the user namespace, not in
    any process or file, so in a warm slot either carried one run's bytes (its hidden stdin, say) to the
    next program, and the zygote has no way to list them. And it refuses ``memfd_create`` and System V
    ``shmget``/``semget``/``msgget``: memory held in a memfd or an IPC object is outside the address
    space ``RLIMIT_AS`` bounds (a process limited to 256 MiB held 64 MiB per memfd, one per open file,
    and shared-memory segments attached, filled and detached one at a time without end), so one run
    could take the host's memory; ``memfd_secret`` too, the same file by another call (512 MiB held
    under that limit, through windows mapped and unmapped one at a time). POSIX shared memory and semaphores (``/dev/shm``) still work. And
    ``sched_setaffinity``: a run is pinned to its slot's core, and one that spread over every core, a
    session (a scheduling group) per busy child, starved a concurrent item's program into timeouts.

    And the mount API and namespace calls (``mount``, ``umount2``, ``pivot_root``, ``unshare``,
    ``setns``, ``open_tree``, ``move_mount``, ``fs{open,config,mount,pick}``, ``mount_setattr``,
    ``open_tree_attr``), whatever their arguments: the capped ``/tmp`` (:func:`_private_tmpfs`) is a
    mount of a namespace the program's own user namespace owns, over ``bwrap``'s uncapped one, so only
    the missing ``CAP_SYS_ADMIN`` stood between a program and ``umount2("/tmp")``. And ``bpf``,
    ``perf_event_open`` and ``userfaultfd``: kernel attack surface no program here needs, which the
    host's sysctls alone decided (user-mode ``userfaultfd`` stays open where unprivileged use is off).
    And ``io_uring``: its ``SQPOLL`` thread is a thread of the run that the kernel puts on whichever
    core the ring's creator names (``IORING_SETUP_SQ_AFF``), the run's pinned core notwithstanding, and
    a ring works without the system calls this filter sees (libuv falls back to its thread pool).
    """
    if _FILTER is None:
        if os.uname().machine not in _SIGNAL_SYSCALLS:
            return  # one-shot guest only (warm sandboxes refuse to start): PID 1 ignores kill(2) at least
        _prepare_protection()  # one-shot guest: ~1.5 ms for ctypes, paid in the judge's process
    ctypes, libc, (arch, by_pid, refused, (fcntl_nr, ioctl_nr)) = _FILTER
    deny = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
    allow = 0x7FFF0000
    targets = sorted({judge, 1, 0xFFFFFFFF, (-judge) & 0xFFFFFFFF, (-os.getpgid(judge)) & 0xFFFFFFFF})
    prog: list[tuple[int, int, int, int]] = []  # (code, jt, jf, k)

    def ret(k: int) -> None:
        prog.append((0x06, 0, 0, k))

    def deny_if_arg_in(offset: int, values: Sequence[int]) -> None:
        """A = the argument at ``offset`` (low 32 bits); deny if it is one of ``values``, else allow.
        Appends ``len(values) + 3`` instructions."""
        prog.append((0x20, 0, 0, offset))
        for m, value in enumerate(values):
            prog.append((0x15, len(values) - m, 0, value))  # to the deny after the allow
        ret(allow)
        ret(deny)

    prog.append((0x20, 0, 0, 4))  # A = arch
    prog.append((0x15, 1, 0, arch))  # same ABI: skip the deny
    ret(deny)
    prog.append((0x20, 0, 0, 0))  # A = syscall number
    if arch == 0xC000003E:
        prog.append((0x35, 0, 1, 0x40000000))  # x32 numbers
        ret(deny)
    for nr in refused:
        prog.append((0x15, 0, 1, nr))
        ret(deny)
    # fcntl/ioctl: refuse the commands that make a file signal its owner, pass everything else
    for nr, cmds in ((fcntl_nr, _SETOWN_FCNTL), (ioctl_nr, _SETOWN_IOCTL)):
        prog.append((0x15, 0, len(cmds) + 3, nr))  # not this syscall: skip its block
        deny_if_arg_in(24, cmds)  # the second argument: the command
    # one jump per by-pid syscall into the check block, which starts after the ALLOW below
    n = len(by_pid)
    for k, nr in enumerate(by_pid):
        prog.append((0x15, n - k, 0, nr))
    ret(allow)
    deny_if_arg_in(16, targets)  # the first argument: the target pid_t

    # struct sock_filter {u16 code; u8 jt; u8 jf; u32 k} and struct sock_fprog {u16 len; filter *}, as
    # bytes (both supported ABIs are 64-bit little-endian): no ctypes.Structure classes built per run.
    code = b"".join(
        c.to_bytes(2, "little") + bytes((jt, jf)) + k.to_bytes(4, "little") for c, jt, jf, k in prog
    )
    filters = ctypes.create_string_buffer(code, len(code))
    fprog = ctypes.create_string_buffer(
        len(prog).to_bytes(2, "little") + bytes(6) + ctypes.addressof(filters).to_bytes(8, "little"), 16
    )
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if libc.prctl(22, 2, fprog, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")


# --------------------------------------------------------------------------------------------------
# warm sandboxes: one long-lived sandbox per pool slot, one fork per run
# --------------------------------------------------------------------------------------------------
def zygote_main(ctrl: int) -> None:
    """Serve runs in forks of this process: the sandbox and the interpreter are set up once per slot.

    Started as PID 1 of a sandbox like a one-shot guest, with a ``SOCK_SEQPACKET`` control socket at
    fd ``ctrl``. Each message from the service carries the run's stdin, stdout and stderr (``SCM_RIGHTS``);
    a fork of this process becomes the run's guest (:func:`main`, unchanged), so the run sees exactly
    what a fresh sandbox's guest sees, minus ~10 ms of bwrap and interpreter start-up. After the fork
    exits, the zygote kills every other process in the namespace, wipes ``/tmp`` and ``/dev/shm`` and answers with the
    exit status; only then does the service read the run as finished.

    What a run could leave for the next one is removed or ends the slot: processes (``kill(-1)``
    until none is left), files (``/tmp`` and ``/dev/shm`` wiped; a wipe that fails exits the zygote), System V IPC
    objects (any left ends the slot; the service starts a new one). The untrusted code never holds the
    control socket, and as the namespace's non-dumpable PID 1 the zygote cannot be signalled, traced or
    read from inside. The run's judge is not PID 1 here; :func:`_protect` keeps the untrusted code's
    signals off it.
    """
    global _WARM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import socket

    sock = socket.socket(fileno=ctrl)
    try:
        _undumpable()
        _private_tmpfs(sys.argv[2:])
        _prepare_protection()
        uid = os.getuid()
        for path in list(_OWNED):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
            if st is None or st.st_uid != uid:  # absent, or not the runs' to change
                del _OWNED[path]
            else:
                _OWNED[path] = st.st_mode & 0o7777
        sock.sendall(b"ready")
    except BaseException as exc:
        _fail_start(f"warm sandbox start-up failed: {type(exc).__name__}: {exc}")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, 3)
        except OSError:
            os._exit(0)
        if not msg or len(fds) != 3:
            os._exit(0)  # the service closed the socket (or spoke nonsense): end the slot
        pid = os.fork()
        if pid == 0:
            _WARM = True
            code = 1
            try:
                sock.close()
                # The run's orphans are this process's to reap (see _kill_leftovers), not the zygote's.
                if _FILTER[1].prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
                    raise OSError("PR_SET_CHILD_SUBREAPER failed")
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                for fd in fds:
                    os.close(fd)
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if type(exc.code) is int else 1
            except BaseException as exc:
                os.write(2, ("rewardhub guest: " + _short(exc) + "\n").encode("utf-8", "replace"))
            os._exit(code)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        try:
            _reset_after_run()
        except BaseException as exc:
            sock.sendall(b"%d end %s" % (returncode, _b64(_short(exc)).encode()))
            os._exit(0)
        sock.sendall(b"%d" % returncode)


# What of the sandbox belongs to its uid and is writable, with the mode it starts with (read by the
# zygote at start-up, which drops those this sandbox lacks or does not own): the two tmpfs and the
# pseudo-terminals' instance.
_OWNED = {"/tmp": 0o755, "/dev/shm": 0o755, "/dev/pts": 0o755, "/dev/pts/ptmx": 0o666}


def _reset_after_run() -> None:
    """Leave the sandbox as a fresh one: no process, no file in /tmp or /dev/shm (nor anything set on them),
    no IPC object; else raise."""
    while True:  # kill(-1) fails with ESRCH once no process but this one is left
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
        try:
            os.waitpid(-1, 0)  # orphans are this process's children: reap them
        except ChildProcessError:
            pass
    for path, mode in _OWNED.items():
        # The directories themselves too: their mode, times and extended attributes (user.*, POSIX
        # ACLs) are the run's to set, and carried its bytes to the next run.
        os.chmod(path, mode)
        try:
            names = os.listxattr(path)
        except OSError:  # devpts has none
            names = []
        for name in names:
            os.removexattr(path, name)
        if path in ("/tmp", "/dev/shm"):
            _wipe(path)
            _clear_inode_flags(path)
        os.utime(path, (0, 0))
    for kind in ("shm", "sem", "msg"):
        try:
            with open("/proc/sysvipc/" + kind, "rb") as f:
                lines = f.read().count(b"\n")
        except OSError:
            continue
        if lines > 1:
            raise RuntimeError(f"the run left System V IPC objects ({kind})")


_FS_IOC_SETFLAGS = 0x40086602  # _IOW('f', 2, long), both supported ABIs


def _clear_inode_flags(path: str) -> None:
    """Clear the directory's chattr flags: its owner may set ``nodump`` and ``noatime`` on a tmpfs
    directory without any capability, and they carried bits to the next run of the slot. A filesystem
    without the flags (``ENOTTY``, ``EOPNOTSUPP``) let the run set none either."""
    ctypes, libc = _FILTER[0], _FILTER[1]
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.ioctl(fd, ctypes.c_ulong(_FS_IOC_SETFLAGS), ctypes.byref(ctypes.c_int(0))) != 0:
            errno = ctypes.get_errno()
            if errno not in (25, 95):
                raise OSError(errno, f"clearing the flags of {path}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def _wipe(path: str, depth: int = 0) -> None:
    if depth > 64:
        raise RuntimeError("/tmp is nested too deeply to wipe")
    with os.scandir(path) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    for name, is_dir in entries:
        child = path + "/" + name
        if is_dir:
            os.chmod(child, 0o700)  # a run may have made it unreadable; it is still the same uid
            _wipe(child, depth + 1)
            os.rmdir(child)
        else:
            os.unlink(child)


if __name__ == "__main__":
    main()
