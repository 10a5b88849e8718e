#!/usr/bin/env bash
# Make this machine able to run ddpctl's integration tests: a running Docker Engine, docker-compose (v1,
# Debian's client) and debootstrap. Idempotent: installs only what is missing and starts dockerd only when
# no engine answers. Debian/Ubuntu (apt). Needs root for the install and for dockerd.
set -euo pipefail

log() { echo "ci-setup: $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
    log "installing $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
fi

# ---- Slurm + munge for tests/slurm (issue 12; its own script, kept separate from the Docker set-up above)
bash "$(dirname "$0")/ci-setup-slurm.sh"
# ---- end Slurm

# ---- the image registry for the workspace-image tests (issue 10)
bash "$(dirname "$0")/ci-setup-registry.sh"

# ---- OpenSSH's server for the ssh:// Docker-host tests (issue 12)
bash "$(dirname "$0")/ci-setup-ssh.sh"

engine_up() { docker info >/dev/null 2>&1; }

if engine_up; then
    log "Docker Engine $(docker version --format '{{.Server.Version}}') is running"
    exit 0
fi
if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
    log "DOCKER_HOST=$DOCKER_HOST does not answer; not starting a local dockerd for it"
    exit 1
fi

log "starting dockerd (log: /var/log/ddpctl-dockerd.log)"
# containerd first when it is installed separately (docker.io depends on it); dockerd starts its own otherwise
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl start docker || true
fi
if ! engine_up; then
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        $SUDO sh -c 'nohup dockerd >/var/log/ddpctl-dockerd.log 2>&1 &'
    fi
fi
for _ in $(seq 1 60); do
    if engine_up; then
        log "Docker Engine $(docker version --format '{{.Server.Version}}') is running"
        exit 0
    fi
    sleep 1
done
log "dockerd did not come up within 60 s; last lines of its log:"
tail -n 20 /var/log/ddpctl-dockerd.log >&2 || true
exit 1
