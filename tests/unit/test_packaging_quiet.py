"""``make run`` shows no build warnings (issue 24, point 6): setuptools deprecates the TOML-table
form of ``project.license`` (a banner printed twice by every build since setuptools 77), so the
license is an SPDX string and the build requires a setuptools that reads it; the Makefile's editable
installs hide only setuptools' informational "Editable installation" notice. Checked by building in
a scratch venv when this was changed (pip 26, setuptools 84: nothing printed with -q); this test
keeps the configuration that made it so."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert doc["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", []))  # refused beside it
    setuptools = [r for r in doc["build-system"]["requires"] if re.match(r"setuptools\b", r)]
    m = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools[0].replace(" ", ""))
    assert m and int(m.group(1)) >= 77, setuptools


def test_make_installs_quietly():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    installs = [ln.strip() for ln in make.splitlines() if "pip install" in ln and " -e " in ln]
    assert installs and all(" -q " in ln for ln in installs)
    assert all(ln.startswith('PYTHONWARNINGS="ignore:Editable installation" ') for ln in installs), installs
