"""Path helpers of ragweedd/paths.py that every layer uses to tell which folder holds a path."""


def test_a_path_is_within_a_root_by_whole_names_and_the_deepest_root_holds_it():
    from ragweedd.paths import deepest_root, within

    assert within("/data/notes/a.txt", "/data/notes") and within("/data/notes", "/data/notes")
    assert within("/data/notes/a.txt", "/data/notes/") and not within("/data/notes", "/data/notes", strictly=True)
    assert not within("/data/notes2/a.txt", "/data/notes")  # a sibling that starts with the same letters
    roots = ["/data", "/data/notes", "/other"]
    assert deepest_root("/data/notes/sub/a.txt", roots) == "/data/notes"
    assert deepest_root("/data/x.txt", roots) == "/data"
    assert deepest_root("/elsewhere/x.txt", roots) is None
