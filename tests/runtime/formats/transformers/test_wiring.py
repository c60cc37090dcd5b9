"""The app wires the transformers plugins: the tensor one in the host's registry, the
generative one in the GenerativeHost of the local backends; without the extra, none."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelport import app as app_module
from modelport.app import build_services
from modelport.config import Settings
from modelport.runtime.formats.transformers.generative import TransformersGenerativeFormat
from modelport.serving.backends.local import LocalBackend


def _settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings(home=tmp_path / "home", admin_key="k" * 30, **extra)  # type: ignore[arg-type]


def test_the_generative_host_gets_the_plugin_with_the_settings(tmp_path: Path) -> None:
    services = build_services(
        _settings(tmp_path, llm_device="cpu", llm_dtype="bfloat16", llm_kv_cache_bytes=1 << 24)
    )
    try:
        assert services.engines is not None and services.host is not None
        plugin = services.engines.formats["transformers"]
        assert isinstance(plugin, TransformersGenerativeFormat)
        assert (plugin.device_setting, plugin.dtype_setting) == ("cpu", "bfloat16")
        assert plugin.kv_cache_bytes == 1 << 24
        assert services.engines.cache is services.host.cache
        assert "transformers" in services.host.formats.names
        (local,) = [b for b in services.health.board.backends() if b.name == "local"]
        assert isinstance(local, LocalBackend) and local.engines is services.engines
        assert "transformers" in local.capabilities().formats
    finally:
        services.close()


def test_without_generative_plugins_there_is_no_generative_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelport.runtime.formats import registry

    monkeypatch.setattr(registry, "generative_formats", lambda options=None: {})
    services = build_services(_settings(tmp_path))
    try:
        assert services.engines is None
        assert app_module.build_generative_host(_settings(tmp_path), services.host) is None  # type: ignore[arg-type]
    finally:
        services.close()
