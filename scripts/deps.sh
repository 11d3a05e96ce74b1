# shellcheck shell=bash
# scripts/deps.sh: the Debian 12 packages shardbench needs, and a function
# that installs the missing ones. Sourced (not run) by scripts/*.sh and
# .ci/run; defines functions and one array, changes nothing by itself.
#
#   source scripts/deps.sh
#   sb_install_deps     # apt-get only if some package is missing
#   sb_env              # exports the run-time settings tests and CI use
#   sb_jax_venv         # build-venv-jax/: JAX (CPU) for the export_jax test

# What each package is for:
#   build-essential cmake pkg-config   the build
#   clang libclang-rt-14-dev           libFuzzer targets (scripts/fuzz.sh)
#   libcmocka-dev                      unit tests
#   libsqlite3-dev sqlite3             results database (and its shell)
#   libjansson-dev                     JSON (strategies, run reports, bench)
#   libopenmpi-dev openmpi-bin         runtime: one MPI rank per device
#   libopenblas-dev libdnnl-dev        runtime: cpu backend kernels
#   gnuplot-nox                        plots
#   libprotobuf-c-dev protobuf-c-compiler libonnx-dev   ONNX import
#     (python3-onnx, python3-torch, python3-torchvision only regenerate
#     tests/data/onnx with its make.py; neither the build nor CI needs them)
#   git                                commit id compiled into the build
#   python3-venv                       build-venv-jax/ (sb_jax_venv)
SB_DEB_PACKAGES=(
    build-essential cmake pkg-config
    clang libclang-rt-14-dev
    libcmocka-dev
    libsqlite3-dev sqlite3
    libjansson-dev
    libopenmpi-dev openmpi-bin
    libopenblas-dev libdnnl-dev
    gnuplot-nox
    libprotobuf-c-dev protobuf-c-compiler libonnx-dev
    git
    python3-venv
)

# Prints the packages of SB_DEB_PACKAGES that are not installed, one a line.
sb_missing_deps() {
    local p
    for p in "${SB_DEB_PACKAGES[@]}"; do
        if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed$'; then
            echo "$p"
        fi
    done
}

# Installs the missing packages (non-interactive). Runs apt-get update only
# when something is missing, so it costs a second when all is installed.
# Needs root, or sudo.
sb_install_deps() {
    local missing sudo=()
    mapfile -t missing < <(sb_missing_deps)
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "deps: missing packages (run as root to install them): ${missing[*]}" >&2
            return 1
        fi
    fi
    echo "deps: installing ${missing[*]}" >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout=300 update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}"
    mapfile -t missing < <(sb_missing_deps)
    if [ "${#missing[@]}" -ne 0 ]; then
        echo "deps: still missing after apt-get install: ${missing[*]}" >&2
        return 1
    fi
}

# Settings for running tests: MPI as root (CI and the Quick start run as
# root), one BLAS thread per process (several ranks share few cores).
sb_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
}

# The Python the export_jax test runs exported programs with
# (tests/tests.cmake): a venv in build-venv-jax/ (git-ignored) with
# JAX for the CPU and numpy at versions that work with Debian 12's Python
# 3.11, from PyPI through pip. Does nothing when the venv already holds
# them (a stamp file names the pins); about 1 minute the first time.
SB_JAX_PINS=("jax[cpu]==0.4.38" "numpy==1.26.4")
sb_jax_venv() {
    local root venv
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    venv=$root/build-venv-jax
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.pins" 2>/dev/null)" = "${SB_JAX_PINS[*]}" ]; then
        return 0
    fi
    echo "deps: creating $venv (${SB_JAX_PINS[*]})" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" &&
        "$venv/bin/pip" install -q --disable-pip-version-check "${SB_JAX_PINS[@]}" &&
        "$venv/bin/python" -c 'import jax, numpy' &&
        echo "${SB_JAX_PINS[*]}" > "$venv/.pins" || {
        echo "deps: could not make $venv" >&2
        rm -rf "$venv"
        return 1
    }
}
