#!/usr/bin/env bash
# scripts/main.sh: the first command of the Quick start (README.md).
#
# Installs missing Debian packages, builds Release in build/, and runs
# `shardbench paper`: PaSE's exact search over the paper's five models at
# p = 4, 8, 16, 32, 64, printing each best strategy and a summary table.
# Arguments go to `shardbench paper` (e.g. -p 4,8 --db none).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
sb_install_deps

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_TESTS=OFF
cmake --build build -j"$(nproc)"
build/shardbench paper "$@"
