"""The warm Python worker: the program that runs inside one slot's bubblewrap sandbox (never imported by the
judge; ``judging/warm.py`` binds it read-only at /warm_worker.py and starts ``python -I -S -B /warm_worker.py``).

The worker runs as root inside the sandbox's namespaces with five capabilities (SETUID, SETGID, SYS_ADMIN,
KILL, SETPCAP) and never runs judged code itself. Per execution it forks a child that

- enters a mount and an IPC namespace of its own: a fresh /tmp, a fresh /scratch holding a copy of the
  execution's program (both tmpfs of the judge's disk size; the folder holding the slot's programs is
  unmounted), no SysV IPC or POSIX queue from before;
- gets its own pipes as stdout and stderr, /dev/null as stdin, and no other descriptor (the control channel
  is closed);
- gets the limits, an empty bounding, inheritable and ambient capability set, the slot uid,
  no_new_privs and the judge's seccomp program (no kernel keyring, as on the cold path); from then on it
  cannot signal, ptrace or open the root-owned worker;
- runs the program as ``__main__`` in a fresh module, as ``python -I -S -B /scratch/main.py`` would.

When the child exits, times out or the judge asks, the worker kills every other process in the sandbox's
PID namespace (the worker is a child subreaper, so every orphan comes back to it and is reaped), then
replies. A fresh fork of a worker that never ran judged code is all a child can ever start from, so
nothing one child does to ``sys.modules``, builtins or files reaches the next.

Protocol (SOCK_SEQPACKET, one message each way per execution): the judge sends
``{"folder": NAME, "timeout": SECONDS}`` with the write ends of the execution's stdout and stderr pipes
attached; the worker replies ``{"status": WAIT_STATUS, "timed_out": BOOL, "stopped": BOOL, "setup": BOOL}``.
``stop`` from the judge while a child runs means stop it now (output over the cap); one that arrives
after the reply is ignored. The worker's first message is ``{"ready": true}``.
"""

import ctypes
import gc
import json
import math
import os
import resource
import select
import signal
import socket
import sys
import time

SLOTS = "/slots"
SCRATCH = "/scratch"
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 36, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
CAPABILITY_VERSION_3 = 0x20080522
KEPT_CAPABILITIES = (5, 6, 7, 8, 21)  # KILL, SETGID, SETUID, SETPCAP, SYS_ADMIN: all the worker needs
SETUP_FAILED = 125
STOP = b"stop"
LIBC = ctypes.CDLL(None, use_errno=True)
# Looked up once here, not in every child (a ctypes lookup and a /proc read cost more than the calls).
PRCTL, UNSHARE, MOUNT, UMOUNT2, CAPGET, CAPSET = (LIBC.prctl, LIBC.unshare, LIBC.mount, LIBC.umount2, LIBC.capget,
                                                   LIBC.capset)
with open("/proc/sys/kernel/cap_last_cap") as last:
    LAST_CAPABILITY = int(last.read())
SECCOMP_PROGRAM = None  # the judge's seccomp program (judging.sandbox.keyring_filter), set by main


def _check(result, what):
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(source, target, kind, flags, data=None):
    _check(MOUNT(source and source.encode(), target.encode(), kind and kind.encode(), ctypes.c_ulong(flags),
                 data and data.encode()), f"mount {target}")


