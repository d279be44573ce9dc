"""What keeps a warm test's program apart from the worker, the slot's other tests and the host: namespaces, mounts
and the privilege drop, as bubblewrap makes them for a cold program (judging/sandbox.py) under the same rules
(judging/policy.py: ``worker_rules``).

Guarantees, for the program's process (forked by the worker, loop.py):

- it is pid 1 of a PID namespace of its own, with no init, as bwrap's ``--as-pid-1`` runs a cold one: it can name
  no process but its own, and when it exits the kernel kills every process it left (the loop's fork, after
  ``UNSHARE(CLONE_NEWPID)``; the ``SETNS`` back to the worker's own namespace runs whether or not the fork worked);
- it leads its session and has a mount and IPC namespace of its own (``set_up_namespaces``): a fresh /proc (its
  own PID namespace only) with the rules' files covered read-only, frozen or emptied, a fresh /tmp, /dev/shm and
  /scratch (tmpfs of the judge's disk size), no SysV IPC or POSIX queue from before;
- it shares the slot's network namespace (loopback only) while no test left a socket there (the loop reads the
  slot's /proc/net/unix after each test: judged Python may open Unix sockets only, judging/seccomp.py), else gets
  a fresh one with its loopback up (``loopback_up``);
- before the program runs (``drop_privileges``): the test's limits, no descriptor but its stdout, stderr and
  /dev/null, an empty bounding, inheritable and ambient set, the slot uid and gid, no_new_privs and the judge's
  seccomp program. From then on it cannot signal, ptrace or open the root-owned worker.

The worker itself keeps only the rules' capabilities in its bounding set and is not dumpable (``confine_worker``).

The seccomp program is the judged code's allow-list (judging/seccomp.py), not the worker's: it comes last, after
the set-up, so the calls only the set-up makes stay off the list. Traced with strace (a worker serving three tests):
the worker makes ``unshare`` and ``setns`` (the PID namespace of each fork), ``pidfd_open``, ``socketpair``,
``sendmsg``/``recvmsg`` with descriptors; the program's process, before its program, ``unshare`` (mount and IPC
namespaces), ``mount`` and ``umount2`` (the plan), ``setsid``, ``capget``/``capset``, ``setgroups``, ``setresgid``,
``setresuid``, ``fchmod``, ``prctl`` (PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS,
PR_SET_SECCOMP). Of these, judged code may make ``setsid``, ``pidfd_open``, ``socketpair`` (Unix), ``sendmsg``,
``recvmsg``, ``fchmod``, and the uid and capability calls and prctl options that setpriv makes under the program
on the cold path (harmless without a capability); ``unshare``, ``setns``, ``mount``, ``umount2`` and
PR_SET_DUMPABLE it may not.

What would break it: reordering ``drop_privileges`` (the capabilities go while still root, the gid before the
uid, seccomp after no_new_privs); a fork that leaves the worker in the child's PID namespace; any mount not in the
plan the worker makes once (``mount_plan``).

Page-copy tricks (every page a forked process writes is copied first): the flags are plain ints; libc's functions,
the capability buffers and the mount plan, with every argument encoded for ctypes, are made once as the worker
starts, so a child formats, encodes and looks up nothing itself.
"""

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
MNT_DETACH = 2
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
LIBC = ctypes.CDLL(None, use_errno=True)
# Looked up once here, not in every child (a ctypes lookup and a /proc read cost more than the calls).
PRCTL, UNSHARE, SETNS, MOUNT, UMOUNT2, CAPGET, CAPSET = (
    LIBC.prctl,
    LIBC.unshare,
    LIBC.setns,
    LIBC.mount,
    LIBC.umount2,
    LIBC.capget,
    LIBC.capset,
)
# capget's and capset's header and data, made once here: each child fills its own copy.
CAPABILITY_BUFFERS = ((ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)())
with open("/proc/sys/kernel/cap_last_cap") as last:
    LAST_CAPABILITY = int(last.read())


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def check(result, what):
    if result != 0:
        fail(what)


def fail(what):
    """Raise the OSError of the last libc call, which ``what`` did."""
    error = ctypes.get_errno()
    raise OSError(error, f"{what}: {os.strerror(error)}")


def mount_call(source, target, kind, flags, data=None):
    """A mount as (function, arguments, what it does), its arguments ready for ctypes."""
    return (
        MOUNT,
        (
            source and source.encode(),
            target.encode(),
            kind and kind.encode(),
            ctypes.c_ulong(flags),
            data and data.encode(),
        ),
        f"mount {target}",
    )


