#!/usr/bin/env bash
# Fuzzes each TARGET until its process has used CPU_SECONDS (default 3600) of CPU time, as
# measured by getrusage (user + system, via GNU time), not wall time: on a shared machine a
# `-max_total_time` hour can be much less than an hour of fuzzing. Runs libFuzzer in chunks of
# CHUNK wall seconds (default 900) on corpus/TARGET (run ./seed.sh first), stops a target at its
# first crash, timeout or OOM (the reproducer is in artifacts/TARGET/), and prints one
# Markdown table row per target for README.md:
#
#   | date (UTC) | target | CPU time | wall time | executions | cov / ft | findings | peak RSS |
#
# Usage: ./hour.sh [-c CPU_SECONDS] TARGET...   (after `cargo +nightly fuzz build -O`)
set -euo pipefail
cd "$(dirname "$0")"
CPU_GOAL=3600
if [[ ${1:-} == -c ]]; then
    CPU_GOAL=$2
    shift 2
fi
CHUNK=${CHUNK:-900}
BIN=target/x86_64-unknown-linux-gnu/release
LOG=${LOG_DIR:-logs}
mkdir -p "$LOG"
[[ -x /usr/bin/time ]] || { echo "hour.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
for t in "$@"; do
    [[ -x $BIN/$t ]] || { echo "hour.sh: $BIN/$t missing: cargo +nightly fuzz build -O" >&2; exit 2; }
    [[ -d corpus/$t ]] || { echo "hour.sh: corpus/$t missing: ./seed.sh" >&2; exit 2; }
    case $t in
        verify_bytes | compressed_sniff) maxlen=262144 ;;
        *) maxlen=65536 ;;
    esac
    mkdir -p "artifacts/$t"
    start=$(date -u '+%Y-%m-%d %H:%M')
    cpu=0 wall=0 execs=0 rss=0 covft=? findings=none n=0
    while ((cpu < CPU_GOAL)); do
        n=$((n + 1))
        # libFuzzer's own clock is wall time: ask for what is left, at most CHUNK.
        left=$((CPU_GOAL - cpu))
        chunk=$((left < CHUNK ? left : CHUNK))
        out=$LOG/$t.$n.log
        t0=$(date +%s)
        rc=0
        /usr/bin/time -f 'rusage %U %S %M' -o "$LOG/$t.$n.time" \
            "$BIN/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$chunk" \
            -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            >"$out" 2>&1 || rc=$?
        wall=$((wall + $(date +%s) - t0))
        read -r _ u s _ <"$LOG/$t.$n.time" || true
        cpu=$(python3 -c "print(int($cpu + ${u:-0} + ${s:-0}))")
        e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)
        execs=$((execs + ${e:-0}))
        r=$(sed -n 's/^stat::peak_rss_mb: *//p' "$out" | tail -1)
        ((${r:-0} > rss)) && rss=${r:-0}
        covft=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$out" | tail -1 | awk '{print $2 " / " $4}')
        if ((rc != 0)); then
            findings="exit $rc: $(grep -m1 -oE 'ERROR: libFuzzer: [a-z-]+|SUMMARY: .*' "$out" || echo see "$out")"
            break
        fi
    done
    printf '| %s | `%s` | %d min %02d s | %d min %02d s | %s M | %s | %s | %s MB |\n' "$start" "$t" \
        $((cpu / 60)) $((cpu % 60)) $((wall / 60)) $((wall % 60)) \
        "$(python3 -c "print(f'{$execs / 1e6:.2f}')")" "$covft" "$findings" "$rss" |
        tee -a "$LOG/rows.md"
done
