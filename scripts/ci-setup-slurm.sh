#!/usr/bin/env bash
# Slurm and munge for the real-Slurm tests (tests/slurm): installs Debian's slurm-wlm and munge when
# missing. Nothing is started or configured here: the tests' fixture starts its own munged, slurmctld and
# two slurmd from a generated slurm.conf under a temporary directory, and stops them afterwards.
# Idempotent. Debian/Ubuntu (apt). Needs root (or sudo).
set -euo pipefail

log() { echo "ci-setup-slurm: $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for exe in slurmctld slurmd sbatch srun scontrol; do
    command -v "$exe" >/dev/null 2>&1 || [ -x "/usr/sbin/$exe" ] || missing+=(slurm-wlm)
done
for exe in munged mungekey; do
    command -v "$exe" >/dev/null 2>&1 || [ -x "/usr/sbin/$exe" ] || missing+=(munge)
done
if [ ${#missing[@]} -eq 0 ]; then
    log "Slurm ($(dpkg-query -W -f='${Version}' slurm-wlm 2>/dev/null || echo "version unknown")) and munge are installed"
    exit 0
fi
pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
log "installing $pkgs"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d or no systemd: the packages' own services do not start; the tests start their own daemons.
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
log "installed $pkgs"
