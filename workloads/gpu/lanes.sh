#!/usr/bin/env bash
# One device call's worth of validate.sh on a machine of several GPUs: its
# (run, row) items in one lane per GPU, side by side. Lane I runs on GPU I
# (CUDA_VISIBLE_DEVICES) and the I-th equal slice of the CPUs, so each lane is
# a one-GPU machine of 16 CPUs, as the single-GPU host is; the lanes share the
# disk and the memory bus, and each lane's agent also sees (and filters out
# in the kernel) the other lanes' calls through the library files they all
# map. At DEADLINE s the runs in progress are stopped and not scored; then
# the summary of every run, and the traces packed to come back.
#   KEEP_DBS=1 RUNS=5 workloads/gpu/lanes.sh CAUSEWAY OUT DEADLINE ROW...
set -uo pipefail
cw=$1 out=$2 deadline=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
n=${LANES:-$(nvidia-smi -L | wc -l)}
per=$(( $(nproc) / n ))
mkdir -p "$out/run"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
# The cold dataset file (mmap-io rows), made once before the lanes share it.
case " $* " in *mmap-io*) (cd "$here" && python3 -c "import shapes; shapes.Cold()") ;; esac
# Each lane loads its own copy of libcuda (LD_LIBRARY_PATH comes before the
# loader's cache for the runtime's dlopen): uprobes sit on a file, so with
# one shared libcuda every lane's launch windows would trap the other lanes'
# launches too (2 us each), which a machine of one job never does.
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / { print $NF; exit }')
[ -n "$libcuda" ] || libcuda=/usr/local/nvidia/lib64/libcuda.so.1
jobs=()
for i in $(seq 0 $((n - 1))); do
  mkdir -p "/tmp/cw_lane$i"
  cp "$(readlink -f "$libcuda")" "/tmp/cw_lane$i/libcuda.so.1"
  CW_LANE=$i LANES=$n LANE=$i CUDA_VISIBLE_DEVICES=$i LD_LIBRARY_PATH="/tmp/cw_lane$i${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    taskset -c $((i * per))-$(((i + 1) * per - 1)) \
    "$here/validate.sh" "$cw" "$out/run" "$@" > "$out/run/validate.$i.log" 2>&1 &
  jobs+=($!)
done
start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt "$deadline" ]; do
  alive=0
  for j in "${jobs[@]}"; do kill -0 "$j" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 1
done
if [ "$alive" = 1 ]; then
  echo "lanes: deadline reached; stopping the runs in progress (not scored)"
  pkill -f validate.sh; pkill -INT -f "causeway trace"; sleep 3; pkill -9 -f shapes.py
  for _ in $(seq 60); do pgrep -x xz >/dev/null || break; sleep 1; done
fi
rm -f "$out"/run/dbs/*.json.part
python3 "$here/summarize.py" "$out/run/dbs" "$@" > "$out/summary.md" 2>&1
cat "$out"/run/explain*.txt > "$out/explain.txt" 2>/dev/null  # one lane: explain.txt
python3 "$here/pack.py" "$out/run/dbs" "$out" 6
rm -rf "$out/run"
cat "$out/summary.md"
