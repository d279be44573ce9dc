"""Tests that give the judged program its standard input (competitive-programming problems), on both Python paths:
the input is the program's stdin, all it prints is its answer, and the limits, verdicts and red-team properties of
printing tests hold here too (no expected output in its view, its input in no other test's view, no warm worker
dropped: tests/helpers/bwrap_paths.py)."""

import os
import secrets

import pytest

from bwrap_paths import judge, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Judge, Test

SUM = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"


def stdin_test(text, expected="unused"):
    return Test("", expected, input=text)


def test_the_input_is_the_programs_standard_input_and_its_output_is_the_answer(judge):
    big = " ".join(["1"] * 500_000)  # 1 MB: more than a pipe holds
    judgement = judge.run(
        SUM,
        [stdin_test("1 2 3\n", "6"), stdin_test("1 2 3\n", "7"), stdin_test("", "0"), stdin_test(big, "500000")],
        "python",
        timeout=5.0,
    )
    assert [t.status for t in judgement.tests] == ["passed", "failed", "passed", "passed"], judgement.tests
    assert judgement.tests[1].stdout == "6\n"


def test_text_reads_as_utf8_and_lines_as_written(judge):
    code = "a = input()\nb = input()\nprint(b, a[::-1], len(a))\n"
    (result,) = judge.run(code, [stdin_test("żółw\nzebra\n", "zebra włóż 4")], "python").tests
    assert result.status == "passed", result


@pytest.mark.slow
@pytest.mark.parametrize(
    "code, status",
    [
        ("import sys\nsys.stdin.read()\nwhile True: pass\n", "timeout"),
        ("import sys\nsys.stdin.read()\nx = bytearray(4 << 30)\n", "memory"),
        ("import sys\nsys.stdout.write(sys.stdin.read() * 100)\n", "output_limit"),
        ("int(input())\n", "runtime_error"),
        ("print(6)\nraise SystemExit(3)\n", "runtime_error"),
        ("import os\nprint(6, flush=True)\nos._exit(0)\n", "passed"),  # its output, however it ends normally
    ],
)
def test_limits_and_verdicts_are_those_of_printing_tests(judge, code, status):
    (result,) = judge.run(code, [stdin_test("x" * 20_000, "6")], "python", timeout=2.0).tests
    assert result.status == status, result


def test_no_marker_is_printed_or_in_the_program_and_nothing_but_its_output_counts(judge):
    """There is no test code after the solution, so no marker: the program is the solution alone (it reads itself
    and finds nothing else) and all it prints is compared; printing the answer early and then more fails."""
    code = "print(open(__file__).read(), end='')"
    (alone,) = judge.run(code, [stdin_test("", "unused")], "python").tests
    assert alone.stdout == code + "\n", alone
    (extra,) = judge.run("print(6)\nprint('more')\n", [stdin_test("", "6")], "python").tests
    assert extra.status == "failed"


def test_the_expected_output_is_nowhere_a_program_reading_its_input_can_look(judge):
    expected = f"zebra-{secrets.token_hex(8)}"
    needle = expected.encode()
    code = (
        "import os, sys\n"
        f"needle = {needle[:6]!r} + {needle[6:]!r}\n"
        "found = []\n"
        "if needle in sys.stdin.buffer.read():\n"
        "    found.append('stdin')\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        if needle in open(f'/proc/self/fd/{fd}', 'rb').read(1 << 22):\n"
        "            found.append(fd)\n"
        "    except OSError:\n"
        "        pass\n"
        "for top in ('/scratch', '/tmp', '/dev/shm', '/proc/self'):\n"
        "    for folder, dirs, files in os.walk(top):\n"
        "        dirs[:] = [d for d in dirs if d not in ('task', 'fd', 'map_files', 'fdinfo', 'net')]\n"
        "        for name in files:\n"
        "            try:\n"
        "                if needle in open(os.path.join(folder, name), 'rb').read(1 << 20):\n"
        "                    found.append(os.path.join(folder, name))\n"
        "            except OSError:\n"
        "                pass\n"
        "print('found' if found else 'nothing', found)\n"
    )
    (result,) = judge.run(code, [stdin_test("the input\n", expected)], "python", timeout=5.0).tests
    assert result.stdout.startswith("nothing"), result


