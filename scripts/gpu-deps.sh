#!/usr/bin/env bash
# scripts/gpu-deps.sh: the Debian 12 packages the build needs that a GPU
# image without network lacks (Open MPI, OpenBLAS, SQLite, jansson, cmocka,
# pkg-config), carried over as .deb files and unpacked into a private prefix.
#
#   bash scripts/gpu-deps.sh download        # here (network): the .debs into build-gpu-deps/debs
#   bash scripts/gpu-deps.sh unpack [PREFIX] # there: unpack into PREFIX (default build-gpu-deps/prefix)
#                                            # and write PREFIX/env.sh
#   bash scripts/gpu-deps.sh check           # here: the whole path with the system's copies hidden
#   . PREFIX/env.sh                          # PATH, LD_LIBRARY_PATH, PKG_CONFIG_PATH, OPAL_PREFIX,
#                                            # CMAKE_PREFIX_PATH, SB_DEPS_CMAKE_ARGS
#
# build-gpu-deps/ is ignored by git; carry build-gpu-deps/debs to the GPU machine (the run
# tool's `carry: ["build-gpu-deps/debs"]`). tests/gpu/run.sh unpacks it by
# itself when it finds build-gpu-deps/debs and no mpirun on the machine.
# Not carried: libc, libstdc++, libgcc, libgomp, the toolchain (the image's
# own), oneDNN (the CPU convolutions fall back to im2col), protobuf-c (ONNX
# import is built off). The .debs are Debian 12's: the image's glibc must
# be 2.36 or newer.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=$root/build-gpu-deps
debs=$deps/debs
arch=x86_64-linux-gnu

# what a build with tests, `shardbench run` and mpirun need; libraries only
# (the -dev packages' own dependencies are headers the C code never includes)
packages=(
    # Open MPI 4.1 and what its libraries and mpirun load
    openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
    libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libmunge2
    libfabric1 ibverbs-providers libatomic1 libuuid1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
    libpsm2-2 libpsm-infinipath1 libnuma1 libltdl7 libpciaccess0 libudev1
    libgfortran5 libquadmath0 libzstd1 zlib1g
    # OpenBLAS (pthread flavour)
    libopenblas0 libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev
    # SQLite, jansson, cmocka
    libsqlite3-0 libsqlite3-dev libjansson4 libjansson-dev libcmocka0 libcmocka-dev
    # pkg-config (CMake's FindPkgConfig)
    pkgconf pkgconf-bin libpkgconf3
)

download() {
    command -v apt-get >/dev/null || { echo "gpu-deps.sh: download needs apt-get (Debian 12)" >&2; exit 1; }
    rm -rf "$debs"
    mkdir -p "$debs"
    (cd "$debs" && apt-get download "${packages[@]}")
    du -sh "$debs"
    printf 'gpu-deps.sh: %d packages, %s bytes in %s\n' "$(ls "$debs" | wc -l)" \
        "$(du -sb "$debs" | cut -f1)" "$debs"
}

# one .deb into the prefix: dpkg -x, else ar + tar (data.tar.xz/zst/gz)
unpack_deb() {
    local deb=$1 prefix=$2
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$deb" "$prefix"
        return
    fi
    local tmp
    tmp=$(mktemp -d)
    if command -v ar >/dev/null; then
        (cd "$tmp" && ar x "$deb")
    else # python's own reading of the ar format
        python3 - "$deb" "$tmp" <<'EOF'
import sys, os
deb, out = sys.argv[1], sys.argv[2]
with open(deb, 'rb') as f:
    assert f.read(8) == b'!<arch>\n'
    while True:
        h = f.read(60)
        if len(h) < 60: break
        name = h[:16].decode().strip().rstrip('/'); size = int(h[48:58])
        data = f.read(size)
        if size % 2: f.read(1)
        with open(os.path.join(out, name), 'wb') as o: o.write(data)
EOF
    fi
    local data
    data=$(ls "$tmp"/data.tar.* 2>/dev/null | head -n 1)
    [ -n "$data" ] || { echo "gpu-deps.sh: no data.tar in $deb" >&2; exit 1; }
    tar -xf "$data" -C "$prefix"
    rm -rf "$tmp"
}