def mount_plan(rules):
    """The program's process's mounts and unmounts after its unshare, made once by the worker, arguments and all."""
    plan = [
        mount_call(None, "/", None, MS_REC | MS_PRIVATE),
        mount_call("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC),
    ]
    for name in rules["proc_read_only"]:
        path = f"/proc/{name}"
        if os.path.exists(path):  # the worker's /proc: the same kernel as the fresh one
            plan += [
                mount_call(path, path, None, MS_BIND | MS_REC),
                mount_call(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC),
            ]
    # A bind keeps its source's read-only, nosuid and nodev flags: the fixed files (read-only in the worker's view)
    # and the empty read-only tmpfs each take one mount call, as bwrap binds and makes them cold.
    plan += [
        mount_call(f"{rules['proc_view']}/{name}", f"/proc/{name}", None, MS_BIND) for name in rules["proc_frozen"]
    ]  # machine-wide counters: fixed content
    plan += [mount_call(rules["proc_empty"], f"/proc/{name}", None, MS_BIND) for name in rules["proc_emptied"]]
    plan += [
        (UMOUNT2, (source.encode(), MNT_DETACH), f"umount {source}")
        for source in (rules["proc_view"], rules["proc_empty"])
    ]
    plan += [
        mount_call("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={rules['tmpfs_bytes']},mode={mode:o}")
        for path, mode in rules["tmpfs"].items()
    ]
    return plan


def seccomp_program(hexadecimal):
    """The rules' seccomp program (hex) ready for prctl, or None."""
    if not hexadecimal:
        return None
    program = bytes.fromhex(hexadecimal)
    code = ctypes.create_string_buffer(program, len(program))
    filter_program = SockFprog(len(program) // 8, ctypes.addressof(code))
    filter_program.code = code  # kept alive with the program
    return filter_program


def confine_worker(capabilities):
    """The worker's own confinement, once: not dumpable, only ``capabilities`` left in its bounding set. Returns
    descriptors of its PID namespace and of its network namespace's /proc/net/unix, kept open for every test."""
    check(PRCTL(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY)
    unix_sockets = os.open("/proc/net/unix", os.O_RDONLY)
    drop_bounding(cap for cap in range(LAST_CAPABILITY + 1) if cap not in capabilities)
    return own_pid_namespace, unix_sockets


def loopback_up():
    """Bring up a fresh network namespace's loopback interface (the kernel gives it 127.0.0.1 and ::1), as
    bubblewrap's --unshare-net does on the cold path."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))


def set_up_namespaces(plan, fresh_network):
    """As pid 1 of the execution's own PID namespace, before its request comes: its own mount and IPC namespaces (and
    network namespace if ``fresh_network``), then ``plan``'s mounts (``mount_plan``)."""
    check(UNSHARE(CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if fresh_network else 0)), "unshare")
    if fresh_network:
        loopback_up()
    for call, args, what in plan:
        check(call(*args), what)


def keep_only(*fds):
    """Close every descriptor from 3 up but ``fds``."""
    edges = sorted(fds)
    for start, end in zip([3] + [fd + 1 for fd in edges], [*edges, 1 << 16]):
        os.closerange(start, end)


def set_up_descriptors(in_fd, out_fd, err_fd, report_fd):
    """The test's standard input (the judge's /dev/null or memory file) as stdin, its pipes as stdout and stderr, no
    other descriptor but ``report_fd``."""
    for source, target in ((in_fd, 0), (out_fd, 1), (err_fd, 2)):
        os.dup2(source, target)
    keep_only(report_fd)


def drop_bounding(capabilities):
    for cap in capabilities:
        check(PRCTL(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop bounding capability")


def drop_privileges(uid, capabilities, folder, seccomp):
    """The program's process, once its request came: an empty bounding (the worker's ``capabilities`` were all it
    had left), ambient and inheritable set while still root, no supplementary groups, the slot uid (which empties
    the rest), ``folder`` as its working folder, no_new_privs, and the ``seccomp`` program (or None)."""
    drop_bounding(capabilities)
    check(PRCTL(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header, data = CAPABILITY_BUFFERS
    check(CAPGET(header, data), "capget")
    data[2] = data[5] = 0  # inheritable, both halves
    check(CAPSET(header, data), "capset")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # A uid change clears the dumpable flag; an exec (the cold path's) sets it again: /proc/self is the slot uid's.
    check(PRCTL(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    os.chdir(folder)
    check(PRCTL(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if seccomp is not None:
        check(PRCTL(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(seccomp), 0, 0), "seccomp")
