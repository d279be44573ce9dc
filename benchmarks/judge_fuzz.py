"""Fuzz the judge: hostile and mutated programs from seeded generators, judged on both bwrap paths (warm workers,
``--sandbox bwrap``, and a fresh interpreter per test, ``bwrap-cold``), reporting what must never happen.

Generators (each program is a bundled Python problem's canonical solution, changed or followed by hostile code,
judged on that problem's tests): mutations of the solution; deep recursion; fork bombs and daemons; memory bombs
(heap, memfd, several processes); disk and inode bombs; signals to itself, its parent, init and its group;
random system calls through ctypes; cleanup breakers (deep folders, link loops, unreadable folders, odd names);
exit tricks; output floods.

Printed: exceptions raised by the judge (run or close), slots free at the end, warm workers dropped, processes
and files left on the host (slot uids' processes, the judges' folders, files the slot uids changed in the
shared temporary folders during the run, a host file the programs try to write), the peak RSS of the judging
process and the machine's peak memory use above its level at the start, warm/cold verdict disagreements
(status of every test), and tests per second on each path. The first five must be zero (slots all free).

    python benchmarks/judge_fuzz.py --programs 2000 --seed 0 --workers 2 --timeout 1.0
    python benchmarks/judge_fuzz.py --per_generator 1      # one program of each generator: the test suite's run
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from data.loading.loaders import bundled_path, load_problems  # noqa: E402
from judging import Judge  # noqa: E402

ESCAPE = "/tmp/judge-fuzz-escaped"  # a host file the programs try to create
DAEMON_MARK = "313.99"  # the argument of every process a program tries to leave running
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
SAMPLE_SECONDS = 0.1

# Syscalls a random call leaves out: they change the interpreter's own memory at addresses that differ from run to
# run (so the outcome would too), copy the process without fork's bookkeeping, flush the host's disks, or set an
# alarm that could race the timeout.
SYSCALLS_LEFT_OUT = {
    "x86_64": {9, 10, 11, 12, 15, 25, 28, 37, 56, 57, 58, 67, 158, 162, 216, 306},
    "aarch64": {81, 139, 214, 215, 216, 220, 226, 227, 233, 234, 267},
}
SYSCALL_COUNT = {"x86_64": 335, "aarch64": 294}
# Argument values a random call draws from: small, edge and a zeroed buffer (never an address that varies).
ARGUMENTS = ("0", "1", "-1", "2", "17", "64", "4096", "1 << 31", "ctypes.addressof(buffer)")


def solution_then(snippet: str):
    """A generator for a hostile program: the canonical solution, then ``snippet`` at module level (before the
    test code runs), judged on the problem's first test."""

    def generate(rng: random.Random, problem) -> tuple[str, list[dict]]:
        return problem.solution + "\n" + snippet(rng) + "\n", problem.tests[:1]

    return generate


def recursion(rng):
    depth = rng.choice(["f(0)", "sys.setrecursionlimit(10 ** 5)\nf(0)", "sys.setrecursionlimit(30000)\nf(0)"])
    body = f"import sys\ndef f(n):\n    return f(n + 1) + 1\n{depth}"
    if rng.random() < 0.5:
        return "try:\n" + indent(body) + "\nexcept RecursionError:\n    pass"
    return body


def fork_bomb(rng):
    kind = rng.randrange(4)
    if kind == 0:
        return "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    if kind == 1:  # as many sleeping children as the process limit allows, then on with the test
        return (
            "import os, time\nfor _ in range(64):\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(30)\n            os._exit(0)\n    except OSError:\n        break"
        )
    if kind == 2:  # a double-forked daemon, new session, left running
        return (
            "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execv('/usr/bin/sleep', ['sleep', '{DAEMON_MARK}'])\n    os._exit(0)\nos.wait()"
        )
    return (
        "import subprocess\n"
        f"procs = [subprocess.Popen(['/usr/bin/sleep', '{DAEMON_MARK}'], start_new_session=True) "
        f"for _ in range({rng.randrange(1, 8)})]"
    )


