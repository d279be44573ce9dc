"""Licence-only egress for judged q (judging/licence_proxy.py), with real sandboxes and real sockets.

Everything here runs against STAND-INS, none of them kdb+ or KX software: tests/helpers/fake_q/licensed_q (a shell
script standing in for q with an on-demand kc.lic licence: it must reach its licence server through the
proxy in its environment, or exits with kdb+'s licence message) and tests/helpers/licence_stand_ins.py (a loopback
licence-server stand-in, and a loopback service that records who connects). All traffic stays on
127.0.0.1 at ephemeral ports.
"""

import ctypes
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import judging.execution
from licence_stand_ins import LoopbackService
from judging import Judge, JudgeUnavailable, Test
from judging.licence_proxy import SLOT_CONNECTIONS, LicenceHostsError, LicenceProxy, parse_licence_hosts

ROOT = Path(__file__).resolve().parents[2]
LICENSED_Q = str(ROOT / "tests" / "helpers" / "fake_q" / "licensed_q")
SIX = [Test('-1 "6";', "6")]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="licence egress needs root (a network namespace per slot)")


@pytest.fixture()
def licence_server():
    server = LoopbackService()
    yield server
    server.close()


@pytest.fixture()
def other_service():
    service = LoopbackService(reply=None)
    yield service
    service.close()


@pytest.fixture()
def kc_lic(qhome, licence_server):
    """An on-demand licence for the stand-in q: the address of the licence-server stand-in."""
    (qhome / "kc.lic").write_text(licence_server.address + "\n")
    return qhome / "kc.lic"


def record(result, key):
    prefix = f"FAKEQ-{key} "
    return [line[len(prefix) :] for line in result.stderr.splitlines() if line.startswith(prefix)]


def test_licence_hosts_values():
    assert parse_licence_hosts("auto") == "auto"
    assert parse_licence_hosts("none") == ()
    assert parse_licence_hosts("Licence.KX.com:443, [::1]:80") == (("licence.kx.com", 443), ("::1", 80))
    for bad in ("", "kx.com", "kx.com:0", "kx.com:65536", "kx com:443", "kx.com:443,", "http://kx.com:443"):
        with pytest.raises(LicenceHostsError, match=r"--q_licence_hosts: .* use auto, none, or HOST:PORT"):
            parse_licence_hosts(bad)
    with pytest.raises(ValueError, match="--q_licence_hosts"):
        Judge(workers=1, q_licence_hosts="kx.com")


def test_auto_learns_the_licence_server_and_q_passes(kc_lic, licence_server, caplog):
    caplog.set_level(logging.INFO, logger="judging")
    with Judge(timeout=5.0, workers=2, q_binary=LICENSED_Q) as judge:
        judge.preflight("q")
        judgement = judge.run("solve:{6}", SIX, "q")
        assert judgement.status == "passed", judgement.tests[0].stderr
        assert record(judgement.tests[0], "LICENCE") == [f"{licence_server.address} via proxy 127.0.0.1:3128 GRANTED"]
        assert f"reaches only {licence_server.address}" in judge.isolation
        assert judge.counters() == {"judge/proxy_refusals": 0, "judge/licence_retries": 0}
    assert f"contacted {licence_server.address}" in caplog.text
    assert licence_server.connections == 3  # the recording run, the preflight, the test
    assert licence_server.first_lines == ["LICENCE kc.lic"] * 3


def test_an_explicit_licence_host_passes(kc_lic, licence_server):
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts=licence_server.address) as judge:
        judge.preflight("q")
        assert judge.run("solve:{6}", SIX, "q").status == "passed"
        if os.path.isdir("/etc/ssl/certs"):  # public CA certificates, for a q that checks its server's TLS
            certs = [Test('system "test -d /etc/ssl/certs && echo trusted";', "trusted")]
            assert judge.run("solve:{6}", certs, "q").status == "passed"
    assert licence_server.connections == 3 - (not os.path.isdir("/etc/ssl/certs"))  # no recording run


