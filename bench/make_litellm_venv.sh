#!/usr/bin/env bash
# Create the LiteLLM bench venv (bench/.venv-litellm, gitignored) used by
# `bench_server.py --litellm`: LiteLLM's proxy, installed apart from synopsis's own venv so
# neither one's pins constrain the other. Needs only PyPI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv-litellm"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q 'litellm[proxy]'
"$venv/bin/litellm" --version || true
echo "LiteLLM proxy venv ready: $venv"