def memory_bomb(rng):
    """Memory bombs whose outcome does not hang on the machine's speed: each either fails at once or touches at
    most 128 MB (writing more takes a loaded machine close to the timeout, making the verdict a matter of luck)."""
    kind = rng.randrange(5)
    if kind == 0:
        return f"hog = bytearray({rng.choice([2, 4, 64])} << 30)"
    if kind == 1:  # address space until the limit says no, untouched
        return (
            "import mmap\nhog = []\ntry:\n    while True:\n        hog.append(mmap.mmap(-1, 256 << 20))\n"
            "except OSError:\n    hog = None" + ("\n    raise MemoryError" if rng.random() < 0.5 else "")
        )
    if kind == 2:  # pages written into a memfd are outside RLIMIT_AS
        size = rng.choice([8, 64, 512])
        return (
            f"import os\nfd = os.memfd_create('fuzz')\nchunk = b'x' * (1 << 20)\n"
            f"try:\n    for _ in range({size}):\n        os.write(fd, chunk)\nexcept OSError:\n    pass"
        )
    if kind == 3:  # several processes, each under its own limit
        count, size = rng.randrange(2, 5), rng.choice([16, 32])
        return (
            "import os\nkids = []\n"
            f"for _ in range({count}):\n    pid = os.fork()\n    if pid == 0:\n"
            f"        hog = bytearray({size} << 20)\n        os._exit(0)\n    kids.append(pid)\n"
            "for pid in kids:\n    os.waitpid(pid, 0)"
        )
    return f"import mmap\nm = mmap.mmap(-1, {rng.choice([16, 64, 128])} << 20)\nm[::4096] = b'x' * len(m[::4096])"


