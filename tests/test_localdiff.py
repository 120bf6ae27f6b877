"""Head files of a local diff read from a head tree (``--head-dir``): only inside the tree."""

from __future__ import annotations

import os
from pathlib import Path

from reviewbot.repo.localdiff import read_head_tree
from reviewbot.repo.localgit import MAX_CONTENT_BYTES


def test_a_head_tree_is_read_only_inside_its_folder(tmp_path: Path) -> None:
    tree, outside = tmp_path / "head", tmp_path / "secret.py"
    (tree / "src").mkdir(parents=True)
    outside.write_text("TOKEN = 'hunter2'\n")
    (tree / "src" / "app.py").write_text("def f():\n    return 1\n")
    (tree / "inside_link.py").symlink_to(tree / "src" / "app.py")
    (tree / "outside_link.py").symlink_to(outside)
    (tree / "dev_zero.py").symlink_to("/dev/zero")
    (tree / "binary.py").write_bytes(b"\0\1\2")
    (tree / "huge.py").write_bytes(b"x" * (MAX_CONTENT_BYTES + 1))
    os.mkfifo(tree / "fifo.py")
    (tree / "folder.py").mkdir()
    wanted = [
        "src/app.py",
        "inside_link.py",
        "../secret.py",
        str(outside),
        "outside_link.py",
        "dev_zero.py",
        "binary.py",
        "huge.py",
        "fifo.py",
        "folder.py",
        "missing.py",
        "nul\0.py",
    ]
    contents = read_head_tree(tree, wanted)
    app = "def f():\n    return 1\n"
    assert contents == {"src/app.py": app, "inside_link.py": app}


def test_a_head_file_that_is_not_utf8_is_read_with_replacements(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes(b"name = 'Fran\xe7ais'\n")
    assert read_head_tree(tmp_path, ["latin1.py"]) == {"latin1.py": "name = 'Fran\ufffdais'\n"}
