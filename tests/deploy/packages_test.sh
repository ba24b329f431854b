#!/usr/bin/env bash
# The Debian packages on this machine, as an administrator gets them: installs the .deb files that
# `make packages` built with dpkg, checks what they put in place (programs, configs, units, the
# system user) and that it works (every program's --help, the configs through --check-config, the
# units through systemd-analyze verify, a GEMM tuned through the installed daemons running as the
# tunefarm user on loopback), then purges them and checks that nothing is left.
#
#   packages_test.sh AGENT.deb SERVER.deb CLIENT.deb [ARM64_AGENT.deb]
#
# With the agent package of an aarch64 cross build, it then installs that one as a board would
# (dpkg on this machine, whose multiarch arm64 libraries satisfy it), runs its programs under
# qemu-aarch64, verifies its unit and purges it the same way.
#
# Needs root (exit 77, a skip, without it). Whatever happens, the packages it installed are purged
# before it exits. It refuses (77) to touch tunefarm packages or a tunefarm user that were on the
# machine before it, unless its own marker says an earlier run of it left them.
set -euo pipefail

AGENT_DEB=$1 SERVER_DEB=$2 CLIENT_DEB=$3 ARM64_AGENT_DEB=${4:-}
PACKAGES=(tunefarm-agent tunefarm-server tunefarm-client)
MARKER=/var/tmp/tunefarm-packages-test.installed
LOCK=/run/lock/tunefarm-packages-test.lock

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

[[ $(id -u) -eq 0 ]] || { echo "SKIP: installing packages needs root"; exit 77; }
for deb in "$AGENT_DEB" "$SERVER_DEB" "$CLIENT_DEB"; do
  [[ -f $deb ]] || fail "$deb is missing (make packages builds it)"
done

# One run at a time on this machine, from any build tree.
exec 9>"$LOCK"
flock -w 300 9 || fail "another run holds $LOCK"

installed_packages() {
  local pkg status
  for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [[ -z $status || $status == not-installed ]] || echo "$pkg"
  done
}

# dpkg waits for nobody: while another dpkg or apt holds its lock, try again.
dpkg_retrying() {
  local out
  for _ in $(seq 120); do
    if out=$(dpkg "$@" 2>&1); then echo "$out"; return 0; fi
    if ! grep -q "lock" <<<"$out"; then echo "$out" >&2; return 1; fi
    sleep 5
  done
  echo "$out" >&2
  return 1
}

purge_all() {
  local left
  left=$(installed_packages)
  [[ -z $left ]] || dpkg_retrying --purge $left
}

if [[ -n $(installed_packages) || -n $(getent passwd tunefarm || true) ]]; then
  if [[ ! -f $MARKER ]]; then
    echo "SKIP: tunefarm packages or a tunefarm user are on this machine already, not installed by this test:" \
         "$(installed_packages | tr '\n' ' ')"
    exit 77
  fi
  step "purging what an interrupted run left"
  purge_all
fi

WORK=$(mktemp -d /tmp/tunefarm-packages-test.XXXXXX)
DAEMONS=()
# Stops the daemons this run started, and waits for what they started (the agent's worker) to go:
# the user can be removed only once nothing runs as it.
stop_daemons() {
  local pid
  for pid in "${DAEMONS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${DAEMONS[@]}"; do wait "$pid" 2>/dev/null || true; done
  DAEMONS=()
  for _ in $(seq 50); do
    pgrep -u tunefarm >/dev/null 2>&1 || return 0
    sleep 0.2
  done
}
cleanup() {
  local rc=$?
  set +e
  stop_daemons
  if [[ -n $(installed_packages) ]]; then
    echo "cleanup: purging $(installed_packages | tr '\n' ' ')"
    purge_all >/dev/null || { echo "cleanup: the purge failed; $MARKER stays for the next run" >&2; rc=1; }
  fi
  # The marker stays while anything this run made is left, so that the next run may clean it up.
  [[ -n $(installed_packages) || -n $(getent passwd tunefarm || true) ]] || rm -f "$MARKER"
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
# A stop by signal (ctest's timeout, ^C) exits through cleanup too.
trap 'exit 143' TERM INT HUP

step "dpkg -i"
touch "$MARKER"
dpkg_retrying -i "$AGENT_DEB" "$SERVER_DEB" "$CLIENT_DEB"
for pkg in "${PACKAGES[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$pkg") == "install ok installed" ]] || fail "$pkg is not installed and configured"
  [[ $(dpkg-query -W -f='${Architecture}' "$pkg") == "$(dpkg --print-architecture)" ]] ||
    fail "$pkg is for $(dpkg-query -W -f='${Architecture}' "$pkg"), this machine is $(dpkg --print-architecture)"
  dpkg-query -L "$pkg" >"$WORK/$pkg.files"
done

step "the programs run from /usr/bin"
declare -A HELP_MENTIONS=([trackerd]=--listen [tunerd]=--data-dir [tunefarm-build-library]=--target
                          [device-agent]=--key [tune-client]=submit)
