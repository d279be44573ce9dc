"""Language executors: how a program is written, started and its outcome read, for one language.

An executor never sees a test's expected output; it only turns a run into ``ran`` (compare the stdout
after the marker) or a failure status. The judge does the comparing (judging/grading.py). ``Executor`` is what the
judge relies on; a new language is one class that has it (and one entry in judging/languages.py).
"""

from __future__ import annotations

import functools
import marshal
import os
import re
import shutil
import signal
import site
import socket
import stat
import sys
import sysconfig
import warnings
import zlib
from pathlib import Path
from typing import Protocol

from judging.records import call_raised, call_separator, call_spans
from judging.running import RunResult
from judging.seccomp import SECCOMP_FILTER, SECCOMP_FILTER_PYTHON

RAN = "ran"
LICENCE_FAILURE = "licence_failure"

# sysconfig fills its configuration dictionary on first use after binding it, so a second thread asking at that
# moment iterates a dictionary still growing ("dictionary changed size during iteration": seen with two judges set up
# at once in one process). Filled here, under the import lock, before any judge's thread asks.
sysconfig.get_config_vars()

_Q_ERROR = re.compile(r"^'\S", re.MULTILINE)
_Q_LICENCE = re.compile(r"k4\.lic|kc\.lic|licen[cs]e error|couldn't connect to license daemon", re.IGNORECASE)
_Q_TRAILING_EXIT = re.compile(r"(?:^|\n)[ \t]*(?:exit|\\\\)[ \t]*0?[ \t]*;?[ \t]*\s*\Z")
_PYTHON_MEMORY = re.compile(r"^MemoryError\b", re.MULTILINE)
_CPU_LIMIT_EXITS = (-signal.SIGXCPU, 128 + signal.SIGXCPU)
# The name the syntax check compiles judged Python under, in the judge's own process. What the compiler warns about
# that code (``"is" with a literal``) is the test's: its sandboxed run prints it to the test's stderr. In the judge's
# process it would reach the trainer's log once for every completion that has it, so it is ignored there.
SOLUTION_NAME = "<solution>"
warnings.filterwarnings("ignore", module=re.escape(SOLUTION_NAME) + r"\Z")
KDB_PLATFORM_FOLDERS = ("l32", "l64", "l64arm", "m32", "m64", "m64arm", "w32", "w64")


class Executor(Protocol):
    """One language, as the judge and its set-up use it."""

    language: str  # the name in judging/languages.py
    reads_input: bool  # judges tests that give the program standard input (``whole_program``)
    licensed: bool  # needs a licence check at start (q's): licence egress, retries, the preflight's advice
    filename: str  # the program's file name in its working folder
    read_only: list[str]  # host paths the program needs in its view (interpreter, binary, QHOME, ...)
    read_write: list[str]  # host files it may write
    hidden: list[str]  # folders inside the view it must not see
    env: dict[str, str]  # its environment besides HOME (judging/policy.py: environment)
    hostname: str  # the host name it sees
    seccomp: bytes | None  # the seccomp program it runs under at the bwrap level (judging/seccomp.py)
    missing: str | None  # why the language cannot run here (and the fix), or None

    def argv(self, program_path: str) -> list[str]:
        """The command line that runs the program at ``program_path``."""

    def syntax_error(self, code: str) -> str | None:
        """The solution's syntax error, found once per completion without running it, or None."""

    def program(self, solution: str, marker: str, test_code: str) -> str:
        """The program of one test: the solution, a line printing ``marker``, then the test code."""

    def whole_program(self, solution: str) -> str:
        """The program of a test that gives standard input: the solution alone, all of whose output counts (only
        where ``reads_input``)."""

    def calls_code(self, marker: str, tests) -> str:
        """The test code of a run of calls (judging/records.py, `Calls`): before each test's code, a line printing
        its separator (judging/records.py, `call_separator`), flushed, so what each call printed is told apart; a
        call that raises an error fails alone and the run goes on to the next one."""

    def raised_calls(self, result: RunResult, marker: str, calls: int) -> frozenset[int]:
        """The calls of a run of ``calls`` calls that raised an error the run went on after: each fails alone
        (judging/grading.py, `grade_calls`). A run whose only fault is theirs (its outcome a ``runtime_error``,
        its exit status 0) went on to its end."""

    def outcome(self, result: RunResult, marker: str) -> str:
        """``RAN`` (compare the stdout after the marker) or a failure status, ``LICENCE_FAILURE`` included."""


