"""``modelport push`` and ``pull`` against a live server over real HTTP."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from modelport.app import Services
from modelport.cli import modelport
from modelport.client.transfer import UploadState
from modelport.errors import NotFound
from modelport.testing import mlp, save
from tests.conftest import ADMIN_KEY, LiveServer


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def _cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The resumable-upload state file goes to a temporary cache folder."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


class Traffic:
    """Counts the upload bytes sent, and can break the connection after N chunks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.patches = 0
        self.patched_bytes = 0
        self.fail_after: int | None = None
        original = httpx.HTTPTransport.handle_request

        def handle(transport: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
            if request.method == "PATCH":
                if self.fail_after is not None and self.patches >= self.fail_after:
                    raise httpx.WriteError("connection reset by peer", request=request)
                self.patches += 1
                self.patched_bytes += int(request.headers["content-length"])
            return original(transport, request)

        monkeypatch.setattr(httpx.HTTPTransport, "handle_request", handle)


@pytest.fixture
def traffic(monkeypatch: pytest.MonkeyPatch) -> Traffic:
    return Traffic(monkeypatch)


def cli(server: LiveServer, *args: str, key: str = ADMIN_KEY) -> Result:
    base = ["--url", server.url, "--api-key", key]
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def cli_json(server: LiveServer, *args: str) -> Any:
    result = cli(server, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture
def onnx_package(tmp_path: Path) -> Path:
    folder = tmp_path / "package"
    folder.mkdir()
    save(mlp(), folder / "model.onnx")
    return folder


@pytest.fixture
def weights_package(tmp_path: Path) -> Path:
    """A package with a manifest.json and one bigger file, to upload in many chunks."""
    folder = tmp_path / "weights-package"
    (folder / "weights").mkdir(parents=True)
    (folder / "weights" / "w.bin").write_bytes(os.urandom(100_000))
    (folder / "vocab.txt").write_text("a\nb\n")
    (folder / ".DS_Store").write_bytes(b"hidden, not a model file")
    manifest = {
        "format": "custom",
        "license": "MIT",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "files": [{"path": "stale.bin", "digest": sha(b"stale"), "size": 5}],
        "tags": ["demo"],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


class TestPush:
    @pytest.fixture(autouse=True)
    def _owner(self, services: Services) -> None:
        """Models are published into a tenant: the admin pushes into acme's namespace."""
        services.tenancy.create_tenant("acme", actor="admin")

    def test_push_builds_the_manifest_from_an_onnx_graph_and_publishes(
        self, live_server: LiveServer, services: Services, onnx_package: Path
    ) -> None:
        body = cli_json(
            live_server,
            "push",
            str(onnx_package),
            "--model",
            "acme/classifier",
            "--version",
            "1",
            "--license",
            "Apache-2.0",
            "--task",
            "classification",
        )
        assert body["model"] == "acme/classifier"
        assert body["version"] == "1"
        assert body["manifest_digest"].startswith("sha256:")
        manifest = body["manifest"]
        assert manifest["format"] == "onnx"
        assert manifest["license"] == "Apache-2.0"
        assert manifest["inputs"] == [{"name": "features", "datatype": "FP32", "shape": [-1, 8]}]
        assert manifest["outputs"] == [
            {"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}
        ]
        data = (onnx_package / "model.onnx").read_bytes()
        assert manifest["files"] == [{"path": "model.onnx", "digest": sha(data), "size": len(data)}]
        assert services.blob_store.size(sha(data)) == len(data)
        model = services.registry.get_model("acme", "classifier")
        assert model.task == "classification"

    def test_a_manifest_json_is_completed_and_not_uploaded(
        self, live_server: LiveServer, weights_package: Path
    ) -> None:
        body = cli_json(
            live_server,
            "push",
            str(weights_package),
            "--model",
            "acme/custom",
            "--version",
            "2",
            "--chunk-size",
            "16KiB",
        )
        manifest = body["manifest"]
        assert [f["path"] for f in manifest["files"]] == ["vocab.txt", "weights/w.bin"]
        assert manifest["tags"] == ["demo"]
        assert manifest["format"] == "custom"

    def test_push_lists_its_files_and_leaves_out_what_modelportignore_names(
        self, live_server: LiveServer, services: Services, onnx_package: Path, traffic: Traffic
    ) -> None:
        (onnx_package / "train.py").write_text("print('training')\n")
        (onnx_package / "notebooks").mkdir()
        (onnx_package / "notebooks" / "explore.ipynb").write_text("{}")
        (onnx_package / "labels.txt").write_text("a\nb\nc\n")
        (onnx_package / "scratch.txt").write_text("notes")
        (onnx_package / ".modelportignore").write_text(
            "# the training code is not part of the model\ntrain.py\nnotebooks/\n*.txt\n"
            "!labels.txt\n"
        )
        example = onnx_package.parent / "example.json"
        example.write_text(json.dumps({"features": [[0.5] * 8]}))
        args = ["push", str(onnx_package), "--model", "acme/m", "--version", "1"]
        args += ["--example-input", str(example)]
        dry = cli(live_server, *args, "--license", "MIT", "--dry-run")
        assert dry.exit_code == 0, dry.output
        assert "2 files in the version" in dry.output
        assert "labels.txt" in dry.output and "model.onnx" in dry.output
        for left_out in ("train.py", "explore.ipynb", "scratch.txt", ".modelportignore"):
            assert left_out not in dry.output
        assert traffic.patches == 0 and "nothing was uploaded" in dry.output
        as_json = cli_json(live_server, *args, "--license", "MIT", "--dry-run")
        assert [f["path"] for f in as_json["files"]] == ["labels.txt", "model.onnx"]
        assert traffic.patches == 0
        with pytest.raises(NotFound):
            services.registry.get_version("acme", "m", "1")

        pushed = cli(live_server, *args, "--license", "MIT")
        assert pushed.exit_code == 0, pushed.output
        assert pushed.output.index("labels.txt") < pushed.output.index("published acme/m:1")
        version = services.registry.get_version("acme", "m", "1")
        assert [f.path for f in version.manifest.files] == ["labels.txt", "model.onnx"]

    def test_pushing_again_uploads_nothing_and_is_idempotent(
        self, live_server: LiveServer, onnx_package: Path, traffic: Traffic
    ) -> None:
        args = ["push", str(onnx_package), "--model", "acme/m", "--license", "MIT"]
        first = cli(live_server, *args, "--version", "1")
        assert first.exit_code == 0, first.output
        assert "published acme/m:1" in first.output
        sent = traffic.patches
        assert sent > 0
        again = cli(live_server, *args, "--version", "1")
        assert again.exit_code == 0, again.output
        assert "already published" in again.output
        other = cli(live_server, *args, "--version", "2")
        assert other.exit_code == 0, other.output
        assert "1 already on the server" in other.output
        assert traffic.patches == sent

    def test_a_different_package_under_a_published_version_is_refused(
        self, live_server: LiveServer, onnx_package: Path
    ) -> None:
        args = ["push", str(onnx_package), "--model", "acme/m", "--version", "1"]
        assert cli(live_server, *args, "--license", "MIT").exit_code == 0
        result = cli(live_server, *args, "--license", "Apache-2.0")
        assert result.exit_code != 0
        assert "version_exists" in result.output

    @pytest.mark.parametrize(
        ("files", "options", "message"),
        [
            ({"model.onnx": None}, [], "needs a license"),
            ({"a.bin": b"1", "b.bin": b"2"}, ["--license", "MIT"], "cannot tell the model format"),
            ({"model.onnx": b"not a protobuf"}, ["--license", "MIT"], "not a readable ONNX"),
            ({}, ["--license", "MIT"], "has no model files"),
        ],
    )
    def test_a_package_that_cannot_be_published_is_refused_before_uploading(
        self,
        live_server: LiveServer,
        tmp_path: Path,
        traffic: Traffic,
        files: dict[str, bytes | None],
        options: list[str],
        message: str,
    ) -> None:
        folder = tmp_path / "bad"
        folder.mkdir()
        for name, data in files.items():
            if data is None:
                save(mlp(), folder / name)
            else:
                (folder / name).write_bytes(data)
        result = cli(live_server, "push", str(folder), "--model", "a/b", "--version", "1", *options)
        assert result.exit_code != 0
        assert message in result.output
        assert traffic.patches == 0

    def test_bad_model_refs_and_chunk_sizes_are_refused(
        self, live_server: LiveServer, onnx_package: Path
    ) -> None:
        base = ["push", str(onnx_package), "--version", "1", "--license", "MIT"]
        result = cli(live_server, *base, "--model", "no-slash")
        assert result.exit_code != 0
        assert "owner/name" in result.output
        result = cli(live_server, *base, "--model", "a/b", "--chunk-size", "lots")
        assert result.exit_code == 2
        assert "not a size" in result.output

    def test_an_interrupted_push_resumes_where_it_stopped(
        self, live_server: LiveServer, services: Services, weights_package: Path, traffic: Traffic
    ) -> None:
        args = ["push", str(weights_package), "--model", "acme/big", "--version", "1"]
        chunk = 16 * 1024
        traffic.fail_after = 3  # vocab.txt takes one chunk, then two of w.bin land
        failed = cli(live_server, *args, "--chunk-size", "16KiB")
        assert failed.exit_code != 0
        assert "run the same command again to resume" in failed.output
        weights = (weights_package / "weights" / "w.bin").read_bytes()
        location = UploadState().get(live_server.url, sha(weights))
        assert location is not None
        upload_id = location.rsplit("/", 1)[1]
        assert services.uploads.get(upload_id).offset == 2 * chunk

        traffic.fail_after = None
        traffic.patched_bytes = 0
        resumed = cli(live_server, *args, "--chunk-size", "16KiB")
        assert resumed.exit_code == 0, resumed.output
        assert traffic.patched_bytes == len(weights) - 2 * chunk
        assert b"".join(services.blob_store.read(sha(weights))) == weights
        assert UploadState().get(live_server.url, sha(weights)) is None

    def test_a_forgotten_upload_is_started_afresh(
        self, live_server: LiveServer, services: Services, onnx_package: Path
    ) -> None:
        data = (onnx_package / "model.onnx").read_bytes()
        upload = services.uploads.start()
        services.uploads.abort(upload.id)
        UploadState().put(live_server.url, sha(data), f"/api/uploads/{upload.id}")
        result = cli(
            live_server, "push", str(onnx_package), "--model", "acme/b", "--version", "1",
            "--license", "MIT",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert services.blob_store.size(sha(data)) == len(data)


@pytest.fixture
def published(live_server: LiveServer, weights_package: Path) -> dict[str, Any]:
    return cli_json(
        live_server, "push", str(weights_package), "--model", "acme/w", "--version", "1"
    )


class TestPull:
    @pytest.fixture(autouse=True)
    def _owner(self, services: Services) -> None:
        """Models are published into a tenant: the admin pushes into acme's namespace."""
        services.tenancy.create_tenant("acme", actor="admin")

    def test_pull_downloads_every_file_and_the_manifest(
        self, live_server: LiveServer, weights_package: Path, published: dict[str, Any],
        tmp_path: Path,
    ) -> None:  # fmt: skip
        dest = tmp_path / "pulled"
        body = cli_json(live_server, "pull", "acme/w:1", str(dest))
        assert body["fetched"] == 2
        assert body["manifest_digest"] == published["manifest_digest"]
        for relative in ("weights/w.bin", "vocab.txt"):
            assert (dest / relative).read_bytes() == (weights_package / relative).read_bytes()
        assert json.loads((dest / "manifest.json").read_text()) == published["manifest"]
        assert sorted(p.name for p in dest.rglob("*")) == sorted(
            ["manifest.json", "vocab.txt", "weights", "w.bin"]
        )
        again = cli_json(live_server, "pull", "acme/w:1", str(dest))
        assert (again["fetched"], again["kept"]) == (0, 2)

    def test_a_partial_download_is_resumed(
        self, live_server: LiveServer, weights_package: Path, published: dict[str, Any],
        tmp_path: Path,
    ) -> None:  # fmt: skip
        weights = (weights_package / "weights" / "w.bin").read_bytes()
        dest = tmp_path / "pulled"
        (dest / "weights").mkdir(parents=True)
        (dest / "weights" / ".w.bin.partial").write_bytes(weights[:30_000])
        result = cli(live_server, "pull", "acme/w:1", str(dest))
        assert result.exit_code == 0, result.output
        assert (dest / "weights" / "w.bin").read_bytes() == weights
        assert not (dest / "weights" / ".w.bin.partial").exists()

    def test_bytes_that_do_not_match_the_digest_are_not_kept(
        self, live_server: LiveServer, weights_package: Path, published: dict[str, Any],
        tmp_path: Path,
    ) -> None:  # fmt: skip
        weights = (weights_package / "weights" / "w.bin").read_bytes()
        dest = tmp_path / "pulled"
        (dest / "weights").mkdir(parents=True)
        partial = dest / "weights" / ".w.bin.partial"
        partial.write_bytes(b"\x00" * 30_000)  # a corrupted earlier download
        result = cli(live_server, "pull", "acme/w:1", str(dest))
        assert result.exit_code != 0
        assert "digest mismatch" in result.output
        assert not (dest / "weights" / "w.bin").exists()
        assert not partial.exists()
        retry = cli(live_server, "pull", "acme/w:1", str(dest))
        assert retry.exit_code == 0, retry.output
        assert (dest / "weights" / "w.bin").read_bytes() == weights

    def test_a_corrupted_blob_on_the_server_fails_the_pull(
        self, live_server: LiveServer, services: Services, published: dict[str, Any],
        tmp_path: Path,
    ) -> None:  # fmt: skip
        entry = next(f for f in published["manifest"]["files"] if f["path"] == "vocab.txt")
        path = services.blob_store.path(entry["digest"])  # type: ignore[attr-defined]
        path.write_bytes(b"A\nb\n")
        result = cli(live_server, "pull", "acme/w:1", str(tmp_path / "pulled"))
        assert result.exit_code != 0
        assert "blob_corrupted" in result.output
        assert not (tmp_path / "pulled" / "vocab.txt").exists()

    def test_an_unknown_version_fails_clearly(
        self, live_server: LiveServer, published: dict[str, Any], tmp_path: Path
    ) -> None:
        result = cli(live_server, "pull", "acme/w:9", str(tmp_path / "pulled"))
        assert result.exit_code != 0
        assert "version_not_found" in result.output


def publisher_key(services: Services, tenant: str) -> str:
    """A new tenant, and the API key of a member of it with the publisher role."""
    services.tenancy.create_tenant(tenant, actor="admin", name=tenant.title())
    services.tenancy.add_member(tenant, "publisher", roles=["publisher"], actor="admin")
    return services.tenancy.create_key(tenant, "publisher", name="cli", actor="admin").secret


class TestTenants:
    def test_a_tenant_uploads_bytes_another_holds_and_then_pulls_its_own_copy(
        self, live_server: LiveServer, services: Services, weights_package: Path,
        traffic: Traffic, tmp_path: Path,
    ) -> None:  # fmt: skip
        """The server asks each tenant for bytes it does not hold yet, even when they are
        stored already (the upload proves it has them); the blob is stored once."""
        acme, globex = publisher_key(services, "acme"), publisher_key(services, "globex")
        push = ["push", str(weights_package), "--version", "1", "--chunk-size", "64KiB"]
        first = cli(live_server, *push, "--model", "acme/w", key=acme)
        assert first.exit_code == 0, first.output
        sent = traffic.patched_bytes
        assert sent > 100_000
        second = cli(live_server, *push, "--model", "globex/w", key=globex)
        assert second.exit_code == 0, second.output
        assert traffic.patched_bytes == 2 * sent
        again = cli(live_server, *push[:2], "--version", "2", "--model", "globex/w", key=globex)
        assert again.exit_code == 0, again.output
        assert traffic.patched_bytes == 2 * sent  # globex holds them now

        dest = tmp_path / "pulled"
        pulled = cli(live_server, "pull", "globex/w:1", str(dest), "--json", key=globex)
        assert pulled.exit_code == 0, pulled.output
        weights = (weights_package / "weights" / "w.bin").read_bytes()
        assert (dest / "weights" / "w.bin").read_bytes() == weights
        hidden = cli(live_server, "pull", "acme/w:1", str(tmp_path / "other"), key=globex)
        assert hidden.exit_code == 1
