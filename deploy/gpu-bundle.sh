#!/usr/bin/env bash
# Makes a self-contained x86-64 bundle of the farm's programs, for a machine that has glibc (and
# NVIDIA's driver for CUDA work) but none of the Debian libraries they link, e.g. a rented GPU box:
#   deploy/gpu-bundle.sh [BUILD_DIR [OUT_DIR]] [--archive FILE.tar.xz|FILE.tar.zst]
# BUILD_DIR (default build) holds the built programs (bin/) and the kernel runtime (lib/).
# OUT_DIR (default BUILD_DIR/gpu-bundle) gets tunefarm-bundle/: bin/ (the programs), lib/ (the kernel
#   runtime and every library they load but glibc's own and the driver's), MANIFEST and README.
# --archive also writes the bundle as a compressed tar (.tar.xz: xz -6; .tar.zst: zstd -19 --long).
# Needs ldd, patchelf, readelf and tar (and xz or zstd for --archive).
set -euo pipefail

PROGRAMS=(trackerd device-agent tunefarm-measure-worker tunefarm-probe-kernel.so tunerd tune-client
          tunefarm-build-library tunefarm-model-import)
# glibc's own libraries: they must come from the target machine, whose loader they belong with.
GLIBC='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libnsl\.so\.1)$'

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-bundle: $*" >&2; exit 1; }

args=() archive=
while (($#)); do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --archive) (($# >= 2)) || die "--archive needs a file name"; archive=$2; shift 2 ;;
    --archive=*) archive=${1#*=}; shift ;;
    -*) usage >&2; die "unknown option $1" ;;
    *) args+=("$1"); shift ;;
  esac
done
((${#args[@]} <= 2)) || { usage >&2; die "too many arguments: ${args[*]}"; }
build=${args[0]:-build}
out=${args[1]:-$build/gpu-bundle}
case $archive in
  '') ;;
  *.tar.xz) compress=(xz -T0 -6) ;;
  # A 128 MiB window (--long=27) finds the repeats across libraries; zstd's decompressor accepts it
  # without flags (its default memory limit is 128 MiB).
  *.tar.zst) compress=(zstd -T0 -19 --long=27 -q) ;;
  *) die "--archive $archive: name it .tar.xz or .tar.zst" ;;
esac
for tool in ldd patchelf readelf tar ${archive:+"${compress[0]}"}; do
  command -v "$tool" >/dev/null || die "$tool is not installed (deploy/install-deps.sh installs it)"
done
[[ -d $build/bin ]] || die "$build/bin does not exist: build first (make gpu-bundle)"
readelf -h "$build/bin/trackerd" 2>/dev/null | grep -q 'Machine:.*X86-64' ||
  die "$build/bin/trackerd is missing or not an x86-64 program"

bundle=$out/tunefarm-bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for p in "${PROGRAMS[@]}"; do
  [[ -f $build/bin/$p ]] || die "$build/bin/$p is missing: build it (make gpu-bundle)"
  cp -L "$build/bin/$p" "$bundle/bin/"
done
[[ -f $build/lib/libtunefarm_rt.so ]] || die "$build/lib/libtunefarm_rt.so is missing: build tunefarm_rt"
cp -L "$build/lib/libtunefarm_rt.so" "$bundle/lib/"

# ldd lists every library a program loads, its libraries' libraries too, as this machine's loader
# finds them; LD_LIBRARY_PATH is left out so that the bundle never depends on this shell's.
declare -A copied=([libtunefarm_rt.so]=1)
for p in "${PROGRAMS[@]}"; do
  deps=$(env -u LD_LIBRARY_PATH ldd "$build/bin/$p") || die "ldd $build/bin/$p failed"
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue  # linux-vdso.so.1 and the loader itself
    [[ $path != not ]] || die "$p needs $name, which this machine's loader does not find"
    [[ ! $name =~ $GLIBC && -z ${copied[$name]:-} ]] || continue
    # The agent loads the driver with dlopen at run time; linked, the bundle would not start without it.
    [[ $name != libcuda.so* ]] || die "$p links $name: the CUDA driver must only be loaded with dlopen"
    soname=$(patchelf --print-soname "$path")
    [[ $soname == "$name" ]] || die "$path has SONAME $soname, not the $name that $p needs"
    cp -L "$path" "$bundle/lib/$name"
    copied[$name]=$path
  done <<<"$deps"
done

# RUNPATH makes the loader look in the bundle first, and applies to each file's own libraries: so
# every library gets one too. (System copies are read-only for their owner on some machines.)
chmod u+w "$bundle"/bin/* "$bundle"/lib/*
for f in "$bundle"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$bundle"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done

# The newest glibc symbol version any file asks for: the oldest glibc the bundle runs with.
glibc=$(for f in "$bundle"/bin/* "$bundle"/lib/*; do readelf -V --wide "$f"; done |
        grep -o 'Name: GLIBC_[0-9.]*' | sed 's/.*GLIBC_//' | sort -uV | tail -n 1)
source_rev=$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo unknown)

cat >"$bundle/README" <<EOF
tunefarm bundle (x86-64, source $source_rev, made by deploy/gpu-bundle.sh)

The farm's programs with every shared library they load except glibc's own, for a machine that
has none of Debian's libraries: it needs x86-64 Linux with glibc $glibc or newer (ldd --version
says which a machine has), and for CUDA targets NVIDIA's driver (device-agent loads libcuda.so.1
with dlopen, from the system). Each program finds its libraries in lib/ by its RUNPATH
(\$ORIGIN/../lib), from wherever the folder is unpacked; LD_LIBRARY_PATH needs no setting.
tune-client build (kernel libraries) runs the system's cc and ld, which must be on PATH then.

Start the farm from this folder (README.md of the source, "Command line", says more):
  bin/trackerd     --listen 127.0.0.1:9190 &
  bin/device-agent --tracker 127.0.0.1:9190 --key gpu-h100 --sandbox-without landlock &
                   # its start lines say "GPU ...: measures 'cuda' candidates" (Landlock: README.md)
  bin/tunerd       --listen 127.0.0.1:9191 --tracker 127.0.0.1:9190 --data-dir tunefarm-data &
  bin/tune-client  devices
  bin/tune-client  submit --workload 'matmul:M=512,N=512,K=512' --target 'cuda -arch=sm_90' \\
                   --device gpu-h100 --trials 64 --watch

Every program prints its flags with --help. MANIFEST lists each file and its size in bytes.
EOF
(cd "$bundle" && find . -type f ! -name MANIFEST -printf '%P\t%s\n' | sort) >"$bundle/MANIFEST"
echo "gpu-bundle: $bundle: ${#PROGRAMS[@]} programs, $(find "$bundle/lib" -type f | wc -l) libraries," \
     "$(du -sb "$bundle" | cut -f1 | numfmt --to=iec-i --suffix=B) (glibc $glibc or newer)"

if [[ -n $archive ]]; then
  mkdir -p "$(dirname "$archive")"
  # Files in name order, owned by root rather than by whoever made the bundle here.
  tar -C "$out" --sort=name --owner=0 --group=0 --numeric-owner -cf - tunefarm-bundle |
    "${compress[@]}" >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  size=$(stat -c %s "$archive")
  echo "gpu-bundle: $archive: $(numfmt --to=iec-i --suffix=B --format=%.1f "$size") ($size bytes)"
fi
