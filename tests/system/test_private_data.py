"""Issue 12 item 12: the daemon's data, state and cache dirs are 0700 and every file in them 0600,
whatever the umask it was started with, and looser modes left by an older version are tightened
at start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import requests

from tests.system.conftest import wait_until


def _loose(base: Path) -> list[str]:
    out = []
    for top in ("data", "state", "cache"):
        for dirpath, dirnames, filenames in os.walk(base / top):
            for name, want in [(d, 0o700) for d in dirnames] + [(f, 0o600) for f in filenames] + [("", 0o700)]:
                p = Path(dirpath) / name if name else Path(dirpath)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    continue
                if stat.S_IMODE(st.st_mode) & ~want:
                    out.append(f"{p} {oct(stat.S_IMODE(st.st_mode))}")
    return out


def _found(d, query: str) -> bool:
    """Searchable yet: before the collection's first file is in, a search says so (400)."""
    r = d.api("POST", "/v1/search", json={"query": query})
    if r.status_code == 400 and "nothing is indexed yet in notes" in r.text:
        return False
    assert r.status_code == 200, r.text
    return bool(r.json()["results"])


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_private_modes_whatever_the_umask(daemon, tmp_path, umask):
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.txt").write_text("private words about the secret garden\n" * 20)
    old = os.umask(umask)
    try:
        d = daemon({"notes": [root]}, start=False)
        # an older version left a world-readable data dir and database behind
        (d.base / "data").mkdir(mode=0o755)
        os.chmod(d.base / "data", 0o755)
        (d.base / "data" / "leftover.json").write_text("{}")
        os.chmod(d.base / "data" / "leftover.json", 0o644)
        d.start()
    finally:
        os.umask(old)
    wait_until(lambda: _found(d, "secret garden"), 60, 0.3, "the note to be searchable")
    d.wait_idle(120)  # keyword search finds the note before its vector is in the index files
    d.stop()
    files = {p.name for top in ("data", "state") for p in (d.base / top).rglob("*")}
    # every kind of private file the issue names exists, so the check below covers them
    for name in ("ingest_db.sqlite3", "rag.sqlite3", "history.sqlite3", "token", "data_level0.bin", "header.bin"):
        assert name in files, sorted(files)
    assert _loose(d.base) == []
    # and while it runs (-wal/-shm, the port file exist then)
    old = os.umask(umask)
    try:
        d.start()
    finally:
        os.umask(old)
    wait_until(lambda: (d.base / "state" / "port").exists(), 30, 0.1, "the port file")
    assert d.search("secret garden")
    names = {p.name for p in (d.base / "data").rglob("*")} | {p.name for p in (d.base / "state").rglob("*")}
    assert "ingest_db.sqlite3-wal" in names and "port" in names, sorted(names)
    assert _loose(d.base) == []


def test_a_token_file_others_could_read_is_replaced_at_restart(daemon, tmp_path):
    """The start-up tightening of the state dir must not hide a leak: a token file that was 0644
    while the daemon was down is taken as read by someone else and replaced, with a warning."""
    folder = tmp_path / "n"
    folder.mkdir()
    d = daemon({"n": [folder]})
    tok = d.base / "state" / "token"
    old = tok.read_text().strip()
    d.stop()
    os.chmod(tok, 0o644)
    d.start()
    assert tok.read_text().strip() != old
    assert oct(tok.stat().st_mode & 0o777) == "0o600"
    assert '"token_file_too_open"' in d.out.read_text()
    r = requests.get(f"http://127.0.0.1:{d.port}/v1/status", headers={"Authorization": f"Bearer {old}"}, timeout=10)
    assert r.status_code == 401


@pytest.mark.parametrize("bad", [b"\x00", b"\x01", b"\x7f", b"\x0b", b"\r"])
def test_a_header_with_a_bad_byte_never_puts_the_token_or_cookie_in_the_log(daemon, tmp_path, bad):
    """The parser's reason for refusing a header quotes the header's value: a token file saved with
    CRLF, or one stray byte, must not write the token or the session cookie to the log."""
    import socket

    folder = tmp_path / "n"
    folder.mkdir()
    d = daemon({"n": [folder]})
    token = (d.base / "state" / "token").read_text().strip()
    cookie = "0123456789abcdefSESSIONSECRET"
    for header in (b"Authorization: Bearer " + token.encode() + bad + b"x",
                   b"Cookie: ragweedd_session_" + str(d.port).encode() + b"=" + cookie.encode() + bad + b"x"):
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
            s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: localhost:" + str(d.port).encode() + b"\r\n" + header
                      + b"\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.split(b" ", 2)[1] in (b"400", b"401"), reply[:200]
        assert token.encode() not in reply and cookie.encode() not in reply
    wait_until(lambda: d.status(), 10, 0.1, "the daemon still up")
    log = d.out.read_text()
    assert token not in log and cookie not in log and token[:12] not in log
