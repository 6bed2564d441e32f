"""docs/team.md names only configuration keys that exist, its example configs load, its ragweedd and
ragweedctl commands use only commands and flags those programs have, and its links to other pages
land on headings that exist. The PostgreSQL commands it shows are run for real in
tests/integration/test_team_procedures.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ragweedd.config import KEYS, load_config

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGE = DOCS / "team.md"

# Names the page puts in backticks that are not configuration keys, and what they are: a new one
# must be added here on purpose, so a misspelt or invented key cannot pass as "something else".
NOT_KEYS = {
    "ragweed", "ragweed_restored", "ragweed_old",  # the example database and user
    "ragweedd_migrations", "jobs",  # tables
    "postgresql.conf", "pg_hba.conf",  # server files
    "sslrootcert", "application_name", "connect_timeout",  # libpq URI parameters
    "pg_stat_activity",  # a PostgreSQL view
    "degraded",  # a field of the daemon's status
    "ssl", "max_connections", "superuser_reserved_connections", "statement_timeout",  # server settings
    "pool_mode",  # a PgBouncer setting
    "psql", "pg_dump", "ragweedctl",  # programs
    "notes",  # the example collection
}
COLLECTION_KEYS = {"paths", "ignore", "topic"}  # of [collections.NAME], which KEYS does not list


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def _prose(text: str) -> str:
    return re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S)


def named_keys(text: str) -> tuple[set[str], set[str]]:
    """(keys named in the prose as `key` or `[section] key`, other backticked identifiers)."""
    prose = _prose(text)
    keys, other = set(), set()
    for section, key in re.findall(r"`\[([a-z_]+)\] ([a-z0-9_]+)`", prose):
        keys.add(f"{section}.{key}")
    names = re.findall(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)?)`", prose)
    names += re.findall(r"`([a-z][a-z0-9_.]*) = [^`]+`", prose)  # `key = value`
    for name in names:
        (other if name in NOT_KEYS else keys).add(name)
    return keys, other


def test_every_key_the_page_names_exists():
    keys, other = named_keys(PAGE.read_text())
    declared = {k.dotted for k in KEYS} | COLLECTION_KEYS
    assert {"store", "source_name", "listen", "allow_remote_bind", "embed.model"} <= keys, keys  # found at all
    assert keys - declared == set(), "docs/team.md names configuration keys that do not exist"


def test_a_key_that_does_not_exist_is_caught():
    keys, _ = named_keys("set `listen_remote` and `[embed] modle`, `remote_bind = true`, see `jobs`\n"
                         "```toml\nx = 1\n```\n")
    assert keys == {"listen_remote", "embed.modle", "remote_bind"}


def test_the_example_configs_load():
    blocks = _blocks(PAGE.read_text(), "toml")
    assert len(blocks) >= 2
    for text in blocks:
        cfg = load_config(text=text, env={})  # an unknown key or a bad value raises ConfigError
        assert cfg.store.startswith("postgresql://") and cfg.source_name and cfg.collections


def _commands(text: str) -> tuple[list[list[str]], list[list[str]]]:
    """(whole command lines of the sh blocks, command mentions in the prose) for both programs."""
    lines = [shlex.split(ln) for b in _blocks(text, "sh") for ln in b.splitlines()
             if ln.startswith(("ragweedd ", "ragweedctl "))]
    mentions = [m.split() for m in re.findall(r"`((?:ragweedd|ragweedctl) [^`]+)`", _prose(text))]
    return lines, mentions


def _parsers():
    from ragweedd.cli.command import build_parser as daemon_parser
    from ragweedd.cli.ctl import build_parser as ctl_parser

    return {"ragweedd": daemon_parser(), "ragweedctl": ctl_parser()}


def _check_mention(parsers, words: list[str]) -> None:
    import argparse

    top = parsers[words[0]]
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert words[1] in sub.choices, f"{words[0]} has no command {words[1]!r}"
    flags = {s for a in sub.choices[words[1]]._actions for s in a.option_strings}
    for w in words[2:]:
        if w.startswith("-"):
            assert w.split("=")[0] in flags, f"{' '.join(words)}: {w} is not a flag of {words[1]}"


def test_the_commands_shown_parse():
    parsers = _parsers()
    lines, mentions = _commands(PAGE.read_text())
    assert any(w[:2] == ["ragweedd", "migrate"] for w in lines), "the migrate command is gone from the page"
    assert len(mentions) >= 5
    for words in lines:
        parsers[words[0]].parse_args(words[1:])
        _check_mention(parsers, words)
    for words in mentions:
        _check_mention(parsers, words)


@pytest.mark.parametrize("words", [["ragweedd", "migrate", "--into", "x"], ["ragweedd", "clone"],
                                   ["ragweedctl", "status", "--follow"]])
def test_a_command_or_flag_that_does_not_exist_is_caught(words):
    with pytest.raises(AssertionError):
        _check_mention(_parsers(), words)


def _slug(heading: str) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def test_links_to_other_pages_land_on_headings_that_exist():
    links = re.findall(r"\]\(([a-z_]+\.md)(?:#([a-z0-9\-_]+))?\)", PAGE.read_text())
    assert links
    for page, anchor in links:
        target = DOCS / page
        assert target.exists(), page
        if anchor:
            slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", target.read_text(), re.M)}
            assert anchor in slugs, f"docs/team.md links to {page}#{anchor}, which has no such heading"
    assert "(team.md)" in (DOCS / "postgres.md").read_text() and "(docs/team.md)" in (ROOT / "README.md").read_text()
