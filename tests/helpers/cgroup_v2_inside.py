"""Run as root inside the cgroup v2 guest (tests/helpers/cgroup_v2_guest.py) by tests/judging/test_cgroup_v2_guest.py: the judge
on both bwrap paths in each cgroup layout, its results as JSON in ``$GUEST_OUT/results.json``.

Layouts: ``root`` (the judge in the root cgroup); ``leaf`` (in ``/job/task``, a leaf whose parent ``/job`` delegates
memory, pids, cpu and cpuset, beside a bystander process, as Slurm's task cgroup, a systemd service or a container; two
trainer ranks, one judging on each path, starting at once); ``read_only`` (that leaf, with the cgroup file system
read-only in the judges' mount namespace); ``undelegated`` (a leaf whose parent delegates pids only). After each,
what is left in the tree.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

CGROUP = Path("/sys/fs/cgroup")
PATHS = ("bwrap", "bwrap-cold")
# Four processes of 120 MB each: each under every per-process limit (256 MB of address space), together over the
# test's 256 MB.
FOUR_PROCESSES = (
    "import os, time\n"
    "children = []\n"
    "for _ in range(4):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        held = b'x' * (120 << 20)\n"
    "        time.sleep(1)\n"
    "        os._exit(0)\n"
    "    children.append(pid)\n"
    "for pid in children:\n"
    "    os.waitpid(pid, 0)\n"
    "print('done')\n"
)
# Three processes spinning for 1.5 s: 4.5 CPU-seconds asked on 2 CPUs, one CPU's time allowed. The program says
# whether its children got more than one CPU's time over the wall-clock time they ran.
SPIN = (
    "import os, time\n"
    "start = time.monotonic()\n"
    "for _ in range(3):\n"
    "    if os.fork() == 0:\n"
    "        end = time.monotonic() + 1.5\n"
    "        while time.monotonic() < end:\n"
    "            pass\n"
    "        os._exit(0)\n"
    "for _ in range(3):\n"
    "    os.wait()\n"
    "wall = time.monotonic() - start\n"
    "cpu = os.times().children_user + os.times().children_system\n"
    "print('bounded' if cpu <= 1.2 * wall else f'unbounded: {cpu:.2f} s of CPU in {wall:.2f} s')\n"
)


def judged(path: str, tests: str = "six,four_processes,after,spin") -> dict:
    """The isolation line of a judge on ``path`` in this process's cgroup, and its verdicts on ``tests``."""
    import judging.setup
    import judging.warm
    from judging import Judge, Test

    # An emulated CPU starts an interpreter 10 to 20 times slower, and four judges may start at once.
    judging.warm.START_TIMEOUT = judging.setup.PROBE_TIMEOUT = 120.0
    programs = {
        "six": ("print(6)", "6"),
        "four_processes": (FOUR_PROCESSES, "done"),
        "after": ("print(6)", "6"),
        "spin": (SPIN, "bounded"),
    }
    started = time.monotonic()
    # The verdicts here do not depend on time: a generous timeout keeps them so on a busy host.
    with Judge(timeout=120.0, workers=2, sandbox=path, memory_mb=256) as judge:
        slots = judge.setup.slots
        result = {"isolation": judge.isolation, "warm": judge.warm}
        for name in filter(None, tests.split(",")):
            code, expected = programs[name]
            result[name] = judge.run("", [Test(code, expected)], "python").status
        cgroups = [*slots.cgroups.slots.values(), *slots.warm_cgroups.slots.values()]
        result["cpu_max"] = sorted({_read(folder / "cpu.max") for slot in cgroups for folder in slot.folders})
        result["cpuset"] = sorted({_read(folder / "cpuset.cpus") for slot in cgroups for folder in slot.folders})
        result["throttled"] = sum(
            _stat(folder / "cpu.stat").get("nr_throttled", 0) for slot in cgroups for folder in slot.folders
        )
        result["own"] = Path("/proc/self/cgroup").read_text().strip()
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as error:
        return f"unreadable: {error}"


def _stat(path: Path) -> dict:
    try:
        return {key: int(value) for key, value in (line.split() for line in path.read_text().splitlines())}
    except OSError:
        return {}