for program in "${!HELP_MENTIONS[@]}"; do
  [[ -x /usr/bin/$program ]] || fail "/usr/bin/$program is missing"
  out=$("/usr/bin/$program" --help) || fail "$program --help exited $?"
  grep -q -- "${HELP_MENTIONS[$program]}" <<<"$out" || fail "$program --help does not mention ${HELP_MENTIONS[$program]}"
done
# The helpers are found beside the programs that run them; each loads its libraries.
for helper in /usr/lib/tunefarm-agent/tunefarm-measure-worker /usr/lib/tunefarm-server/tunefarm-model-import; do
  out=$("$helper" --help 2>&1) || true
  grep -q -i "usage" <<<"$out" || fail "$helper does not start: $out"
done
[[ -f /usr/lib/tunefarm-agent/tunefarm-probe-kernel.so ]] || fail "the probe kernel is not beside the worker"

step "the configs are conffiles the daemons accept"
declare -A CONFIG_OF=([tunefarm-server]="trackerd:trackerd.toml tunerd:tunerd.toml" [tunefarm-agent]="device-agent:agent.toml")
for pkg in "${!CONFIG_OF[@]}"; do
  for entry in ${CONFIG_OF[$pkg]}; do
    program=${entry%%:*} file=/etc/tunefarm/${entry#*:}
    dpkg-query -W -f='${Conffiles}\n' "$pkg" | grep -q " $file " || fail "$file is not a conffile of $pkg"
    extra=()
    [[ $program == device-agent ]] && extra=(--key x86-avx512)
    "/usr/bin/$program" --config "$file" "${extra[@]}" --check-config || fail "$program refuses $file"
  done
done

step "the system user, its state directory and the directories of secrets"
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd tunefarm) || fail "no tunefarm user"
(( uid < 1000 )) || fail "tunefarm is not a system user (uid $uid)"
[[ $home == /var/lib/tunefarm && $shell == */nologin ]] || fail "tunefarm's home $home, shell $shell"
for dir in /etc/tunefarm/secrets:root /etc/tunefarm/tls:root /var/lib/tunefarm:tunefarm; do
  path=${dir%%:*} owner=${dir#*:}
  [[ $(stat -c '%U:%G %a' "$path") == "$owner:tunefarm 750" ]] || fail "$path is $(stat -c '%U:%G %a' "$path")"
done

step "the units: in place, enabled, and systemd-analyze verify"
UNITS=(tunefarm-trackerd.service tunefarm-tunerd.service tunefarm-agent@.service)
for unit in "${UNITS[@]}"; do
  [[ -f /lib/systemd/system/$unit ]] || fail "/lib/systemd/system/$unit is missing"
done
for unit in tunefarm-trackerd.service tunefarm-tunerd.service; do
  [[ -L /etc/systemd/system/multi-user.target.wants/$unit ]] || fail "$unit is not enabled"
done
# An instance enabled as README.md's "Running a lab" does (systemctl writes the link without a running
# systemd): the purge must not leave it pointing at a template that is gone.
systemctl enable tunefarm-agent@x86-avx512.service >/dev/null 2>&1 ||
  fail "systemctl enable tunefarm-agent@x86-avx512.service: $(systemctl enable tunefarm-agent@x86-avx512.service 2>&1)"
[[ -L /etc/systemd/system/multi-user.target.wants/tunefarm-agent@x86-avx512.service ]] ||
  fail "systemctl enable wrote no link for tunefarm-agent@x86-avx512"
# verify exits 0 on some warnings (an unknown key, say): any output is a failure too.
out=$(cd "$WORK" && systemd-analyze verify "${UNITS[@]/#//lib/systemd/system/}" \
      /lib/systemd/system/tunefarm-agent@x86-avx512.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z $out ]] || fail "systemd-analyze verify: $out"

step "a GEMM tuned through the installed daemons, as the tunefarm user"
chown tunefarm:tunefarm "$WORK"
chmod 0755 "$WORK"
ports=($(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))'))
tracker=127.0.0.1:${ports[0]} server=127.0.0.1:${ports[1]}
# exec: the job's pid is the daemon's, so that cleanup can stop it.
as_tunefarm() { exec setpriv --reuid=tunefarm --regid=tunefarm --init-groups "$@"; }
as_tunefarm /usr/bin/trackerd --listen "$tracker" --metrics-listen off >"$WORK/trackerd.log" 2>&1 &
DAEMONS+=($!)
TMPDIR=$WORK as_tunefarm /usr/bin/device-agent --tracker "$tracker" --key packages-test --metrics-listen off \
  >"$WORK/agent.log" 2>&1 &
DAEMONS+=($!)
as_tunefarm /usr/bin/tunerd --listen "$server" --tracker "$tracker" --data-dir "$WORK/history" --metrics-listen off \
  >"$WORK/tunerd.log" 2>&1 &
DAEMONS+=($!)
workload=matmul:M=32,N=32,K=32
for _ in $(seq 100); do
  tune-client --server "$server" --tracker "$tracker" devices 2>/dev/null | grep -q packages-test && break
  sleep 0.2
