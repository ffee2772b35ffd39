#!/usr/bin/env bash
# Sourced by .ci/run (or by hand: CI_SERVICES=$(mktemp -d) . .ci/services/docker.sh): starts dockerd and a
# docker-registry (Distribution, htpasswd auth) for the restore-docker tests, each on a private socket/port with
# its data under $CI_SERVICES/docker, writes $CI_SERVICES/docker.pid and docker-registry.pid, waits until both
# answer, and exports VAULT_TEST_DOCKER_HOST, VAULT_TEST_DOCKER_ROOT, VAULT_TEST_DOCKER_LOG, VAULT_TEST_REGISTRY,
# VAULT_TEST_REGISTRY_USER and VAULT_TEST_REGISTRY_PASSWORD. See ../shared/domain/SERVICES.md for why these flags.

vault_docker_start() {
  local dir="$CI_SERVICES/docker" port password i tool
  mkdir -p "$dir/data" "$dir/exec" "$dir/registry/data"
  for tool in dockerd docker docker-registry htpasswd; do
    command -v "$tool" >/dev/null || { echo "docker.sh: $tool is not installed" >&2; return 1; }
  done

  # The VM has no iptables bridge: no bridge network, containers run with --network none. Its own containerd
  # namespace keeps it apart from any other dockerd on the machine.
  dockerd --iptables=false --bridge=none --data-root "$dir/data" --exec-root "$dir/exec" \
    --pidfile "$dir/dockerd.pid" -H "unix://$dir/sock" --debug --containerd-namespace vault-ci \
    --containerd-plugins-namespace vault-ci-plugins >"$dir/dockerd.log" 2>&1 &
  echo $! >"$CI_SERVICES/docker.pid"

  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  htpasswd -Bbn vault "$password" >"$dir/registry/htpasswd"
  cat >"$dir/registry/config.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $dir/registry/data}
  delete: {enabled: true}
http: {addr: "127.0.0.1:$port"}
auth:
  htpasswd: {realm: vault-ci, path: $dir/registry/htpasswd}
YAML
  docker-registry serve "$dir/registry/config.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$CI_SERVICES/docker-registry.pid"

  for i in $(seq 1 60); do
    docker -H "unix://$dir/sock" version >/dev/null 2>&1 && break
    [ "$i" = 60 ] && { echo "docker.sh: dockerd did not answer in 30 s; see $dir/dockerd.log" >&2; return 1; }
    sleep 0.5
  done
  for i in $(seq 1 60); do
    # 401 is the answer of a registry that wants a login
    python3 -c "import urllib.request, urllib.error, sys
try: urllib.request.urlopen('http://127.0.0.1:$port/v2/', timeout=2)
except urllib.error.HTTPError as e: sys.exit(0 if e.code == 401 else 1)
except OSError: sys.exit(1)" && break
    [ "$i" = 60 ] && { echo "docker.sh: docker-registry did not answer in 30 s; see $dir/registry.log" >&2; return 1; }
    sleep 0.5
  done

  export VAULT_TEST_DOCKER_HOST="unix://$dir/sock" VAULT_TEST_DOCKER_ROOT="$dir/data" VAULT_TEST_DOCKER_LOG="$dir/dockerd.log"
  export VAULT_TEST_REGISTRY="127.0.0.1:$port" VAULT_TEST_REGISTRY_USER=vault VAULT_TEST_REGISTRY_PASSWORD="$password"
}

vault_docker_start
