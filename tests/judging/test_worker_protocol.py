"""The judge's protocol with its warm worker (judging/worker/protocol.py), without root: what the judge packs the
worker reads back, the ready message, and a reply or request that is not one refused. The worker importing the
same module in its isolated interpreter is tested here too; a worker that breaks the protocol for real is in
tests/judging/test_warm_worker.py (root)."""

import json
import resource
import subprocess
import sys

import pytest

from conftest import ROOT
from judging.policy import Limits
from judging.worker import protocol

WORKER_FOLDER = ROOT / "judging" / "worker"


def test_a_request_reads_back_as_the_judge_packed_it():
    rlimits = Limits().rlimits(1.5)
    message = protocol.pack_request(1.5, rlimits)
    assert protocol.request_is_well_formed(message, [4, 5, 6, 7])
    timeout, limits = protocol.unpack_request(message)
    triples = [tuple(limits[index : index + 3]) for index in range(0, len(limits), 3)]
    assert timeout == 1.5
    assert triples == [(getattr(resource, name), soft, hard) for name, (soft, hard) in rlimits.items()]
    assert (resource.RLIMIT_CPU, 3, 4) in triples and len(triples) == len(rlimits) == 6


@pytest.mark.parametrize(
    "message, fds",
    [
        (protocol.pack_request(1.0, {"RLIMIT_CPU": (2, 3)}), [4, 5, 6]),  # a descriptor short
        (protocol.pack_request(1.0, {"RLIMIT_CPU": (2, 3)}), [4, 5, 6, 7, 8]),
        (protocol.pack_request(1.0, {"RLIMIT_CPU": (2, 3)})[:-1], [4, 5, 6, 7]),  # a limit cut short
        (protocol.pack_request(1.0, {}) + b"\0", [4, 5, 6, 7]),
        (b"1234567", [4, 5, 6, 7]),  # not even a timeout
        (b"not json", []),
    ],
)
def test_what_is_not_a_request_is_refused(message, fds):
    assert not protocol.request_is_well_formed(message, fds)


def test_a_request_without_limits_is_one():
    assert protocol.request_is_well_formed(protocol.pack_request(2.0, {}), [4, 5, 6, 7])


def test_a_reply_reads_back_as_the_worker_wrote_it():
    for exit_code, timed_out, stopped, setup in [
        (0, False, False, True),
        (137, True, True, False),
        (255, False, True, True),
    ]:
        written = protocol.REPLY % (
            exit_code,
            protocol.BOOLEANS[timed_out],
            protocol.BOOLEANS[stopped],
            protocol.BOOLEANS[setup],
        )
        assert protocol.unpack_reply(written) == {
            "exit_code": exit_code,
            "timed_out": timed_out,
            "stopped": stopped,
            "setup": setup,
        }


@pytest.mark.parametrize(
    "message",
    [
        b"not json",
        b"",
        b"[0, false, false, true]",
        b'{"exit_code": 0, "timed_out": false, "stopped": false}',  # a key missing
        b'{"exit_code": 0, "timed_out": false, "stopped": false, "setup": true, "extra": 1}',
        b'{"status": "nonsense", "timed_out": false, "stopped": false, "setup": true}',
        b'{"exit_code": true, "timed_out": false, "stopped": false, "setup": true}',  # a bool is no exit code
        b'{"exit_code": "0", "timed_out": false, "stopped": false, "setup": true}',
        b'{"exit_code": 0.0, "timed_out": false, "stopped": false, "setup": true}',
        b'{"exit_code": 0, "timed_out": 0, "stopped": false, "setup": true}',
        b'{"exit_code": 0, "timed_out": false, "stopped": null, "setup": true}',
        protocol.READY,
    ],
)
def test_a_malformed_reply_is_refused(message):
    with pytest.raises(protocol.ProtocolError, match="not a reply"):
        protocol.unpack_reply(message)


def test_the_ready_message():
    assert protocol.is_ready(protocol.READY) and json.loads(protocol.READY) == {"ready": True}
    for other in (b'{"ready": false}', b'{"ready": 1}', b"ready", b"", protocol.STOP):
        assert not protocol.is_ready(other)


def test_the_start_arguments_read_back():
    rules = {"tmpfs": {"/tmp": 0o1777}, "capabilities": [5, 6], "seccomp": None}
    arguments = protocol.start_arguments(7, 2000000001, rules)
    assert all(isinstance(argument, str) for argument in arguments)
    assert protocol.read_start_arguments(["/warm_worker/main.py", *arguments]) == (7, 2000000001, rules)


def test_the_worker_imports_its_modules_in_an_isolated_interpreter_with_the_standard_library_alone():
    """As the worker starts (``python -I -S -B``, its folder on the path): every module of the folder imports, and
    nothing but the standard library and the folder is loaded."""
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(WORKER_FOLDER)!r})\n"
        "before = set(sys.modules)\n"
        "import protocol, isolation, ending, finalization, loop\n"
        "own = {'protocol', 'isolation', 'ending', 'finalization', 'loop'}\n"
        "outside = sorted(name for name in set(sys.modules) - before - own\n"
        "                 if name.split('.')[0] not in sys.stdlib_module_names)\n"
        "print(outside, sorted(name for name in sys.modules if name.startswith('judging')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", probe], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[] []\n"
