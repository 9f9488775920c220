#!/usr/bin/env bash
# What a newcomer following README.md does as root, end to end, on the
# simulated GPU:
#   1. makes the .deb with cpack from the build tree, installs it with dpkg;
#   2. writes a policy for two users of the test's own (gpltest-alice: at
#      most 1G and weight 2; gpltest-bob: at most 512M, weight 1 by default);
#   3. runs the installed gpulimitd as the system server (a plain process on
#      a socket of its own, with that policy and a metrics address);
#   4. runs a job of each user with the installed gpulimit, each asking for
#      more than its maximum: each is told once what was lowered and stops
#      at the policy's cap;
#   5. `gpulimit top --batch` shows both users with their caps;
#   6. a real Prometheus scraping the server sees both caps.
# Everything is undone on the way out, after a failure or an interruption
# too: jobs, Prometheus and gpulimitd stopped, the package purged, the users
# deleted, the temporary directory removed. /etc/ld.so.preload is never
# touched (the package's prerm is pointed at a file of the test's own).
#
#   operator_test.sh CPACK CPACK_CONFIG VERSION ALLOCATOR FAKECUDA_LIB_DIR
#
# Exit status: 0 passed, 1 failed, 77 skipped (not root, a tool missing, or
# a gpulimit package or one of the test's users there already).
set -uo pipefail

readonly kSkip=77
if (($# != 5)); then
  echo "usage: $0 CPACK CPACK_CONFIG VERSION ALLOCATOR FAKECUDA_LIB_DIR" >&2
  exit 2
fi
cpack=$1 cpack_config=$2 version=$3 allocator=$4 fakecuda_lib=$5

export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"
readonly kAlice=gpltest-alice kBob=gpltest-bob
readonly kGiB=$((1 << 30)) kMiB=$((1 << 20))
readonly kAliceCap=$kGiB kBobCap=$((512 * kMiB))
readonly kPrometheus=/usr/bin/prometheus
readonly kBudget=200  # seconds for the whole test, cleaning up included

skip() {
  echo "SKIPPED: $*"
  exit "$kSkip"
}

# --- can it run here? ----------------------------------------------------------
((EUID == 0)) || skip "needs root (dpkg -i, useradd, runuser)"
for program in useradd userdel runuser dpkg dpkg-deb dpkg-query curl; do
  command -v "$program" >/dev/null 2>&1 || skip "$program is not installed"
done
[[ -x $kPrometheus ]] || skip "$kPrometheus is not installed (Debian package prometheus)"
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3) || skip "python3 is not installed"
[[ -x $cpack ]] || skip "cpack not found at $cpack"
[[ -f $cpack_config ]] || skip "no $cpack_config: configure the build tree first"
if dpkg-query -W -f='${Status}' gpulimit 2>/dev/null | grep -qv 'not-installed'; then
  skip "a package named gpulimit is on this machine already ($(dpkg-query -W -f='${Version} ${Status}' gpulimit)); not touching it"
fi
# Files of another gpulimit (cmake --install --prefix /usr, say) that
# dpkg -i would overwrite and dpkg -P delete.
for file in /usr/bin/gpulimit /usr/bin/gpulimitd /usr/lib/libgpulimit.so /etc/gpulimit/policy.toml; do
  [[ -e $file ]] && skip "$file exists already, not of a gpulimit package; not touching it"
done
for user in "$kAlice" "$kBob"; do
  getent passwd "$user" >/dev/null && skip "user $user exists already; not touching it"
done

# --- the state to restore, and how -------------------------------------------
work=
failures=0
package_installed=no
users_created=()
job_pid_files=()
job_runners=()
gpulimitd_pid=
prometheus_pid=
watchdog_pid=
cleaned=no
# What /etc/ld.so.preload is now, to check it is the same at the end.
preload_before=$(sha256sum /etc/ld.so.preload 2>/dev/null || echo absent)

ok() { echo "ok: $*"; }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
log() { echo "== $*"; }

# Whether process $1 runs (a zombie, a child not yet waited for, does not).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ ${stat##*) } != Z* ]]
}

