#!/usr/bin/env bash
# scripts/test.sh: the test command of the Quick start (README.md).
#
# Installs missing Debian packages and the JAX venv (build-venv-jax/),
# builds the Sanitize configuration (ASan + UBSan) in build-sanitize/ and runs every ctest test there, then
# builds Release in build/ and checks that `cmake --install` gives a usable
# package: libraries, headers, pkg-config file and models, with a small
# program compiled through pkg-config (linked dynamically, then statically
# with `pkg-config --static`) that loads a shipped model.
# Stops at the first failure with a non-zero status.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
sb_install_deps
sb_env
sb_jax_venv # the export_jax test is registered where it exists
jobs=$(nproc)

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'test.sh: FAILED: %s\n' "$*" >&2; exit 1; }

step "Sanitize build (build-sanitize/)"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Sanitize -DSHARDBENCH_TESTS=ON
cmake --build build-sanitize -j"$jobs"

step "unit tests (ctest, Sanitize)"
ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j2

step "Release build (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_TESTS=OFF
cmake --build build -j"$jobs"

step "install check"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install build --prefix "$prefix" >/dev/null

need=(lib/libshardbench.a lib/libshardbench.so lib/pkgconfig/shardbench.pc)
for h in include/shardbench/*.h; do need+=("$h"); done
for m in models/*.model; do need+=("share/shardbench/models/${m#models/}"); done
for f in "${need[@]}"; do
    [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
echo "installed: ${#need[@]} files checked under $prefix"

cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#include <shardbench/model.h>
int main(void) {
    sb_model m; sb_error err = {0};
    if (sb_model_load("alexnet", NULL, 0, &m, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("%s %d %s\n", m.name, m.nops, m.path);
    int ok = m.nops > 0; sb_model_free(&m);
    return ok ? 0 : 1;
}
C
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs shardbench) || fail "pkg-config does not find shardbench"
# shellcheck disable=SC2086  # flags are words
cc -std=c17 -Wall -Werror -o "$tmp/use" "$tmp/use.c" $flags ||
    fail "a program using 'pkg-config --cflags --libs shardbench' ($flags) does not build"
out=$(SHARDBENCH_MODELS=$prefix/share/shardbench/models LD_LIBRARY_PATH=$prefix/lib "$tmp/use") ||
    fail "the installed library does not load alexnet: $out"
echo "$out"
case "$out" in
    "alexnet "*" $prefix/share/shardbench/models/alexnet.model") ;;
    *) fail "alexnet did not come from the installed models: $out" ;;
esac
# the static library with what `pkg-config --static` says it needs besides
sflags=$(pkg-config --static --cflags --libs shardbench) || fail "pkg-config --static does not find shardbench"
# shellcheck disable=SC2086  # flags are words
cc -std=c17 -Wall -Werror -o "$tmp/use_static" "$tmp/use.c" "$prefix/lib/libshardbench.a" \
    ${sflags//-lshardbench/} ||
    fail "a static link with 'pkg-config --static --cflags --libs shardbench' ($sflags) fails"
SHARDBENCH_MODELS=$prefix/share/shardbench/models "$tmp/use_static" > /dev/null ||
    fail "the statically linked program does not load alexnet"
echo "static link: ok"

step "all tests passed"