def test_none_makes_licence_failures_sandbox_errors(kc_lic, licence_server):
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts="none") as judge:
        judgement = judge.run("solve:{6}", SIX, "q")
        assert judgement.status == "sandbox_error"
        assert record(judgement.tests[0], "LICENCE") == [f"{licence_server.address} direct no answer"]
        assert judge.counters()["judge/licence_retries"] == 3
        with pytest.raises(
            JudgeUnavailable, match=r"licence.*no network \(--q_licence_hosts none\).*auto or HOST:PORT"
        ):
            judge.preflight("q")
    assert licence_server.connections == 0


def test_a_host_off_the_list_is_refused_counted_and_logged_once(kc_lic, licence_server, other_service, caplog):
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts=other_service.address) as judge:
        assert judge.run("solve:{6}", SIX, "q").status == "sandbox_error"
        # Four tries, each followed by q's own 1+1 (refused too, so the licence failure is q's, not the program's)
        assert judge.counters() == {"judge/proxy_refusals": 8, "judge/licence_retries": 3}
    assert licence_server.connections == 0 and other_service.connections == 0
    refusals = [r for r in caplog.records if "licence proxy refused" in r.getMessage()]
    assert len(refusals) == 1 and f"CONNECT {licence_server.address}" in refusals[0].getMessage()


def test_refused_starts_are_retried_and_counted(kc_lic, licence_server):
    licence_server.deny_first = 3  # the recording run's first try and two more: a server refusing under load
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q) as judge:
        judge.preflight("q")
        assert judge.run("solve:{6}", SIX, "q").status == "passed"
        # refused: the first try, the 1+1 that checks q itself (so a retry), the second try; then 1+1 starts, and
        # the third try passes
        assert judge.counters()["judge/licence_retries"] == 1


def test_auto_without_a_licence_server_opens_no_egress(qhome, caplog):
    caplog.set_level(logging.INFO, logger="judging")
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q) as judge:
        judgement = judge.run("solve:{6}", SIX, "q")
        assert judgement.status == "passed", judgement.tests[0].stderr
        assert judge.setup.proxy is None
        assert not {"http_proxy", "HTTP_PROXY"} & set(record(judgement.tests[0], "ENV")[0].split())
        assert "no network (q contacted no host" in judge.isolation
    assert "contacted no host" in caplog.text


def test_without_nsenter_auto_gives_no_network_and_an_explicit_list_is_refused(kc_lic, licence_server, monkeypatch):
    which = shutil.which
    for hosts in ("auto", licence_server.address):
        with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts=hosts) as judge:
            monkeypatch.setattr(
                shutil, "which", lambda name, *a, **k: None if name == "nsenter" else which(name, *a, **k)
            )
            if hosts == "auto":
                assert judge.run("solve:{6}", SIX, "q").status == "sandbox_error"
                assert "no network (--q_licence_hosts auto: licence egress needs nsenter" in judge.isolation
            else:
                with pytest.raises(JudgeUnavailable, match=rf"--q_licence_hosts {hosts}: .*needs nsenter.*util-linux"):
                    judge.preflight("q")
            monkeypatch.setattr(shutil, "which", which)
    assert licence_server.connections == 0


# What judged code can reach. The stand-in q runs `system "..."` lines with sh, as q's system does, so the
# judged code below is a Python program that q code starts; it sees QHOME read-only, where the test puts it.
PROBE = """
import socket, sys
licence, other = int(sys.argv[1]), int(sys.argv[2])

def direct(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return "connected"
    except OSError:
        return "blocked"

def proxied(request):
    try:
        with socket.create_connection(("127.0.0.1", 3128), timeout=5) as proxy:
            proxy.sendall(request.encode())
            return proxy.makefile("rb").readline().decode().strip() or "closed"
    except OSError:
        return "no proxy"

print("direct licence", direct("127.0.0.1", licence))
print("direct other", direct("127.0.0.1", other))
print("direct outside", direct("192.0.2.1", 443))
print("connect other", proxied(f"CONNECT 127.0.0.1:{other} HTTP/1.1\\r\\n\\r\\n"))
print("http other", proxied(f"GET http://127.0.0.1:{other}/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"))
print("connect outside", proxied("CONNECT example.com:443 HTTP/1.1\\r\\n\\r\\n"))
print("connect licence by another name", proxied(f"CONNECT localhost:{licence} HTTP/1.1\\r\\n\\r\\n"))
print("connect licence", proxied(f"CONNECT 127.0.0.1:{licence} HTTP/1.1\\r\\n\\r\\n"))
"""


