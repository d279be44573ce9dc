"""The contract between the judge (``judging/warm.py``) and its warm worker (this folder): how the worker starts,
the request, the reply, and the two fixed messages. Both sides import this module, so the contract is written once.

The worker starts as ``python -I -S -B /warm_worker/main.py CONTROL_FD UID RULES`` (``start_arguments``): its end of
a SOCK_SEQPACKET socket pair, the slot's uid, and the judge's rules for every test as JSON (judging/policy.py:
``worker_rules``, with the capabilities the worker keeps). Then one message each way per execution:

- the worker's first message is ``READY``;
- a request (``pack_request``) is the timeout in seconds, a native double, then each resource limit as (resource,
  soft, hard), native 64-bit integers, with ``REQUEST_FDS`` descriptors attached: the write ends of the test's
  stdout and stderr pipes, a memory file holding the program, and the test's standard input (a sealed memory file,
  or /dev/null);
- the reply is ``REPLY`` filled in, a JSON object of ``REPLY_KEYS`` (``unpack_reply``): the program's exit code
  (or 128 + the signal that ended it), whether it timed out, whether the judge stopped it, whether its set-up
  worked;
- ``STOP`` from the judge while a program runs means stop it now (output over the cap); one that arrives after
  the reply is ignored.

Guarantees: whatever the worker sends, the judge reads either a reply whose fields have their types or a
``ProtocolError`` (``unpack_reply``, ``is_ready``); a request the worker accepts (``request_is_well_formed``) holds
a timeout, whole limit triples and exactly its descriptors. What would break it: a side that packs or parses a
message itself instead of through this module; a non-standard import here (the worker imports this file as
``protocol`` from its own folder, in an interpreter that sees nothing of the judging package).

Page-copy trick: the worker reads a request and formats its reply in the loop it runs for every test, after a
fork, where each object it touches is a page copied. So a request is packed, read in place (``unpack_request``;
the loop reads the timeout through ``TIMEOUT`` itself, as one more function call would cost it pages), and the
reply is ``REPLY`` filled with an int and ``BOOLEANS``, not made with ``json``.
"""

import json
import resource
import struct

READY = b'{"ready": true}'
STOP = b"stop"
TIMEOUT = struct.Struct("d")  # a request's first field
LIMIT_FIELD = "q"  # a limit's resource, soft and hard value each
LIMIT = struct.Struct(f"3{LIMIT_FIELD}")  # then each (resource, soft, hard)
REQUEST_FDS = 4  # stdout's and stderr's write ends, the program's memory file, its standard input
MESSAGE_BYTES = 4096  # the most either side reads of one message
REPLY = b'{"exit_code": %d, "timed_out": %s, "stopped": %s, "setup": %s}'
BOOLEANS = (b"false", b"true")
REPLY_KEYS = ("exit_code", "timed_out", "stopped", "setup")


class ProtocolError(ValueError):
    """A message that is not what the protocol says; the message quotes it."""


def start_arguments(control_fd: int, uid: int, rules: dict) -> list[str]:
    """The worker's command-line arguments after its program's path."""
    return [str(control_fd), str(uid), json.dumps(rules)]


def read_start_arguments(argv: list[str]) -> tuple[int, int, dict]:
    """``start_arguments`` read back from the worker's ``sys.argv``: (control fd, uid, rules)."""
    _, control_fd, uid, rules = argv
    return int(control_fd), int(uid), json.loads(rules)


def pack_request(timeout: float, rlimits: dict[str, tuple[int, int]]) -> bytes:
    """A request: ``timeout`` and each of ``rlimits`` (a resource's name in the ``resource`` module: (soft, hard))."""
    return TIMEOUT.pack(timeout) + b"".join(
        LIMIT.pack(getattr(resource, name), soft, hard) for name, (soft, hard) in rlimits.items()
    )


def request_is_well_formed(message: bytes, fds: list[int]) -> bool:
    """Whether ``message`` with ``fds`` is a request: a timeout, whole limit triples, its descriptors."""
    return len(fds) == REQUEST_FDS and len(message) >= TIMEOUT.size and (len(message) - TIMEOUT.size) % LIMIT.size == 0


def unpack_request(message: bytes) -> tuple[float, memoryview]:
    """A well-formed request's timeout and its limits, read in place: (resource, soft, hard, resource, ...)."""
    return TIMEOUT.unpack_from(message)[0], memoryview(message)[TIMEOUT.size :].cast(LIMIT_FIELD)


def unpack_reply(message: bytes) -> dict:
    """A reply as a dict of ``REPLY_KEYS`` (an int exit code, the rest booleans), or ProtocolError."""
    try:
        reply = json.loads(message)
    except ValueError:
        reply = None
    if (
        not isinstance(reply, dict)
        or reply.keys() != set(REPLY_KEYS)
        or type(reply["exit_code"]) is not int
        or any(type(reply[key]) is not bool for key in REPLY_KEYS[1:])
    ):
        raise ProtocolError(f"not a reply: {message!r:.200}")
    return reply


def is_ready(message: bytes) -> bool:
    return message == READY
