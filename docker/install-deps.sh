#!/bin/sh
# Stage 1 of docker/Dockerfile: make the venv /opt/ddpctl (it sees the base image's packages) and install
# torch, unless the base already has it, plus ddpctl's runtime dependencies. Offline when the wheelhouse
# has wheels and no INDEX_URL is given.
set -eu
W=/tmp/ddpctl
set --
if [ -n "$(ls "$W/wheelhouse" 2>/dev/null)" ]; then
    set -- "$@" --find-links "$W/wheelhouse"
    [ -n "${INDEX_URL:-}" ] || set -- "$@" --no-index
fi
[ -z "${INDEX_URL:-}" ] || set -- "$@" --index-url "$INDEX_URL"
[ ! -f "$W/ca/ca.pem" ] || set -- "$@" --cert "$W/ca/ca.pem"

python3 -m venv --without-pip --system-site-packages /opt/ddpctl
PY=/opt/ddpctl/bin/python
if $PY -c "import torch" 2>/dev/null; then
    echo "base image has torch $($PY -c 'import torch; print(torch.__version__)'); not installing it"
    grep -v '^torch' "$W/requirements.txt" > "$W/req.txt" || true
else
    cp "$W/requirements.txt" "$W/req.txt"
fi
echo "installing: $(tr '\n' ' ' < "$W/req.txt")"
if [ -s "$W/req.txt" ]; then
    $PY -m pip install --progress-bar off "$@" -r "$W/req.txt"
fi
rm -rf "$W"
