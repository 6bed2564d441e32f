"""Search filters: collection, path glob, file type (extension) and document (MD5).

Collections choose which rag.sqlite3 files are searched at all. The other three are turned into the
set of chunk ids allowed in each collection, so vector search ranks only allowed chunks (instead of
filtering a top-k that may hold none of them). A document with several paths (copies) passes when
any of its paths passes. Globs use fnmatch against both the absolute path and the path relative to
its root (``*`` also crosses ``/``), case-sensitively.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from ragweedd.contract import shown_path
from ragweedd.errors import RequestError

if TYPE_CHECKING:
    from ragweedd.store.protocols import RagStore

_EXT = re.compile(r"^[A-Za-z0-9_+-]{1,16}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Filters:
    collections: tuple[str, ...] | None = None
    path_glob: str | None = None
    file_types: tuple[str, ...] | None = None
    doc_ids: tuple[str, ...] | None = None

    @classmethod
    def make(cls, *, collections: Iterable[str] | None = None, path_glob: str | None = None,
             file_types: Iterable[str] | None = None, doc_ids: Iterable[str] | None = None) -> "Filters":
        """Validated filters; bad values raise RequestError naming the filter and the value."""
        cols = tuple(collections) if collections else None
        if cols:
            for c in cols:
                if not isinstance(c, str) or not c:
                    raise RequestError(f"filter 'collection': {c!r} is not a collection name")
        glob = path_glob or None
        if glob is not None and (not isinstance(glob, str) or len(glob) > 4096 or "\x00" in glob):
            raise RequestError(f"filter 'path': {path_glob!r} is not a usable glob",
                               hint="use a shell-style pattern such as '*/papers/*.pdf'")
        types: tuple[str, ...] | None = None
        if file_types:
            typed = []
            for t in file_types:
                t2 = str(t).strip().lower().lstrip(".")
                if not _EXT.match(t2):
                    raise RequestError(f"filter 'type': {t!r} is not a file extension",
                                       hint="give extensions such as 'pdf' or '.md'")
                typed.append(t2)
            types = tuple(dict.fromkeys(typed))
        docs: tuple[str, ...] | None = None
        if doc_ids:
            ids = []
            for d in doc_ids:
                d2 = str(d).strip().lower()
                if not _MD5.match(d2):
                    raise RequestError(f"filter 'document': {d!r} is not a document id",
                                       hint="a document id is the 32-hex-digit MD5 shown as doc_id in results")
                ids.append(d2)
            docs = tuple(dict.fromkeys(ids))
        return cls(cols, glob, types, docs)

    @property
    def restricts_chunks(self) -> bool:
        return bool(self.path_glob or self.file_types or self.doc_ids)

    def allowed_ids(self, rag: RagStore) -> set[int] | None:
        """Chunk ids of ``rag`` that pass, or None when nothing restricts chunks."""
        md5s = self.allowed_documents(rag)
        return None if md5s is None else rag.chunk_ids_of_documents(sorted(md5s))

    def allowed_documents(self, rag: RagStore) -> set[str] | None:
        """Document ids (md5) of ``rag`` that pass, or None when nothing restricts chunks."""
        if not self.restricts_chunks:
            return None
        md5s: set[str] | None = set(self.doc_ids) if self.doc_ids else None
        if self.path_glob or self.file_types:
            ok: set[str] = set()
            # On PostgreSQL a collection holds every machine's paths and document_paths() gives this
            # machine's; a search finds them all, so its filters match them all.
            for src, rel, md5 in rag.every_document_path():
                # as the documents listing does: a name is matched as it is shown (bytes that are
                # not UTF-8 as \xNN, the only way a client can write them)
                if self.path_glob and not (fnmatch.fnmatchcase(shown_path(src), self.path_glob)
                                           or fnmatch.fnmatchcase(shown_path(rel or ""), self.path_glob)):
                    continue
                if self.file_types:
                    name = src.rsplit("/", 1)[-1]
                    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
                    if ext not in self.file_types:
                        continue
                ok.add(md5)
            md5s = ok if md5s is None else (md5s & ok)
        return md5s or set()

    def as_dict(self) -> dict[str, Any]:
        return {"collections": list(self.collections) if self.collections else None,
                "path": self.path_glob, "types": list(self.file_types) if self.file_types else None,
                "documents": list(self.doc_ids) if self.doc_ids else None}