unpack() {
    local prefix=${1:-$deps/prefix}
    ls "$debs"/*.deb >/dev/null 2>&1 ||
        { echo "gpu-deps.sh: no .deb files in $debs (run 'download' on a machine with network)" >&2; exit 1; }
    mkdir -p "$prefix"
    prefix=$(cd "$prefix" && pwd)
    local d
    for d in "$debs"/*.deb; do unpack_deb "$d" "$prefix"; done
    local lib=$prefix/usr/lib/$arch
    # what Debian's alternatives would have linked
    ln -sfn "$lib/openblas-pthread/libopenblas.so.0" "$lib/libopenblas.so.0"
    ln -sfn "$lib/openblas-pthread/libopenblas.so" "$lib/libopenblas.so"
    ln -sfn ../libpsm1/libpsm_infinipath.so.1.16 "$lib/libpsm_infinipath.so.1"
    mkdir -p "$lib/pkgconfig"
    ln -sfn ../openblas-pthread/pkgconfig/openblas.pc "$lib/pkgconfig/openblas.pc"
    local b
    for b in mpirun mpiexec mpicc; do ln -sfn "$b.openmpi" "$prefix/usr/bin/$b"; done
    # absolute links inside the packages point at /usr/...: into the prefix
    local l t
    while IFS= read -r l; do
        t=$(readlink "$l")
        case $t in /*) [ -e "$prefix$t" ] && ln -sfn "$prefix$t" "$l" ;; esac
    done < <(find "$prefix" -type l)
    # pkg-config files name prefix=/usr (or /usr/lib/...): rewrite them
    local pc
    while IFS= read -r pc; do
        sed -i -E -e "s#^(prefix|libdir|includedir|exec_prefix)=/usr#\1=$prefix/usr#" \
            -e "s#(-[LI])/usr/#\1$prefix/usr/#g" "$pc"
    done < <(find "$prefix" -name '*.pc' -type f)
    local mpiinc=$prefix/usr/lib/$arch/openmpi/include
    local mpilib=$prefix/usr/lib/$arch/libmpi.so
    [ -e "$mpilib" ] || mpilib=$prefix/usr/lib/$arch/openmpi/lib/libmpi.so
    cat >"$prefix/env.sh" <<EOF
# written by scripts/gpu-deps.sh unpack: the private prefix $prefix
export SB_DEPS_PREFIX=$prefix
export PATH=$prefix/usr/bin:\$PATH
export LD_LIBRARY_PATH=$lib/pmix2/lib:$lib:$lib/openblas-pthread:$lib/openmpi/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$prefix/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
export CMAKE_PREFIX_PATH=$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}
export OPAL_PREFIX=$prefix/usr
export OPAL_LIBDIR=$lib
export OMPI_MCA_mca_base_component_path=$lib/openmpi/lib/openmpi3
export PMIX_PREFIX=$lib/pmix2
export PMIX_MCA_mca_base_component_path=$lib/pmix2/lib/pmix
# Open MPI's help texts, its MCA components and the wrapper are found through OPAL_PREFIX;
# CMake's FindMPI is told the header and library instead of running mpicc.
export SB_DEPS_CMAKE_ARGS="-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkgconf -DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_C_HEADER_DIR=$mpiinc -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY=$mpilib -DMPIEXEC_EXECUTABLE=$prefix/usr/bin/mpirun -DSQLite3_INCLUDE_DIR=$prefix/usr/include -DSQLite3_LIBRARY=$lib/libsqlite3.so"
EOF
    echo "gpu-deps.sh: unpacked $(ls "$debs"/*.deb | wc -l) packages into $prefix; . $prefix/env.sh"
}

# The system's copies of what the .debs hold, hidden in a private mount
# namespace (unshare -m) so that only the prefix can answer.
hide_system() {
    local e=$1 l=/usr/lib/$arch f
    mkdir -p "$e"
    for f in $l/pmix2 $l/openmpi $l/hwloc $l/openblas-pthread $l/pkgconfig /usr/share/openmpi \
        /usr/share/pkgconfig; do
        [ -d "$f" ] && mount --bind "$e" "$f"
    done
    for f in $l/libmpi* $l/libopen-* $l/libpmix* $l/libhwloc* $l/libevent* $l/libsqlite3* $l/libjansson* \
        $l/libopenblas* $l/libcmocka* $l/libfabric* $l/libuc[pst]* /usr/include/sqlite3.h \
        /usr/include/jansson*.h /usr/include/cmocka*.h /usr/bin/mpi* /usr/bin/orte* /usr/bin/ompi* \
        /usr/bin/pkg-config /usr/bin/pkgconf; do
        [ -e "$f" ] && mount --bind /dev/null "$f"
    done
    return 0
}

# check [BUILD]: this machine, end to end as far as it goes without a GPU:
# unpack into a fresh prefix, hide the system's copies, configure and build
# the CPU library, shardbench and test_relayout against the prefix only,
# then mpirun (relocated Open MPI) test_relayout on 2 ranks and a
# `shardbench run` of a small AlexNet on 2 ranks.
check() {
    local b=${1:-$deps/check-build} p=$deps/check-prefix
    rm -rf "$p"
    unpack "$p"
    unshare -m --propagation private bash -euo pipefail -c "
        $(declare -f hide_system); arch=$arch; hide_system $deps/empty
        . $p/env.sh
        export PKG_CONFIG_LIBDIR=\$PKG_CONFIG_PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        export OPENBLAS_NUM_THREADS=1 SHARDBENCH_MODELS=$root/models
        echo \"mpirun: \$(command -v mpirun)\"; ! [ -s /usr/bin/mpirun ]
        cmake -S $root -B $b -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_CUDA=OFF -DSHARDBENCH_TESTS=ON \
            \$SB_DEPS_CMAKE_ARGS >$b.cmake.log
        cmake --build $b -j\$(nproc) --target shardbench test_relayout >/dev/null
        ldd $b/shardbench | grep -E 'mpi|blas|sqlite|jansson'
        mpirun --oversubscribe -np 2 $b/tests/test_relayout | tail -n 1
        mpirun --oversubscribe -np 2 $b/shardbench run -m alexnet --set batch=8 --set image=67 \
            --set width_div=16 --strategy dp --steps 2 --db none | grep -E 'median|samples'
    "
    echo "gpu-deps.sh: check passed: built and ran from $p alone"
}

case ${1:-} in
download) download ;;
unpack) unpack "${2:-}" ;;
check) check "${2:-}" ;;
*)
    echo "usage: bash scripts/gpu-deps.sh download | unpack [PREFIX] | check [BUILD]" >&2
    exit 2
    ;;
esac
