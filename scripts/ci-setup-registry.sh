#!/usr/bin/env bash
# The image registry for the workspace-image tests (tests/support/registry.py): installs Debian's
# docker-registry (the CNCF distribution registry) when missing. Nothing is started or configured here: the
# tests start their own 'docker-registry serve CONFIG' on a free loopback port with its own storage directory
# and stop it afterwards. The package's own service does not start (no systemd / policy-rc.d).
# Idempotent. Debian/Ubuntu (apt). Needs root (or sudo).
set -euo pipefail

log() { echo "ci-setup-registry: $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if command -v docker-registry >/dev/null 2>&1; then
    log "docker-registry $(dpkg-query -W -f='${Version}' docker-registry 2>/dev/null || echo "(version unknown)") is installed"
    exit 0
fi
log "installing docker-registry"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
log "installed docker-registry"
