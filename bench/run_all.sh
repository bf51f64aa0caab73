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
# setup, no compile), --only LIST (re-run only some of engine, scaling,
# overhead, memory, mujoco, comma-separated; the others' CSV files in DIR are kept,
# and the table and plots are made from all of them), --plots-only (run
# nothing: draw the plots from the CSV files in DIR), --plot-format png|svg.
# --quick runs every program briefly, once, without waiting for a quiet
# machine. Every figure is a ratio or a median taken within one run of one
# program.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=default
long=0
only=",engine,scaling,overhead,memory,mujoco,"
out=""
build=build-bench
compile=1
plots_only=0
fmt=png
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --long) long=1 ;;
    --out) out=$2; shift ;;
    --build) build=$2; shift ;;
    --no-build) compile=0 ;;
    --only) only=",$2,"; shift ;;
    --plots-only) plots_only=1 ;;
    --plot-format)
      case "$2" in png|svg) fmt=$2 ;; *) echo "run_all.sh: --plot-format '$2': expected png or svg" >&2; exit 2 ;; esac
      shift ;;
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
  secs=0.3; reps=1; osecs=0.3; oreps=1; rss_steps=5000000; warm=0.5; every=0.25; quiet=0
else
  secs=2; reps=3; osecs=1.5; oreps=5; rss_steps=100000000; warm=3; every=1; quiet=10
fi
[ "$long" = 1 ] && rss_steps=1000000000

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
    echo "== engine efficiency"
    "$B/bench_engine" --seconds "$secs" --repeats "$reps" --quiet-wait "$quiet" \
      --csv "$out/engine.csv"
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
    echo "== resident memory over $rss_steps steps (cartpole + MLP)"
    "$B/bench_rss" --node "$build/rollout-node" --interval "$every" --warmup "$warm" \
      --csv "$out/rss.csv" --summary "$out/rss_summary.csv" -- --steps "$rss_steps" 2>/dev/null
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
for f in engine scaling overhead batch_sweep rss rss_summary; do
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
{
  echo "# Benchmark results"
  echo
  echo "Generated by \`bench/run_all.sh$([ "$mode" = quick ] && echo " --quick")$([ "$long" = 1 ] && echo " --long")\`"
  echo "on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $rev: $cores allowed CPUs ($cpu), $nodes NUMA"
  echo "node(s), $(uname -sr). Medians of $reps repeats of ${secs} s (engine, scaling) and"
  echo "$oreps repeats of ${osecs} s (overheads), sides alternating. See docs/benchmarks.md for"
  echo "what each figure means and why any misses its target."
  echo
  if [ "$only" != ",engine,scaling,overhead,memory,mujoco," ]; then
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
  else
    echo "Each sample waits (up to 10 s) for a quiet moment and is retried (up to 6 times) while"
    echo "other processes kept more than 0.1 CPU busy during it (busy time in /proc/stat minus this"
    echo "process's); \`ext load\` is the mean number of CPUs other processes still used during the"
    echo "kept samples: figures with a high one are suspect."
  fi
  echo
  echo "## Against the targets (docs/benchmarks.md, \"Results against the targets\")"
  echo
  echo "| figure | measured | target | met |"
  echo "|---|---|---|---|"
  awk -F, 'NR>1 && $1=="cartpole+mlp64x64" {printf "| cartpole + MLP(64,64): node ÷ (raw loop × %s) | %.3f | ≥ 0.85 | %s |\n", $2, $6, ($6>=0.85?"yes":"**no**")}' "$out/engine.csv"
  awk -F, -v c="$cores" 'NR>1 && $1 ~ /^burn/ && $2==c {printf "| burn 50 µs: steps/s(W=%s) ÷ (%s × steps/s(1)) | %.3f | ≥ 0.95 | %s |\n", c, c, $6, ($6>=0.95?"yes":"**no**")}' "$out/scaling.csv"
  awk -F, 'NR>1 {printf "| %s on ÷ off, %s (W=%s) | %.3f | ≥ 0.98 | %s |\n", ($1=="logger"?"logger (--metrics file)":"validation (--check-finite)"), $2, $3, $6, ($6>=0.98?"yes":"**no**")}' "$out/overhead.csv"
  awk -F, 'NR>1 {printf "| resident memory growth after %s s warm-up over %.0f M steps | %d KiB | ≤ 1024 KiB | %s |\n", $4, $1/1e6, $8, ($8>=0 && $8<=1024?"yes":"**no**")}' "$out/rss_summary.csv"
  echo
  echo "A growth of -1 means the run ended before the warm-up did (too few steps)."
  echo
  echo "## Engine efficiency (bench_engine)"
  echo
  echo "| case | W | batch | raw 1-thread steps/s | node steps/s | efficiency | threads | ext load |"
  echo "|---|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %.0f | %.0f | %.3f | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, $8}' "$out/engine.csv"
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
  echo "| feature | case | W | off steps/s | on steps/s | on ÷ off | threads off/on | records dropped | ext load |"
  echo "|---|---|---|---|---|---|---|---|---|"
  awk -F, 'NR>1 {printf "| %s | %s | %s | %.0f | %.0f | %.3f | %s/%s | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}' "$out/overhead.csv"
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
  awk -F, 'NR>1 {printf "| engine | %s | %s | %s | %d | %s |\n", $1, $2, $7, $2+1, ($7==$2+1?"yes":"**no**")}' "$out/engine.csv"
  awk -F, 'NR>1 {printf "| scaling | %s | %s | %s | %d | %s |\n", $1, $2, $7, $2+1, ($7==$2+1?"yes":"**no**")}' "$out/scaling.csv"
  awk -F, 'NR>1 {printf "| overhead | %s on, %s | %s | %s | %d | %s |\n", $1, $2, $3, $8, $3+1, ($8==$3+1?"yes":"**no**")}' "$out/overhead.csv"
  awk -F, 'NR>1 {printf "| batch sweep | batch %s, max-wait %s | %s | %s | %d | %s |\n", $1, $2, $4, $7, $4+1, ($7==$4+1?"yes":"**no**")}' "$out/batch_sweep.csv"
  awk -F, 'NR>1 {printf "| memory | rollout-node process | %d | %s | %s | %s |\n", $10-1, $9, $10, ($9==$10?"yes":"**no**")}' "$out/rss_summary.csv"
  bash bench/mujoco_report.sh "$out" "$fmt" # issue 17: the MuJoCo section, where measured
} > "$out/results.md"
echo "== wrote $out/results.md and $(ls "$out"/*.png 2>/dev/null | wc -l) plots in $out"
