#!/usr/bin/python3
"""Plot a node's --metrics file: env steps/s and mean episode return over time.

    rollout-node --metrics run.jsonl --metrics-every 1 --seconds 60
    bench/plot_metrics.py run.jsonl -o run.png          # or .svg
    bench/plot_metrics.py node0.jsonl node1.jsonl -o nodes.png --csv nodes.csv
    bench/plot_metrics.py run.jsonl -o run.png --x steps  # against env steps

Reads the throughput lines of one or more metrics files (one curve per
file). The return curve is each interval's mean return: the lines'
``interval_mean_return`` (written by every node of this version), or, for
a file without it, the mean of the episode lines that fall in the
interval; intervals where no episode ended have no point. A last line cut
short (a node still writing) is skipped. The x axis is seconds since the
node started, or with ``--x steps`` its env steps so far (the lines'
``steps``); both panels share it, from 0 to the last point. Large values
are scaled to thousands or millions, named in the axis label; file names
are shown as they are. Draws with gnuplot (Debian: gnuplot-nox); ``--csv``
also writes the series (file, t, sps, interval_episodes,
interval_mean_return, steps). Exits 2 on a bad file, naming it and the
line.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys


def read_series(path):
    """[(t, sps, episodes in interval, mean return or None, env steps so
    far)] of one file."""
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
    steps = 0.0  # a line without "steps" (an older node): integrated from sps
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
        steps = float(r["steps"]) if "steps" in r else steps + float(r["sps"]) * (t - prev_t)
        out.append((t, float(r["sps"]), n, None if mean is None else float(mean), steps))
        prev_t = t
    return out


def scale(top):
    """(divisor, words) that bring values up to top to at most a few
    thousand: the axis then reads 3.5 (thousands), never 3.500k."""
    for div, words in ((1e6, " (millions)"), (1e3, " (thousands)")):
        if top >= 10 * div:
            return div, words
    return 1.0, ""


def datablock(name, rows, col, x, xdiv, ydiv):
    lines = [f"${name} << EOD"]
    for t, sps, n, mean, steps in rows:
        v = sps if col == "sps" else mean
        if v is not None:
            lines.append(f"{(steps if x == 'steps' else t) / xdiv!r} {v / ydiv!r}")
    lines.append("EOD")
    return "\n".join(lines)


def gnuplot_script(series, out, title, x="time"):
    ext = os.path.splitext(out)[1].lower()
    term = ("svg size 900,700 dynamic font ',11'" if ext == ".svg"
            else "pngcairo size 900,700 font ',11'")
    col = 4 if x == "steps" else 0
    xmax = max(r[col] for _, rows in series for r in rows) or 1.0
    xdiv, xwords = scale(xmax) if x == "steps" else (1.0, "")
    ydiv, ywords = scale(max(r[1] for _, rows in series for r in rows))
    parts = []
    for i, (_, rows) in enumerate(series):
        parts.append(datablock(f"sps{i}", rows, "sps", x, xdiv, ydiv))
        parts.append(datablock(f"ret{i}", rows, "ret", x, xdiv, 1.0))
    label = [os.path.basename(p).replace('"', "'") for p, _ in series]
    sps_plot = ", ".join(f'$sps{i} using 1:2 with lines lw 2 title "{label[i]}"'
                         for i in range(len(series)))
    ret_plot = ", ".join(f'$ret{i} using 1:2 with linespoints lw 2 pt 7 ps 0.5 '
                         f'title "{label[i]}"' for i in range(len(series)))
    xlabel = f"env steps{xwords}" if x == "steps" else "seconds since the node started"
    # noenhanced: "run_1.jsonl" is a name, not run with a subscript 1. One
    # x range and fixed margins for both panels, so their x axes line up:
    # the return panel's first point (the first interval in which an
    # episode ended) comes later, and its tick labels are wider.
    parts.append(f"""
set terminal {term} noenhanced
set output "{out}"
set multiplot layout 2,1 title "{title.replace('"', "'")}"
set grid
set key top left
set lmargin 12
set rmargin 4
set xlabel "{xlabel}"
set xrange [0:{xmax / xdiv!r}]
set format x "%g"
set ylabel "env steps/s{ywords}"
set format y "%g"
set yrange [0:*]
plot {sps_plot}
set ylabel "mean episode return (per interval)"
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
    ap.add_argument("--x", choices=("time", "steps"), default="time",
                    help="x axis: seconds since the node started (default) or env steps")
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
            f.write("file,t,sps,interval_episodes,interval_mean_return,steps\n")
            for path, rows in series:
                for t, sps, n, mean, steps in rows:
                    f.write(f"{path},{t},{sps},{n},{'' if mean is None else mean},{steps:g}\n")
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("plot_metrics: gnuplot not found (Debian: apt-get install gnuplot-nox)",
              file=sys.stderr)
        return 1
    p = subprocess.run([gnuplot], input=gnuplot_script(series, args.output, args.title, args.x),
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"plot_metrics: gnuplot failed: {p.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"plot_metrics: wrote {args.output} ({sum(len(r) for _, r in series)} intervals, "
          f"{len(series)} file(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
