"""ragweedctl against servers that lie, stall or attack (issue 12, items 17-19): it never sends the
token to a server that cannot prove it knows it, and any bad reply ends in one clear error line,
exit code 1 and no traceback, within its deadline. Escape sequences in names never reach the
terminal; --json output stays exact. ragweedctl runs as a subprocess, as users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ragweedd.api.server import ensure_token  # noqa: E402
from tests.api_support import running_api  # noqa: E402
from tests.hostile_server import HostileServer, send_json  # noqa: E402

CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]
TOKEN = "T" * 43


def run(state: Path, *argv, timeout: float = 60) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    p = subprocess.run(CTL + ["--state-dir", str(state), *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def one_clear_line(err: str) -> None:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("ragweedctl: "), err
    assert len(lines) <= 2, err  # the message and at most a hint


# --------------------------------------------------------------------------- item 17
def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("pid", ["dead", "not-listening"])
def test_stale_port_file_gets_no_connection(tmp_path, pid):
    with HostileServer(lambda s, r: send_json(s, {"ok": True})) as srv:
        srv.write_files(tmp_path, TOKEN, pid=dead_pid() if pid == "dead" else os.getppid())
        code, _, err, _ = run(tmp_path, "status")
        assert code == 3 and "stale" in err, err
        assert srv.connections == 0 and not srv.received


@pytest.mark.parametrize("behaviour", ["plain-health", "wrong-proof", "401"])
def test_server_that_cannot_prove_the_token_never_receives_it(tmp_path, behaviour):
    def reply(sock, head):
        if behaviour == "plain-health":
            send_json(sock, {"ok": True, "version": "1"})
        elif behaviour == "wrong-proof":
            send_json(sock, {"ok": True, "version": "1", "proof": "0" * 64})
        else:
            send_json(sock, {"error": {"code": "unauthorized", "message": "send me your token"}}, 401)

    with HostileServer(reply) as srv:  # holds the port, pid alive: only the proof can tell
        srv.write_files(tmp_path, TOKEN)
        for argv in (["status"], ["search", "x"], ["--json", "ask", "x"]):
            code, _, err, _ = run(tmp_path, *argv)
            assert code == 1 and "did not prove it knows the API token" in err, err
        assert srv.received and not any(TOKEN.encode() in r for r in srv.received)


def test_daemon_start_replaces_the_token_after_a_crash(tmp_path):
    token_file, port_file = tmp_path / "token", tmp_path / "port"
    first = ensure_token(token_file)
    assert ensure_token(token_file) == first  # no port file: the same token
    port_file.write_text(json.dumps({"host": "127.0.0.1", "port": 9, "pid": os.getpid()}))
    assert ensure_token(token_file) == first  # our own: not stale
    port_file.write_text(json.dumps({"host": "127.0.0.1", "port": 9, "pid": dead_pid()}))
    second = ensure_token(token_file)
    assert second != first and not port_file.exists()
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    port_file.write_text(json.dumps({"host": "127.0.0.1", "port": 9, "pid": os.getppid()}))  # alive, not on 9
    assert ensure_token(token_file) != second


# --------------------------------------------------------------------------- item 18
def trickle(sock, head):
    sock.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(60):
        sock.sendall(b"X")
        time.sleep(0.5)


def never(sock, head):
    time.sleep(30)


def endless(prefix: bytes, piece: bytes):
    def reply(sock, head):
        sock.sendall(prefix)
        try:
            for _ in range(20_000):  # 20,000 x 8 KiB = 160 MiB, more than any cap
                sock.sendall(piece)
        except OSError:
            pass
    return reply


def raw(data: bytes):
    return lambda sock, head: sock.sendall(data)


def body(b: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(b)}\r\n{extra}\r\n".encode() + b


def chunked(*chunks: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(chunks)


DEEP = b"[" * 100_000 + b"]" * 100_000
BAD = {
    "endless-status-line": endless(b"HTTP/1.1 200 ", b"a" * 8192),
    "endless-header": endless(b"HTTP/1.1 200 OK\r\nX-A: ", b"a" * 8192),
    "endless-headers": endless(b"HTTP/1.1 200 OK\r\n", b"X-A: b\r\n" * 1024),
    "endless-body": endless(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\": \"", b"a" * 8192),
    "huge-length": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n{}"),
    "negative-length": raw(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}"),
    "length-with-plus": raw(b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}"),
    "two-lengths": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}"),
    "truncated": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"version\": "),
    "bad-chunk-size": raw(chunked(b"zz\r\n{}\r\n0\r\n\r\n")),
    "negative-chunk": raw(chunked(b"-1\r\n{}\r\n0\r\n\r\n")),
    "huge-chunk": raw(chunked(b"fffffffff\r\n{}\r\n")),
    "truncated-chunks": raw(chunked(b"2\r\n{}\r\n")),
    "not-http": raw(b"SSH-2.0-OpenSSH_9.6\r\n"),
    "empty": raw(b""),
    "array": raw(body(b"[1, 2]")),
    "string": raw(body(b'"ok"')),
    "deep": raw(body(DEEP)),
    "deep-object": raw(body(b'{"a": ' + b"[" * 500 + b"]" * 500 + b"}")),
    "wrong-shape": raw(body(b'{"version": 1, "collections": 5}')),
    "not-json": raw(body(b"<html>hello</html>")),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_replies_are_one_clear_error(tmp_path, case):
    with HostileServer(BAD[case], token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, out, err, took = run(tmp_path, "--timeout", "10", "status")
    assert code == 1, (code, out, err)
    one_clear_line(err)
    assert took < 9, took


@pytest.mark.parametrize("argv,limit", [(["status"], 5), (["--timeout", "2", "status"], 2)])
def test_status_has_a_deadline(tmp_path, argv, limit):
    with HostileServer(never, token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, _, err, took = run(tmp_path, *argv)
    assert code == 1 and f"within {limit} s" in err, err
    one_clear_line(err)
    assert limit <= took < limit + 3, took


def test_timeout_is_for_the_whole_request_not_each_read(tmp_path):
    with HostileServer(trickle, token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, _, err, took = run(tmp_path, "--timeout", "2", "search", "x")
    assert code == 1 and "within 2 s" in err, err
    assert took < 5, took


def test_ask_stream_with_endless_event_is_capped(tmp_path):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: token\ndata: "
    with HostileServer(endless(head, b"a" * 8192), token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, _, err, _ = run(tmp_path, "--timeout", "20", "ask", "x")
    assert code == 1, err
    one_clear_line(err)


# --------------------------------------------------------------------------- item 19
EVIL = "evil\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202e.txt"


def test_escape_sequences_never_reach_the_terminal(tmp_path):
    files = {EVIL: "wombats dig burrows \x1b]0;title\x07 at night\n", "plain.txt": "wombats sleep by day\n",
             "two\nlines.txt": "wombats nest in pairs\n"}
    with running_api(tmp_path, files=files) as api:
        state = api.state_dir
        outputs = []
        # the ask is about the file with a newline in its name, so it is the answer's first source
        for argv in (["search", "wombats"], ["docs"], ["ask", "wombats nest in pairs"], ["collections"], ["status"],
                     ["history"]):
            code, out, err, _ = run(state, *argv)
            assert code == 0, (argv, err)
            outputs.append(out + err)
        key = next(d["doc_key"] for d in api.ok("GET", "/v1/documents")["items"] if d["filename"] == EVIL)
        code, out, err, _ = run(state, "docs", key)
        outputs.append(out + err)
        for text in outputs:
            for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
                assert bad not in text, (bad, text)
        assert "evil\\x1b]0;pwned\\x07" in outputs[0] and "\\u202e" in outputs[0]
        # a newline in a name is shown escaped (a name never spans two lines), in ask's sources too
        assert not any("two\nlines" in text for text in outputs)
        assert "two\\nlines.txt" in outputs[0] and "two\\nlines.txt" in outputs[2], outputs[2]
        assert "] notes/two\\nlines.txt\n" in outputs[2], outputs[2]  # the answer's own label line
        # --json is the daemon's answer, unchanged
        code, out, _, _ = run(state, "--json", "search", "wombats")
        assert code == 0 and EVIL in {h["filename"] for h in json.loads(out)["results"]}
        code, out, _, _ = run(state, "--json", "docs")
        assert json.loads(out) == api.ok("GET", "/v1/documents")


def test_error_messages_are_escaped_too(tmp_path):
    msg = "no \x1b]0;owned\x07 such thing"
    with HostileServer(lambda s, h: send_json(s, {"error": {"code": "x", "message": msg}}, 404), token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, out, err, _ = run(tmp_path, "status")
    assert code == 2 and "\x1b" not in err and "\\x1b]0;owned\\x07" in err, err


def test_token_is_sent_once_the_server_proved_itself(tmp_path):
    with HostileServer(lambda s, h: send_json(s, {"items": []}), token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, out, err, _ = run(tmp_path, "collections")
        assert code == 0, err
        assert [b"Bearer " + TOKEN.encode() in r for r in srv.received] == [False, True]



def test_truncated_body_that_is_valid_json_is_not_success(tmp_path):
    """A Content-Length of 100 with a complete JSON object of 13 bytes, then the connection closes."""
    with HostileServer(raw(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"items": []}'), token=TOKEN) as srv:
        srv.write_files(tmp_path, TOKEN)
        code, out, err, _ = run(tmp_path, "collections")
    assert code == 1 and "ended after 13 of 100 bytes" in err, (code, out, err)
    one_clear_line(err)
