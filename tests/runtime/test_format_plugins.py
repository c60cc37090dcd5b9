"""Formats are plugins of the ``modelport.formats`` entry point group."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

from modelport.errors import InvalidInput, Unprocessable
from modelport.manifest import Manifest
from modelport.runtime.engines import choose_contract
from modelport.runtime.formats import FormatRegistry, discover, get_format, known_formats
from modelport.runtime.formats import registry as registry_module
from modelport.runtime.formats.onnx import OnnxFormat
from modelport.runtime.formats.registry import GROUP
from modelport.runtime.formats.transformers.availability import llm_installed
from modelport.runtime.formats.trees.availability import tree_installed

ROOT = Path(__file__).resolve().parents[2]


class EchoFormat:
    """A format a test registers: its model returns its inputs."""

    name = "echo"

    def __init__(self, *, scale: int = 1) -> None:
        self.scale = scale

    def estimate_memory(self, manifest: Manifest) -> int:
        return 0

    def load(self, files: dict[str, Path], manifest: Manifest) -> EchoModel:
        return EchoModel()


class EchoModel:
    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(inputs)

    def memory_bytes(self) -> int:
        return 0

    def unload(self) -> None:
        pass


ECHO = EntryPoint("echo", f"{__name__}:EchoFormat", GROUP)


def test_modelport_s_formats_are_declared_as_entry_points_of_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][GROUP]
    assert declared == {
        "onnx": "modelport.runtime.formats.onnx:OnnxFormat",
        "transformers": (
            "modelport.runtime.formats.transformers.embedding:TransformersEmbeddingFormat"
        ),
        "xgboost": "modelport.runtime.formats.trees.format:XGBoostFormat",
        "lightgbm": "modelport.runtime.formats.trees.format:LightGBMFormat",
        "sklearn": "modelport.runtime.formats.trees.format:SklearnFormat",
    }
    assert {e.name: e.value for e in registry_module.BUILT_IN} == declared


def test_onnx_is_known_and_loads_with_its_options() -> None:
    assert "onnx" in known_formats()
    fmt = get_format("onnx", {"intra_op_threads": 1})
    assert isinstance(fmt, OnnxFormat)


def test_without_the_group_in_the_metadata_the_built_in_formats_stand_in() -> None:
    llm = {"transformers"} if llm_installed() else set()
    trees = {name for name in ("xgboost", "lightgbm", "sklearn") if tree_installed(name)}
    assert set(discover([])) == {"onnx", *llm, *trees}
    assert set(discover([ECHO])) == {"echo", "onnx", *llm, *trees}


def test_without_the_llm_extra_transformers_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry_module, "llm_installed", lambda: False)
    monkeypatch.setattr(registry_module, "tree_installed", lambda name: False)
    monkeypatch.setitem(registry_module.GENERATIVE, "transformers", ("x:Y", lambda: False))
    plugins = discover([])
    assert set(plugins) == {"onnx"}
    assert registry_module.generative_formats() == {}
    with pytest.raises(Unprocessable) as info:
        get_format("transformers", plugins=plugins)
    assert info.value.code == "unsupported_format"
    assert "install modelport[llm]" in info.value.message
    with pytest.raises(Unprocessable) as info:
        choose_contract("transformers", "chat", tensor_formats={"onnx"}, generative_formats=())
    assert "install modelport[llm]" in info.value.message


def test_without_the_trees_extra_a_tree_format_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry_module, "tree_installed", lambda name: False)
    plugins = discover([])
    assert not {"xgboost", "lightgbm", "sklearn"} & set(plugins)
    for name in ("xgboost", "lightgbm", "sklearn"):
        with pytest.raises(Unprocessable) as info:
            get_format(name, plugins=plugins)
        assert info.value.code == "unsupported_format"
        assert "install modelport[trees]" in info.value.message


def test_a_registered_plugin_is_loaded_with_its_options() -> None:
    registry = FormatRegistry({"echo": {"scale": 3}}, plugins=discover([ECHO]))
    assert registry.names >= {"echo", "onnx"}
    fmt = registry("echo")
    assert isinstance(fmt, EchoFormat) and fmt.scale == 3
    assert registry("echo") is fmt  # one instance per format
    with pytest.raises(Unprocessable) as info:
        FormatRegistry()("echo")  # not installed: only this registry has it
    assert info.value.code == "unsupported_format" and "onnx" in info.value.message


def test_a_plugin_claiming_an_unsafe_name_is_never_loaded() -> None:
    sneaky = EntryPoint("pickle", f"{__name__}:EchoFormat", GROUP)
    plugins = discover([sneaky, ECHO])
    assert "pickle" not in plugins
    with pytest.raises(InvalidInput) as info:
        get_format("pickle", plugins={"pickle": sneaky})
    assert info.value.code == "unsafe_format"


def test_the_first_of_two_plugins_with_one_name_is_kept() -> None:
    other = EntryPoint("echo", "somewhere.else:Echo", GROUP)
    assert discover([ECHO, other])["echo"] is ECHO


def test_a_plugin_that_cannot_be_imported_fails_its_own_format_only() -> None:
    broken = EntryPoint("broken", "modelport_no_such_package.formats:Broken", GROUP)
    registry = FormatRegistry(plugins=discover([broken, ECHO]))
    with pytest.raises(Unprocessable) as info:
        registry("broken")
    assert info.value.code == "unsupported_format" and "could not be loaded" in info.value.message
    assert isinstance(registry("echo"), EchoFormat)
