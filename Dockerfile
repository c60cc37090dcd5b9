# One image for every role of modelport: the role is the argument
#   docker build -t modelport .                                  the base install
#   docker build --build-arg EXTRAS=otel,parquet -t modelport .  with extras
#   docker run modelport gateway | worker | all | migrate
# Dependencies come from requirements/lock.txt, hash-checked (scripts/lock_subset.py
# keeps the share the chosen extras need). See docs/deploy.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: a virtual environment under /opt/modelport, compilers left behind --------
FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS=""
# torch's CPU builds are served by PyTorch's own index, not PyPI: pass it for EXTRAS=llm.
ARG PIP_EXTRA_INDEX_URL
# llama.cpp (EXTRAS=llm) compiles for a portable x86-64 level, as scripts/bootstrap.sh
# does (a native build crashed on other CPUs); replace it for ARM or a GPU build.
ARG LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_OPENMP=OFF"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/lock.txt requirements/lock.txt
COPY scripts/lock_subset.py scripts/lock_subset.py
RUN python scripts/lock_subset.py requirements/lock.txt pyproject.toml "${EXTRAS}" > /tmp/share.txt \
 && awk '/^setuptools==/{p=1} p{print} p&&!/\\$/{exit}' requirements/lock.txt > /tmp/build.txt
# The project's own wheel, built with the locked setuptools (no unpinned build download).
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes -r /tmp/build.txt
COPY src src
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --no-index -w /tmp/wheels .
# llama-cpp-python builds from its locked, hash-checked source; everything else is wheels.
RUN python -m venv /opt/modelport \
 && if grep -q '^llama-cpp-python==' /tmp/share.txt; then \
      awk '/^llama-cpp-python==/{p=1} p{print} p&&!/\\$/{exit}' /tmp/share.txt > /tmp/llama.txt \
      && awk '/^llama-cpp-python==/{s=1; next} s && /^ /{next} {s=0; print}' /tmp/share.txt > /tmp/rest.txt \
      && mv /tmp/rest.txt /tmp/share.txt \
      && CMAKE_ARGS="${LLAMA_CMAKE_ARGS} -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF" \
         /opt/modelport/bin/pip wheel --no-deps --require-hashes -r /tmp/llama.txt -w /tmp/wheels; \
    fi \
 && /opt/modelport/bin/pip install --require-hashes -r /tmp/share.txt \
 && /opt/modelport/bin/pip install --no-deps --no-index /tmp/wheels/*.whl

# ---- runtime: the environment, bubblewrap for the sandbox, and nothing to build with ---
FROM ${PYTHON_IMAGE} AS runtime
# bubblewrap isolates publishers' code (modelport.sandbox); libgomp serves torch and
# onnxruntime's thread pools.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap libgomp1 tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 modelport \
 && useradd --system --uid 10001 --gid modelport --home-dir /var/lib/modelport \
      --shell /usr/sbin/nologin modelport \
 && install -d -o modelport -g modelport -m 0750 /var/lib/modelport
COPY --from=build /opt/modelport /opt/modelport
COPY deploy/docker/entrypoint.sh /usr/local/bin/modelport-entrypoint
ENV PATH=/opt/modelport/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MODELPORT_HOME=/var/lib/modelport \
    MODELPORT_LOG_FORMAT=json \
    PORT=8080
# The root file system can be read-only: the state folder (MODELPORT_HOME) and /tmp are
# the only places written, volumes in Kubernetes (deploy/).
VOLUME ["/var/lib/modelport", "/tmp"]
USER 10001:10001
WORKDIR /var/lib/modelport
EXPOSE 8080 8081
HEALTHCHECK --interval=30s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8080'), timeout=2)"]
ENTRYPOINT ["tini", "--", "modelport-entrypoint"]
CMD ["all"]