def test_a_program_cannot_change_its_input(judge):
    code = (
        "import os\n"
        "for how in (lambda: os.write(0, b'x'), lambda: open('/proc/self/fd/0', 'r+b', buffering=0).write(b'x'),\n"
        "            lambda: os.ftruncate(0, 0)):\n"
        "    try:\n"
        "        how()\n"
        "        print('changed')\n"
        "    except OSError:\n"
        "        print('refused')\n"
        "os.lseek(0, 0, 0)\n"
        "print(os.read(0, 100).decode())\n"
    )
    (result,) = judge.run(code, [stdin_test("kept", "refused\nrefused\nrefused\nkept")], "python").tests
    assert result.status == "passed", result


def test_the_input_of_one_test_is_in_no_other_tests_view(judge):
    """A test holding its input open (it reads it slowly) while another looks everywhere it can for it: the other
    processes' descriptors, the shared memory and temporary folders, every memory file it can open. The seeker finds
    its own input the same way (the search works)."""
    secret = f"input-{secrets.token_hex(8)}"
    holder = "import sys, time\nsys.stdin.read(1)\ntime.sleep(1.5)\nprint('held')\n"
    needle = secret.encode()
    seeker = (
        "import os, time\n"
        f"needle = {needle[:6]!r} + {needle[6:]!r}\n"
        "found, own = set(), False\n"
        "end = time.time() + 1.2\n"
        "while time.time() < end:\n"
        "    for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self']:\n"
        "        try:\n"
        "            fds = os.listdir(f'/proc/{pid}/fd')\n"
        "        except OSError:\n"
        "            continue\n"
        "        for fd in fds:\n"
        "            try:\n"
        "                text = open(f'/proc/{pid}/fd/{fd}', 'rb').read(1 << 20)\n"
        "                own = own or b'seeker-' + b'own' in text\n"
        "                if needle in text:\n"
        "                    found.add((pid, fd))\n"
        "            except OSError:\n"
        "                pass\n"
        "    for top in ('/tmp', '/dev/shm', '/scratch'):\n"
        "        for folder, _, files in os.walk(top):\n"
        "            for name in files:\n"
        "                try:\n"
        "                    if needle in open(os.path.join(folder, name), 'rb').read():\n"
        "                        found.add(name)\n"
        "                except OSError:\n"
        "                    pass\n"
        "    time.sleep(0.05)\n"
        "print(sorted(found), own)\n"
    )
    held, sought = judge.run_many(
        [
            (holder, [stdin_test(secret + "\n" + "x" * 100_000, "held")], "python"),
            (seeker, [stdin_test("seeker-own", "[] True")], "python"),
        ],
        timeout=4.0,
    )
    assert held.status == "passed", held.tests[0]
    assert sought.status == "passed", sought.tests[0]


def test_the_next_test_in_a_slot_reads_its_own_input_only(sandbox):
    with Judge(timeout=2.0, workers=1, sandbox=sandbox) as one_slot:
        first, second = (
            one_slot.run("import sys\nprint(sys.stdin.read())", [stdin_test(text, text)], "python")
            for text in ("first input", "second")
        )
        assert (first.status, second.status) == ("passed", "passed"), (first.tests, second.tests)
        assert not one_slot.warm or one_slot.setup.warm.failures == 0, one_slot.setup.warm.failure


def test_printing_tests_still_get_an_empty_standard_input(judge):
    (result,) = judge.run(
        "import sys",
        [Test("print(repr(sys.stdin.read()), os.isatty(0))".replace("os.", "__import__('os')."), "'' False")],
        "python",
    ).tests
    assert result.status == "passed", result


def test_standard_input_is_refused_for_q_before_anything_runs():
    with Judge(timeout=1.0, workers=1, sandbox="none" if os.geteuid() else "bwrap", q_binary="/bin/true") as judge:
        with pytest.raises(ValueError, match="q programs are not judged on standard input"):
            judge.run("solve:{x}", [stdin_test("1", "1")], "q")