def test_judged_code_reaches_only_the_licence_host_through_the_proxy(kc_lic, licence_server, other_service, qhome):
    (qhome / "probe.py").write_text(PROBE)
    code = f'system "/usr/bin/python3 -I -S $QHOME/probe.py {licence_server.port} {other_service.port}";'
    expected = "\n".join(
        [
            "direct licence blocked",
            "direct other blocked",
            "direct outside blocked",
            "connect other HTTP/1.1 403 Forbidden",
            "http other HTTP/1.1 403 Forbidden",
            "connect outside HTTP/1.1 403 Forbidden",
            "connect licence by another name HTTP/1.1 403 Forbidden",
            "connect licence HTTP/1.1 200 Connection established",
        ]
    )
    with Judge(timeout=10.0, workers=1, q_binary=LICENSED_Q) as judge:
        judgement = judge.run("solve:{6}", [Test(code, expected)], "q")
        assert judgement.status == "passed", (judgement.tests[0].stdout, judgement.tests[0].stderr)
        assert judge.counters()["judge/proxy_refusals"] == 4
        probe = PROBE.replace("sys.argv[1]", "1").replace("sys.argv[2]", "2")
        python = judge.run("", [Test(probe, "")], "python").tests[0].stdout
        assert all(line.endswith(("blocked", "no proxy")) for line in python.splitlines()), python
    assert other_service.connections == 0, "judged code reached another service on the host's loopback"


def test_plain_http_reaches_an_allowed_host_in_origin_form(kc_lic, licence_server, qhome):
    (qhome / "get.py").write_text(
        "import socket, sys\n"
        "with socket.create_connection(('127.0.0.1', 3128), timeout=5) as proxy:\n"
        "    proxy.sendall(f'GET http://127.0.0.1:{sys.argv[1]}/licence?x=1 HTTP/1.1\\r\\nHost: h\\r\\n'\n"
        "                  f'Proxy-Authorization: secret\\r\\n\\r\\n'.encode())\n"
        "    print(proxy.makefile('rb').readline().decode().strip())\n"
    )
    code = f'system "/usr/bin/python3 -I -S $QHOME/get.py {licence_server.port}";'
    with Judge(timeout=10.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts=licence_server.address) as judge:
        judgement = judge.run("solve:{6}", [Test(code, "GRANTED")], "q")
    assert judgement.status == "passed", (judgement.tests[0].stdout, judgement.tests[0].stderr)
    assert licence_server.first_lines[-1] == "GET /licence?x=1 HTTP/1.1"


def connect_from(netns_fd):
    """A socket connected to the proxy from inside a slot's namespace, as judged code would hold one."""
    made = {}

    def enter_and_connect():
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.setns(netns_fd, 0x40000000) == 0, os.strerror(ctypes.get_errno())  # this thread only
        made["socket"] = socket.create_connection(("127.0.0.1", 3128), timeout=5)

    thread = threading.Thread(target=enter_and_connect)
    thread.start()
    thread.join()
    return made["socket"]


def test_a_slot_hogging_the_proxy_starves_only_itself(licence_server):
    proxy = LicenceProxy([1, 2], allowed=(("127.0.0.1", licence_server.port),))
    try:
        hogs = [connect_from(proxy.netns[1]) for _ in range(SLOT_CONNECTIONS)]  # idle: never send a request
        extra = connect_from(proxy.netns[1])
        assert extra.recv(100) == b"", "a slot over its share must be closed unanswered"
        other_slot = connect_from(proxy.netns[2])
        other_slot.sendall(f"CONNECT {licence_server.address} HTTP/1.1\r\n\r\n".encode())
        assert other_slot.recv(100).startswith(b"HTTP/1.1 200 ")
        for sock in [*hogs, extra, other_slot]:
            sock.close()
    finally:
        proxy.close()