def disk_bomb(rng):
    folder = rng.choice([".", "/tmp", "/dev/shm"])
    chunk = rng.choice([1, 4, 8])
    total = rng.choice([32, 64, 96])
    return (
        "chunk = b'x' * (%d << 20)\ntry:\n    for n in range(%d):\n"
        "        with open(f'%s/fill{n}', 'wb') as out:\n            out.write(chunk)\n"
        "except OSError:\n    pass" % (chunk, total // chunk, folder)
    )


def inode_bomb(rng):
    folder = rng.choice([".", "/tmp"])
    count = rng.choice([500, 2000, 4000])
    kind = rng.choice(
        ["open(f'{folder}/i{n}', 'w').close()", "os.mkdir(f'{folder}/d{n}')", "os.symlink('x', f'{folder}/l{n}')"]
    )
    return (
        f"import os\nfolder = {folder!r}\ntry:\n    for n in range({count}):\n        {kind}\nexcept OSError:\n    pass"
    )


def signals(rng):
    import signal

    numbers = [s for s in range(1, 32) if s not in (signal.SIGKILL, signal.SIGSTOP)] + [9, 19]
    number = rng.choice(numbers)
    target = rng.choice(["os.getpid()", "os.getppid()", "1", "-1", "0"])
    flushed = "print('x', flush=True)\n" if rng.random() < 0.5 else ""
    return f"import os\n{flushed}try:\n    os.kill({target}, {number})\nexcept OSError:\n    pass"


def random_syscalls(rng):
    machine = os.uname().machine
    calls = []
    for _ in range(rng.randrange(1, 6)):
        number = rng.randrange(SYSCALL_COUNT[machine])
        while number in SYSCALLS_LEFT_OUT[machine]:
            number = rng.randrange(SYSCALL_COUNT[machine])
        # All six registers set, each a full C long: an argument left out, or the upper half of one passed as a
        # ctypes int, would be whatever the register held, which differs by path (so would the outcome).
        arguments = [rng.choice(ARGUMENTS) for _ in range(rng.randrange(0, 6))]
        listed = ", ".join([str(number), *arguments, *["0"] * (6 - len(arguments))])
        calls.append(f"libc.syscall(*map(ctypes.c_long, ({listed})))")
    return (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
        "buffer = ctypes.create_string_buffer(4096)\n" + "\n".join(calls)
    )


def cleanup_breaker(rng):
    kind = rng.randrange(6)
    if kind == 0:
        depth = rng.choice([200, 1500, 3000])
        return f"import os\nfor _ in range({depth}):\n    os.mkdir('d')\n    os.chdir('d')\nos.chdir('/scratch')"
    if kind == 1:
        return "import os\nos.symlink('loop', 'loop')\nos.symlink('/', 'root')\nos.symlink('.', 'self')"
    if kind == 2:  # folders no one may enter, holding files
        return (
            "import os\nos.makedirs('locked/inner')\nopen('locked/inner/f', 'w').write('x')\n"
            "os.chmod('locked/inner', 0)\nos.chmod('locked', 0)"
        )
    if kind == 3:
        return (
            "import os, socket\nos.mkfifo('fifo')\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\n"
            "open(b'\\xff\\xfe-not-utf8', 'w').close()\nopen('n' * 255, 'w').close()"
        )
    if kind == 4:  # the longest path the kernel takes, in steps
        return (
            "import os\nname = 'p' * 250\ntry:\n    while True:\n        os.mkdir(name)\n        os.chdir(name)\n"
            "except OSError:\n    pass\nos.chdir('/scratch')"
        )
    return f"import os\nos.chmod('.', 0o{rng.choice(['000', '500', '100'])})"


def exit_trick(rng):
    return rng.choice(
        [
            "import sys\nsys.exit(2 ** 64)",
            "import sys\nsys.exit(0)",
            "import os\nos._exit(0)",
            "import sys\nsys.stdout.close()",
            "import os\nos.close(1)",
            "raise KeyboardInterrupt",
            "import sys\nsys.exit(-1)",
            "import sys\nsys.exit('bye')",
            "raise SystemExit(256)",
            "import os\nos.close(2)\nraise ValueError",
            "import atexit, os\natexit.register(os._exit, 3)",
            "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()",
            "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
        ]
    )


def output_flood(rng):
    stream = rng.choice(["sys.stdout", "sys.stderr"])
    size = rng.choice([1 << 10, 1 << 18, 1 << 21, 1 << 24])
    return f"import sys\n{stream}.write('y' * {size})\n{stream}.flush()"


def escape(rng):
    target = rng.choice([ESCAPE, "/escaped", "/usr/escaped", "/proc/1/root/tmp/escaped"])
    return f"try:\n    open({target!r}, 'w').write('x')\nexcept OSError:\n    pass"


OPERATORS = [
    ("+", "-"),
    ("-", "+"),
    ("*", "+"),
    ("//", "%"),
    ("%", "//"),
    ("<=", "<"),
    ("<", "<="),
    (">=", ">"),
    (">", ">="),
    ("==", "!="),
    ("!=", "=="),
    (" and ", " or "),
    (" or ", " and "),
]


def mutate(rng: random.Random, problem) -> tuple[str, list[dict]]:
    """The canonical solution with one to three random edits, judged on all the problem's tests."""
    lines = problem.solution.rstrip("\n").split("\n")
    for _ in range(rng.randrange(1, 4)):
        kind = rng.choices(range(7), [8, 6, 1, 2, 2, 2, 1])[0]  # mostly edits that keep the syntax
        index = rng.randrange(len(lines))
        line = lines[index]
        if kind == 0:
            present = [(old, new) for old, new in OPERATORS if old in line]
            if present:
                old, new = rng.choice(present)
                spots = [m.start() for m in re.finditer(re.escape(old), line)]
                spot = rng.choice(spots)
                lines[index] = line[:spot] + new + line[spot + len(old) :]
        elif kind == 1:
            numbers = list(re.finditer(r"\b\d+\b", line))
            if numbers:
                match = rng.choice(numbers)
                value = int(match.group()) + rng.choice([-1, 1])
                lines[index] = line[: match.start()] + str(max(value, 0)) + line[match.end() :]
        elif kind == 2 and len(lines) > 1:
            del lines[index]
        elif kind == 3:
            lines.insert(index, line)
        elif kind == 4 and index + 1 < len(lines):
            lines[index], lines[index + 1] = lines[index + 1], line
        elif kind == 5:
            lines.insert(index + 1, " " * (len(line) - len(line.lstrip())) + "return None")
        else:
            cut = rng.randrange(len(line) + 1)
            lines[index] = line[:cut] + rng.choice(["", ")", ":", "(", "'"]) + line[cut:]
    return "\n".join(lines) + "\n", problem.tests


GENERATORS = {
    "mutation": (mutate, 30),
    "recursion": (solution_then(recursion), 6),
    "fork": (solution_then(fork_bomb), 6),
    "memory": (solution_then(memory_bomb), 8),
    "disk": (solution_then(disk_bomb), 6),
    "inodes": (solution_then(inode_bomb), 5),
    "signals": (solution_then(signals), 8),
    "syscalls": (solution_then(random_syscalls), 12),
    "cleanup": (solution_then(cleanup_breaker), 8),
    "exits": (solution_then(exit_trick), 5),
    "output": (solution_then(output_flood), 3),
    "escape": (solution_then(escape), 3),
}


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.split("\n"))


