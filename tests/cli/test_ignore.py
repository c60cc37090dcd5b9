"""``.modelportignore`` patterns, as ``.gitignore`` reads them."""

from __future__ import annotations

import pytest

from modelport.cli.ignore import IgnoreRules

RULES = IgnoreRules(
    [
        "# comment",
        "",
        "train.py",
        "*.ipynb",
        "!keep.ipynb",
        "data/",
        "/notes.md",
        "logs/*.txt",
        "**/cache/**",
        "ckpt-[0-9]*",
    ]
)


@pytest.mark.parametrize(
    ("path", "folder", "ignored"),
    [
        ("train.py", False, True),
        ("src/train.py", False, True),  # a name without a slash matches at any depth
        ("train.pyc", False, False),
        ("a.ipynb", False, True),
        ("keep.ipynb", False, False),  # re-included by a later pattern
        ("data", True, True),
        ("x/data", True, True),
        ("data", False, False),  # a trailing slash: folders only
        ("notes.md", False, True),
        ("sub/notes.md", False, False),  # a leading slash anchors at the root
        ("logs/a.txt", False, True),
        ("logs/sub/a.txt", False, False),  # * stays within a name
        ("a/cache/b/c", False, True),
        ("ckpt-1", False, True),
        ("ckpt-x", False, False),
        ("model.onnx", False, False),
        ("# comment", False, False),
    ],
)
def test_patterns(path: str, folder: bool, ignored: bool) -> None:
    assert RULES.ignored(path, folder=folder) is ignored


def test_no_file_leaves_nothing_out() -> None:
    assert not IgnoreRules().ignored("train.py")
