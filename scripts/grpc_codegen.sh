#!/usr/bin/env bash
# Regenerate the Open Inference Protocol's gRPC messages (src/modelport/api/grpc/oip_pb2.py
# and its type stub oip_pb2.pyi) from oip.proto with grpcio-tools (the dev extra). The
# generated files are committed: run this after changing oip.proto, or after moving
# grpcio-tools/protobuf in the lock file, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
"$PYTHON" -m grpc_tools.protoc -I src --python_out=src --pyi_out=src \
  src/modelport/api/grpc/oip.proto
echo "src/modelport/api/grpc/oip_pb2.py and oip_pb2.pyi regenerated"
