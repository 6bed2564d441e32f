"""Faults injected into index flushes (``ragweedd.index.fileformat.write_index``) for the crash
tests, by wrapping the functions a flush calls: the package carries no hook for them.

The points, in the order a flush passes them:

  data_level0_written, link_lists_written, index_meta_written
                    that data file's .tmp is written and fsynced, not yet renamed
  data_renamed      every data file has its final name; the directory is not fsynced yet
  header_written    the new header's .tmp is written and fsynced, not yet renamed
  header_renamed    the header has its final name and the directory is fsynced: the flush is committed
  published         the plain names (data_level0.bin ...) are links to the new generation
"""

from __future__ import annotations

from typing import Callable

from ragweedd.index import fileformat as ff

_BASES = ("data_level0", "link_lists", "index_meta", "header")


def inject(hook: Callable[[str], None], patch: Callable = setattr) -> None:
    """Call ``hook(point)`` at each point of every later flush; a hook that raises or exits there
    is the crash. ``patch``: pass pytest's ``monkeypatch.setattr`` to have it undone after the
    test (a child process that dies at the point needs no undoing). A test that renames a wrapped
    function fails here, at the getattr, not by passing without its fault."""
    write_parts, fsync_dir, publish = ff._write_parts, ff.fsync_dir, ff._publish_plain_names
    # which file a flush wrote last tells which of its fsyncs of the directory comes next
    last = {"written": ""}

    def _write_parts(path, parts):
        out = write_parts(path, parts)
        base = next(b for b in _BASES if path.name.startswith(b))
        last["written"] = base
        hook(f"{base}_written")
        return out

    def _fsync_dir(directory) -> None:
        written, last["written"] = last["written"], ""
        if written == "header":
            fsync_dir(directory)
            hook("header_renamed")
            return
        if written:
            hook("data_renamed")
        fsync_dir(directory)

    def _publish(directory, suffix, gen) -> None:
        publish(directory, suffix, gen)
        hook("published")

    patch(ff, "_write_parts", _write_parts)
    patch(ff, "fsync_dir", _fsync_dir)
    patch(ff, "_publish_plain_names", _publish)
