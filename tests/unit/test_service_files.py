"""The systemd unit and launchd plist: the files in the repository are what gets installed, the
unit passes `systemd-analyze verify`, the plist has what launchd needs, and `ragweedctl service`
writes/enables/removes them (real files; systemctl is a recording stand-in on PATH because a
container has no user systemd instance)."""

from __future__ import annotations

import io
import json
import os
import plistlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ragweedd.cli import ctl, service  # noqa: E402
from tests.tools import require_tool  # noqa: E402


def test_repository_files_are_the_rendered_templates():
    placeholders = {"ragweedd": "@RAGWEEDD@", "config": "@CONFIG@"}
    assert (ROOT / "systemd" / "ragweedd.service").read_text() == service.systemd_unit(**placeholders)
    assert (ROOT / "launchd" / "com.ragweed.ragweedd.plist").read_bytes() == \
        service.launchd_plist(**placeholders, home="@HOME@")


def _verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    tool = require_tool("systemd-analyze")
    path = tmp_path / "ragweedd.service"
    path.write_text(unit_text)
    return subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"})


def test_rendered_unit_passes_systemd_analyze_verify(tmp_path):
    exe = tmp_path / "bin dir" / "ragweedd"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    unit = service.systemd_unit(str(exe), str(tmp_path / "conf %h $HOME.toml"), str(tmp_path / "state"))
    r = _verify(unit, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "" or "ragweedd.service" not in r.stderr, r.stderr


def test_systemd_analyze_catches_a_broken_unit(tmp_path):
    unit = service.systemd_unit(str(tmp_path / "missing" / "ragweedd"), None)
    r = _verify(unit, tmp_path)
    assert r.returncode != 0 and "ragweedd" in r.stderr


def test_unit_contents():
    unit = service.systemd_unit("/opt/venv/bin/ragweedd", "/home/u/.config/ragweedd/config.toml")
    lines = unit.splitlines()
    assert 'ExecStart="/opt/venv/bin/ragweedd" --config "/home/u/.config/ragweedd/config.toml" run' in lines
    for want in ("Restart=on-failure", "StandardOutput=journal", "Nice=10",
                 "Environment=NUMBA_CACHE_DIR=%h/.cache/ragweedd/numba", "WantedBy=default.target"):
        assert want in lines
    # specifiers and variables in user paths are escaped, not expanded by systemd
    unit = service.systemd_unit('/o/100%/b"in/ragweedd', None, "/s/$HOME")
    assert 'ExecStart="/o/100%%/b\\"in/ragweedd" run' in unit
    assert 'Environment="RAGWEED_STATE_DIR=/s/$$HOME"' in unit


def test_plist_has_what_launchd_needs():
    data = plistlib.loads(service.launchd_plist("/opt/bin/ragweedd", "/c.toml", "/Users/u", "/s"))
    for key in ("Label", "ProgramArguments", "RunAtLoad", "KeepAlive", "StandardOutPath",
                "StandardErrorPath", "EnvironmentVariables"):
        assert key in data, key
    assert data["Label"] == "com.ragweed.ragweedd"
    assert data["ProgramArguments"] == ["/opt/bin/ragweedd", "--config", "/c.toml", "run"]
    assert data["RunAtLoad"] is True and data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["EnvironmentVariables"]["NUMBA_CACHE_DIR"] == "/Users/u/Library/Caches/ragweedd/numba"
    assert data["EnvironmentVariables"]["RAGWEED_STATE_DIR"] == "/s"
    assert data["StandardOutPath"].startswith("/Users/u/Library/Logs/")
    repo = plistlib.loads((ROOT / "launchd" / "com.ragweed.ragweedd.plist").read_bytes())
    assert set(repo) == set(data)


@pytest.fixture
def exe(tmp_path):
    p = tmp_path / "venv" / "bin" / "ragweedd"
    p.parent.mkdir(parents=True)
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(0o755)
    return p


@pytest.fixture
def fake_systemctl(tmp_path, monkeypatch):
    """A stand-in systemctl that records its arguments (no user systemd in a container)."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "systemctl.log"
    script = bindir / "systemctl"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                      "case \"$*\" in *is-active*) echo inactive; exit 3;; *is-enabled*) echo enabled;; esac\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("RAGWEED_CONFIG", str(tmp_path / "no-config.toml"))
    return log


def test_install_dry_run_changes_nothing(tmp_path, exe, fake_systemctl):
    out = io.StringIO()
    assert service.run("install", dry_run=True, ragweedd=str(exe), out=out, platform="linux") == 0
    text = out.getvalue()
    assert "would write" in text and f'ExecStart="{exe}" run' in text
    assert "would run: systemctl --user daemon-reload" in text
    assert "would run: systemctl --user enable --now ragweedd.service" in text
    assert "no config file" in text
    assert not (tmp_path / "xdg").exists() and not fake_systemctl.exists()


def test_launchd_dry_run(tmp_path, exe):
    cfg = tmp_path / "config.toml"
    cfg.write_text("")
    out = io.StringIO()
    service.run("install", dry_run=True, ragweedd=str(exe), config=str(cfg), out=out, as_json=True,
                platform="darwin", home=str(tmp_path / "home"))
    rep = json.loads(out.getvalue())
    assert rep["platform"] == "launchd"
    assert rep["file"] == str(tmp_path / "home/Library/LaunchAgents/com.ragweed.ragweedd.plist")
    assert rep["commands"][1] == f"launchctl bootstrap gui/{os.getuid()} {rep['file']}"
    assert plistlib.loads(rep["content"].encode())["ProgramArguments"] == [str(exe), "--config", str(cfg), "run"]
    assert not (tmp_path / "home").exists()


def test_install_status_uninstall_with_systemctl(tmp_path, exe, fake_systemctl):
    cfg = tmp_path / "my config.toml"
    cfg.write_text("")
    code = ctl.main(["service", "install", "--ragweedd", str(exe), "--config", str(cfg)],
                    out=io.StringIO(), err=io.StringIO())
    assert code == 0
    unit = tmp_path / "xdg" / "systemd" / "user" / "ragweedd.service"
    assert f'ExecStart="{exe}" --config "{cfg}" run' in unit.read_text()
    assert fake_systemctl.read_text().splitlines() == ["--user daemon-reload", "--user enable --now ragweedd.service"]
    out = io.StringIO()
    assert ctl.main(["service", "status", "--json"], out=out, err=io.StringIO()) == 0
    rep = json.loads(out.getvalue())
    assert rep["installed"] is True and rep["active"] == "inactive" and rep["enabled"] == "enabled"
    assert ctl.main(["service", "uninstall"], out=io.StringIO(), err=io.StringIO()) == 0
    assert not unit.exists()
    assert fake_systemctl.read_text().splitlines()[-2:] == ["--user disable --now ragweedd.service",
                                                            "--user daemon-reload"]


def test_install_defaults_to_ragweedd_beside_python(tmp_path, fake_systemctl):
    out = io.StringIO()
    service.run("install", dry_run=True, out=out, platform="linux")
    assert f'ExecStart="{Path(sys.executable).parent / "ragweedd"}"' in out.getvalue()


def test_install_errors(tmp_path, exe, fake_systemctl, monkeypatch):
    err = io.StringIO()
    assert ctl.main(["service", "install", "--ragweedd", str(tmp_path / "nope")], out=io.StringIO(), err=err) == 2
    assert "not found" in err.getvalue()
    err = io.StringIO()
    assert ctl.main(["service", "install", "--ragweedd", str(exe), "--config", str(tmp_path / "none.toml")],
                    out=io.StringIO(), err=err) == 2
    assert "does not exist" in err.getvalue()
    noexec = tmp_path / "noexec"
    noexec.write_text("x")
    noexec.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert ctl.main(["service", "install", "--ragweedd", str(noexec)], out=io.StringIO(), err=io.StringIO()) == 2
    # systemctl failing is reported with its message, exit 1
    (fake_systemctl.parent / "fakebin" / "systemctl").write_text(
        "#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    err = io.StringIO()
    assert ctl.main(["service", "install", "--ragweedd", str(exe)], out=io.StringIO(), err=err) == 1
    assert "Failed to connect to bus" in err.getvalue()
    # no systemctl at all
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    err = io.StringIO()
    assert ctl.main(["service", "install", "--ragweedd", str(exe)], out=io.StringIO(), err=err) == 1
    assert "systemctl is not installed" in err.getvalue() and "ragweedd run" in err.getvalue()


def test_unsupported_platform():
    with pytest.raises(service.ServiceError) as e:
        service.plan("install", platform="win32")
    assert e.value.exit_code == 2