class PythonExecutor:
    """CPython from this environment, run ``-I -S -B``: isolated mode, standard library only.

    Skipping ``site`` cuts start-up from ~70 ms to ~20 ms here and keeps the trainer's packages
    (torch, wandb, ...) off the program's path; ``hidden`` (the interpreter's site-packages, covered by an
    empty folder in the sandbox's view) keeps them and what they ship out of its sight: a non-editable install
    of this project puts every bundled test and solution (data/*.jsonl) there.
    """

    language = "python"
    reads_input = True
    licensed = False
    filename = "main.py"
    seccomp = SECCOMP_FILTER_PYTHON  # the allow-list: Unix sockets only; no sysinfo, locks, watches (seccomp.py)

    def __init__(self):
        self.interpreter = os.path.realpath(sys.executable)
        prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
        self.read_only = sorted(p for p in prefixes if not p.startswith("/usr"))
        self.hidden = site_packages_in_view(self.read_only)
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.read_write: list[str] = []
        self.hostname = "sandbox"
        self.missing = None

    def argv(self, program_path: str) -> list[str]:
        return [self.interpreter, "-I", "-S", "-B", program_path]

    def syntax_error(self, code: str) -> str | None:
        """The solution's syntax error, found once per completion without running it."""
        try:
            compile(code, SOLUTION_NAME, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as error:
            return f"{type(error).__name__}: {error}"
        return None

    def program(self, solution: str, marker: str, test_code: str) -> str:
        return f"{solution}\nprint({marker!r}, flush=True)\n{test_code}\n"

    def whole_program(self, solution: str) -> str:
        return f"{solution}\n"

    def calls_code(self, marker: str, tests) -> str:
        """A function that runs each call's test code in the module's globals (as the code after the marker of a
        run of its own runs) inside a ``try``: an ``Exception`` it raises has its traceback written to stderr (the
        call's frames, not the loop's; the error's line alone where an earlier call raised the same error at the
        same line: the C printer reads and parses the source line, ~45 us a call) and the call's raised line
        (`call_raised`) printed after what it printed, to stdout and then to stderr (where it ends the call's
        traceback); the next call runs. A ``MemoryError`` is raised on, as are ``SystemExit``,
        ``KeyboardInterrupt`` and any other BaseException: they end the run as they end a run of the call alone.

        The calls come compiled (`_compiled_calls`: on the host, once for every completion judged on the same
        calls), so the sandbox parses a short loop and not fifty calls; a test code that does not compile alone
        comes as its text, whose ``exec`` raises its SyntaxError inside the ``try``: that call fails alone. The loop
        imports what it uses and takes the builtins from ``builtins``, so a solution defining ``print``, ``exec``
        or ``__import__`` changes only what its calls do, as in runs of their own. The program can forge or hide a
        raised line (it can read the marker in its own file, and replace ``print``), as it can end a run of one call
        normally after raising (``atexit``, ``os._exit(0)``): either only fails its own calls or has them graded on
        what they printed, which it could have printed without raising."""
        return (  # defined after the solution: a name of its own it shadows only from here on
            "def _judge_calls(marker, blob):\n"
            "    import builtins, marshal, sys, zlib\n"
            "    scope, shown = builtins.globals(), builtins.set()\n"
            "    for index, call in builtins.enumerate(marshal.loads(zlib.decompress(builtins.bytes.fromhex(blob)))):\n"
            f"        builtins.print(f{call_separator('{marker}', '{index}')!r}, flush=True)\n"
            "        try:\n"
            "            builtins.exec(call, scope)\n"
            "        except builtins.MemoryError:\n"
            "            raise\n"
            "        except builtins.Exception as error:\n"
            "            trace = error.__traceback__\n"
            "            if trace.tb_next is not None:\n"
            "                trace = error.__traceback__ = trace.tb_next\n"
            "            while trace.tb_next is not None:\n"
            "                trace = trace.tb_next\n"
            "            place = (builtins.type(error), trace.tb_frame.f_code.co_filename, trace.tb_lineno)\n"
            "            if place in shown:\n"
            "                error.__traceback__ = None\n"
            "            shown.add(place)\n"
            "            sys.__excepthook__(builtins.type(error), error, error.__traceback__)\n"
            f"            line = f{call_raised('{marker}', '{index}')!r}\n"
            "            builtins.print(line, flush=True)\n"
            "            builtins.print(line, file=sys.stderr, flush=True)\n"
            f"_judge_calls({marker!r}, {_compiled_calls(tuple(test.test_code for test in tests))!r})\n"
        )

    def raised_calls(self, result: RunResult, marker: str, calls: int) -> frozenset[int]:
        """The calls whose output (what they printed after their separator, before the next) holds their own
        raised line, printed by the harness of `calls_code`."""
        start = result.stdout.find(marker)
        if start < 0 or ":raised\n" not in result.stdout:  # no call raised: no span to read
            return frozenset()
        text = result.stdout[start + len(marker) :]
        return frozenset(
            index
            for index, (begin, end) in enumerate(call_spans(text, marker, calls))
            if text.find(call_raised(marker, index) + "\n", begin, end) >= 0
        )

    def outcome(self, result: RunResult, marker: str) -> str:
        if result.returncode == 0:
            return RAN
        if _PYTHON_MEMORY.search(result.stderr):
            return "memory"
        if result.returncode in _CPU_LIMIT_EXITS:
            return "timeout"
        return "runtime_error"


@functools.lru_cache(maxsize=1 << 10)
def _compiled_calls(test_codes: tuple[str, ...]) -> str:
    """Each test code compiled alone (as its own module, so no layout of the harness changes what it does), or its
    text where it does not compile alone (a ``return`` outside a function), the tuple marshalled, compressed (to
    a tenth: the sandbox's compiler reads the hex text a character at a time, ~140 us for fifty calls otherwise)
    and in hex: what `PythonExecutor.calls_code` hands the sandbox's loop. The sandbox runs this interpreter
    (`PythonExecutor` starts ``sys.executable``), so it reads this marshal format. Lone surrogates read as "?", as
    in the rest of the program (judging/execution.py). Cached: a step's completions of one problem share their
    calls."""
    calls = []
    for index, test_code in enumerate(test_codes):
        test_code = test_code.encode("utf-8", "replace").decode("utf-8")
        try:
            calls.append(compile(test_code, f"<call {index}>", "exec", dont_inherit=True))
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            calls.append(test_code)
    return zlib.compress(marshal.dumps(tuple(calls))).hex()


def site_packages_in_view(read_only: list[str]) -> list[str]:
    """This interpreter's site-packages folders that the sandbox's view would show (under /usr or ``read_only``):
    a venv's own, and its base interpreter's, whose prefix is in the view."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    found = {
        *site.getsitepackages(),
        *site.getsitepackages([sys.base_prefix, sys.base_exec_prefix]),
        site.getusersitepackages(),
        sysconfig.get_path("purelib"),
        sysconfig.get_path("platlib"),
        sysconfig.get_path("purelib", vars=base),
        sysconfig.get_path("platlib", vars=base),
    }
    shown = ("/usr", *read_only)
    return sorted(
        {
            os.path.realpath(path)
            for path in found
            if os.path.isdir(path) and any(os.path.realpath(path).startswith(top + "/") for top in shown)
        }
    )


class QExecutor:
    """The user's own kdb+ q, run as ``q main.q -q`` with stdin closed.

    The sandbox sees the binary, and QHOME and QLIC when set. Without QHOME, a binary in a kdb+
    platform folder (``QHOME/l64/q``) implies its QHOME; any other binary is bound alone, so a q in
    ``~/bin`` does not expose the whole home folder.

    q keeps going after an error in a script, so errors are read from stderr (``'type``, ``'length``,
    ...); ``'wsfull`` is the memory limit. Licence failures are not the program's fault: the judge
    retries them and reports ``sandbox_error`` if they persist. q checks its licence before it reads the
    script, so the script's first line writes the run's random marker to stderr: licence text after it is
    the program's own output (a program must not dodge a wrong answer's penalty by printing ``'k4.lic``).

    Licences: q sees the host's name (a k4.lic is bound to it). q writes its usage-accounting file
    ``kod.q.acct`` in its working folder (the scratch folder, writable), or at ``KX_ACCT`` when set: that one
    file is passed through read-write, created if missing, and must be writable by the sandbox uids.
    """

    language = "q"
    reads_input = False  # q's console reads standard input as code once the script ends: not judged so, untried
    licensed = True
    filename = "main.q"
    seccomp = SECCOMP_FILTER  # the allow-list with network sockets, sysinfo, locks, inotify (seccomp.py)

    def __init__(self, q_binary: str | None = None):
        self.binary = find_q(q_binary)
        self.missing = (
            None
            if self.binary
            else (
                "q executable not found: pass --q_binary, set Q_INTERPRETER_PATH (or QHOME with l64/q inside), "
                "or put q on PATH; a kdb+ licence (QLIC) is needed too"
            )
        )
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.read_only = [self.binary] if self.binary else []
        for key in ("QHOME", "QLIC"):
            value = os.environ.get(key)
            if value:
                self.env[key] = os.path.realpath(value)
                self.read_only.append(os.path.realpath(value))
        binary = Path(self.binary or "")
        if self.binary and "QHOME" not in self.env and binary.parent.name in KDB_PLATFORM_FOLDERS:
            self.env["QHOME"] = str(binary.parent.parent)
            self.read_only.append(self.env["QHOME"])
        self.hostname = socket.gethostname()
        self.read_write: list[str] = []
        self.hidden: list[str] = []
        if os.environ.get("KX_ACCT") and self.binary:
            self.env["KX_ACCT"] = os.path.realpath(os.environ["KX_ACCT"])
            self.read_write.append(self.env["KX_ACCT"])
            self.missing = _accounting_file_problem(self.env["KX_ACCT"])

    def argv(self, program_path: str) -> list[str]:
        return [self.binary, program_path, "-q"]

    def syntax_error(self, code: str) -> str | None:
        return None

    def program(self, solution: str, marker: str, test_code: str) -> str:
        solution = _Q_TRAILING_EXIT.sub("\n", solution.rstrip())
        # q reads a line that starts with white space as the continuation of the line before: the "::" (a no-op)
        # between the marker's line and the solution is what an indented first line of the solution continues.
        return f'-2 "{marker}";\n::\n{solution}\n-1 "{marker}";\n{test_code}\nexit 0;\n'

    def calls_code(self, marker: str, tests) -> str:
        # The separator goes to stderr too: q goes on after an error, so the calls whose stderr shows one are found.
        return "\n".join(
            f'-1 "{call_separator(marker, index)}";\n-2 "{call_separator(marker, index)}";\n{test.test_code}'
            for index, test in enumerate(tests)
        )

    def raised_calls(self, result: RunResult, marker: str, calls: int) -> frozenset[int]:
        """The calls after whose separator q wrote an error (``'type``, ``'length`` ...) to stderr before the next
        one's; every call when the error came before the first call (in the solution: every run of a test alone
        shows it)."""
        start = result.stderr.find(marker)  # the script's first line writes it: nothing before it is the program's
        if start < 0:
            return frozenset()
        text = result.stderr[start + len(marker) :]
        spans = call_spans(text, marker, calls)
        if not spans:
            return frozenset()
        if _Q_ERROR.search(text, 0, spans[0][0]):
            return frozenset(range(calls))
        return frozenset(index for index, (begin, end) in enumerate(spans) if _Q_ERROR.search(text, begin, end))

    def outcome(self, result: RunResult, marker: str) -> str:
        """A licence failure is q's licence text on stderr before q ever ran the script's first line (which
        writes the marker to stderr); anything after that is the program's and judged like any other output."""
        if marker not in result.stderr and _Q_LICENCE.search(result.stderr):
            return LICENCE_FAILURE
        if "'wsfull" in result.stderr:
            return "memory"
        if _Q_ERROR.search(result.stderr):
            return "runtime_error"
        if result.returncode != 0:
            return "runtime_error"
        return RAN


