#!/usr/bin/env bash
# The GPU bundle (deploy/gpu-bundle.sh) as a machine without our Debian libraries would run it: made
# without its archive into a scratch folder, then for each program in its bin/ (the probe kernel
# is a library): ldd resolves every library, inside the bundle's lib/ but glibc's own; its RUNPATH
# is $ORIGIN/../lib (each library's, $ORIGIN); it starts in an empty environment (--help, and the
# daemons' --check-config without a config file), also with LD_LIBRARY_PATH naming an empty folder.
#   gpu_bundle_test.sh SOURCE_DIR BUILD_DIR
# Skips (77) without patchelf, which the bundle needs.
set -euo pipefail

SOURCE=$1 BUILD=$2
# glibc's own libraries, which come from the machine the bundle runs on.
GLIBC='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libnsl\.so\.1)$'
DAEMONS=(trackerd tunerd device-agent)

command -v patchelf >/dev/null || { echo "SKIP: patchelf is not installed (deploy/install-deps.sh installs it)"; exit 77; }

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/tunefarm-gpu-bundle-test.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

bash "$SOURCE/deploy/gpu-bundle.sh" "$BUILD" "$SCRATCH/out"
BUNDLE=$SCRATCH/out/tunefarm-bundle
LIB=$(realpath "$BUNDLE/lib")
EMPTY=$SCRATCH/empty
mkdir "$EMPTY" "$SCRATCH/data"
# Relative paths a program writes (tunerd's default --data-dir) land in the scratch folder.
cd "$SCRATCH"

runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
for f in "$BUNDLE"/bin/*; do
  [[ $(runpath "$f") == '$ORIGIN/../lib' ]] || fail "bin/${f##*/}: RUNPATH is '$(runpath "$f")', not \$ORIGIN/../lib"
done
for f in "$BUNDLE"/lib/*; do
  name=${f##*/}
  [[ $(runpath "$f") == '$ORIGIN' ]] || fail "lib/$name: RUNPATH is '$(runpath "$f")', not \$ORIGIN"
  [[ ! $name =~ $GLIBC && $name != libcuda.so* ]] || fail "lib/$name is glibc's or the driver's: it must come from the machine"
done

programs=()
for f in "$BUNDLE"/bin/*; do [[ $f == *.so ]] || programs+=("${f##*/}"); done
[[ ${#programs[@]} -eq 7 ]] || fail "bin/ holds ${#programs[@]} programs (${programs[*]}), not 7"

# runs PROGRAM ARGS... with nothing from this shell's environment, then again with LD_LIBRARY_PATH
# naming an empty folder; prints the exit codes of both.
bare() {
  local rc1=0 rc2=0
  env -i PATH=/usr/bin:/bin "$BUNDLE/bin/$1" "${@:2}" >"$SCRATCH/out.log" 2>&1 || rc1=$?
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$EMPTY" "$BUNDLE/bin/$1" "${@:2}" >>"$SCRATCH/out.log" 2>&1 || rc2=$?
  echo "$rc1 $rc2"
}

for p in "${programs[@]}"; do
  for ld_path in "" "$EMPTY"; do
    deps=$(env -i PATH=/usr/bin:/bin ${ld_path:+LD_LIBRARY_PATH=$ld_path} ldd "$BUNDLE/bin/$p" 2>&1) ||
      { fail "$p: ldd failed: $deps"; continue; }
    while read -r name arrow path _; do
      [[ $arrow == "=>" ]] || continue
      if [[ $path == not ]]; then fail "$p: $name is not found"; continue; fi
      [[ $name =~ $GLIBC ]] && continue
      [[ $(dirname "$(realpath "$path")") == "$LIB" ]] || fail "$p: $name resolves to $path, outside the bundle's lib/"
    done <<<"$deps"
  done

  if [[ $p == tunefarm-measure-worker ]]; then
    # The worker has no --help: without arguments it prints its usage and exits 2 (127 when it cannot load).
    [[ $(bare "$p") == "2 2" ]] && grep -q '^usage:' "$SCRATCH/out.log" ||
      fail "$p without arguments: exit codes $(bare "$p"), not 2: $(head -c 2000 "$SCRATCH/out.log")"
  else
    [[ $(bare "$p" --help) == "0 0" ]] || fail "$p --help: exit codes $(bare "$p" --help): $(head -c 2000 "$SCRATCH/out.log")"
  fi
done

for d in "${DAEMONS[@]}"; do
  args=(--check-config)
  [[ $d != tunerd ]] || args+=(--data-dir "$SCRATCH/data")
  [[ $(bare "$d" "${args[@]}") == "0 0" ]] ||
    fail "$d ${args[*]}: exit codes $(bare "$d" "${args[@]}"): $(head -c 2000 "$SCRATCH/out.log")"
done

if ((failures)); then
  echo "gpu_bundle: $failures failures" >&2
  exit 1
fi
echo "gpu_bundle: ${#programs[@]} programs resolve their $(ls "$BUNDLE/lib" | wc -l) libraries in the bundle and start bare"