def programs(count: int, seed: int, per_generator: int = 0) -> list[tuple[str, str, list[dict]]]:
    """(generator, code, tests) for ``count`` programs drawn by the generators' weights, or ``per_generator`` of each
    generator when given; the same for the same seed."""
    rng = random.Random(seed)
    problems = [problem for problem in load_problems(bundled_path("python"), "python") if problem.solution]
    names = list(GENERATORS)
    weights = [GENERATORS[name][1] for name in names]
    chosen = (
        [name for name in names for _ in range(per_generator)]
        if per_generator
        else [rng.choices(names, weights)[0] for _ in range(count)]
    )
    made = []
    for name in chosen:
        code, tests = GENERATORS[name][0](rng, rng.choice(problems))
        made.append((name, code, tests))
    return made


class MemoryWatch:
    """The machine's peak memory in use (MemTotal - MemAvailable), sampled every 0.1 s in a thread."""

    def __init__(self):
        self.start = self.peak = self.used()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    @staticmethod
    def used() -> int:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        return (int(fields["MemTotal"].split()[0]) - int(fields["MemAvailable"].split()[0])) << 10

    def _watch(self):
        while not self._stop.wait(SAMPLE_SECONDS):
            self.peak = max(self.peak, self.used())

    def stop(self):
        self._stop.set()
        self._thread.join()