def unshare_works():
    command = ["unshare", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc", "true"]
    return shutil.which("unshare") is not None and subprocess.run(command, capture_output=True).returncode == 0


@pytest.mark.skipif(not unshare_works(), reason="unshare cannot create namespaces here")
def test_the_unshare_level_gets_the_same_egress(licence_server, other_service, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")  # the level's probe needs a Python any uid can run
    monkeypatch.setattr(judging.execution, "LICENCE_RETRY_DELAYS", (0.01, 0.01, 0.01))
    home = Path(tempfile.mkdtemp(dir="/tmp"))  # the host filesystem is visible: the slot uid must reach QHOME
    try:
        home.chmod(0o755)
        (home / "kc.lic").write_text(licence_server.address + "\n")
        (home / "probe.py").write_text(PROBE)
        monkeypatch.setenv("QHOME", str(home))
        monkeypatch.setenv("QLIC", str(home))
        code = f'system "/usr/bin/python3 -I -S $QHOME/probe.py {licence_server.port} {other_service.port}";'
        with Judge(timeout=10.0, workers=1, sandbox="unshare", q_binary=LICENSED_Q) as judge:
            judgement = judge.run("solve:{6}", [Test(code, "")], "q")
            assert judge.level == "unshare"
            assert record(judgement.tests[0], "LICENCE")[0].endswith("via proxy 127.0.0.1:3128 GRANTED")
            lines = judgement.tests[0].stdout.splitlines()
            assert lines[:3] == ["direct licence blocked", "direct other blocked", "direct outside blocked"]
            assert lines[-1] == "connect licence HTTP/1.1 200 Connection established"
            assert all(line.endswith("403 Forbidden") for line in lines[3:-1])
    finally:
        shutil.rmtree(home)
    assert other_service.connections == 0


def test_q_keeps_the_host_name_and_python_does_not(qhome):
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts="none") as judge:
        judgement = judge.run("solve:{6}", SIX, "q")
        assert record(judgement.tests[0], "HOSTNAME") == [socket.gethostname()]
        python = judge.run("import socket", [Test("print(socket.gethostname())", "sandbox")], "python")
        assert python.status == "passed"


def test_usage_accounting_file(qhome, tmp_path, monkeypatch):
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts="none") as judge:
        judgement = judge.run("solve:{6}", SIX, "q")
        assert judgement.status == "passed" and record(judgement.tests[0], "ACCT") == ["kod.q.acct"]
    folder = tmp_path / "acct"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("KX_ACCT", str(folder / "usage.acct"))
    with Judge(timeout=5.0, workers=2, q_binary=LICENSED_Q, q_licence_hosts="none") as judge:
        judgements = judge.run_many([("solve:{6}", SIX, "q")] * 2)
        assert [j.status for j in judgements] == ["passed", "passed"], judgements[0].tests[0].stderr
        assert record(judgements[0].tests[0], "ACCT") == [str(folder / "usage.acct")]
    assert (folder / "usage.acct").read_text() == "stand-in q start\n" * 2
    private = folder / "private.acct"
    private.write_text("")
    private.chmod(0o644)
    monkeypatch.setenv("KX_ACCT", str(private))
    with Judge(timeout=5.0, workers=1, q_binary=LICENSED_Q, q_licence_hosts="none") as judge:
        with pytest.raises(JudgeUnavailable, match=rf"KX_ACCT={private} is mode 0644.*chmod o\+w"):
            judge.preflight("q")


def test_close_stops_the_proxy_and_frees_the_namespaces(kc_lic):
    judge = Judge(timeout=5.0, workers=2, q_binary=LICENSED_Q)
    judge.preflight("q")
    proxy = judge.setup.proxy
    listeners = list(proxy._listeners)
    assert len(proxy.netns) == len(listeners) == 2 and proxy._thread.is_alive()
    judge.close()
    assert not proxy._thread.is_alive() and not proxy.netns
    assert [listener.fileno() for listener in listeners] == [-1, -1]


# The three commands. `auto` is the default, so it runs through today's command lines; the explicit
# settings need the --q_licence_hosts flag (JudgeArguments), which every command's `--help` must list.
# The stand-in runs `-1 "text";` and `system` lines, not q's `show solve[...]`: its tests are not printed calls, which
# only this flag lets a command load.
STAND_IN_TESTS = "--allow_in_sandbox_comparisons"


