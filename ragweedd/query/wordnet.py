"""WordNet 3.0 synonyms straight from the dictionary files (DESIGN §8 step 4).

Debian's ``wordnet-base`` installs the dict files in /usr/share/wordnet (cfg.wordnet_dir). Nothing is
loaded whole: a lemma is found by binary search, seeking in the sorted ``index.POS`` file (bytewise
order; the licence header lines start with spaces, which sort before every lemma); its first synset
offset is the byte offset of that synset's line in ``data.POS``, whose words are the synonyms.

"First synset only": the first synset of the first part of speech (noun, verb, adj, adv) in which
the word, or its base form, appears. Base forms follow WordNet's morphy: the POS exception list
(``noun.exc`` ... , also binary searched), then the detachment rules (``-ies`` -> ``-y``, ...).
Multi-word lemmas (``heart_attack``) come back with spaces, for the caller to use as phrases.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path

from ragweedd.config import Config
from ragweedd.logging import get_logger

log = get_logger("ragweedd.query.wordnet")

POS = ("noun", "verb", "adj", "adv")
_FILES = tuple(f"{kind}.{p}" for p in POS for kind in ("index", "data"))
_RULES = {
    "noun": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
             ("men", "man"), ("ies", "y")],
    "verb": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
    "adj": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "adv": [],
}


def wordnet_status(cfg: Config) -> dict:
    """What the search says about synonyms: on, off by config, or off because files are missing."""
    d = Path(cfg.wordnet_dir)
    if not cfg.synonyms_enabled:
        return {"enabled": False, "reason": "synonyms_enabled = false", "dir": str(d)}
    missing = [f for f in _FILES if not (d / f).is_file()]
    if missing:
        return {"enabled": False, "dir": str(d),
                "reason": f"WordNet dictionary files missing in {d}: {', '.join(missing[:4])}"
                          + (" ..." if len(missing) > 4 else ""),
                "hint": "install Debian's wordnet-base (apt-get install wordnet-base) or set wordnet_dir"}
    return {"enabled": True, "dir": str(d)}


class _SortedFile:
    """Binary search for a line starting with ``key + ' '`` in a bytewise-sorted text file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self._f = open(path, "rb")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._f.close()

    def _line_at(self, pos: int) -> tuple[int, bytes]:
        """(start, line) of the first whole line starting at or after ``pos``."""
        f = self._f
        if pos <= 0:
            f.seek(0)
            return 0, f.readline()
        f.seek(pos - 1)
        f.readline()  # finish the line pos lies in (pos-1 keeps a line starting at pos whole)
        start = f.tell()
        return start, f.readline()

    def find(self, key: str) -> bytes | None:
        if not key or key[0].isspace() or any(c.isspace() for c in key):
            return None  # lemmas have no spaces; the licence header lines start with them
        k = key.encode("utf-8") + b" "
        with self._lock:
            lo, hi = 0, self.size
            # Invariant: the wanted line, if present, starts in [lo, hi).
            while lo < hi:
                mid = (lo + hi) // 2
                start, line = self._line_at(mid)
                if not line or start >= hi:
                    hi = mid
                    continue
                if line.startswith(k):
                    return line
                if line[:len(k)] < k:
                    lo = start + len(line)
                else:
                    hi = mid
            return None

    def at(self, offset: int) -> bytes:
        with self._lock:
            self._f.seek(offset)
            return self._f.readline()


class WordNet:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self._index = {p: _SortedFile(self.dir / f"index.{p}") for p in POS}
        self._data = {p: _SortedFile(self.dir / f"data.{p}") for p in POS}
        self._exc = {p: _SortedFile(self.dir / f"{p}.exc") for p in POS if (self.dir / f"{p}.exc").is_file()}
        self._memo: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        for group in (self._index, self._data, self._exc):
            for f in group.values():
                f.close()

    def _base_forms(self, word: str, pos: str) -> list[str]:
        forms = [word]
        exc = self._exc.get(pos)
        if exc is not None:
            line = exc.find(word)
            if line:
                forms.extend(line.decode("utf-8", "replace").split()[1:])
        for suffix, repl in _RULES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix) + 1:
                forms.append(word[: len(word) - len(suffix)] + repl)
        return list(dict.fromkeys(forms))

    def first_synset(self, word: str) -> tuple[str, str, tuple[str, ...]] | None:
        """(pos, lemma found, words of its first synset) or None."""
        w = word.strip().lower().replace(" ", "_")
        if not w:
            return None
        for pos in POS:
            for form in self._base_forms(w, pos):
                line = self._index[pos].find(form)
                if not line:
                    continue
                offset = _first_offset(line)
                if offset is None:
                    continue
                words = _synset_words(self._data[pos].at(offset), offset)
                return pos, form, tuple(words)
        return None

    def synonyms(self, word: str) -> tuple[str, ...]:
        """Words of the first synset, without the word itself, as space-separated phrases."""
        hit = self._memo.get(word)
        if hit is not None:
            return hit
        found = self.first_synset(word)
        out: tuple[str, ...] = ()
        if found is not None:
            _, lemma, words = found
            skip = {word.lower(), lemma.replace("_", " ")}
            out = tuple(dict.fromkeys(s for s in (x.replace("_", " ").lower() for x in words) if s not in skip))
        with self._lock:
            if len(self._memo) > 50_000:
                self._memo.clear()
            self._memo[word] = out
        return out


def _first_offset(index_line: bytes) -> int | None:
    # lemma pos synset_cnt p_cnt [ptr_symbol]*p_cnt sense_cnt tagsense_cnt offset+
    parts = index_line.split()
    try:
        p_cnt = int(parts[3])
        first = 4 + p_cnt + 2
        return int(parts[first])
    except (IndexError, ValueError):
        return None


def _synset_words(data_line: bytes, offset: int) -> list[str]:
    # offset lex_filenum ss_type w_cnt(hex) word lex_id [word lex_id]* ...
    parts = data_line.decode("utf-8", "replace").split()
    if not parts or not parts[0].isdigit() or int(parts[0]) != offset:
        return []
    try:
        n = int(parts[3], 16)
    except (IndexError, ValueError):
        return []
    words = []
    for i in range(n):
        idx = 4 + 2 * i
        if idx >= len(parts):
            break
        w = parts[idx]
        if "(" in w:  # adjective markers: "galore(ip)"
            w = w[: w.index("(")]
        words.append(w)
    return words


@lru_cache(maxsize=4)
def _open(directory: str) -> WordNet:
    return WordNet(directory)


def open_wordnet(cfg: Config) -> WordNet | None:
    """The WordNet of cfg.wordnet_dir, shared per process; None when synonyms are off or missing."""
    if not wordnet_status(cfg)["enabled"]:
        return None
    return _open(str(Path(cfg.wordnet_dir)))
