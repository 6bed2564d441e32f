"""The progress renderer of the one-shot ingest and ``status --watch``: rate and ETA math, width, and
that nothing is drawn where stderr is not a terminal."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragweedd.cli.progress import Bar, RateMeter, clock, eta, render
from ragweedd.cli.watch import lines

ROOT = Path(__file__).resolve().parents[2]


def test_eta_math():
    assert eta(20, 100, 4.0) == 20.0
    assert eta(100, 100, 0.0) == 0.0  # all done: no estimate needed
    assert eta(0, 100, None) is None and eta(0, 100, 0.0) is None  # no rate yet
    assert eta(5, 0, 2.0) is None  # unknown total


def test_clock():
    assert clock(None) == "--" and clock(float("nan")) == "--" and clock(-1) == "--"
    assert clock(0) == "0:00" and clock(65.4) == "1:05" and clock(3725) == "1:02:05"


def test_rate_over_a_window_of_recent_samples():
    m = RateMeter(window=10)
    assert m.rate() is None
    m.add(0.0, 0)
    assert m.rate() is None  # one sample: no rate
    m.add(2.0, 10)
    assert m.rate() == 5.0
    # a stall at the start drops out of the window: nothing for 10 s, then 10 files/s for 20 s;
    # the whole-run average (200 files in 30 s) would say 6.7
    m = RateMeter(window=10)
    for t in range(0, 31):
        m.add(float(t), max(0, t - 10) * 10)
    assert m.samples[0][0] == 20.0
    assert m.rate() == pytest.approx(10.0)
    assert eta(200, 500, m.rate()) == pytest.approx(30.0)


@pytest.mark.parametrize("width", [20, 40, 60, 80, 200])
def test_render_fits_the_width(width):
    line = render("ingest", 120, 3000, 4.1, eta(120, 3000, 4.1), width)
    assert len(line) <= width
    assert "120/3000 files" in line or width < 40


def test_render_contents_and_bar_fill():
    line = render("ingest", 50, 100, 2.5, 20, 80)
    assert line.startswith("ingest [") and line.endswith("50/100 files  2.5 files/s  ETA 0:20")
    bar = line[line.index("[") + 1: line.index("]")]
    assert len(bar) == 80 - len("ingest") - 3 - len(" 50/100 files  2.5 files/s  ETA 0:20")
    assert bar.count("#") == len(bar) // 2 and set(bar) == {"#", "."}
    # too narrow for a bar: the numbers alone
    assert render("ingest", 50, 100, 2.5, 20, 45) == "ingest 50/100 files  2.5 files/s  ETA 0:20"
    # unknown total and rate
    assert render("ingest", 3, 0, None, None, 80) == "ingest 3 files  -- files/s  ETA …"
    over = render("x", 200, 100, 1.0, 0, 60)  # more done than total: a full bar, no overflow
    assert len(over) == 60 and "." not in over[: over.index("]")] and "[" + "#" * 10 in over


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_draws_only_on_a_terminal_and_clears_itself():
    t = [0.0]
    s = io.StringIO()
    b = Bar("ingest", 10, s, now=lambda: t[0])
    for n in range(1, 11):
        t[0] += 1
        b.update(n)
    b.close()
    assert s.getvalue() == ""  # not a terminal: no control characters at all

    tty = FakeTTY()
    b = Bar("ingest", 10, tty, now=lambda: t[0], enabled=True)
    t[0] += 1
    b.update(5)
    assert "\r\x1b[K" in tty.getvalue() and "5/10 files" in tty.getvalue() and "1.0 files/s" not in tty.getvalue()
    log = b.log_stream()
    print("a log line", file=log)  # printed above the bar, which comes back under it
    assert tty.getvalue().endswith("a log line\n\r\x1b[K" + tty.getvalue().rsplit("\r\x1b[K", 1)[1])
    b.close()
    assert tty.getvalue().endswith("\r\x1b[K")
    b.update(10)  # closed: nothing more is drawn
    assert tty.getvalue().endswith("\r\x1b[K")


def test_watch_lines_for_a_terminal():
    s = {"ingest": {"total": 300, "done": 120, "running": 1, "files_per_s": 4.0, "chunks_per_s": 30.0, "eta_s": 45.0,
                    "done_since_start": 120, "failed_since_start": 0},
         "vectors": {"pending_chunks": 0, "files_with_vectors": 120, "vectors_since_start": 400,
                     "files_searchable": 120, "chunks_per_s": 0.0, "eta_s": None},
         "queue": {"queued": 180, "running": 1, "debouncing": 0, "failed": 2}}
    out = lines(s, 70)
    assert out[0].startswith("ingest [") and "120/300 files  4.0 files/s  ETA 0:45" in out[0]
    assert all(len(x) <= 70 for x in out)
    assert out[2] == "queue: 180 queued, 1 running, 0 settling, 2 failed"
    s["ingest"].update(total=0, running=0)
    assert lines(s, 70)[0].startswith("ingest: idle")


def test_oneshot_ingest_draws_the_bar_on_a_terminal_only(tmp_path):
    """The real ``ragweedd ingest`` with stderr on a pseudo-terminal, then on a pipe."""
    pty = pytest.importorskip("pty")
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"f{i}.txt").write_text(f"note {i} about tea and cats\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n[collections.n]\npaths = ["{docs}"]\n')
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64", "COLUMNS": "100"}
    argv = [sys.executable, "-m", "ragweedd", "--config", str(cfg), "ingest", "-c", "n"]
    master, slave = pty.openpty()
    p = subprocess.Popen(argv + ["--force"], stdout=subprocess.PIPE, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0
    text = seen.decode()
    assert "\r\x1b[Kingest [" in text and "12/12 files" in text and "ETA" in text, text[-2000:]
    assert "ingested into 'n': 12 " in out.decode()
    p2 = subprocess.run(argv + ["--force"], capture_output=True, env=env, cwd=ROOT, timeout=120)
    assert p2.returncode == 0 and b"\x1b[K" not in p2.stderr and b"\r" not in p2.stderr


def _ingest_on_a_terminal(tmp_path, *extra: str) -> tuple[int, str]:
    pty = pytest.importorskip("pty")
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for i in range(30):
        (docs / f"f{i}.txt").write_text(f"note {i} about tea and cats\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n[collections.n]\npaths = ["{docs}"]\n')
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64", "COLUMNS": "100"}
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(cfg), "ingest", "-c", "n", "--force",
                          *extra], stdout=subprocess.PIPE, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    p.communicate(timeout=120)
    return p.returncode, seen.decode()


def test_the_bar_is_not_buried_under_a_log_line_per_file(tmp_path):
    code, text = _ingest_on_a_terminal(tmp_path)
    assert code == 1 and "31/31 files" in text  # broken.pdf failed
    assert "ingest_file" not in text, text[-3000:]  # info: quiet while the bar is shown
    assert "failed: " in text and "broken.pdf" in text  # a problem still shows, above the bar
    code, text = _ingest_on_a_terminal(tmp_path, "--verbose")
    assert text.count("ingest_file") == 31 and "31/31 files" in text


def test_through_a_pipe_the_log_has_its_line_per_file_with_verbose(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(5):
        (docs / f"f{i}.txt").write_text(f"note {i} about tea\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\ncache_dir = "{tmp_path / "cache"}"\n')
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    p = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "--json", "ingest", str(docs),
                        "-c", "n", "--verbose"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stderr.splitlines() if line.startswith("{")]
    assert sum(e.get("event") == "ingest_file" for e in events) == 5, p.stderr
    # without --verbose a one-shot command is quiet (warnings and errors only)
    p = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "--json", "ingest", str(docs),
                        "-c", "n2"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def _status(**ing):
    s = {"ingest": {"total": 62, "done": 0, "running": 1, "files_per_s": 0.1, "chunks_per_s": 0.5, "eta_s": 908.0,
                    "done_since_start": 40, "failed_since_start": 0},
         "vectors": {"pending_chunks": 1890, "files_with_vectors": 12, "vectors_since_start": 4000,
                     "files_searchable": 74, "chunks_per_s": 35.0, "eta_s": 54.0},
         "queue": {"queued": 62, "running": 1, "debouncing": 0, "failed": 0}}
    s["ingest"].update(ing)
    return s


def test_watch_at_80_columns_keeps_the_numbers_and_the_eta():
    out = lines(_status(done=30, eta_s=45.0), 79)
    assert all(len(x) <= 79 for x in out)
    assert out[1].startswith("vectors: 12/74 files  1890 chunks left  35.0 chunks/s  ETA 0:54"), out[1]
    big = _status()
    big["vectors"].update(pending_chunks=1890000, files_with_vectors=12000, files_searchable=74000,
                          chunks_per_s=1234.5, eta_s=3900.0)
    assert lines(big, 79)[1].endswith("1234.5 chunks/s  ETA 1:05:00")  # not cut, the note left out
    wide = lines(_status(), 140)[1]
    assert wide.endswith("ETA 0:54 (keyword search finds them already)")
    from ragweedd.cli.ctl_text import vectors_line  # plain `status`: numbers first, the note last

    assert vectors_line(_status()["vectors"]).startswith(
        "vectors: 12/74 files, 1890 chunks waiting, 35.0 chunks/s, about 54 s left")


def test_no_eta_before_the_rate_rests_on_enough_data():
    from ragweedd.cli.ctl_text import ingest_line
    from ragweedd.cli.watch import Settling

    # the daemon's rate of a fresh batch is the last batch's: no ETA before a file of it is done
    assert "ETA …" in lines(_status(), 79)[0] and "15:08" not in lines(_status(), 79)[0]
    assert ingest_line(_status()["ingest"]).endswith("estimating time left")
    t = [100.0]
    settling = Settling(now=lambda: t[0])
    assert "ETA …" in lines(_status(done=1, eta_s=300.0), 79, settling)[0]  # first sight
    assert "ETA …" in lines(_status(done=1, eta_s=300.0), 79, settling)[1]
    t[0] = 102.0
    assert "ETA …" in lines(_status(done=5, eta_s=300.0), 79, settling)[0]  # 2 s: not yet
    t[0] = 103.5
    s = _status(done=9, eta_s=300.0)
    s["vectors"]["vectors_since_start"] = 4100
    shown = lines(s, 79, settling)
    assert "ETA 5:00" in shown[0] and "ETA 0:54" in shown[1]
    t[0] = 110.0  # a new batch: its count starts again, and so does the wait
    assert "ETA …" in lines(_status(done=1, eta_s=10.0), 79, settling)[0]


def test_the_ingest_bar_shows_no_eta_before_3_s_and_a_finished_file():
    tty = FakeTTY()
    t = [0.0]
    b = Bar("ingest", 62, tty, now=lambda: t[0])
    t[0] = 0.5
    b.update(1, force=True)  # one quick file in half a second: 121 s left would be a guess
    assert tty.getvalue().endswith("ETA …")
    t[0] = 2.9
    b.update(2, force=True)
    assert tty.getvalue().endswith("ETA …")
    t[0] = 3.0
    b.update(6, force=True)
    assert tty.getvalue().endswith("ETA 0:28")  # 6 files in 3 s: 56 left at 2/s
    b2 = Bar("ingest", 5, FakeTTY(), now=lambda: 10.0)
    b2.update(5, force=True)  # finished at once: nothing left to estimate
    assert b2.stream.getvalue().endswith("ETA 0:00")
