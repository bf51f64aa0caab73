#!/usr/bin/env bash
# Runs every benchmark and regenerates docs/benchmarks/: CSV files, a
# Markdown table of the figures against their targets (results.md) and PNG
# plots (gnuplot). One command:
#
#   bench/run_all.sh            # the published run, a few minutes
#   bench/run_all.sh --quick    # a smoke run (well under a minute), written to bench/out/
#   bench/run_all.sh --long     # the memory run over 1e9 steps instead of 1e8
#   bench/run_all.sh --plots-only --out docs/benchmarks   # redraw the plots from the CSVs
#
# Options: --out DIR (where to write), --build DIR (build directory; set up
# as a release build if missing), --no-build (use --build as it is: no
# setup, no compile), --only LIST (re-run only some of engine, kernels,
# scaling, overhead, memory, mujoco, comma-separated; the others' CSV files in DIR
# are kept, and the table and plots are made from all of them), --previous
# NODE (a rollout-node binary of an earlier version: its node is measured
# against the same machine yardstick, into engine_previous.csv; results.md
# names it by --previous-label TEXT, or by its path),
# --plots-only (run nothing: draw the plots from the CSV files in DIR),
# --plot-format png|svg, --quiet-wait S (how long each sample may wait for
# a quiet machine; default 10, 0 with --quick). --quick runs every program
# briefly, once, without waiting for a quiet machine. Every figure is a
# ratio or a median taken within one run of one program.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=default
long=0
only=",engine,kernels,scaling,overhead,memory,mujoco,"
previous=""
out=""
build=build-bench
compile=1
plots_only=0
fmt=png
quiet_wait=""
previous_label=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --long) long=1 ;;
    --out) out=$2; shift ;;
    --build) build=$2; shift ;;
    --no-build) compile=0 ;;
    --only) only=",$2,"; shift ;;
    --previous) previous=$2; shift ;;
    --previous-label) previous_label=$2; shift ;;
    --plots-only) plots_only=1 ;;
    --plot-format)
      case "$2" in png|svg) fmt=$2 ;; *) echo "run_all.sh: --plot-format '$2': expected png or svg" >&2; exit 2 ;; esac
      shift ;;
    --quiet-wait) quiet_wait=$2; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$out" ]; then
  if [ "$mode" = quick ]; then out=bench/out; else out=docs/benchmarks; fi
fi
mkdir -p "$out"

if [ "$mode" = quick ]; then
  # One short sample of each, at once: a smoke run, not a measurement.
  secs=0.3; reps=1; osecs=0.3; oreps=1; rss_secs=2; warm=0.5; every=0.25; quiet=0; ksecs=0.05
else
  secs=2; reps=3; osecs=1.5; oreps=5; rss_secs=20; warm=3; every=1; quiet=10; ksecs=0.3
