#!/bin/bash
# Packs what a bare GPU machine lacks to run a CUDA build of stratbench made
# here: the binaries the GPU checks need, every shared library they and Open
# MPI's launcher and plugins load that is not the C runtime or CUDA's own
# (CUDA, cuBLAS and NCCL come from the GPU machine: libcublas alone is
# hundreds of MB), and Open MPI's launcher tree, laid out as under /usr so
# that OPAL_PREFIX relocates it. tools/gpu/check.sh unpacks it there.
#
# Usage: tools/gpu/bundle.sh [BUILD [OUT]]   (default build, .gpu/bundle.tar.xz)
# Needs: a CUDA build (./configure.py --cuda-arch 90 && ninja), Debian's
# openmpi-bin and libopenmpi3 installed (bench/setup-debian.sh).
set -euo pipefail
build=${1:-build}
out=${2:-.gpu/bundle.tar.xz}
multiarch=x86_64-linux-gnu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
mkdir -p "$root/build/tests" "$root/lib" "$root/usr/bin" "$root/usr/lib/$multiarch" \
         "$root/usr/share" "$root/etc"

for f in stratbench tests/test_cuda_backend tests/libnvtx_inject.so; do
    [ -e "$build/$f" ] || { echo "bundle: $build/$f is missing (build first)" >&2; exit 2; }
    cp "$build/$f" "$root/build/$f"
done
grep -q SB_HAVE_CUDA "$build/../build.ninja" 2>/dev/null ||
    { echo "bundle: build.ninja is not a CUDA build (./configure.py --cuda-arch 90)" >&2; exit 2; }

# Open MPI 4.1 (Debian's layout): launcher, daemon, libraries and plugins,
# help texts; PMIx with its plugins; the site parameter file.
cp -a /usr/bin/orterun /usr/bin/orted "$root/usr/bin/"
ln -s orterun "$root/usr/bin/mpirun"
cp -a "/usr/lib/$multiarch/openmpi" "/usr/lib/$multiarch/pmix2" "$root/usr/lib/$multiarch/"
rm -rf "$root/usr/lib/$multiarch/openmpi/include" "$root/usr/lib/$multiarch/pmix2/include"
find "$root/usr/lib/$multiarch" -name '*.a' -delete
cp -a /usr/share/openmpi "$root/usr/share/"
cp -a /etc/openmpi "$root/etc/"

# The shared libraries all of the above load, except the C runtime (every
# Linux has it) and CUDA's (the GPU machine's own must match its driver).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libnccl|libnvidia)'
{
    find "$root/build" "$root/usr" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
        xargs -0 ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
} | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    case $path in "$root"/*) continue ;; esac
    [ -e "$root/lib/$name" ] || cp -L "$path" "$root/lib/$name"
done

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" root
echo "bundle: $out $(du -h "$out" | cut -f1) ($(ls "$root/lib" | wc -l) libraries)"