def left_processes(uids: set[int]) -> list[str]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(status.read_text().split("\nUid:")[1].split()[0])
            cmdline = (status.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if uid in uids or DAEMON_MARK.encode() in cmdline:
            found.append(f"{status.parent.name} (uid {uid}: {cmdline[:60]!r})")
    return found


def left_files(uids: set[int], judge_folders: list[str], since: float) -> list[str]:
    """The judges' folders if still there, the escape target, and files the slot uids own in the shared
    temporary folders changed since ``since`` (earlier runs' leftovers and other judges' folders are not this
    run's). Walked without recursion: a program may have nested folders thousands deep."""
    found = [folder for folder in judge_folders if os.path.lexists(folder)]
    if os.path.lexists(ESCAPE):
        found.append(ESCAPE)
    pending = [top for top in {*SHARED_FOLDERS, tempfile.gettempdir()} if os.path.isdir(top)]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if re.fullmatch(r"judge-[a-z0-9_]{8}", entry.name):  # a judge's folder (tempfile.mkdtemp's name)
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid in uids and info.st_ctime >= since:
                found.append(entry.path)
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=2000)
    parser.add_argument(
        "--per_generator",
        type=int,
        default=0,
        help="N programs of every generator instead of --programs drawn by weight (a small run that tries each)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="slots of each judge, and programs judged at once")
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds per test")
    parser.add_argument("--show", type=int, default=10, help="disagreements and exceptions shown in full")
    args = parser.parse_args()
    if args.programs < 1 or args.per_generator < 0 or args.workers < 1 or args.timeout <= 0:
        raise SystemExit(
            "judge_fuzz.py: --programs and --workers must be at least 1, --per_generator not negative, "
            "--timeout positive"
        )
    if os.geteuid() != 0:
        raise SystemExit("judge_fuzz.py: run it as root (the warm path and slot uids need root)")
    corpus = programs(args.programs, args.seed, args.per_generator)
    since = time.time()
    memory = MemoryWatch()
    exceptions: list[str] = []
    judges = {path: Judge(timeout=args.timeout, workers=args.workers, sandbox=path) for path in ("bwrap", "bwrap-cold")}
    if not judges["bwrap"].warm:
        raise SystemExit(f"judge_fuzz.py: the warm workers did not start: {judges['bwrap'].isolation}")
    uids = {uid for judge in judges.values() for uid in judge.setup.slots.uids.uids}
    folders = [judge.setup.slots.base for judge in judges.values()]
    verdicts: dict[str, list] = {path: [None] * len(corpus) for path in judges}
    details: dict[str, list] = {path: [""] * len(corpus) for path in judges}  # the first failing test's stderr
    seconds = Counter()
    tests_run = Counter()
    lock = threading.Lock()

    def judge_one(index: int) -> None:
        name, code, tests = corpus[index]
        order = list(judges) if index % 2 else list(judges)[::-1]
        for path in order:
            start = time.monotonic()
            try:
                judgement = judges[path].run(code, tests, "python")
                verdict = (judgement.status, tuple(test.status for test in judgement.tests))
                failing = [test for test in judgement.tests if test.status != "passed"][:1]
                details[path][index] = failing[0].stderr[-200:] if failing else ""
                ran = sum(test.seconds > 0 for test in judgement.tests)
            except Exception as error:
                verdict, ran = ("exception", repr(error)[:300]), 0
                with lock:
                    exceptions.append(f"{path} {name} #{index}: {error!r:.300}")
            with lock:
                seconds[path] += time.monotonic() - start
                tests_run[path] += ran
            verdicts[path][index] = verdict

    started = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(judge_one, range(len(corpus))))
    wall = time.monotonic() - started
    free = {path: (judge.setup.slots.free.qsize(), judge.workers) for path, judge in judges.items()}
    dropped = judges["bwrap"].setup.warm.failures
    last_drop = judges["bwrap"].setup.warm.failure
    for path, judge in judges.items():
        try:
            judge.close()
        except Exception as error:
            exceptions.append(f"{path} close: {error!r:.300}")
    time.sleep(0.5)
    processes, files = left_processes(uids), left_files(uids, folders, since)
    memory.stop()

    disagreements = [index for index in range(len(corpus)) if verdicts["bwrap"][index] != verdicts["bwrap-cold"][index]]
    by_generator = defaultdict(Counter)
    for index, (name, _, _) in enumerate(corpus):
        by_generator[name][verdicts["bwrap"][index][0]] += 1
    print(
        f"judge_fuzz: {len(corpus)} programs (seed {args.seed}), {args.workers} workers, timeout {args.timeout} s, "
        f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.2f}, {wall:.0f} s in all"
    )
    for name in GENERATORS:
        print(f"  {name:10} {sum(by_generator[name].values()):5}  warm statuses: {dict(by_generator[name])}")
    print(f"judge exceptions:            {len(exceptions)}")
    for line in exceptions[: args.show]:
        print(f"  {line}")
    print("slots free at the end:       " + ", ".join(f"{path} {free[path][0]}/{free[path][1]}" for path in free))
    print(f"warm workers dropped:        {dropped}" + (f" (last: {last_drop})" if dropped else ""))
    print(f"processes left on the host:  {len(processes)} {processes[: args.show]}")
    print(f"files left on the host:      {len(files)} {files[: args.show]}")
    print(f"peak RSS, judging process:   {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(
        f"peak memory use, machine:    {(memory.peak - memory.start) / 2**20:.0f} MiB above the "
        f"{memory.start / 2**30:.1f} GiB in use at the start (sampled every {SAMPLE_SECONDS} s)"
    )
    print(f"warm/cold disagreements:     {len(disagreements)}")
    for index in disagreements[: args.show]:
        name, code, _ = corpus[index]
        print(
            f"  #{index} {name}: warm {verdicts['bwrap'][index]} cold {verdicts['bwrap-cold'][index]}\n"
            f"    {code[-300:]!r}\n    stderr warm {details['bwrap'][index]!r} cold {details['bwrap-cold'][index]!r}"
        )
    for path in judges:
        rate = tests_run[path] / (seconds[path] / args.workers)
        print(f"tests per second, {path:10}: {rate:.1f} ({tests_run[path]} tests run)")


if __name__ == "__main__":
    main()
