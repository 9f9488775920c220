#!/usr/bin/env bash
# gpulimit_spank.so under a real Slurm, on the simulated GPU: starts munged,
# slurmctld and slurmd (one node, everything in a temporary directory, ports
# of its own) with a plugstack.conf naming the plugin, and a system-mode
# gpulimitd on a temporary socket; runs jobs through srun and sbatch; stops
# everything on the way out, also after a failure.
#
#   slurm_plugin_test.sh PLUGIN LIBRARY GPULIMITD GPULIMIT ALLOCATOR SPINNER TRACE FAKECUDA_LIB_DIR
#
# Exit status: 0 passed, 1 failed, 77 skipped (no Slurm or munge here, or
# not root: slurmd must start job steps as their users).
set -uo pipefail

readonly kSkip=77
if (($# != 8)); then
  echo "usage: $0 PLUGIN LIBRARY GPULIMITD GPULIMIT ALLOCATOR SPINNER TRACE FAKECUDA_LIB_DIR" >&2
  exit 2
fi
plugin=$1 library=$2 gpulimitd=$3 gpulimit=$4 allocator=$5 spinner=$6 trace_cli=$7 fakecuda_lib=$8

for program in munged slurmctld slurmd srun sbatch scancel scontrol squeue sinfo; do
  if ! command -v "$program" >/dev/null 2>&1; then
    echo "SKIPPED: $program is not installed (Debian: slurm-wlm, slurmd, slurmctld, munge)"
    exit "$kSkip"
  fi
done
if ((EUID != 0)); then
  echo "SKIPPED: needs root, to run slurmd and munged"
  exit "$kSkip"
fi

work=$(mktemp -d /tmp/gpulimit-slurm.XXXXXX)
chmod 755 "$work"
failures=0
daemon_pids=()

log() { echo "== $*"; }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
show_logs() {
  for file in "$work"/slurmctld.log "$work"/slurmd.log "$work"/gpulimitd.log; do
    [[ -f $file ]] && { echo "--- tail of $file"; tail -n 30 "$file"; }
  done
}

stop_all() {
  local i pid
  # Jobs first, while slurmd and munged are there to end their steps.
  if [[ -s $work/slurmd.pid ]]; then
    scancel --quiet --full --user=root 2>/dev/null || true
    for _ in $(seq 100); do
      [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  # Then the daemons, in the reverse order of their start: munged last.
  for ((i = ${#daemon_pids[@]} - 1; i >= 0; i--)); do
    pid=${daemon_pids[i]}
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if ((failures > 0)); then show_logs; fi
  rm -rf "$work"
}
trap stop_all EXIT

# Runs "$@" until it succeeds, at most $1 tenths of a second.
wait_for() {
  local tenths=$1
  shift
  for _ in $(seq "$tenths"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

pid_of() { cat "$1" 2>/dev/null; }

# --- munge: a key, then a munged of our own on its own socket ----------------
key=/etc/munge/munge.key
if [[ ! -f $key ]]; then
  log "generating $key"
  mkdir -p /etc/munge
  dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
  chown munge:munge "$key" 2>/dev/null || true
  chmod 400 "$key"
fi
mkdir -p "$work/munge"
chown munge:munge "$work/munge" 2>/dev/null || true
munge_user=(runuser -u munge --)
id munge >/dev/null 2>&1 || munge_user=()
"${munge_user[@]}" munged --force --socket="$work/munge/munge.socket" --key-file="$key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/munged.seed" || { fail "munged did not start"; exit 1; }
wait_for 50 test -s "$work/munge/munged.pid" || { fail "munged wrote no pid file"; exit 1; }
daemon_pids+=("$(pid_of "$work/munge/munged.pid")")

# --- gpulimitd in system mode, on a socket of its own -------------------------
socket=$work/run/gpulimitd.sock
ledgers=$work/ledgers
mkdir -p "$work/run" "$ledgers"
chmod 1777 "$ledgers"
export LD_LIBRARY_PATH="$fakecuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FAKECUDA_STATE="$work/fakecuda.state" FAKECUDA_TRACE="$work/trace" FAKECUDA_MEM=16G
# Contexts of 64 MiB, so that two tasks under one 1 GiB cap both get one.
export FAKECUDA_DEVICES=1 FAKECUDA_CTX_MEM=64M
readonly kContext=$((64 << 20)) kGiB=$((1 << 30))
# Nothing of the machine's own: no metrics port (another server may hold
# it), an empty policy (not /etc/gpulimit/policy.toml), no BPF watcher (it
# would see other tests' GPU processes).
: >"$work/policy.toml"
"$gpulimitd" --system --socket "$socket" --foreground --quantum-ms 40 --metrics-address off \
  --policy "$work/policy.toml" --watch off >"$work/gpulimitd.log" 2>&1 &
gpulimitd_pid=$!
daemon_pids+=("$gpulimitd_pid")
wait_for 100 test -S "$socket" || { fail "gpulimitd is not listening at $socket"; exit 1; }

status_json() { GPULIMIT_SOCKET=$socket "$gpulimit" status --json; }

# --- Slurm: one node, one partition, this directory ---------------------------
host=$(hostname -s)
port=$((20000 + ($$ % 20000)))
conf=$work/slurm.conf
cat >"$work/plugstack.conf" <<EOF
required $plugin library=$library socket=$socket ledger_dir=$ledgers shards_per_gpu=8
EOF
# One simulated GPU in 8 shards. Slurm wants a device file for it; it only
# looks at it (task/none constrains nothing).
mknod "$work/nvidia0" c 195 0
cat >"$work/gres.conf" <<EOF
AutoDetect=off
NodeName=$host Name=gpu File=$work/nvidia0
NodeName=$host Name=shard Count=8 File=$work/nvidia0
EOF
cat >"$conf" <<EOF
ClusterName=gpulimittest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
PlugStackConfig=$work/plugstack.conf
GresTypes=gpu,shard
NodeName=$host CPUs=8 RealMemory=1000 Gres=gpu:1,shard:8 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
mkdir -p "$work/state" "$work/spool"
export SLURM_CONF=$conf
slurmctld -f "$conf" || { fail "slurmctld did not start"; exit 1; }
wait_for 100 test -s "$work/slurmctld.pid" || { fail "slurmctld wrote no pid file"; exit 1; }
daemon_pids+=("$(pid_of "$work/slurmctld.pid")")
slurmd -f "$conf" || { fail "slurmd did not start"; exit 1; }
wait_for 100 test -s "$work/slurmd.pid" || { fail "slurmd wrote no pid file"; exit 1; }
daemon_pids+=("$(pid_of "$work/slurmd.pid")")
node_idle() { sinfo -h -n "$host" -o %t | grep -qE '^(idle|mix|alloc)'; }
wait_for 300 node_idle || { fail "node $host never became idle"; exit 1; }
log "Slurm is up on $host (ports $port, $((port + 1)))"

value_of() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

# --- 1. srun --gpu-mem=1G: the cap holds and the job sees a 1 GiB GPU ---------
log "srun --gpu-mem=1G allocator"
out=$(srun -n1 --gpu-mem=1G "$allocator" --target 4G --chunk 64M 2>"$work/1.err")
rc=$?
total=$(value_of total "$out") bytes=$(value_of bytes "$out") error=$(value_of error "$out")
if ((rc != 0)); then
  fail "srun --gpu-mem=1G exited $rc: $(cat "$work/1.err")"
elif [[ $total != "$kGiB" || $error != CUDA_ERROR_OUT_OF_MEMORY ]] || ((bytes != kGiB - kContext)); then
  fail "srun --gpu-mem=1G: want total=$kGiB, bytes=$((kGiB - kContext)) (the cap less the context), an out-of-memory stop; got: $out"
else
  log "ok: total=$total bytes=$bytes error=$error"
fi

# --- 2. bad values are refused at submission, and nothing runs ----------------
for command in srun sbatch; do
  log "$command --gpu-mem=banana"
  marker=$work/ran-$command
  if [[ $command == srun ]]; then
    srun -J banana-$command --gpu-mem=banana touch "$marker" >"$work/2.out" 2>&1
  else
    sbatch -J banana-$command --gpu-mem=banana --wrap "touch $marker" >"$work/2.out" 2>&1
  fi
  rc=$?
  sleep 1
  if ((rc == 0)); then
    fail "$command --gpu-mem=banana exited 0: $(cat "$work/2.out")"
  elif ! grep -q -- '--gpu-mem=banana: not a size' "$work/2.out"; then
    fail "$command --gpu-mem=banana: no clear message: $(cat "$work/2.out")"
  elif [[ -e $marker ]] || scontrol show jobs 2>/dev/null | grep -q "JobName=banana-$command"; then
    fail "$command --gpu-mem=banana: a job was created or ran"
  else
    log "ok, all it said: $(cat "$work/2.out")"
  fi
done

# --- 3. two concurrent steps, --gpu-weight 3 and 1: GPU time 3:1 ---------------
log "two steps, --gpu-weight=3 and --gpu-weight=1"
: >"$FAKECUDA_TRACE"
spin=("$spinner" --launch kernel --kernel-ns 1000000 --streams 2 --batch 2 --seconds 5)
srun -n1 --gpu-weight=3 sh -c 'echo $$ >"$0"; exec "$@"' "$work/heavy.pid" "${spin[@]}" \
  >"$work/heavy.out" 2>&1 &
heavy_srun=$!
srun -n1 --gpu-weight=1 sh -c 'echo $$ >"$0"; exec "$@"' "$work/light.pid" "${spin[@]}" \
  >"$work/light.out" 2>&1 &
light_srun=$!
wait "$heavy_srun"; heavy_rc=$?
wait "$light_srun"; light_rc=$?
heavy=$(pid_of "$work/heavy.pid") light=$(pid_of "$work/light.pid")
if ((heavy_rc != 0 || light_rc != 0)) || [[ -z $heavy || -z $light ]]; then
  fail "weighted steps exited $heavy_rc and $light_rc: $(cat "$work/heavy.out" "$work/light.out")"
else
  # The window in which both ran kernels: from the later first kernel to the
  # earlier last one.
  window=$(awk -v a="$heavy" -v b="$light" '
    $1 == a || $1 == b {
      if (!($1 in first) || $4 < first[$1]) first[$1] = $4
      if (!($1 in last) || $5 > last[$1]) last[$1] = $5
    }
    END {
      from = first[a] > first[b] ? first[a] : first[b]
      to = last[a] < last[b] ? last[a] : last[b]
      # %.0f: %d in mawk stops at 2^31, CLOCK_MONOTONIC nanoseconds do not.
      if (length(first) == 2 && to > from) printf "%.0f %.0f", from, to
    }' "$FAKECUDA_TRACE")
  if [[ -z $window ]]; then
    fail "the two weighted steps never ran kernels at the same time"
  else
    read -r from to <<<"$window"
    table=$("$trace_cli" "$FAKECUDA_TRACE" --device 0 --from "$from" --to "$to" \
      --tenant heavy="$heavy" --tenant light="$light" --check-no-overlap)
    trace_rc=$?
    heavy_share=$(awk '$1 == "heavy" { sub(/%/, "", $4); print $4 }' <<<"$table")
    light_share=$(awk '$1 == "light" { sub(/%/, "", $4); print $4 }' <<<"$table")
    # Weights 3 and 1: heavy's part of the time both held is 75 %.
    part=$(awk -v h="$heavy_share" -v l="$light_share" \
      'BEGIN { if (h + l > 0) printf "%.0f", 100 * h / (h + l); else print 0 }')
    if ((trace_rc != 0)); then
      fail "gpulimit-trace exited $trace_rc (overlapping kernels?): $table"
    elif ((part < 62 || part > 88)); then
      fail "weights 3:1 gave heavy $part % of the shared time, want 75 % (62 to 88): $table"
    else
      log "ok: heavy ${heavy_share}%, light ${light_share}% of the GPU: $part % to weight 3"
    fi
  fi
fi

# --- 4. sbatch, two tasks of one step: one cap for both -----------------------
log "sbatch -n2 with #SBATCH --gpu-mem=1G, srun of two allocators"
cat >"$work/batch.sh" <<EOF
#!/bin/sh
#SBATCH --gpu-mem=1G
echo "GPULIMIT_TENANT=\$GPULIMIT_TENANT GPULIMIT_MEM=\$GPULIMIT_MEM" >"$work/batch.env"
srun -n2 "$allocator" --target 512M --chunk 64M --hold 8 >"$work/batch.out" 2>"$work/batch.err"
EOF
chmod 755 "$work/batch.sh"
job=$(sbatch --parsable -n2 -o "$work/batch.log" "$work/batch.sh" 2>"$work/4.err")
if [[ -z $job ]]; then
  fail "sbatch of a script with #SBATCH --gpu-mem=1G was refused: $(cat "$work/4.err")"
else
  tenant=slurm-$job.0
  # While the tasks hold their memory: one tenant, two processes.
  seen=no
  for _ in $(seq 300); do
    if status_json 2>/dev/null | grep -qE '"tenant":"'"$tenant"'"[^][{}]*"pids":\[[0-9]+,[0-9]+\]'; then
      seen=yes
      break
    fi
    sleep 0.1
  done
  wait_for 600 sh -c "scontrol show job $job | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED)'"
  outputs=$(grep -c '^workload=allocator path' "$work/batch.out" 2>/dev/null)
  sum=$(awk '/^workload=allocator path/ { for (i = 1; i <= NF; i++) if ($i ~ /^bytes=/) { sub(/bytes=/, "", $i); s += $i } } END { print s + 0 }' "$work/batch.out" 2>/dev/null)
  totals=$(grep -o ' total=[0-9]*' "$work/batch.out" 2>/dev/null | sort -u | tr -d ' ')
  if [[ $outputs != 2 ]]; then
    fail "the batch job's two tasks did not both report: $(cat "$work/batch.out" "$work/batch.err" "$work/batch.log" 2>/dev/null)"
  elif [[ $seen != yes ]]; then
    fail "gpulimit status never showed tenant $tenant with both tasks"
  elif [[ $(cat "$work/batch.env") != "GPULIMIT_TENANT=slurm-$job.batch GPULIMIT_MEM=1G" ]]; then
    fail "the batch script itself ran with: $(cat "$work/batch.env")"
  elif ((sum != kGiB - 2 * kContext)) || [[ $totals != "total=$kGiB" ]]; then
    # Each asked for 512 MiB: apart they would have 1 GiB; under one cap,
    # the cap less their two contexts.
    fail "two tasks of one step took $sum bytes together under one 1 GiB cap, want $((kGiB - 2 * kContext)) ($totals): $(cat "$work/batch.out")"
  else
    log "ok: tenant $tenant held by both tasks; $sum bytes together, $totals"
  fi
fi

# --- 5. scancel mid-run: memory and token come back ----------------------------
log "scancel of a running step with --gpu-mem=1G --gpu-weight=2"
srun -n1 -J cancelme --gpu-mem=1G --gpu-weight=2 \
  "$spinner" --launch kernel --kernel-ns 1000000 --seconds 60 >"$work/5.out" 2>&1 &
cancel_srun=$!
job=
for _ in $(seq 300); do
  job=$(squeue -h -n cancelme -o %i 2>/dev/null | head -n 1)
  [[ -n $job ]] && status_json 2>/dev/null | grep -q '"tenant":"slurm-'"$job"'.0".*"memory_used":[1-9]' && break
  sleep 0.1
done
tenant=slurm-$job.0
before=$(status_json 2>/dev/null)
if [[ -z $job ]] || ! grep -q '"tenant":"'"$tenant"'"' <<<"$before"; then
  fail "the step to cancel never showed in gpulimit status: $before $(cat "$work/5.out")"
else
  scancel "$job"
  wait "$cancel_srun"
  gone() {
    local now
    now=$(status_json) || return 1
    # No device held: a device nobody uses any more leaves the board, so
    # none may be listed at all.
    ! grep -q '"tenant":"'"$tenant"'"' <<<"$now" && ! grep -q '"holder":"' <<<"$now" &&
      ! grep -q '"tenants":\[{' <<<"$now"
  }
  if ! wait_for 200 gone; then
    fail "after scancel, gpulimitd still has $tenant or the token: $(status_json)"
  elif ! wait_for 100 sh -c "! ls '$ledgers' | grep -q '$tenant'"; then
    fail "after scancel, the step's ledger file is left: $(ls -l "$ledgers")"
  else
    log "ok: the holder was $(grep -o '"holder":"[^"]*"' <<<"$before"); now no tenant, no holder, no ledger"
  fi
fi

# --- 6. a bad plugstack.conf argument: every srun says so, nothing runs ---------
log "plugstack.conf with max_mem=lots"
cp "$work/plugstack.conf" "$work/plugstack.good"
sed -i 's/$/ max_mem=lots/' "$work/plugstack.conf"
srun -n1 touch "$work/ran-bad-plugstack" >"$work/6.out" 2>&1
rc=$?
cp "$work/plugstack.good" "$work/plugstack.conf"
if ((rc == 0)) || [[ -e $work/ran-bad-plugstack ]]; then
  fail "srun ran under a plugstack.conf with max_mem=lots: $(cat "$work/6.out")"
elif ! grep -q 'gpulimit: plugstack.conf: max_mem=lots: not a size' "$work/6.out"; then
  fail "srun under a bad plugstack.conf: no clear message: $(cat "$work/6.out")"
else
  log "ok, all it said: $(cat "$work/6.out")"
fi
srun --help >"$work/help.out" 2>&1
for option in gpu-mem gpu-sm gpu-weight gpu-priority; do
  grep -q -- "--$option" "$work/help.out" || fail "srun --help does not list --$option"
done

# --- 7. --gres=shard:2 of 8: a quarter of the GPU's memory, weight 25 ---------
log "srun --gres=shard:2 (of 8)"
out=$(srun -n1 --gres=shard:2 sh -c 'echo "GPULIMIT_WEIGHT=$GPULIMIT_WEIGHT"; exec "$0" "$@"' \
  "$allocator" --target 16G --chunk 256M 2>"$work/7.err")
rc=$?
total=$(value_of total "$out") weight=$(value_of GPULIMIT_WEIGHT "$out")
if ((rc != 0)); then
  fail "srun --gres=shard:2 exited $rc: $(cat "$work/7.err")"
elif [[ $total != $((16 * kGiB / 4)) || $weight != 25 ]]; then
  fail "srun --gres=shard:2 of 8: want total=$((16 * kGiB / 4)) (25 % of 16 GiB) and weight 25; got: $out"
else
  log "ok: total=$total, GPULIMIT_WEIGHT=$weight"
fi

# --- 8. a job of another user: the tenant is that user's ----------------------
if id nobody >/dev/null 2>&1; then
  log "srun --gpu-mem=1G as nobody"
  mkdir -p "$work/nobody"
  chown nobody "$work/nobody"
  (cd "$work/nobody" && FAKECUDA_STATE=$work/nobody/fakecuda.state FAKECUDA_TRACE= \
    runuser -u nobody -- srun -n1 -J nobodys --gpu-mem=1G \
    "$allocator" --target 512M --chunk 64M --hold 10 >"$work/8.out" 2>&1) &
  nobody_srun=$!
  job=
  owned=no
  for _ in $(seq 300); do
    job=$(squeue -h -n nobodys -o %i 2>/dev/null | head -n 1)
    if [[ -n $job ]] && status_json 2>/dev/null |
      grep -qE '"tenant":"slurm-'"$job"'\.0"[^][{}]*"uid":65534,"user":"nobody"'; then
      owned=yes
      break
    fi
    sleep 0.1
  done
  wait "$nobody_srun"
  rc=$?
  if ((rc != 0)); then
    fail "srun as nobody exited $rc: $(cat "$work/8.out")"
  elif [[ $owned != yes ]]; then
    fail "gpulimit status never showed slurm-$job.0 as nobody's: $(status_json)"
  elif [[ $(value_of total "$(cat "$work/8.out")") != "$kGiB" ]]; then
    fail "nobody's step did not see a 1 GiB GPU: $(cat "$work/8.out")"
  elif ! wait_for 100 sh -c "! ls '$ledgers' | grep -q 'slurm-$job\.'"; then
    fail "nobody's ledger is left after the step: $(ls -l "$ledgers")"
  else
    log "ok: slurm-$job.0 was uid 65534's, saw a 1 GiB GPU, and left no ledger"
  fi
fi

# --- 9. no gpulimitd: a share of GPU time is refused, a memory cap holds ---------
log "no gpulimitd at the socket"
kill "$gpulimitd_pid"
wait "$gpulimitd_pid" 2>/dev/null
srun -n1 --gpu-weight=2 touch "$work/ran-unserved" >"$work/9a.out" 2>&1
rc=$?
out=$(srun -n1 --gpu-mem=1G "$allocator" --target 4G --chunk 64M 2>"$work/9b.err")
rc_mem=$?
if ((rc == 0)) || [[ -e $work/ran-unserved ]]; then
  fail "srun --gpu-weight=2 ran without gpulimitd: $(cat "$work/9a.out")"
elif ! grep -q 'gpulimit: a share of GPU time needs gpulimitd: nobody listens at' "$work/9a.out"; then
  fail "srun --gpu-weight=2 without gpulimitd: no clear message: $(cat "$work/9a.out")"
elif ((rc_mem != 0)) || [[ $(value_of total "$out") != "$kGiB" ]]; then
  fail "srun --gpu-mem=1G without gpulimitd did not run under its cap: $out $(cat "$work/9b.err")"
elif ! grep -q 'time-slicing is off, memory caps only' "$work/9b.err"; then
  fail "srun --gpu-mem=1G without gpulimitd: not told that time-slicing is off: $(cat "$work/9b.err")"
else
  log "ok: $(grep -h 'gpulimit:' "$work/9a.out" "$work/9b.err" | head -n 2 | tr '\n' ' ')"
fi

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all Slurm checks passed"
exit 0
