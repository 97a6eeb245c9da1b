#!/usr/bin/env bash
# Fuzzes each TARGET until its process has used CPU_SECONDS (default 3600) of CPU time, as
# measured by getrusage (user + system, via GNU time), not wall time: on a shared machine a
# `-max_total_time` hour can be much less than an hour of fuzzing. Runs libFuzzer in chunks of
# CHUNK wall seconds (default 900) on corpus/TARGET (run ./seed.sh first), stops a target at its
# first crash, timeout or OOM (the reproducer is in artifacts/TARGET/), and prints one
# Markdown table row per target for README.md:
#
#   | started (UTC) | target | CPU time | wall time | executions | cov / ft | findings | peak RSS |
#
# The row sums every chunk logged in LOG_DIR (default logs/) for the target, so a run that
# was stopped (Ctrl-C, end of a session) and resumed later adds up: `--report TARGET...`
# prints the rows of what is logged without fuzzing.
#
# Usage: ./hour.sh [-c CPU_SECONDS] TARGET...   (after `cargo +nightly fuzz build -O`)
#        ./hour.sh --report TARGET...
set -euo pipefail
cd "$(dirname "$0")"
CPU_GOAL=3600
REPORT=
case ${1:-} in
    -c) CPU_GOAL=$2; shift 2 ;;
    --report) REPORT=1; shift ;;
esac
CHUNK=${CHUNK:-900}
BIN=target/x86_64-unknown-linux-gnu/release
LOG=${LOG_DIR:-logs}
mkdir -p "$LOG"

# CPU seconds, wall seconds, executions, last cov / ft, peak RSS, start, findings of every
# chunk of target $1 logged so far, as shell assignments.
tally() {
    python3 - "$LOG" "$1" <<'PY'
import pathlib, re, sys
log, t = pathlib.Path(sys.argv[1]), sys.argv[2]
cpu = wall = execs = rss = 0.0
covft, start, findings = "?", "", "none"
chunks = sorted(log.glob(f"{t}.*.log"), key=lambda p: int(p.name.split(".")[-2]))
for p in chunks:
    text = p.read_text(errors="replace")
    tm = p.with_suffix(".time")
    m = re.search(r"rusage ([\d.]+) ([\d.]+)", tm.read_text()) if tm.exists() else None
    if m:
        cpu += float(m[1]) + float(m[2])
    m = re.search(r"^wall (\d+) (\S+ \S+)", tm.read_text(), re.M) if tm.exists() else None
    if m:
        wall += int(m[1])
        start = start or m[2]
    execs += sum(int(x) for x in re.findall(r"^stat::number_of_executed_units: *(\d+)", text, re.M))
    rss = max([rss] + [float(x) for x in re.findall(r"^stat::peak_rss_mb: *(\d+)", text, re.M)])
    c = re.findall(r"cov: (\d+) ft: (\d+)", text)
    if c:
        covft = f"{c[-1][0]} / {c[-1][1]}"
    f = re.search(r"ERROR: libFuzzer: [a-z-]+|SUMMARY: .*|==\d+== ERROR: .*", text)
    if f and "run interrupted" not in text:
        findings = f"{f[0]} (see {p})"
print(f"cpu={int(cpu)} wall={int(wall)} execs={int(execs)} rss={int(rss)}")
print(f"covft='{covft}' start='{start}' findings='{findings}' n={len(chunks)}")
PY
}

row() {
    eval "$(tally "$1")"
    printf '| %s | `%s` | %d min %02d s | %d min %02d s | %s M | %s | %s | %s MB |\n' "$start" "$1" \
        $((cpu / 60)) $((cpu % 60)) $((wall / 60)) $((wall % 60)) \
        "$(python3 -c "print(f'{$execs / 1e6:.2f}')")" "$covft" "$findings" "$rss"
}

[[ -x /usr/bin/time ]] || { echo "hour.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
for t in "$@"; do
    if [[ -n $REPORT ]]; then
        row "$t"
        continue
    fi
    [[ -x $BIN/$t ]] || { echo "hour.sh: $BIN/$t missing: cargo +nightly fuzz build -O" >&2; exit 2; }
    [[ -d corpus/$t ]] || { echo "hour.sh: corpus/$t missing: ./seed.sh" >&2; exit 2; }
    case $t in
        verify_bytes | compressed_sniff) maxlen=262144 ;;
        *) maxlen=65536 ;;
    esac
    mkdir -p "artifacts/$t"
    eval "$(tally "$t")"
    while ((cpu < CPU_GOAL)) && [[ $findings == none ]]; do
        n=$((n + 1))
        # libFuzzer's own clock is wall time: ask for what is left, at most CHUNK.
        left=$((CPU_GOAL - cpu))
        chunk=$((left < CHUNK ? left : CHUNK))
        t0=$(date +%s)
        begun=$(date -u '+%Y-%m-%d %H:%M')
        rc=0
        /usr/bin/time -f 'rusage %U %S %M' -o "$LOG/$t.$n.time" \
            "$BIN/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$chunk" \
            -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            >"$LOG/$t.$n.log" 2>&1 || rc=$?
        echo "wall $(($(date +%s) - t0)) $begun" >>"$LOG/$t.$n.time"
        eval "$(tally "$t")"
        if ((rc != 0)) && [[ $findings == none ]]; then
            findings="exit $rc (see $LOG/$t.$n.log)"
        fi
    done
    row "$t" | tee -a "$LOG/rows.md"
done
