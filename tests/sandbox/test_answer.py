"""A child's answer on its standard output (``Sandbox.run(answer_bytes=...)``): read
through a pipe, and bounded: a child that writes more is killed, and the run says so."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from modelport.sandbox import Finished, Limits, Sandbox, SandboxMode

pytestmark = pytest.mark.slow  # each run is a process

LIMITS = Limits(wall_seconds=60, cpu_seconds=30, memory_bytes=1 << 30)


def _run(bubblewrap: None, tmp_path: Path, code: str, limit: int) -> Finished:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "child.py").write_text(textwrap.dedent(code))
    with (tmp_path / "child.log").open("wb") as log:
        return Sandbox(SandboxMode.AUTO).run(
            ["child.py"], scratch=scratch, limits=LIMITS, output=log, answer_bytes=limit
        )


def test_the_answer_is_what_the_child_wrote_on_its_output(bubblewrap: None, tmp_path: Path) -> None:
    code = """
        import sys
        sys.stdout.buffer.write(b"the answer")
        print("a note", file=sys.stderr)
    """
    finished = _run(bubblewrap, tmp_path, code, 1 << 20)
    assert (finished.returncode, finished.answer) == (0, b"the answer")
    assert not finished.answer_overflowed
    assert "a note" in (tmp_path / "child.log").read_text()


def test_a_child_that_answers_past_the_bound_is_killed(bubblewrap: None, tmp_path: Path) -> None:
    code = """
        import sys
        while True:
            sys.stdout.buffer.write(b"x" * 65536)
    """
    finished = _run(bubblewrap, tmp_path, code, 1 << 20)
    assert finished.answer_overflowed
    assert finished.returncode < 0
    assert len(finished.answer) <= 1 << 20
