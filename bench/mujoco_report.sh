#!/usr/bin/env bash
# The MuJoCo section of results.md, from DIR/mujoco.csv (bench_mujoco), and
# its plot DIR/mujoco.FORMAT (png, the default, or svg). Called by
# bench/run_all.sh; prints nothing when DIR has no mujoco.csv:
#
#   bench/mujoco_report.sh DIR [FORMAT] >> DIR/results.md
set -euo pipefail
out=$1
fmt=${2:-png}
csv=$out/mujoco.csv
[ -f "$csv" ] || exit 0

if command -v gnuplot >/dev/null; then
  # One pair of bars per env: efficiency (W=1 node / raw loop) and W=2 scaling.
  awk -F, 'NR>1 && $1=="efficiency" {e[$2]=$8} NR>1 && $1=="scaling" {s[$2]=$8; o[++n]=$2}
           END {for (i=1;i<=n;i++) print o[i], e[o[i]], s[o[i]]}' "$csv" >"$out/mujoco.dat"
  # A starved quick run (a sanitizer build on a busy machine) can measure no
  # step in its short window: its ratios are 0 or NaN, and gnuplot has
  # nothing to draw. The table below still says so; no plot is not a failure.
  gnuplot <<GP || echo "mujoco_report.sh: no plot: no valid ratio in $csv" >&2
set terminal $([ "$fmt" = svg ] && echo "svg size 800,450 dynamic" || echo pngcairo size 800,450) font ",11" noenhanced
set output "$out/mujoco.$fmt"
set title "MuJoCo envs, random policy: node / raw mj_step loop (W=1), and W=2 scaling (medians)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:1.4]
set ylabel "ratio"
set grid ytics
set key top center horizontal
plot "$out/mujoco.dat" using 2:xtic(1) title "W=1 node / raw loop (target 0.9)", \
     "" using 3 title "W=2 / (2 x W=1) (target 0.95)", \
     0.9 with lines dt 2 lc rgb "gray" notitle, 0.95 with lines dt 3 lc rgb "black" notitle
GP
  rm -f "$out/mujoco.dat"
fi

echo
echo "## MuJoCo envs (bench_mujoco)"
echo
echo "Random policy, 64 envs per worker. *Efficiency*: a node with 1 worker over a raw"
echo "single-thread loop of \`mj_step\` x frame_skip on the same model (64 mjData, random controls,"
echo "the env's termination test and reset; no observations, rewards, actors or messages)."
echo "*Scaling*: steps/s with 2 workers over 2 x steps/s with 1. Medians over the repeats, with the"
echo "smallest and largest ratio of any repeat (each repeat measures both sides back to back)."
echo "*CPU-time ratio*: the same ratio computed from CPU seconds per env step (every thread of the"
echo "process), which other processes on a shared machine move much less: they take CPU time away"
echo "from a sample, and add to its CPU time per step only the cost of being preempted."
echo
echo "![MuJoCo efficiency and scaling](mujoco.$fmt)"
echo
echo "| figure | env | W | envs | base steps/s | steps/s | ratio | min..max | CPU-time ratio | target | met | ext load |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F, 'NR>1 && $1!="mlp" {t = ($1=="efficiency" ? 0.9 : 0.95);
  printf "| %s | %s | %s | %s | %.0f | %.0f | %.3f | %.3f..%.3f | %.3f | ≥ %.2f | %s | %.2f |\n",
  $1, $2, $4, $5, $6, $7, $8, $9, $10, $14, t, ($8>=t?"yes":"**no**"), $13}' "$csv"
echo
echo "Hopper + MLP(64,64) (tanh, Gaussian head): node steps/s, against the ideal W / (env time +"
echo "policy time) per step, each measured alone on one thread; *env share* is the env's part of"
echo "that time."
echo
echo "| W | envs | ideal steps/s | node steps/s | node / ideal | env share | threads | ext load |"
echo "|---|---|---|---|---|---|---|---|"
awk -F, 'NR>1 && $1=="mlp" {printf "| %s | %s | %.0f | %.0f | %.3f | %.1f%% | %s | %.2f |\n",
  $4, $5, $6, $7, $8, 100*$11, $12, $13}' "$csv"
