"""What section-tree answers read and keep (ragweedd/answer/tree.py).

The tree itself is never stored: it is built on demand from the metadata every chunk already
carries (``section``, ``section_path``, ``pages``), so it can never disagree with the index. Only
the LLM-written summaries cost something to make; they are cached in a database of their own
(``tree_summaries.sqlite3`` in the cache folder), keyed by the document's content hash, the
section's path and the model that wrote them. A file whose content changes gets a new hash, so a
stale summary is never read; the cache may be deleted at any time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ragweedd.store.pathnames import from_db
from ragweedd.store.rows import section_row
from ragweedd.store.sqlite.connection import Migration, connect, migrate, write

MIGRATIONS: list[Migration] = [
    (1, "tree_summaries", """
CREATE TABLE tree_summaries (
    md5 TEXT NOT NULL,
    node TEXT NOT NULL,
    writer TEXT NOT NULL,
    summary TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (md5, node, writer)
);
"""),
]


def documents(rag: Any) -> list[dict[str, Any]]:
    """Every document of a collection: md5, title, one source path, chunk count."""
    rows = rag.conn.execute(
        "SELECT d.md5, d.title, d.chunks, (SELECT min(source_file) FROM document_paths p WHERE p.md5 = d.md5)"
        " FROM documents d ORDER BY d.md5").fetchall()
    return [{"md5": r[0], "title": r[1], "chunks": r[2], "source_file": from_db(r[3]) if r[3] else None}
            for r in rows if r[3]]


def section_rows(rag: Any, md5: str) -> list[dict[str, Any]]:
    """A document's chunks in reading order with what places them in its outline: (chunk id,
    section, section_path, pages)."""
    return [section_row(*r) for r in rag.conn.execute(
            "SELECT e.id,"
            " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='section'),"
            " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='section_path'),"
            " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='pages'),"
            " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='chroma:document')"
            " FROM embeddings e WHERE e.md5 = ? ORDER BY e.chunk_idx", (md5,))]


class TreeRows:
    """The section-tree reads of a collection database (RagDB)."""

    def tree_documents(self) -> list[dict[str, Any]]:
        return documents(self)

    def tree_sections(self, md5: str) -> list[dict[str, Any]]:
        return section_rows(self, md5)


class SummaryCache:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.conn = connect(self.path)
        migrate(self.conn, MIGRATIONS, db_name=str(self.path))

    def get(self, md5: str, nodes: list[str], writer: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in range(0, len(nodes), 500):
            part = nodes[i:i + 500]
            q = ",".join("?" * len(part))
            for r in self.conn.execute(f"SELECT node, summary FROM tree_summaries WHERE md5=? AND writer=?"
                                       f" AND node IN ({q})", [md5, writer, *part]):
                out[r[0]] = r[1]
        return out

    def put(self, md5: str, node: str, writer: str, summary: str) -> None:
        write(self.conn, "INSERT OR REPLACE INTO tree_summaries(md5, node, writer, summary, at) VALUES (?,?,?,?,?)",
              (md5, node, writer, summary, time.time()))

    def close(self) -> None:
        self.conn.close()