# Sends TERM to each pid, waits for them up to 5 s, then KILLs the rest.
stop_pids() {
  local pid alive
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=no
    for pid in "$@"; do running "$pid" && alive=yes; done
    [[ $alive == no ]] && break
    sleep 0.1
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null; done
  for pid in "$@"; do wait "$pid" 2>/dev/null; done
  return 0
}

show_logs() {
  local file
  for file in "$work"/gpulimitd.log "$work"/prometheus.log "$work"/*.out "$work"/*.err; do
    [[ -s $file ]] && { echo "--- tail of $(basename "$file")"; tail -n 20 "$file"; }
  done
}

cleanup() {
  [[ $cleaned == yes ]] && return 0
  cleaned=yes
  trap '' INT TERM HUP
  local pids=() file pid user
  [[ -n $watchdog_pid ]] && stop_pids "$watchdog_pid"
  # The jobs: the processes their pid files name (the allocators, run by
  # exec), and the runuser processes that started them.
  for file in "${job_pid_files[@]}"; do
    pid=$(cat "$file" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] && pids+=("$pid")
  done
  pids+=("${job_runners[@]}")
  ((${#pids[@]} > 0)) && stop_pids "${pids[@]}"
  [[ -n $prometheus_pid ]] && stop_pids "$prometheus_pid"
  [[ -n $gpulimitd_pid ]] && stop_pids "$gpulimitd_pid"
  ((failures > 0)) && [[ -n $work ]] && show_logs
  if [[ $package_installed == yes ]]; then
    if dpkg -P gpulimit >"$work/purge.log" 2>&1; then
      echo "== purged the gpulimit package"
    else
      fail "dpkg -P gpulimit: $(cat "$work/purge.log")"
    fi
    for file in /usr/bin/gpulimit /usr/bin/gpulimitd /usr/lib/libgpulimit.so /etc/gpulimit/policy.toml; do
      [[ -e $file ]] && fail "$file is still there after dpkg -P gpulimit"
    done
  fi
  for user in "${users_created[@]}"; do
    userdel "$user" >/dev/null 2>&1 || fail "userdel $user failed"
  done
  [[ $(sha256sum /etc/ld.so.preload 2>/dev/null || echo absent) == "$preload_before" ]] ||
    fail "/etc/ld.so.preload changed during the test"
  [[ -n $work ]] && rm -rf "$work"
}
finish() {
  local status=$?
  cleanup
  if ((failures > 0)); then
    echo "$failures check(s) failed"
    exit 1
  fi
  exit "$status"
}
interrupted() {
  fail "interrupted (by a signal, or the test ran past its own ${kBudget}s)"
  exit 1
}
# Where the test's own output goes: a trap may run inside a command whose
# output is thrown away (wait_for's), and must still be heard.
exec 3>&1 4>&2
trap 'finish >&3 2>&4' EXIT
trap 'interrupted >&3 2>&4' INT TERM HUP

# ctest ends a test past its TIMEOUT (240 s) with SIGKILL, which leaves no
# chance to clean up: the test stops itself, cleanly, before that.
( trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  sleep "$kBudget" &
  sleeper=$!
  wait "$sleeper" && kill -TERM $$ ) >/dev/null 2>&1 &
watchdog_pid=$!

work=$(mktemp -d /tmp/gpulimit-acceptance.XXXXXX) || { fail "mktemp -d failed"; exit 1; }
chmod 755 "$work"
# gpulimit preload, as the package's prerm runs it, edits this file instead.
export GPULIMIT_PRELOAD_FILE=$work/ld.so.preload

# Runs "$@" every tenth of a second until it succeeds, for at most $1 tenths
# of a second of wall time (the time "$@" takes counts).
wait_for() {
  local deadline=$((${EPOCHREALTIME/./} + $1 * 100000))
  shift
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    ((${EPOCHREALTIME/./} < deadline)) || return 1
    sleep 0.1
  done
}

# A TCP port on 127.0.0.1 that nobody listens on now.
free_port() {
  "$python" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# The value of key $1 in a workload's key=value line $2.
value_of() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

# --- 1. the .deb, from the build tree, installed ------------------------------
log "cpack -G DEB from the build tree"
if ! timeout 120 "$cpack" -G DEB --config "$cpack_config" -B "$work/package" >"$work/cpack.log" 2>&1; then
  fail "cpack failed: $(tail -n 20 "$work/cpack.log")"
  exit 1
fi
debs=("$work"/package/gpulimit_"$version"_*.deb)
if ((${#debs[@]} != 1)) || [[ ! -f ${debs[0]} ]]; then
  fail "cpack made no single gpulimit_${version}_ARCH.deb: $(ls "$work/package")"
  exit 1
fi
ok "cpack made $(basename "${debs[0]}")"

log "dpkg -i $(basename "${debs[0]}")"
package_installed=yes  # from here on, purge it whatever happens
if ! dpkg -i "${debs[0]}" >"$work/dpkg.log" 2>&1; then
  fail "dpkg -i failed: $(cat "$work/dpkg.log")"
  exit 1
fi
installed_ok=yes
for file in /usr/bin/gpulimit /usr/bin/gpulimitd /usr/lib/libgpulimit.so /etc/gpulimit/policy.toml; do
  [[ -e $file ]] || { fail "dpkg -i installed no $file"; installed_ok=no; }
done
[[ $installed_ok == yes ]] || exit 1
ok "installed /usr/bin/gpulimit, /usr/bin/gpulimitd, /usr/lib/libgpulimit.so, /etc/gpulimit/policy.toml"

# --- 2. two users and their policy --------------------------------------------
for user in "$kAlice" "$kBob"; do
  if ! useradd -M -N -s /usr/sbin/nologin "$user" >"$work/useradd.log" 2>&1; then
    fail "useradd $user: $(cat "$work/useradd.log")"
    exit 1
  fi
  users_created+=("$user")
done
ok "created users $kAlice and $kBob"

policy=$work/policy.toml
cat >"$policy" <<EOF
[users.$kAlice]
max_memory = "1G"
max_weight = 2

[users.$kBob]
max_memory = "512M"
weight = 1
EOF
chmod 644 "$policy"

# What the users' jobs need from the build tree: the allocator and the
# simulated driver. Copied where the users can reach them if they cannot
# reach the build tree.
can_use_build_tree() {
  local user
  for user in "$kAlice" "$kBob"; do
    runuser -u "$user" -- test -x "$allocator" || return 1
    runuser -u "$user" -- test -r "$fakecuda_lib/libcuda.so.1" || return 1
    runuser -u "$user" -- test -r "$fakecuda_lib/libnvidia-ml.so.1" || return 1
  done
}
if ! can_use_build_tree; then
  mkdir -p "$work/bin" "$work/lib"
  cp "$allocator" "$work/bin/allocator"
  cp -L "$fakecuda_lib"/*.so* "$work/lib/"
  chmod 755 "$work/bin" "$work/lib" "$work/bin/allocator" "$work"/lib/*
  allocator=$work/bin/allocator fakecuda_lib=$work/lib
  log "the users cannot reach the build tree: using copies in $work"
  can_use_build_tree || { fail "the users cannot run $allocator"; exit 1; }
fi

# --- 3. the installed gpulimitd, as the system server -------------------------
socket=$work/run/gpulimitd.sock
mkdir -p "$work/run" "$work/ledgers" "$work/gpu" "$work/jobs"
chmod 755 "$work/run"
chmod 1777 "$work/ledgers" "$work/gpu" "$work/jobs"

log "gpulimitd --system --foreground --policy $policy"
metrics_port=
for attempt in 1 2 3; do
  metrics_port=$(free_port)
  # The server's NVML is the simulated machine's, as on a GPU machine the
  # driver's: a system server serves only the GPUs NVML lists.
  LD_LIBRARY_PATH="$fakecuda_lib" FAKECUDA_STATE="$work/gpu/state" FAKECUDA_DEVICES=1 \
    FAKECUDA_MEM=8G FAKECUDA_CTX_MEM=0 \
    /usr/bin/gpulimitd --system --foreground --socket "$socket" --policy "$policy" \
    --metrics-address "127.0.0.1:$metrics_port" --watch=off >"$work/gpulimitd.log" 2>&1 &
  gpulimitd_pid=$!
  listening() { [[ -S $socket ]] || ! running "$gpulimitd_pid"; }
  wait_for 300 listening
  if running "$gpulimitd_pid" && [[ -S $socket ]]; then break; fi
  stop_pids "$gpulimitd_pid"
  gpulimitd_pid=
  # Another program took the port in between: try another.
  grep -q 'cannot serve metrics' "$work/gpulimitd.log" && ((attempt < 3)) && continue
  fail "gpulimitd did not start: $(cat "$work/gpulimitd.log")"
  exit 1
done
if ! wait_for 300 curl -sf "http://127.0.0.1:$metrics_port/metrics"; then
  fail "gpulimitd serves no metrics at 127.0.0.1:$metrics_port"
  exit 1
fi
ok "gpulimitd (pid $gpulimitd_pid) listens at $socket, metrics at 127.0.0.1:$metrics_port"

# --- 4. a job of each user, asking for more than its maximum ------------------
# $1 user, $2 name: gpulimit --mem 4G --weight 5 -- allocator, holding what
# it got for long enough to be watched. Its pid goes to jobs/NAME.pid.
start_job() {
  local user=$1 name=$2
  job_pid_files+=("$work/jobs/$name.pid")
  runuser -u "$user" -- /bin/sh -c 'echo $$ >"$0"; exec "$@"' "$work/jobs/$name.pid" \
    env -i PATH=/usr/bin:/bin \
    GPULIMIT_SOCKET="$socket" GPULIMIT_LEDGER_DIR="$work/ledgers" \
    LD_LIBRARY_PATH="$fakecuda_lib" FAKECUDA_STATE="$work/gpu/state" FAKECUDA_DEVICES=1 \
    FAKECUDA_MEM=8G FAKECUDA_CTX_MEM=0 \
    /usr/bin/gpulimit --mem 4G --weight 5 -- \
    "$allocator" --path linear --target 3G --chunk 64M --hold 150 \
    >"$work/$name.out" 2>"$work/$name.err" &
  job_runners+=($!)
}
log "as $kAlice and $kBob: gpulimit --mem 4G --weight 5 -- allocator --target 3G --hold 150"
start_job "$kAlice" alice
start_job "$kBob" bob

# The changes a "gpulimit: the policy lowers A, B" line names, one a line,
# sorted: the order the server lists them in is not part of the check.
lowered() { sed -n 's/^gpulimit: the policy lowers //p' | sed 's/, /\n/g' | sort; }

# $1 name, $2 cap in bytes, then each change the job must be told of.
check_job() {
  local name=$1 cap=$2 line bytes free told want
  shift 2
  want=$(printf '%s\n' "$@" | sort)
  if ! wait_for 600 grep -q 'event=holding' "$work/$name.out"; then
    fail "$name's job never held its memory: $(cat "$work/$name.out" "$work/$name.err")"
    return
  fi
  line=$(grep 'event=holding' "$work/$name.out")
  bytes=$(value_of bytes "$line") free=$(value_of free_after_alloc "$line")
  told=$(grep -c '^gpulimit: the policy lowers ' "$work/$name.err")
  if [[ $bytes != "$cap" || $free != 0 ]]; then
    fail "$name's job asked for 3G under --mem 4G: want it stopped at the policy's cap, bytes=$cap free_after_alloc=0; got: $line"
  elif [[ $told != 1 ]]; then
    fail "$name's job was told $told times that its limits were lowered, want once: $(cat "$work/$name.err")"
  elif [[ $(lowered <"$work/$name.err") != "$want" ]]; then
    fail "$name's job was not told that the policy lowers exactly: ${want//$'\n'/, }; it was told: $(cat "$work/$name.err")"
  else
    ok "$name's job stopped at $bytes bytes (the policy's cap) and was told once: $(grep '^gpulimit: the policy lowers ' "$work/$name.err")"
  fi
}
check_job alice "$kAliceCap" "--mem 4G to 1G" "--weight 5 to 2"
check_job bob "$kBobCap" "--mem 4G to 512M"

# --- 5. gpulimit top ------------------------------------------------------------
log "gpulimit top --batch --iterations 1"
# The user as top's USER column shows it: cut to 12 characters, with a '+'.
shown_user() { if ((${#1} > 12)); then echo "${1:0:11}+"; else echo "$1"; fi; }
# Whether top's frame has the row of job $1 (its pid) with user $2 and
# MEM/CAP $3.
top_row() {
  awk -v user="$(shown_user "$2")" -v pid="$(cat "$work/jobs/$1.pid")" -v memory="$3" \
    '$1 == user && $3 == pid && $4 == memory { found = 1 } END { exit !found }' "$work/top.txt"
}
top_shows() {
  COLUMNS=200 GPULIMIT_SOCKET=$socket /usr/bin/gpulimit top --batch --iterations 1 \
    >"$work/top.txt" 2>&1 || return 1
  top_row alice "$kAlice" 1G/1G && top_row bob "$kBob" 512M/512M
}
if wait_for 200 top_shows; then
  ok "gpulimit top shows $kAlice's job at 1G/1G and $kBob's at 512M/512M (MEM/CAP)"
  sed 's/^/   | /' "$work/top.txt"
else
  fail "gpulimit top does not show $kAlice's job (pid $(cat "$work/jobs/alice.pid")) at 1G/1G and $kBob's (pid $(cat "$work/jobs/bob.pid")) at 512M/512M: $(cat "$work/top.txt")"
fi

# --- 6. Prometheus scraping gpulimitd ------------------------------------------
log "Prometheus scraping 127.0.0.1:$metrics_port every second"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpulimitd
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
EOF
prometheus_port=
for attempt in 1 2 3; do
  prometheus_port=$(free_port)
  "$kPrometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus-data" \
    --web.listen-address="127.0.0.1:$prometheus_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
  prometheus_pid=$!
  ready() { curl -sf "http://127.0.0.1:$prometheus_port/-/ready" || ! running "$prometheus_pid"; }
  wait_for 300 ready
  if running "$prometheus_pid" &&
    curl -sf "http://127.0.0.1:$prometheus_port/-/ready" >/dev/null 2>&1; then
    break
  fi
  stop_pids "$prometheus_pid"
  prometheus_pid=
  ((attempt < 3)) && grep -qi 'address already in use' "$work/prometheus.log" && continue
  fail "Prometheus did not become ready on port $prometheus_port: $(tail -n 20 "$work/prometheus.log")"
  exit 1
done
ok "Prometheus (pid $prometheus_pid) ready on 127.0.0.1:$prometheus_port"

# "USER VALUE" lines of gpulimit_memory_cap_bytes as Prometheus has it now.
caps_in_prometheus() {
  curl -sf --max-time 5 --get "http://127.0.0.1:$prometheus_port/api/v1/query" \
    --data-urlencode 'query=gpulimit_memory_cap_bytes{job="gpulimitd"}' |
    "$python" -c 'import json, sys
body = json.load(sys.stdin)
for series in body["data"]["result"]:
    print(series["metric"].get("user", "-"), series["value"][1])' | sort
}
prometheus_has_caps() {
  caps_in_prometheus >"$work/caps.txt" 2>/dev/null || return 1
  grep -qxF "$kAlice $kAliceCap" "$work/caps.txt" && grep -qxF "$kBob $kBobCap" "$work/caps.txt"
}
if wait_for 300 prometheus_has_caps; then
  ok "Prometheus has gpulimit_memory_cap_bytes $kAlice=$kAliceCap and $kBob=$kBobCap"
else
  fail "Prometheus never had gpulimit_memory_cap_bytes $kAlice=$kAliceCap and $kBob=$kBobCap within 30 s; last: $(tr '\n' ';' <"$work/caps.txt" 2>/dev/null) gpulimitd serves: $(curl -s "http://127.0.0.1:$metrics_port/metrics" | grep '^gpulimit_memory_cap_bytes' | tr '\n' ';')"
fi

# --- the end: everything undone --------------------------------------------------
cleanup
for user in "$kAlice" "$kBob"; do
  getent passwd "$user" >/dev/null && fail "user $user is still there"
done
dpkg-query -W -f='${Status}' gpulimit 2>/dev/null | grep -qv 'not-installed' &&
  fail "the gpulimit package is still known to dpkg: $(dpkg-query -W -f='${Status}' gpulimit)"
[[ -e $work ]] && fail "$work is still there"
if ((failures == 0)); then
  ok "package purged, users deleted, processes stopped, $work removed"
  echo "all operator acceptance checks passed"
fi
exit 0