done
if ! timeout 180 tune-client --server "$server" submit --workload "$workload" --target llvm --device packages-test \
     --trials 8 --watch >"$WORK/submit.log" 2>&1; then
  cat "$WORK"/*.log >&2
  fail "the tuning job did not finish"
fi
best=$(tune-client --server "$server" best --workload "$workload" --target llvm --device packages-test --json)
grep -q '"device_key":"packages-test"' <<<"$best" || { cat "$WORK"/*.log >&2; fail "no best record: $best"; }
[[ $(stat -c %U "$WORK/history") == tunefarm ]] || fail "the history is not the tunefarm user's"
stop_daemons
! pgrep -u tunefarm >/dev/null || fail "processes still run as tunefarm: $(ps -o pid,args -u tunefarm)"

# purge_and_check PACKAGE...: purges them and checks that nothing of theirs is left, nor the user.
purge_and_check() {
  local pkg path left
  dpkg_retrying --purge "$@"
  [[ -z $(installed_packages) ]] || fail "still installed: $(installed_packages)"
  for pkg in "$@"; do
    while read -r path; do
      # Directories such as /usr/bin (or /lib, a link to one) stay for the system's other packages;
      # tunefarm's own go.
      [[ -d $path && $path != *tunefarm* ]] && continue
      [[ ! -e $path && ! -L $path ]] || fail "$path (from $pkg) is left after the purge"
    done <"$WORK/$pkg.files"
  done
  for path in /etc/tunefarm /var/lib/tunefarm; do
    [[ ! -e $path ]] || fail "$path is left after the purge"
  done
  ! getent passwd tunefarm >/dev/null || fail "the tunefarm user is left after the purge"
  ! getent group tunefarm >/dev/null || fail "the tunefarm group is left after the purge"
  left=$(find /etc/systemd /var/lib/systemd -name '*tunefarm*' 2>/dev/null)
  [[ -z $left ]] || fail "systemd state is left after the purge: $left"
}

step "dpkg --purge"
purge_and_check "${PACKAGES[@]}"
echo "packages_test: installed, ran and purged ${PACKAGES[*]}"

[[ -n $ARM64_AGENT_DEB ]] || exit 0
if [[ ! -f $ARM64_AGENT_DEB ]]; then
  echo "packages_test: no $ARM64_AGENT_DEB (make agent-arm64 configures the aarch64 build that makes it); not tried"
  exit 0
fi
step "the arm64 agent package: dpkg -i"
[[ $(dpkg-deb -f "$ARM64_AGENT_DEB" Package Architecture | tr '\n' ' ') == "Package: tunefarm-agent Architecture: arm64 " ]] ||
  fail "$ARM64_AGENT_DEB is not tunefarm-agent for arm64: $(dpkg-deb -f "$ARM64_AGENT_DEB" Package Architecture)"
dpkg_retrying -i "$ARM64_AGENT_DEB"
[[ $(dpkg-query -W -f='${Status} ${Architecture}' tunefarm-agent:arm64) == "install ok installed arm64" ]] ||
  fail "tunefarm-agent:arm64 is not installed and configured"
dpkg-query -L tunefarm-agent:arm64 >"$WORK/tunefarm-agent.files"
# The same files as the amd64 package: a board is set up as an x86 machine is.
package_paths() { dpkg-deb -c "$1" | awk '{print $6}' | sort; }
differ=$(diff <(package_paths "$AGENT_DEB") <(package_paths "$ARM64_AGENT_DEB")) ||
  fail "the arm64 agent package holds other files than the amd64 one: $differ"
for program in /usr/lib/tunefarm-agent/device-agent /usr/lib/tunefarm-agent/tunefarm-measure-worker \
               /usr/lib/tunefarm-agent/tunefarm-probe-kernel.so /usr/lib/tunefarm-agent/libtunefarm_rt.so; do
  machine=$(LC_ALL=C readelf -h "$program" | sed -n 's/^ *Machine: *//p')
  [[ $machine == AArch64 ]] || fail "$program is built for $machine, not AArch64"
done

step "the arm64 agent's programs under qemu-aarch64"
QEMU=/usr/bin/qemu-aarch64
[[ -x $QEMU ]] || fail "$QEMU is missing (Debian's qemu-user; deploy/install-deps.sh installs it)"
out=$("$QEMU" /usr/bin/device-agent --help) || fail "device-agent --help under qemu exited $?"
grep -q -- --key <<<"$out" || fail "the arm64 device-agent --help does not mention --key"
out=$("$QEMU" /usr/lib/tunefarm-agent/tunefarm-measure-worker --help 2>&1) || true
grep -q -i usage <<<"$out" || fail "the arm64 worker does not start: $out"
"$QEMU" /usr/bin/device-agent --config /etc/tunefarm/agent.toml --key rk-a72 --check-config ||
  fail "the arm64 device-agent refuses /etc/tunefarm/agent.toml"
out=$(cd "$WORK" && systemd-analyze verify /lib/systemd/system/tunefarm-agent@.service \
      /lib/systemd/system/tunefarm-agent@rk-a72.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z $out ]] || fail "systemd-analyze verify: $out"

step "the arm64 agent package: dpkg --purge"
purge_and_check tunefarm-agent
echo "packages_test: installed, ran and purged tunefarm-agent for arm64"
