#!/usr/bin/python3
"""Plot a node's --metrics file: env steps/s and mean episode return over time.

    rollout-node --metrics run.jsonl --metrics-every 1 --seconds 60
    bench/plot_metrics.py run.jsonl -o run.png          # or .svg
    bench/plot_metrics.py node0.jsonl node1.jsonl -o nodes.png --csv nodes.csv

Reads the throughput lines of one or more metrics files (one curve per
file). The return curve is each interval's mean return: the lines'
``interval_mean_return`` (written by every node of this version), or, for
a file without it, the mean of the episode lines that fall in the
interval; intervals where no episode ended have no point. A last line cut
short (a node still writing) is skipped. Draws with gnuplot (Debian:
gnuplot-nox); ``--csv`` also writes the series (file, t, sps,
interval_episodes, interval_mean_return). Exits 2 on a bad file, naming it
and the line.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys


def read_series(path):
    """[(t, sps, episodes in interval, mean return or None)] of one file."""
    rows, episodes = [], []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    complete = lines[:-1]  # the text after the last newline is a line being written
    for no, line in enumerate(complete, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"plot_metrics: {path}:{no}: not a JSON line ({e.msg})")
        if not isinstance(r, dict) or "type" not in r:
            raise SystemExit(f"plot_metrics: {path}:{no}: not a metrics record")
        if r["type"] == "episode":
            episodes.append((float(r["t"]), float(r["return"])))
        elif r["type"] == "throughput":
            rows.append(r)
    out = []
    prev_t = 0.0
    k = 0
    episodes.sort()
    for r in rows:
        t = float(r["t"])
        if "interval_episodes" in r:
            n = int(r["interval_episodes"])
            mean = r.get("interval_mean_return")
        else:  # an older file: the episode lines of the interval
            chunk = []
            while k < len(episodes) and episodes[k][0] <= t:
                if episodes[k][0] > prev_t:
                    chunk.append(episodes[k][1])
                k += 1
            n = len(chunk)
            mean = sum(chunk) / n if n else None
        if mean is not None and not math.isfinite(float(mean)):
            mean = None
        out.append((t, float(r["sps"]), n, None if mean is None else float(mean)))
        prev_t = t
    return out


def datablock(name, rows, col):
    lines = [f"${name} << EOD"]
    for t, sps, n, mean in rows:
        v = sps if col == "sps" else mean
        if v is not None:
            lines.append(f"{t!r} {v!r}")
    lines.append("EOD")
    return "\n".join(lines)


def gnuplot_script(series, out, title):
    ext = os.path.splitext(out)[1].lower()
    term = ("svg size 900,700 dynamic font ',11'" if ext == ".svg"
            else "pngcairo size 900,700 font ',11'")
    parts = []
    for i, (_, rows) in enumerate(series):
        parts.append(datablock(f"sps{i}", rows, "sps"))
        parts.append(datablock(f"ret{i}", rows, "ret"))
    label = [os.path.basename(p).replace("_", "\\_") for p, _ in series]
    sps_plot = ", ".join(f'$sps{i} using 1:2 with lines lw 2 title "{label[i]}"'
                         for i in range(len(series)))
    ret_plot = ", ".join(f'$ret{i} using 1:2 with linespoints lw 2 pt 7 ps 0.5 '
                         f'title "{label[i]}"' for i in range(len(series)))
    parts.append(f"""
set terminal {term}
set output "{out}"
set multiplot layout 2,1 title "{title}"
set grid
set key top left
set xlabel "seconds since the node started"
set ylabel "env steps/s"
set format y "%.3s%c"
set yrange [0:*]
plot {sps_plot}
set ylabel "mean episode return (per interval)"
set format y "%g"
set autoscale y
plot {ret_plot}
unset multiplot
""")
    return "\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("metrics", nargs="+", help="rollout-node --metrics files (JSON lines)")
    ap.add_argument("-o", "--output", required=True, help="the plot: .png or .svg")
    ap.add_argument("--title", default="rollout-node metrics", help="the plot's title")
    ap.add_argument("--csv", help="also write the series to this CSV file")
    args = ap.parse_args(argv)
    series = []
    for path in args.metrics:
        try:
            rows = read_series(path)
        except OSError as e:
            print(f"plot_metrics: {path}: {e.strerror}", file=sys.stderr)
            return 2
        except SystemExit as e:
            print(e, file=sys.stderr)
            return 2
        if not rows:
            print(f"plot_metrics: {path}: no throughput line yet", file=sys.stderr)
            return 2
        series.append((path, rows))
    if args.csv:
        with open(args.csv, "w", encoding="utf-8") as f:
            f.write("file,t,sps,interval_episodes,interval_mean_return\n")
            for path, rows in series:
                for t, sps, n, mean in rows:
                    f.write(f"{path},{t},{sps},{n},{'' if mean is None else mean}\n")
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("plot_metrics: gnuplot not found (Debian: apt-get install gnuplot-nox)",
              file=sys.stderr)
        return 1
    p = subprocess.run([gnuplot], input=gnuplot_script(series, args.output, args.title),
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"plot_metrics: gnuplot failed: {p.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"plot_metrics: wrote {args.output} ({sum(len(r) for _, r in series)} intervals, "
          f"{len(series)} file(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
