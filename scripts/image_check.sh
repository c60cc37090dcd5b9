#!/usr/bin/env bash
# Build the container image and smoke-test it, where an image builder exists (optional in
# CI: a build downloads the base image, Debian packages and the locked wheels, minutes).
#   scripts/image_check.sh                 docker (with a daemon) or podman, whichever works
#   IMAGE_CHECK_BUILDER=podman PODMAN_STORAGE=vfs scripts/image_check.sh
#                                          podman inside a container (no overlay mounts)
#   PYTHON_IMAGE=localhost/python:3.11 scripts/image_check.sh
#                                          a base image of your own (Debian with python3.11,
#                                          python3-venv and python-is-python3) where the
#                                          registry's python image cannot be pulled
# Checks: the build; `modelport --help` and `all --help` through the entry point; an
# unknown role exits 64; the `all` role started with a read-only root file system as
# uid 10001 answers the image's own HEALTHCHECK command. Exits 0 with "skip: <why>"
# where no builder runs, the base image cannot be had or no container can be run (after
# the build), non-zero where a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${IMAGE_CHECK_TAG:-localhost/modelport:check}"
skip() { echo "image check skip: $*"; exit 0; }

builder="${IMAGE_CHECK_BUILDER:-}"
if [ -z "$builder" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    builder=docker
  elif command -v podman >/dev/null 2>&1; then
    builder=podman
  else
    skip "no image builder (a docker CLI with a reachable daemon, or podman)"
  fi
fi
cli=("$builder")
build_opts=()
if [ "$builder" = podman ]; then
  if [ -n "${PODMAN_STORAGE:-}" ]; then cli+=(--storage-driver "$PODMAN_STORAGE"); fi
  # The docker format: podman's default (OCI) drops the HEALTHCHECK. chroot isolation
  # builds where the process may not make namespaces (inside a container).
  build_opts+=(--format docker --isolation "${PODMAN_ISOLATION:-chroot}" --network host)
fi
"${cli[@]}" info >/dev/null 2>&1 || skip "$builder does not run here ($("${cli[@]}" info 2>&1 | tail -1))"

base="${PYTHON_IMAGE:-python:3.11-slim-bookworm}"
if ! "${cli[@]}" image inspect "$base" >/dev/null 2>&1 && ! "${cli[@]}" pull "$base" >/dev/null 2>&1; then
  skip "the base image $base cannot be pulled (set PYTHON_IMAGE to one of your own)"
fi

started=$SECONDS
echo "image check: building $tag with $builder on $base"
"${cli[@]}" build "${build_opts[@]}" --build-arg "PYTHON_IMAGE=$base" -t "$tag" .
echo "image check: built in $((SECONDS - started)) s"

run_opts=(--rm --network host)
# Building needs no container runtime; running does (a sandbox may refuse it setrlimit,
# cgroups or namespaces): the image is built and its run checks are skipped, with why.
if ! ran=$("${cli[@]}" run "${run_opts[@]}" "$tag" modelport --help 2>&1); then
  skip "built $tag, but $builder cannot run a container here: $(echo "$ran" | grep -v 'level=' | tail -1)"
fi
"${cli[@]}" run "${run_opts[@]}" "$tag" modelport --help | grep -q "serve"
"${cli[@]}" run "${run_opts[@]}" "$tag" all --help | grep -q -- "--role"
set +e
"${cli[@]}" run "${run_opts[@]}" "$tag" nonsense >/dev/null 2>&1
unknown=$?
set -e
[ "$unknown" -eq 64 ] || { echo "image check: an unknown role exited $unknown, not 64"; exit 1; }
echo "image check: --help and the unknown role answer"

# The HEALTHCHECK's own command, as the image declares it (CMD form: a JSON list).
health=$("${cli[@]}" image inspect --format '{{json .Config.Healthcheck.Test}}' "$tag")
mapfile -t probe < <(python3 -c 'import json, sys; t = json.loads(sys.argv[1]); print("\n".join(t[1:]))' "$health")
[ "${#probe[@]}" -gt 0 ] || { echo "image check: the image has no HEALTHCHECK"; exit 1; }
port="${IMAGE_CHECK_PORT:-18080}"
name="modelport-image-check-$$"
"${cli[@]}" run -d --name "$name" --network host --read-only \
  --tmpfs /tmp --tmpfs /var/lib/modelport:uid=10001,gid=10001,mode=0750 \
  -e "PORT=$port" -e "MODELPORT_ADMIN_KEY=image-check-admin-key-$(date +%s)-xxxxxxxx" \
  "$tag" all >/dev/null
trap '"${cli[@]}" rm -f "$name" >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 90); do
  if "${cli[@]}" exec -e "PORT=$port" "$name" "${probe[@]}" >/dev/null 2>&1; then
    user=$("${cli[@]}" exec "$name" id -u)
    [ "$user" = 10001 ] || { echo "image check: the server runs as uid $user"; exit 1; }
    echo "image check: the HEALTHCHECK passes on the all role (read-only root, uid $user)"
    echo "image check: ok in $((SECONDS - started)) s"
    exit 0
  fi
  sleep 1
done
"${cli[@]}" logs "$name" 2>&1 | tail -20
echo "image check: the HEALTHCHECK did not pass within 90 s"
exit 1