def _drop_bounding(capabilities):
    for cap in capabilities:
        _check(PRCTL(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop bounding capability")


def _drop_capabilities():
    """Empty the bounding (the worker already dropped all but its own), ambient and inheritable sets while
    still root; the uid change empties the rest."""
    _drop_bounding(KEPT_CAPABILITIES)
    _check(PRCTL(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(CAPGET(header, data), "capget")
    data[2] = data[5] = 0  # inheritable, both halves
    _check(CAPSET(header, data), "capset")


def _set_up_child(folder, timeout, uid, limits, out_fd, err_fd, setup_fd):
    os.setsid()
    _check(UNSHARE(CLONE_NEWNS | CLONE_NEWIPC), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['tmpfs_bytes']},mode=1777")
    with open(f"{SLOTS}/{folder}/main.py", "rb") as source:  # into a tmpfs as on the cold path: no host disk
        program = source.read()
    _mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['tmpfs_bytes']},mode=0777")
    target = os.open(f"{SCRATCH}/main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.fchmod(target, 0o644)  # whatever the umask: the slot uid reads it, as bwrap's --perms 0644 on the cold path
    with os.fdopen(target, "wb") as file:
        file.write(program)
    _check(UMOUNT2(SLOTS.encode(), MNT_DETACH), f"umount {SLOTS}")
    null = os.open("/dev/null", os.O_RDONLY)
    for source, target in ((null, 0), (out_fd, 1), (err_fd, 2)):
        os.dup2(source, target)
    os.closerange(3, setup_fd)
    os.closerange(setup_fd + 1, 1 << 16)
    cpu = math.ceil(timeout) + 1  # as the cold path's prlimit
    for name, value in (("RLIMIT_AS", (limits["memory_mb"] << 20,) * 2), ("RLIMIT_CPU", (cpu, cpu + 1)),
                        ("RLIMIT_FSIZE", (limits["file_mb"] << 20,) * 2), ("RLIMIT_NOFILE", (limits["open_files"],) * 2),
                        ("RLIMIT_CORE", (0, 0)), ("RLIMIT_NPROC", (limits["processes"],) * 2)):
        resource.setrlimit(getattr(resource, name), value)
    _drop_capabilities()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.chdir(SCRATCH)  # only its owner, the slot uid, may enter it
    _check(PRCTL(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if limits["seccomp"]:
        _check(PRCTL(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(SECCOMP_PROGRAM), 0, 0), "seccomp")
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.write(setup_fd, b"1")
    os.close(setup_fd)


def _exit_code(exit):
    """What the interpreter's own exit handling makes of a SystemExit."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code & 0xFF
    try:
        print(exit.code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _run_program(path):
    """Run ``path`` as ``__main__`` in a fresh module and exit like the interpreter would."""
    import builtins

    main = type(sys)("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None)
    sys.modules["__main__"] = main
    sys.argv[:] = [path]
    code = 0
    try:
        with open(path, "rb") as file:
            source = file.read()
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exit:
        code = _exit_code(exit)
    except BaseException:
        kind, value, trace = sys.exc_info()
        value.__traceback__ = trace.tb_next  # the program's frames only, as a cold start shows them
        sys.excepthook(kind, value, trace.tb_next)
        code = 1
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 120
    os._exit(code)


def _execute(control, request, fds, uid, limits):
    out_fd, err_fd = fds
    setup_read, setup_write = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            control.detach()
            _set_up_child(request["folder"], request["timeout"], uid, limits, out_fd, err_fd, setup_write)
        except BaseException as error:
            os.write(2, f"warm worker: child set-up failed: {error!r}\n".encode())
            os._exit(SETUP_FAILED)
        _run_program(f"{SCRATCH}/main.py")
    for fd in (out_fd, err_fd, setup_write):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(control, select.POLLIN)
    timed_out = stopped = host_gone = False
    deadline = started + request["timeout"]
    while True:
        left = deadline - time.monotonic()
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
    os.close(pidfd)
    try:
        os.kill(-1, signal.SIGKILL)  # every process of the sandbox but its init and this worker
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    while True:  # the worker is a child subreaper: every orphan of the child's tree is its child now
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    setup = os.read(setup_read, 1) == b"1"
    os.close(setup_read)
    if host_gone:
        raise SystemExit(0)
    return {"status": status, "timed_out": timed_out, "stopped": stopped, "setup": setup}


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def main():
    global SECCOMP_PROGRAM
    control_fd, uid = int(sys.argv[1]), int(sys.argv[2])
    limits = json.loads(sys.argv[3])
    if limits["seccomp"]:
        program = bytes.fromhex(limits["seccomp"])
        code = ctypes.create_string_buffer(program, len(program))
        SECCOMP_PROGRAM = _SockFprog(len(program) // 8, ctypes.addressof(code))
        SECCOMP_PROGRAM.code = code  # kept alive with the program
    _check(PRCTL(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    _check(PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "child subreaper")
    _drop_bounding(cap for cap in range(LAST_CAPABILITY + 1) if cap not in KEPT_CAPABILITIES)
    control = socket.socket(fileno=control_fd)
    # The first compile() of a process builds the compiler's and AST's lazily made state (~1 ms of CPU): made
    # once here, on a constant, every child inherits it.
    compile("pass", "<warm-up>", "exec", dont_inherit=True)
    gc.freeze()  # a collection in a child then never walks (and so copies) the worker's own objects
    control.send(b'{"ready": true}')
    while True:
        message, fds, _, _ = socket.recv_fds(control, 4096, 2)
        if not message:
            return
        if message == STOP:  # a stop request that crossed the reply of the execution it meant: nothing runs
            continue
        if len(fds) != 2:
            raise SystemExit(f"warm worker: expected 2 descriptors, got {len(fds)}")
        control.send(json.dumps(_execute(control, json.loads(message), fds, uid, limits)).encode())


if __name__ == "__main__":
    main()