def command(*args, env=None):
    return subprocess.run(
        [sys.executable, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )


def need_flag(*prefix):
    """A renamed or dropped flag fails the tests that use it, never skips them."""
    shown = command(*prefix, "--help")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "--q_licence_hosts" in shown.stdout, f"{' '.join(map(str, prefix))} --help lists no --q_licence_hosts"


@pytest.fixture()
def q_env(kc_lic, qhome):
    return {**os.environ, "Q_INTERPRETER_PATH": LICENSED_Q}


@pytest.fixture()
def score_files(tmp_path):
    problems = tmp_path / "p.jsonl"
    problems.write_text(
        json.dumps({"id": "six", "language": "q", "description": "Print 6.", "tests": [test.record() for test in SIX]})
        + "\n"
    )
    completions = tmp_path / "c.jsonl"
    completions.write_text(json.dumps({"id": "six", "completion": "```q\nsolve:{6}\n```"}) + "\n")
    return ["--problems", problems, "--completions", completions, "--out", tmp_path / "s.jsonl"]


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["auto (default)", "HOST:PORT", "none"])
def test_rewards_score(setting, score_files, q_env, licence_server):
    flag = []
    if setting != "auto (default)":
        need_flag("-m", "rewards", "score")
        flag = ["--q_licence_hosts", licence_server.address if setting == "HOST:PORT" else "none"]
    result = command("-m", "rewards", "score", *score_files, "--workers", "1", STAND_IN_TESTS, *flag, env=q_env)
    if setting == "none":
        assert result.returncode == 2 and "--q_licence_hosts none" in result.stderr, result.stderr
        return
    assert result.returncode == 0, result.stderr
    (row,) = [json.loads(line) for line in Path(score_files[-1]).read_text().splitlines()]
    assert row["status"] == "passed"


@pytest.fixture()
def verify_file(tmp_path):
    # The stand-in evaluates nothing: the solution leaves files that the tests print, so a no-op fails. Three tests
    # with three answers: printing one answer whatever the input passes a third of them, no more.
    problem = {
        "id": "six",
        "description": "Leave 6, 7 and 8 in files.",
        "solution": 'system "echo 6 > a; echo 7 > b; echo 8 > c";',
        "tests": [
            {"test_code": f'system "cat {name}";', "expected_output": answer}
            for name, answer in (("a", "6"), ("b", "7"), ("c", "8"))
        ],
    }
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(problem) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["auto (default)", "HOST:PORT", "none"])
def test_data_verify(setting, verify_file, q_env, licence_server):
    flag = []
    if setting != "auto (default)":
        need_flag("-m", "data", "verify")
        flag = ["--q_licence_hosts", licence_server.address if setting == "HOST:PORT" else "none"]
    result = command(
        "-m",
        "data",
        "verify",
        verify_file,
        "--language",
        "q",
        "--q_binary",
        LICENSED_Q,
        STAND_IN_TESTS,
        *flag,
        env=q_env,
    )
    if setting == "none":
        assert result.returncode == 2 and "--q_licence_hosts none" in result.stderr, result.stderr
        return
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "verified 1 problems: 0 broken, 0 guessable (trivial share above 0.34), "
        "0 weak (a wrong program passes the judged tests), 0 unverifiable (no "
        "solution), 1 clean"
    )


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["auto (default)", "HOST:PORT", "none"])
def test_trainer_reward_check(setting, tiny_model, tmp_path, q_env, licence_server):
    flag = []
    if setting != "auto (default)":
        need_flag(ROOT / "rl_trainer.py")
        flag = ["--q_licence_hosts", licence_server.address if setting == "HOST:PORT" else "none"]
    problem = {
        "id": "six",
        "description": "Print 6.",
        "solution": "solve:{6}",
        "split": "train",
        "tests": [test.record() for test in SIX],
    }
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps(problem) + "\n" + json.dumps({**problem, "id": "seven", "split": "test"}) + "\n")
    result = command(
        ROOT / "rl_trainer.py",
        "--model",
        tiny_model,
        "--data",
        data,
        "--q_binary",
        LICENSED_Q,
        "--test_reward_function",
        STAND_IN_TESTS,
        *flag,
        env=q_env,
    )
    if setting == "none":
        assert result.returncode == 2 and "--q_licence_hosts none" in result.stderr, result.stderr[-3000:]
        return
    assert result.returncode == 0, result.stderr[-3000:]
    assert "six: reward 2.000 (1/1 tests, passed)" in result.stdout