def _accounting_file_problem(path: str) -> str | None:
    """Make q's KX_ACCT file exist; why the sandbox cannot write it, or None.

    Judged q runs as unprivileged slot uids (when the judge is root), so the file must be writable by
    others; one the judge creates is made so, an existing one is left as its owner set it.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o666)
    except FileExistsError:
        fd = None
    except OSError as error:
        return (
            f"KX_ACCT={path}: cannot create q's accounting file ({error.strerror}); point KX_ACCT at a "
            f"writable file, or unset it so q keeps kod.q.acct in its working folder"
        )
    if fd is not None:
        os.fchmod(fd, 0o666)
        os.close(fd)
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        return f"KX_ACCT={path} is not a regular file; point KX_ACCT at a file"
    if os.geteuid() == 0 and not info.st_mode & stat.S_IWOTH:
        return (
            f"KX_ACCT={path} is mode {stat.S_IMODE(info.st_mode):04o}: judged q runs as unprivileged sandbox "
            f"uids and cannot write it; chmod o+w {path}, or unset KX_ACCT so q keeps kod.q.acct in its "
            f"working folder"
        )
    return None


def find_q(q_binary: str | None = None) -> str | None:
    """The q executable: the argument (only it, when given), else Q_INTERPRETER_PATH,
    Q_EXECUTABLE_PATH, $QHOME/l64/q, then ``q`` on PATH."""
    if q_binary:
        candidates = [q_binary]
    else:
        candidates = [os.environ.get("Q_INTERPRETER_PATH"), os.environ.get("Q_EXECUTABLE_PATH")]
        if os.environ.get("QHOME"):
            candidates.append(os.path.join(os.environ["QHOME"], "l64", "q"))
        candidates.append("q")
    for candidate in candidates:
        if candidate:
            found = shutil.which(candidate) if os.sep not in candidate else candidate
            if found and os.path.isfile(found) and os.access(found, os.X_OK):
                return os.path.realpath(found)
    return None
