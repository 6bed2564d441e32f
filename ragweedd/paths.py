"""Per-OS directories (XDG on Linux, ~/Library on macOS) and the files the daemon and ragweedctl share."""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

TYPE_CHECKING = False
if TYPE_CHECKING:  # not typing.TYPE_CHECKING: ragweedctl loads this module and never typing
    from ragweedd.config import Config

APP = "ragweedd"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# The rule for collection names, the same the API's schema checks: a name becomes a directory
# under data_dir/collections, so "..", "/" and absolute paths must never get that far.
COLLECTION_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
# \A...\Z, not ^...$: "$" also matches before a final newline, so "x\n" would pass
_COLLECTION_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def valid_collection_name(name: object) -> bool:
    return isinstance(name, str) and _COLLECTION_NAME_RE.match(name) is not None


def check_collection_name(name: object) -> str:
    """``name`` if it is a usable collection name, else RequestError (exit 2, HTTP 400)."""
    if not valid_collection_name(name):
        from ragweedd.errors import RequestError

        shown = name[:80] if isinstance(name, str) else name
        raise RequestError(f"name {shown!r} is not allowed (must match {COLLECTION_NAME_PATTERN})",
                           hint="use letters, digits, '_', '-', '.' (at most 64 characters)")
    return name  # type: ignore[return-value]


PRIVATE_UMASK = 0o077  # what the daemon runs with: files 0600, directories 0700, whatever the user's


def _tighten(p: Path, mode: int) -> list[str]:
    try:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode) or not stat.S_IMODE(st.st_mode) & ~mode:
            return []
        os.chmod(p, stat.S_IMODE(st.st_mode) & mode, follow_symlinks=False)
    except (FileNotFoundError, NotImplementedError):
        return []  # gone meanwhile, or a platform that cannot chmod without following
    return [str(p)]


def _xdg(var: str, fallback: str) -> Path:
    val = os.environ.get(var)
    return Path(val) if val else Path.home() / fallback


def default_config_file() -> Path:
    if os.environ.get("RAGWEED_CONFIG"):
        return Path(os.environ["RAGWEED_CONFIG"]).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP / "config.toml"
    return _xdg("XDG_CONFIG_HOME", ".config") / APP / "config.toml"


@dataclass(frozen=True)
class Paths:
    data: Path
    state: Path
    cache: Path

    @classmethod
    def resolve(cls, data_dir: str = "", state_dir: str = "", cache_dir: str = "") -> "Paths":
        if sys.platform == "darwin":
            lib = Path.home() / "Library"
            d = lib / "Application Support" / APP
            s = d / "state"
            c = lib / "Caches" / APP
        else:
            d = _xdg("XDG_DATA_HOME", ".local/share") / APP
            s = _xdg("XDG_STATE_HOME", ".local/state") / APP
            c = _xdg("XDG_CACHE_HOME", ".cache") / APP
        return cls(
            data=Path(data_dir).expanduser() if data_dir else d,
            state=Path(state_dir).expanduser() if state_dir else s,
            cache=Path(cache_dir).expanduser() if cache_dir else c,
        )

    @classmethod
    def from_config(cls, cfg: Config) -> "Paths":
        return cls.resolve(cfg.data_dir, cfg.state_dir, cfg.cache_dir)

    def ensure(self) -> "Paths":
        # 0700: rag.sqlite3 holds the full text of every document and history.sqlite3 every
        # question; nobody else on the machine may list or read them.
        for p in (self.data, self.state, self.cache, self.collections):
            p.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        return self

    def secure(self) -> list[str]:
        """Tighten what an older version (or a loose umask) left: the data, state and cache dirs
        and every directory below them to 0700, every file to 0600. Symlinks are neither followed
        nor changed. Returns the paths whose mode was changed (for the start-up log)."""
        changed: list[str] = []
        for top in (self.data, self.state, self.cache):
            if not top.is_dir() or top.is_symlink():
                continue
            changed += _tighten(top, PRIVATE_DIR)
            for dirpath, dirnames, filenames in os.walk(top):  # os.walk does not follow links
                for d in dirnames:
                    changed += _tighten(Path(dirpath) / d, PRIVATE_DIR)
                for f in filenames:
                    changed += _tighten(Path(dirpath) / f, PRIVATE_FILE)
        return changed

    @property
    def ingest_db(self) -> Path:
        return self.data / "ingest_db.sqlite3"

    @property
    def collections(self) -> Path:
        return self.data / "collections"

    def collection_dir(self, name: str) -> Path:
        # every path of a collection is built here: no caller can escape data_dir/collections
        return self.collections / check_collection_name(name)

    def rag_db(self, name: str) -> Path:
        return self.collection_dir(name) / "rag.sqlite3"

    @property
    def token_file(self) -> Path:
        return self.state / "token"

    @property
    def port_file(self) -> Path:
        return self.state / "port"

    @property
    def lock_file(self) -> Path:
        return self.state / "ragweedd.lock"

    @property
    def history_db(self) -> Path:
        return self.state / "history.sqlite3"

    @property
    def numba_cache(self) -> Path:
        return self.cache / "numba"

    @property
    def scratch(self) -> Path:
        return self.cache / "scratch"

    @property
    def managed_uploads(self) -> Path:
        return self.data / "uploads"


def within(path: str, root: str, *, strictly: bool = False) -> bool:
    """Whether ``path`` is ``root`` (unless ``strictly``) or below it, by name: no link is followed,
    and "/data/notes2" is not below "/data/notes"."""
    return (path == root and not strictly) or path.startswith(root.rstrip(os.sep) + os.sep)


def deepest_root(path: str, roots: Iterable[str | os.PathLike[str]]) -> str | None:
    """The root among ``roots`` that holds ``path`` most closely (roots may nest), or None."""
    best: str | None = None
    for r in map(str, roots):
        if within(path, r) and (best is None or len(r) > len(best)):
            best = r
    return best