def tree() -> list[str]:
    """Every cgroup below the root, as paths from it."""
    return sorted(str(path.relative_to(CGROUP)) for path in CGROUP.rglob("*") if path.is_dir())


def in_cgroup(folder: Path, *args: str, read_only: bool = False) -> list[str]:
    """A command line that moves itself into ``folder``, then (``read_only``: in a mount namespace of its own where
    the cgroup file system is read-only) runs this script with ``args``."""
    script = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
    command = [sys.executable, __file__, *args]
    if read_only:
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'mount -o remount,bind,ro {CGROUP} && exec "$@"',
            "sh",
            *command,
        ]
    return ["sh", "-c", script, "sh", str(folder), *command]


def at_once(commands: dict[str, list[str]]) -> dict:
    """Run ``commands`` (each this script with ``judged``) side by side, all judges starting at the same moment."""
    start_at = str(time.time() + 2)
    running = {
        name: subprocess.Popen(command + ["--at", start_at], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, command in commands.items()
    }
    results = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=900)
        results[name] = json.loads(out.strip().splitlines()[-1]) if process.returncode == 0 else {"error": err[-3000:]}
    return results


def make_leaf(name: str, delegated: str) -> Path:
    """``/name/task``: a leaf whose parent ``/name`` gives it ``delegated`` (``+memory +pids``, ...)."""
    root_enabled = " ".join(f"+{c}" for c in ("memory", "pids", "cpu", "cpuset"))
    (CGROUP / "cgroup.subtree_control").write_text(root_enabled)
    parent = CGROUP / name
    parent.mkdir(exist_ok=True)
    (parent / "cgroup.subtree_control").write_text(delegated)
    (parent / "task").mkdir(exist_ok=True)
    return parent / "task"


def leaf_state(task: Path) -> dict:
    """What is in the leaf after the judges closed: cgroups below it, its controllers, its processes."""
    return {
        "below": sorted(str(path.relative_to(task)) for path in task.rglob("*") if path.is_dir()),
        "subtree_control": _read(task / "cgroup.subtree_control"),
        "procs": _read(task / "cgroup.procs").split(),
    }


def main() -> None:
    results = {"kernel": os.uname().release, "cgroup2": _read(CGROUP / "cgroup.controllers"), "seconds": {}}
    phase = time.monotonic()

    def timed(name: str) -> None:
        nonlocal phase
        results["seconds"][name] = round(time.monotonic() - phase, 1)
        phase = time.monotonic()

    task = make_leaf("job", "+memory +pids +cpu +cpuset")
    bystander = subprocess.Popen(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec sleep 600', "sh", str(task)])
    time.sleep(0.2)
    results["bystander"] = str(bystander.pid)
    before = tree()
    # The judges in the root cgroup, and those in the leaf with the cgroup file system read-only, side by side.
    commands = {f"root {path}": [sys.executable, __file__, "judged", path] for path in PATHS}
    commands.update(
        {
            f"read_only {path}": in_cgroup(task, "judged", path, "--tests", "four_processes", read_only=True)
            for path in PATHS
        }
    )
    results.update(at_once(commands))
    results["root left"] = [path for path in tree() if path not in before]
    results["read_only left"] = leaf_state(task)
    timed("root and read_only")
    # Two trainer ranks in the leaf, one judging on each path, starting at once.
    results.update(at_once({f"leaf {path}": in_cgroup(task, "judged", path) for path in PATHS}))
    results["leaf left"] = leaf_state(task)
    bystander.kill()
    bystander.wait()
    timed("leaf")

    undelegated = make_leaf("pids-only", "+pids")
    results.update(at_once({"undelegated": in_cgroup(undelegated, "judged", "bwrap-cold", "--tests", "spin")}))
    timed("undelegated")
    out = Path(os.environ.get("GUEST_OUT", "."))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["judged"]:
        parser = argparse.ArgumentParser()
        parser.add_argument("path")
        parser.add_argument("--tests", default="six,four_processes,after,spin")
        parser.add_argument("--at", type=float, default=0.0, help="start at this time.time()")
        args = parser.parse_args(sys.argv[2:])
        time.sleep(max(0.0, args.at - time.time()))
        print(json.dumps(judged(args.path, args.tests)))
    else:
        main()
