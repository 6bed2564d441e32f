"""Which files are indexed: the rules the watch side and the pipeline both apply, kept below both
so neither reaches into the other. ``ignore`` (patterns, the walk of a root), ``skip_rules``
(what the stat alone says: empty, unreadable type, over a size cap, unchanged) and ``roots``
(whether a root is there, gone, or an empty mount point)."""