fi
[ "$long" = 1 ] && rss_secs=120
[ -n "$quiet_wait" ] && quiet=$quiet_wait

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$plots_only" = 0 ]; then
  if [ "$compile" = 1 ]; then
    if [ ! -f "$build/build.ninja" ]; then
      meson setup "$build" --buildtype=release -Dtests=false >/dev/null
    fi
    meson compile -C "$build" >/dev/null
  fi
  B=$build/bench
  want() { case "$only" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
  if want engine; then
    echo "== the node against the machine, and engine efficiency"
    "$B/bench_engine" --seconds "$secs" --repeats "$reps" --quiet-wait "$quiet" \
      --csv "$out/engine.csv"
    if [ -n "$previous" ]; then
      echo "== the previous version's node against the same machine yardstick: $previous"
      "$B/bench_engine" --seconds "$secs" --repeats "$reps" --quiet-wait "$quiet" \
        --node "$previous" --csv "$out/engine_previous.csv"
    fi
  fi
  if want kernels; then
    echo "== kernels: forward pass per row, every path, relu and tanh, against OpenBLAS"
    "$B/bench_kernels" --seconds "$ksecs" --repeats "$reps" --quiet-wait "$quiet" \
      --csv "$out/kernels.csv"
  fi
  if want scaling; then
    echo "== scaling"
    "$B/bench_scaling" --seconds "$secs" --repeats "$reps" --quiet-wait "$quiet" \
      --csv "$out/scaling.csv"
  fi
  if want overhead; then
    echo "== logger, validation, batch and max-wait"
    "$B/bench_overhead" --seconds "$osecs" --repeats "$oreps" --quiet-wait "$quiet" \
      --csv "$out/overhead.csv" --batch-csv "$out/batch_sweep.csv"
  fi
  if want memory; then
    # A run by time, not steps: the samples after warm-up must exist however
    # fast the node is.
    echo "== resident memory over $rss_secs s (cartpole + MLP)"
    "$B/bench_rss" --node "$build/rollout-node" --interval "$every" --warmup "$warm" \
      --csv "$out/rss.csv" --summary "$out/rss_summary.csv" -- --seconds "$rss_secs" 2>/dev/null
  fi
  # issue 17: the MuJoCo envs (bench_mujoco is absent from a build without MuJoCo).
  if want mujoco; then
    if [ -x "$B/bench_mujoco" ]; then
      echo "== MuJoCo envs against raw mj_step loops"
      "$B/bench_mujoco" --seconds "$secs" --repeats "$([ "$mode" = quick ] && echo 1 || echo 5)" \
        --quiet-wait "$quiet" --csv "$out/mujoco.csv"
    else
      echo "run_all.sh: $B/bench_mujoco was not built (no MuJoCo): skipped" >&2
    fi
  fi
fi
for f in engine kernels scaling overhead batch_sweep rss rss_summary; do
  if [ ! -f "$out/$f.csv" ]; then
    echo "run_all.sh: $out/$f.csv is missing: run without --only (or --plots-only) first" >&2
    exit 1
  fi
done

load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- plots ----
# Each plot states its own tics: a setting left over from the plot before
# (xtics 1 for workers) once hid every x label of the batch sweep.
if [ "$fmt" = svg ]; then
  term="svg size 800,500 dynamic font ',11'"
else
  term="pngcairo size 800,500 font ',11'"
fi
prev_csv=/dev/null
[ -f "$out/engine_previous.csv" ] && prev_csv="$out/engine_previous.csv"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set datafile separator ","
set terminal $term
set key top left
set grid
set xlabel "workers (W)"
set xtics 1
set format x "%g"

set output "$out/scaling_sps.$fmt"
set title "steps/s vs workers (strong scaling, medians)"
set ylabel "env steps/s"
set logscale y
plot "< grep '^burn' $out/scaling.csv" using 2:5 with linespoints lw 2 title "burn 50 us + MLP(64,64)", \
     "< grep '^cartpole' $out/scaling.csv" using 2:5 with linespoints lw 2 title "cartpole + MLP(64,64)"
unset logscale y

set output "$out/scaling_efficiency.$fmt"
set title "efficiency vs workers: steps/s(W) / (W x steps/s(1))"
set ylabel "efficiency"
set yrange [0:1.2]
plot "< grep '^burn' $out/scaling.csv" using 2:6 with linespoints lw 2 title "burn 50 us + MLP(64,64)", \
     "< grep '^cartpole' $out/scaling.csv" using 2:6 with linespoints lw 2 title "cartpole + MLP(64,64)", \
     0.95 with lines dt 2 lc rgb "gray" title "target 0.95 (burn)"
set autoscale y

set output "$out/rss.$fmt"
set title "resident memory of a node (cartpole + MLP), sampled every ${every} s"
set xlabel "seconds"
set xtics autofreq
set ylabel "RSS (MiB)"
set yrange [0:*]
set key bottom right
# The first sample is taken before the node has even been exec'd: skip it.
plot "< awk -F, 'NR>2' $out/rss.csv" using 1:(\$2/1024.0) with linespoints lw 2 title "RSS"
set key top left

set output "$out/batch_sweep.$fmt"
set title "cartpole + MLP: steps/s vs --batch (medians)"
set xlabel "batch"
set logscale x 2
set xtics autofreq
set ylabel "env steps/s"
plot "< awk -F, 'NR>1 && \$2==0' $out/batch_sweep.csv" using 1:5 with linespoints lw 2 title "--max-wait-us 0", \
     "< awk -F, 'NR>1 && \$2==1000' $out/batch_sweep.csv" using 1:5 with linespoints lw 2 title "--max-wait-us 1000"

# The node against the machine: cartpole + MLP(64,64), this build and, where
# measured, the previous one (engine_previous.csv), in wall-clock and in CPU
# time, with the targets. One row per case: label, this build's wall and CPU
# ratios, the previous build's (nan where not measured: no bar).
unset logscale x
set output "$out/engine_vs_machine.$fmt"
set title "cartpole + MLP(64,64): node / (W x one thread: env loop + OpenBLAS ReLU forward)"
set xlabel ""
set ylabel "node / (W x machine loop)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set key below maxrows 3
set xtics rotate by 0
set datafile missing "nan"
rows = "< awk -F, 'FILENAME==ARGV[1] {if (FNR>1) {p[\$1\" \"\$2\" \"\$3]=\$11; pc[\$1\" \"\$2\" \"\$3]=\$18}; next} FNR>1 && \$11!=\"nan\" {k=\$1\" \"\$2\" \"\$3; print \$2\" \"\$3\" envs,\"\$11\",\"\$18\",\"(k in p?p[k]:\"nan\")\",\"(k in pc?pc[k]:\"nan\")}' $prev_csv $out/engine.csv"
plot rows using 4:xtic(1) title "previous build, wall-clock" lc rgb "#b0b0b0", \
     rows using 2 title "this build, wall-clock" lc rgb "#4070c0", \
     rows using 5 title "previous build, CPU time" lc rgb "#707070", \
     rows using 3 title "this build, CPU time" lc rgb "#103080", \
     0.85 with lines dt 2 lw 2 lc rgb "black" title "target 0.85 (relu)", \
     0.7 with lines dt 3 lw 2 lc rgb "black" title "target 0.7 (tanh)"

set key inside top left
set output "$out/kernels.$fmt"
set title "forward pass of 4-64-64-2, one thread: CPU ns per row (batch 64)"
set ylabel "ns per row (log)"
set logscale y
set yrange [*:*]
plot "< awk -F, 'NR>1 && \$2==64 && \$3==\"forward relu\" {print \$1\",\"\$4}' $out/kernels.csv" using 2:xtic(1) title "ours, relu", \
     "< awk -F, 'NR>1 && \$2==64 && \$3==\"forward tanh\" {print \$1\",\"\$4}' $out/kernels.csv" using 2 title "ours, tanh", \
     "< awk -F, 'NR>1 && \$2==64 && \$3==\"OpenBLAS forward relu\" {print \$1\",\"\$4}' $out/kernels.csv" using 2 title "OpenBLAS sgemm, relu"
GP
else
  echo "run_all.sh: gnuplot not found: no plots (bash .ci/install-deps installs it)" >&2
fi

if [ "$plots_only" = 1 ]; then
  echo "== drew $(ls "$out"/*."$fmt" 2>/dev/null | wc -l) plots in $out from its CSV files"
  exit 0
fi

# ---- results.md ----
cores=$(awk -F, 'NR==2{print $3}' "$out/scaling.csv")
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //' || echo unknown)
nodes=$(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
previous_label=${previous_label:-${previous:-none}}
{
  echo "# Benchmark results"
  echo
  echo "Generated by \`bench/run_all.sh$([ "$mode" = quick ] && echo " --quick")$([ "$long" = 1 ] && echo " --long")\`"
  echo "on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $rev: $cores allowed CPUs ($cpu), $nodes NUMA"
  echo "node(s), $(uname -sr). Medians of $reps repeats of ${secs} s (engine, scaling) and"
  echo "$oreps repeats of ${osecs} s (overheads), sides alternating. See docs/benchmarks.md for"
  echo "what each figure means and why any misses its target."
  echo
  if [ "$only" != ",engine,kernels,scaling,overhead,memory,mujoco," ]; then
    only_list=${only#,}; only_list=${only_list%,}
    echo
    echo "This invocation re-ran only: $only_list (with --only); the other tables come from the"
    echo "CSV files of an earlier run in the same directory."
  fi
  echo
  echo "The machine is shared. Load average at the start: $load_start; at the end: $load_end."
  if [ "$mode" = quick ]; then
    echo "A --quick run: one short sample of each figure, taken at once, without waiting for a"
    echo "quiet machine: a smoke run of the suite, not a measurement."
  elif [ "$quiet" = 0 ]; then
    echo "Run with --quiet-wait 0: each sample was taken at once, neither waiting for a quiet moment"
    echo "nor retried, whatever other processes did. \`ext load\` is the mean number of CPUs other"
    echo "processes used during the samples: wall-clock figures with a high one are suspect; the"
    echo "CPU-time figures (bench_engine's CPU-time ratios, bench_kernels) are what load moves least."
  else
    echo "Each sample waits (up to $quiet s) for a quiet moment and is retried (up to 6 times) while"
    echo "other processes kept more than 0.1 CPU busy during it (busy time in /proc/stat minus this"
    echo "process's); \`ext load\` is the mean number of CPUs other processes still used during the"
    echo "kept samples: figures with a high one are suspect."
  fi
  echo
  echo "## Against the targets (docs/benchmarks.md, \"Results against the targets\")"
  echo
  echo "| figure | measured | target | met |"
  echo "|---|---|---|---|"
  awk -F, 'NR>1 && $11!="nan" {t=($2=="relu"?0.85:0.7); printf "| cartpole + MLP(64,64) %s, %s envs: node ÷ (%s × machine loop: env + OpenBLAS ReLU forward) | %.3f | ≥ %.2f | %s |\n", $2, $3, $4, $11, t, ($11>=t?"yes":"**no**")}' "$out/engine.csv"
  awk -F, 'NR>1 && $11!="nan" {t=($2=="relu"?0.85:0.7); printf "| the same in CPU time (%s, %s envs) | %.3f | ≥ %.2f | %s |\n", $2, $3, $18, t, ($18>=t?"yes":"**no**")}' "$out/engine.csv"
  awk -F, 'NR>1 && $11!="nan" && $3==256 {printf "| cartpole + MLP(64,64) %s, 256 envs: node ÷ (%s × same-kernel loop), the previous yardstick | %.3f | ≥ 0.85 | %s |\n", $2, $4, $9, ($9>=0.85?"yes":"**no**")}' "$out/engine.csv"
  awk -F, 'NR>1 && $3=="forward relu" {r[$1" "$2]=$4} NR>1 && $3=="forward tanh" {t[$1" "$2]=$4} END {for (k in r) if (k ~ /^avx512/ || k ~ /^avx2/) printf "| forward pass, %s rows: tanh network ÷ ReLU network (%s) | %.3f | ≤ 1.3 | %s |\n", substr(k, index(k," ")+1), substr(k,1,index(k," ")-1), t[k]/r[k], (t[k]/r[k]<=1.3?"yes":"**no**")}' "$out/kernels.csv" | sort
  awk -F, 'NR>1 && $1=="cartpole+mlp64x64" && $2=="relu" {r[$3]=$16; rw[$3]=$8} NR>1 && $1=="cartpole+mlp64x64" && $2=="tanh" {t[$3]=$16; tw[$3]=$8} END {for (n in r) if (n in t) printf "| the node, %s envs: CPU time per step, tanh network ÷ ReLU network (wall-clock: %.3f) | %.3f | ≤ 1.3 | %s |\n", n, rw[n]/tw[n], r[n]/t[n], (r[n]/t[n]<=1.3?"yes":"**no**")}' "$out/engine.csv" | sort -t, -k1,1
  awk -F, -v c="$cores" 'NR>1 && $1 ~ /^burn/ && $2==c {printf "| burn 50 µs: steps/s(W=%s) ÷ (%s × steps/s(1)) | %.3f | ≥ 0.95 | %s |\n", c, c, $6, ($6>=0.95?"yes":"**no**")}' "$out/scaling.csv"
  awk -F, 'NR>1 {f=($1=="logger"?"logger (--metrics, per-interval lines)":($1=="logger_episodes"?"logger (--metrics --metrics-episodes)":"validation (--check-finite)")); t=($1=="logger_episodes"?"—":"≥ 0.98"); printf "| %s on ÷ off, %s (W=%s) | %.3f | %s | %s |\n", f, $2, $3, $6, t, ($1=="logger_episodes"?"(for the record)":($6>=0.98?"yes":"**no**")); if ($13!="") printf "| the same in CPU time | %.3f | %s | %s |\n", $13, t, ($1=="logger_episodes"?"(for the record)":($13>=0.98?"yes":"**no**"))}' "$out/overhead.csv"
  awk -F, 'NR>1 {printf "| resident memory growth after %s s warm-up over %.0f M steps | %d KiB | ≤ 1024 KiB | %s |\n", $4, $1/1e6, $8, ($8>=0 && $8<=1024?"yes":"**no**")}' "$out/rss_summary.csv"
  echo
  echo "A growth of -1 means the run ended before the warm-up did (too few steps)."
  echo
  echo "## The node against the machine, and engine efficiency (bench_engine)"
  echo
  echo "machine loop: one thread steps B envs and runs OpenBLAS's sgemm forward of the same network with"
  echo "ReLU (B = the node's batch); same-kernel loop: one thread with our own policy. of machine = node"
  echo "÷ (W × machine loop), for relu and tanh alike; efficiency = node ÷ (W × same-kernel loop). of"
  echo "machine (CPU time): the node's steps per CPU-second of all its threads ÷ the machine loop's per"
  echo "CPU-second of its thread, which other processes on the machine do not move."
  echo
  echo "| case | act | envs | W | batch | kernels | same-kernel loop | node steps/s | efficiency | machine loop | of machine | of machine (CPU time) | env loop | OpenBLAS fwd rows/s | threads | ext load |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.3f | %.0f | %.3f | %.3f | %.0f | %.0f | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $18, $12, $13, $14, $15}' "$out/engine.csv"
  if [ -f "$out/engine_previous.csv" ]; then
    echo
    echo "The previous version's node ($previous_label) against the same yardstick, in a run of its own:"
    echo
    echo "| case | act | envs | batch | node steps/s | machine loop | of machine (previous) | of machine (this build) | CPU time: previous | CPU time: this build | ext load |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    awk -F, 'NR==FNR {if (FNR>1) {now[$1","$2","$3]=$11; nowc[$1","$2","$3]=$18}; next} FNR>1 && $11!="nan" {printf "| %s | %s | %s | %s | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f | %.2f |\n", $1, $2, $3, $5, $8, $10, $11, now[$1","$2","$3], $18, nowc[$1","$2","$3], $15}' "$out/engine.csv" "$out/engine_previous.csv"
    echo
    echo "![node against the machine](engine_vs_machine.png)"
  fi
  echo
  echo "## Kernels (bench_kernels): one thread, CPU time per row"
  echo
  echo "![forward pass per row](kernels.png)"
  echo
  echo "| path | batch | op | CPU ns per row | ext load |"
  echo "|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %.1f | %.2f |\n", $1, $2, $3, $4, $5}' "$out/kernels.csv"
  echo
  echo "## Scaling (bench_scaling): W = 1 … $cores"
  echo
  echo "![steps/s vs workers](scaling_sps.png) ![efficiency vs workers](scaling_efficiency.png)"
  echo
  echo "| case | W | envs | steps/s | efficiency | threads | ext load |"
  echo "|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %.0f | %.3f | %s | %.2f |\n", $1, $2, $4, $5, $6, $7, $9}' "$out/scaling.csv"
  echo
  echo "No machine with 16 or more cores was available to this run: the scaling figures stop"
  echo "at W = $cores. Run \`bench/run_all.sh\` there and publish its results beside these."
  echo
  echo "## Logger and validation (bench_overhead)"
  echo
  echo "on ÷ off, CPU time: the process's steps per CPU-second (every thread; the logger runs on"
  echo "the loop thread) on ÷ off, which other processes on the machine do not move."
  echo
  echo "| feature | case | W | off steps/s | on steps/s | on ÷ off | on ÷ off, CPU time | threads off/on | records dropped | ext load |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %.0f | %.0f | %.3f | %s | %s/%s | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, ($13==""?"n/a":sprintf("%.3f", $13)), $7, $8, $9, $10}' "$out/overhead.csv"
  echo
  echo "## Batch size and max-wait (bench_overhead), cartpole + MLP(64,64)"
  echo
  echo "![steps/s vs batch](batch_sweep.png)"
  echo
  echo "| batch | --max-wait-us | shard | W | steps/s | mean batch | threads | ext load |"
  echo "|---|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %s | %.0f | %s | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, $8}' "$out/batch_sweep.csv"
  echo
  echo "## Resident memory (bench_rss)"
  echo
  echo "![resident memory](rss.png)"
  echo
  echo "| steps | seconds | steps/s | RSS at warm-up | max RSS after | final RSS | growth | threads (max / expected) |"
  echo "|---|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %.0f | %s | %.0f | %d KiB | %d KiB | %d KiB | %d KiB | %s / %s |\n", $1, $2, $3, $5, $6, $7, $8, $9, $10}' "$out/rss_summary.csv"
  echo
  echo "## Threads per configuration"
  echo
  echo "Read from /proc while each node ran; a node must be exactly 1 loop thread + W workers."
  echo
  echo "| benchmark | configuration | W | threads | expected | ok |"
  echo "|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| engine | %s %s %s envs | %s | %s | %d | %s |\n", $1, $2, $3, $4, $14, $4+1, ($14==$4+1?"yes":"**no**")}' "$out/engine.csv"
  awk -F, 'NR>1 {printf "| scaling | %s | %s | %s | %d | %s |\n", $1, $2, $7, $2+1, ($7==$2+1?"yes":"**no**")}' "$out/scaling.csv"
  awk -F, 'NR>1 {printf "| overhead | %s on, %s | %s | %s | %d | %s |\n", $1, $2, $3, $8, $3+1, ($8==$3+1?"yes":"**no**")}' "$out/overhead.csv"
  awk -F, 'NR>1 {printf "| batch sweep | batch %s, max-wait %s | %s | %s | %d | %s |\n", $1, $2, $4, $7, $4+1, ($7==$4+1?"yes":"**no**")}' "$out/batch_sweep.csv"
  awk -F, 'NR>1 {printf "| memory | rollout-node process | %d | %s | %s | %s |\n", $10-1, $9, $10, ($9==$10?"yes":"**no**")}' "$out/rss_summary.csv"
  bash bench/mujoco_report.sh "$out" "$fmt" # issue 17: the MuJoCo section, where measured
} > "$out/results.md"
echo "== wrote $out/results.md and $(ls "$out"/*.png 2>/dev/null | wc -l) plots in $out"
