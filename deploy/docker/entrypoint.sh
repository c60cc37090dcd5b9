#!/bin/sh
# The image's entry point: its argument is the role.
#   gateway | worker | all   modelport serve on $HOST:$PORT (0.0.0.0:8080) in that role;
#                            MODELPORT_GRPC_PORT adds the gRPC listener (gateway, all)
#   migrate                  modelport migrate (the schema, before a rollout)
#   modelport ...            any other modelport command, as given
set -eu
role="${1:-all}"
case "$role" in
  gateway|worker|all)
    if [ "$#" -gt 0 ]; then shift; fi
    exec modelport serve --host "${HOST:-0.0.0.0}" --port "${PORT:-8080}" --role "$role" "$@"
    ;;
  migrate)
    exec modelport migrate
    ;;
  modelport)
    exec "$@"
    ;;
  *)
    echo "modelport image: unknown role '$role' (gateway, worker, all, migrate, or 'modelport ...')" >&2
    exit 64
    ;;
esac
