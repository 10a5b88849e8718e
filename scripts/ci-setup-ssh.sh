#!/usr/bin/env bash
# OpenSSH's server for the ssh:// Docker-host tests (tests/support/twohost.py): installs Debian's
# openssh-server (and the client, and openssl for the TLS tests' certificates) when missing. Nothing is
# started or configured here: the tests start their own sshd inside each test network namespace, on a test
# port, with a generated host key, their own sshd_config and authorized_keys under a temporary directory,
# and stop it afterwards. Where policy-rc.d forbids it or systemd is absent (containers, CI images) the
# package's own service does not start.
# Idempotent. Debian/Ubuntu (apt). Needs root (or sudo).
set -euo pipefail

log() { echo "ci-setup-ssh: $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
{ command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; } || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)  # the TLS daemons' certificates
if [ ${#missing[@]} -eq 0 ]; then
    log "OpenSSH $(dpkg-query -W -f='${Version}' openssh-server 2>/dev/null || echo "(version unknown)") and openssl are installed"
    exit 0
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed ${missing[*]}"
