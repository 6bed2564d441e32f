"""On-disk format of one vector index, and crash-safe flushing (DESIGN §3, §7).

Files of the index with suffix S ("" for the primary, "_384", "_1024" for extra passes):

  header{S}.bin          fixed 160-byte commit record (struct HEADER below): magic, version, kind,
                         dim, M, M0, counts, entry point, applied_seq, generation, and the size + CRC-32 of
                         each data file. It is written last; it alone decides which files are the index.
  data_level0{S}.bin     n packed records [M0 x int32 ids][int32 count][dim x float32][int64 label]
                         (no padding: 140 + 4*dim bytes, 1,676 at 384-d, 3,212 at 768-d)
  link_lists{S}.bin      levels int8[n], deleted uint8[n], first upper row int32[n],
                         then rows x [M x int32 ids][int32 count] of the upper layers
  index_meta{S}.json     dim, counts, applied_seq, entry-point labels, cluster stats

Atomic switch of the set: a flush writes generation g+1 of each data file as ``NAME.gN`` (through
``.tmp``, fsync, rename), fsyncs the directory, and only then renames a new header naming generation
g+1 over ``header{S}.bin``. A reader follows the header to ``NAME.gN`` and checks size and CRC, so a
crash at any point leaves either the old set (old header -> old generation files, which are deleted
only after the new header is durable) or the new one. After the commit the plain names
(``data_level0.bin`` ...) are refreshed as hard links to the committed generation, for tools; a reader
falls back to them only if the generation file is missing, and then the CRC decides.

Every count in the header is checked against the real file sizes before anything is allocated.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np

from ragweedd.errors import CorruptIndexError, InternalError

MAGIC = b"RGWHNSW\x00"
VERSION = 1
KINDS = {"hnsw": 0, "flat": 1}
MAX_LEVEL = 16
#                     magic ver kind dim M  M0 efc  n  live tomb maxl entry seq gen rows seed
HEADER = struct.Struct("<8s I   I    I   I  I  I    Q  Q    Q    i    q     q   Q   Q    Q"
                       "QI QI QI 20x")  # (size, crc32) of level0, link lists, meta; pad to 160 - 4
_HCRC = struct.Struct("<I")
HEADER_SIZE = HEADER.size + _HCRC.size
_FILES = ("data_level0", "link_lists", "index_meta")
_EXT = {"data_level0": ".bin", "link_lists": ".bin", "index_meta": ".json"}
_SUFFIX_RE = re.compile(r"^(_[A-Za-z0-9]{1,16})?$")

def level0_dtype(dim: int, M0: int = 32) -> np.dtype:
    """The packed level-0 record; numpy structured dtypes without align=True have no padding."""
    return np.dtype([("links", "<i4", (M0,)), ("count", "<i4"), ("vector", "<f4", (dim,)), ("label", "<i8")])


@dataclass
class IndexData:
    kind: str
    dim: int
    M: int
    M0: int
    ef_construction: int
    seed: int
    n: int
    live: int
    tombstones: int
    entry: int
    max_level: int
    vecs: np.ndarray
    labels: np.ndarray
    links0: np.ndarray
    cnt0: np.ndarray
    levels: np.ndarray
    deleted: np.ndarray
    uoff: np.ndarray
    ulinks: np.ndarray
    ucnt: np.ndarray
    entry_labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    meta: dict = field(default_factory=dict)


def _name(base: str, suffix: str) -> str:
    return f"{base}{suffix}{_EXT[base]}"


def header_path(directory: str | Path, suffix: str = "") -> Path:
    return Path(directory) / f"header{suffix}.bin"


def _check_suffix(suffix: str) -> None:
    if not _SUFFIX_RE.match(suffix):
        raise InternalError(f"index suffix must be '' or '_' + up to 16 letters/digits, got {suffix!r}")


# --- durable writes ---------------------------------------------------------------------------
def _fsync_file(f: BinaryIO) -> None:
    f.flush()
    fd = f.fileno()
    if sys.platform == "darwin":  # fsync does not reach stable storage on macOS without F_FULLFSYNC
        import fcntl

        try:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
            return
        except (OSError, AttributeError):
            pass
    os.fsync(fd)


def fsync_dir(directory: str | Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(str(directory), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_parts(path: Path, parts: Iterable[bytes | np.ndarray]) -> tuple[int, int]:
    """Write buffers to ``path`` (a .tmp name), fsync; returns (size, crc32)."""
    crc, size = 0, 0
    # 0600: the level-0 file holds every chunk's vector; private like the databases.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "wb") as f:
        for p in parts:
            if isinstance(p, np.ndarray):
                if p.size == 0:
                    continue
                p = np.ascontiguousarray(p).reshape(-1).view(np.uint8)
            mv = (p.data if isinstance(p, np.ndarray) else memoryview(p)).cast("B")
            f.write(mv)
            crc = zlib.crc32(mv, crc)
            size += mv.nbytes
        _fsync_file(f)
    return size, crc


def _level0_records(d: IndexData) -> np.ndarray:
    rec = np.empty(d.n, dtype=level0_dtype(d.dim, d.M0))
    rec["links"] = d.links0
    rec["count"] = d.cnt0
    rec["vector"] = d.vecs
    rec["label"] = d.labels
    return rec


def _meta_doc(d: IndexData, applied_seq: int, suffix: str) -> dict:
    doc = dict(d.meta)
    doc.update({
        "format": "ragweedd-hnsw", "version": VERSION, "kind": d.kind, "suffix": suffix, "dim": d.dim,
        "count": d.live, "nodes": d.n, "tombstones": d.tombstones, "M": d.M, "M0": d.M0,
        "ef_construction": d.ef_construction, "applied_seq": applied_seq,
        "entry_points": [int(x) for x in d.entry_labels.tolist()],
    })
    return doc


def read_header(directory: str | Path, suffix: str = "") -> dict:
    _check_suffix(suffix)
    hp = header_path(directory, suffix)
    try:
        size = hp.stat().st_size
        if size != HEADER_SIZE:
            raise CorruptIndexError(f"{hp}: header is {size} bytes, expected {HEADER_SIZE}", hint=_REBUILD)
        raw = hp.read_bytes()
    except (FileNotFoundError, CorruptIndexError):
        raise
    except OSError as e:
        raise CorruptIndexError(f"{hp}: cannot read the index header ({e})", hint=_REBUILD) from None
    if len(raw) != HEADER_SIZE:
        raise CorruptIndexError(f"{hp}: header changed while reading", hint=_REBUILD)
    body, (crc,) = raw[: HEADER.size], _HCRC.unpack(raw[HEADER.size:])
    if body[:8] != MAGIC:
        raise CorruptIndexError(f"{hp}: not a ragweedd index header (bad magic)", hint=_REBUILD)
    if zlib.crc32(body) != crc:
        raise CorruptIndexError(f"{hp}: header checksum mismatch", hint=_REBUILD)
    (_, ver, kind, dim, M, M0, efc, n, live, tomb, maxl, entry, seq, gen, rows, seed,
     l0s, l0c, lls, llc, ms, mc) = HEADER.unpack(body)
    if ver != VERSION:
        raise CorruptIndexError(f"{hp}: index format version {ver}, this ragweedd reads {VERSION}", hint=_REBUILD)
    kinds = {v: k for k, v in KINDS.items()}
    h = dict(kind=kinds.get(kind), dim=dim, M=M, M0=M0, ef_construction=efc, n=n, live=live, tombstones=tomb,
             max_level=maxl, entry=entry, applied_seq=seq, generation=gen, rows=rows, seed=seed,
             sizes={"data_level0": l0s, "link_lists": lls, "index_meta": ms},
             crcs={"data_level0": l0c, "link_lists": llc, "index_meta": mc})
    problems = []
    if h["kind"] is None:
        problems.append(f"unknown kind {kind}")
    if not (1 <= dim <= 65536 and 2 <= M <= 512 and M <= M0 <= 4096):
        problems.append(f"dim={dim} M={M} M0={M0} out of range")
    if n >= 2**31 or live + tomb != n:
        problems.append(f"counts n={n} live={live} tombstones={tomb} are inconsistent")
    if not -1 <= maxl <= MAX_LEVEL or not -1 <= entry < max(n, 1) or (n > 0) != (entry >= 0):
        problems.append(f"entry point {entry} / top level {maxl} invalid for {n} nodes")
    if rows > n * MAX_LEVEL:
        problems.append(f"{rows} upper-layer rows for {n} nodes")
    if not problems and l0s != n * level0_dtype(dim, M0).itemsize:
        problems.append(f"data_level0 size {l0s} != {n} records x {level0_dtype(dim, M0).itemsize} bytes")
    if not problems and lls != n * 6 + rows * (M + 1) * 4:
        problems.append(f"link_lists size {lls} does not match {n} nodes and {rows} rows")
    if problems:
        raise CorruptIndexError(f"{hp}: " + "; ".join(problems), hint=_REBUILD)
    return h


_REBUILD = "the index is rebuilt from the database; run 'ragweedctl collections rebuild' if it persists"


def _data_path(directory: Path, base: str, suffix: str, gen: int) -> Path:
    return directory / f"{_name(base, suffix)}.g{gen}"


_DIR_LOCKS: dict[str, threading.RLock] = {}
_DIR_LOCKS_GUARD = threading.Lock()


def directory_lock(directory: str | Path) -> threading.RLock:
    """The lock every write of index files in ``directory`` holds, and their removal: files of
    a space being dropped (a finished change of model) are removed only after a flush still under
    way there (an abandoned manager's) has finished, never in the middle of it."""
    key = os.path.realpath(directory)
    with _DIR_LOCKS_GUARD:
        return _DIR_LOCKS.setdefault(key, threading.RLock())


def remove_index_files(directory: str | Path, suffix: str) -> None:
    """Remove every file of the index of ``suffix`` (an extra space's: never the primary's, whose
    files have no suffix) in ``directory``."""
    _check_suffix(suffix)
    if not suffix:
        raise InternalError("the primary index's files are not removed by suffix")
    with directory_lock(directory):
        for p in Path(directory).glob(f"*{suffix}.*"):
            p.unlink(missing_ok=True)


def write_index(directory: str | Path, d: IndexData, applied_seq: int, suffix: str = "") -> int:
    """Flush ``d`` crash-safely; returns the new generation number."""
    with directory_lock(directory):
        return _write_index(directory, d, applied_seq, suffix)


def _write_index(directory: str | Path, d: IndexData, applied_seq: int, suffix: str = "") -> int:
    _check_suffix(suffix)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        gen = read_header(directory, suffix)["generation"] + 1
    except (FileNotFoundError, CorruptIndexError):
        gen = 1 + max([_gen_of(p.name) for p in directory.glob(f"*{suffix}.*.g*")] + [0])
    rec = _level0_records(d)
    rows = np.zeros((d.ulinks.shape[0], d.M + 1), np.int32)
    rows[:, : d.M] = d.ulinks
    rows[:, d.M] = d.ucnt
    meta = json.dumps(_meta_doc(d, applied_seq, suffix), indent=1, sort_keys=True).encode()
    parts: dict[str, list[bytes | np.ndarray]] = {
        "data_level0": [rec.view(np.uint8)],
        "link_lists": [d.levels.astype(np.int8), d.deleted.astype(np.uint8), d.uoff.astype("<i4"), rows],
        "index_meta": [meta],
    }
    sizes, crcs = {}, {}
    for base in _FILES:
        final = _data_path(directory, base, suffix, gen)
        tmp = final.with_name(final.name + ".tmp")
        try:
            sizes[base], crcs[base] = _write_parts(tmp, parts[base])
        except OSError:
            # A flush that fails half-way (ENOSPC) must not leave its partial file behind: the
            # next try writes another generation, and the leftovers would keep the disk full
            # after the user freed space.
            for p in directory.glob(f"*{suffix}.*.g{gen}*"):
                p.unlink(missing_ok=True)
            raise
        os.replace(tmp, final)
    fsync_dir(directory)
    body = HEADER.pack(MAGIC, VERSION, KINDS[d.kind], d.dim, d.M, d.M0, d.ef_construction, d.n, d.live,
                       d.tombstones, d.max_level, d.entry, applied_seq, gen, d.ulinks.shape[0], d.seed,
                       sizes["data_level0"], crcs["data_level0"], sizes["link_lists"], crcs["link_lists"],
                       sizes["index_meta"], crcs["index_meta"])
    hp = header_path(directory, suffix)
    htmp = hp.with_name(hp.name + ".tmp")
    _write_parts(htmp, [body + _HCRC.pack(zlib.crc32(body))])
    os.replace(htmp, hp)
    fsync_dir(directory)
    _publish_plain_names(directory, suffix, gen)
    _remove_stale(directory, suffix, gen)
    fsync_dir(directory)
    return gen


def _gen_of(name: str) -> int:
    m = re.search(r"\.g(\d+)(\.tmp)?$", name)
    return int(m.group(1)) if m else 0


def _publish_plain_names(directory: Path, suffix: str, gen: int) -> None:
    for base in _FILES:
        src = _data_path(directory, base, suffix, gen)
        plain = directory / _name(base, suffix)
        tmp = plain.with_name(plain.name + ".tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(src, tmp)
        except OSError:  # filesystems without hard links get a copy
            import shutil

            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o600)
            with open(tmp, "rb+") as f:
                _fsync_file(f)
        os.replace(tmp, plain)


def _remove_stale(directory: Path, suffix: str, gen: int) -> None:
    for base in _FILES:
        for p in directory.glob(_name(base, suffix) + ".g*"):
            if p.name != _data_path(directory, base, suffix, gen).name:
                p.unlink(missing_ok=True)
    header_path(directory, suffix).with_name(f"header{suffix}.bin.tmp").unlink(missing_ok=True)


def _read_checked(directory: Path, base: str, suffix: str, h: dict) -> bytes:
    want_size, want_crc = h["sizes"][base], h["crcs"][base]
    candidates = [_data_path(directory, base, suffix, h["generation"]), directory / _name(base, suffix)]
    last = None
    for p in candidates:
        try:
            size = p.stat().st_size
        except FileNotFoundError:
            continue
        if size != want_size:
            last = f"{p}: {size} bytes, the header expects {want_size} (truncated or from another flush)"
            continue
        with open(p, "rb") as f:
            raw = f.read(want_size + 1)
        if len(raw) != want_size:
            last = f"{p}: changed while reading"
            continue
        if zlib.crc32(raw) != want_crc:
            last = f"{p}: checksum mismatch (damaged, or from another flush)"
            continue
        return raw
    raise CorruptIndexError(last or f"{directory}: {_name(base, suffix)} is missing", hint=_REBUILD)


def read_index(directory: str | Path, suffix: str = "") -> tuple[IndexData, int]:
    """Load and validate an index; raises CorruptIndexError on any damage, FileNotFoundError when
    there is no header at all (a new collection)."""
    directory = Path(directory)
    h = read_header(directory, suffix)
    n, dim, M, M0, rows = h["n"], h["dim"], h["M"], h["M0"], h["rows"]
    raw0 = _read_checked(directory, "data_level0", suffix, h)
    rawl = _read_checked(directory, "link_lists", suffix, h)
    rawm = _read_checked(directory, "index_meta", suffix, h)
    rec = np.frombuffer(raw0, dtype=level0_dtype(dim, M0), count=n)
    links0 = np.ascontiguousarray(rec["links"])
    cnt0 = np.ascontiguousarray(rec["count"])
    vecs = np.ascontiguousarray(rec["vector"])
    labels = np.ascontiguousarray(rec["label"])
    del rec, raw0
    levels = np.frombuffer(rawl, np.int8, n, 0).copy()
    deleted = np.frombuffer(rawl, np.uint8, n, n).copy()
    uoff = np.frombuffer(rawl, "<i4", n, 2 * n).astype(np.int32)
    urows = np.frombuffer(rawl, "<i4", rows * (M + 1), 6 * n).reshape(rows, M + 1)
    ulinks = np.ascontiguousarray(urows[:, :M])
    ucnt = np.ascontiguousarray(urows[:, M])
    where = f"{directory}/{_name('data_level0', suffix)}"
    _validate_graph(where, h, links0, cnt0, vecs, labels, levels, deleted, uoff, ulinks, ucnt)
    try:
        meta = json.loads(rawm.decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("dim") != dim or meta.get("applied_seq") != h["applied_seq"]:
            raise ValueError("dim/applied_seq differ from the header")
        entry_labels = np.asarray(meta.get("entry_points", []), dtype=np.int64)
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise CorruptIndexError(f"{directory}/{_name('index_meta', suffix)}: invalid ({e})", hint=_REBUILD) from None
    keep = {k: v for k, v in meta.items() if k in ("clusters", "cluster_stats", "analysed_at", "embedder")}
    d = IndexData(kind=h["kind"], dim=dim, M=M, M0=M0, ef_construction=h["ef_construction"], seed=h["seed"],
                  n=n, live=h["live"], tombstones=h["tombstones"], entry=h["entry"], max_level=h["max_level"],
                  vecs=vecs, labels=labels, links0=links0, cnt0=cnt0, levels=levels, deleted=deleted, uoff=uoff,
                  ulinks=ulinks, ucnt=ucnt, entry_labels=entry_labels, meta=keep)
    return d, h["applied_seq"]


def _validate_graph(where: str, h: dict[str, Any], links0: np.ndarray, cnt0: np.ndarray, vecs: np.ndarray,
                    labels: np.ndarray, levels: np.ndarray, deleted: np.ndarray, uoff: np.ndarray, ulinks: np.ndarray,
                    ucnt: np.ndarray) -> None:
    """Structural checks so that a file with a valid CRC but wrong content (a bug, a hand edit) can
    never send a kernel out of bounds."""
    n, M, M0, rows = h["n"], h["M"], h["M0"], h["rows"]
    bad = []
    if n:
        if cnt0.min() < 0 or cnt0.max() > M0:
            bad.append("a level-0 neighbour count is out of range")
        mask0 = np.arange(M0)[None, :] < cnt0[:, None]
        if mask0.any() and (links0[mask0].min() < 0 or links0[mask0].max() >= n):
            bad.append("a level-0 neighbour id is out of range")
        if levels.min() < 0 or levels.max() > MAX_LEVEL:
            bad.append("a node level is out of range")
        if int(levels.astype(np.int64).sum()) != rows:
            bad.append("upper-layer row count does not match the node levels")
        up = levels > 0
        if up.any() and (uoff[up].min() < 0 or (uoff[up].astype(np.int64) + levels[up]).max() > rows):
            bad.append("an upper-layer row offset is out of range")
        if deleted.max() > 1 or int((deleted == 0).sum()) != h["live"]:
            bad.append("tombstone flags do not match the live count")
        if h["kind"] == "hnsw" and (levels[h["entry"]] != h["max_level"] or levels.max() != h["max_level"]):
            bad.append("the entry point is not on the top level")
        live_labels = labels[deleted == 0]
        if live_labels.size and (live_labels.min() < 0 or np.unique(live_labels).size != live_labels.size):
            bad.append("live labels are negative or repeated")
        if not np.isfinite(vecs).all():
            bad.append("a vector holds NaN or infinity")
    if rows:
        if ucnt.min() < 0 or ucnt.max() > M:
            bad.append("an upper-layer neighbour count is out of range")
        mask = np.arange(M)[None, :] < ucnt[:, None]
        if mask.any() and (ulinks[mask].min() < 0 or ulinks[mask].max() >= n):
            bad.append("an upper-layer neighbour id is out of range")
    if bad:
        raise CorruptIndexError(f"{where}: " + "; ".join(bad), hint=_REBUILD)
