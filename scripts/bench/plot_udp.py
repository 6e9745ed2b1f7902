#!/usr/bin/env python3
"""Plot UDP throughput by payload size, nagare beside Linux loopback.

Reads the CSV written by `nagare bench udp --csv FILE` and writes a PNG
with two panels: goodput (Gbit/s of UDP payload) and datagram rate (Mpps),
each bar group labelled with the ratio nagare / Linux (one thread).

    python3 scripts/bench/plot_udp.py udp.csv docs/img/udp_throughput.png

Needs matplotlib (pip install matplotlib).
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = [
    ("nagare", "nagare (sim link, 1 thread)", "#d1495b"),
    ("linux1", "Linux loopback (1 thread)", "#00798c"),
    ("linux2", "Linux loopback (2 threads)", "#8fb8de"),
]


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{path}: no rows")
    return rows


def panel(ax, rows, metric, ylabel):
    n = len(SERIES)
    width = 0.8 / n
    xs = range(len(rows))
    for i, (key, label, color) in enumerate(SERIES):
        values = [float(r[f"{key}_{metric}"]) for r in rows]
        offset = (i - (n - 1) / 2) * width
        bars = ax.bar([x + offset for x in xs], values, width, label=label, color=color)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    for x, r in zip(xs, rows):
        ratio = float(r[f"nagare_{metric}"]) / float(r[f"linux1_{metric}"])
        ax.annotate(
            f"x{ratio:.1f}",
            xy=(x, 1.0),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="bottom",
            fontsize=8,
            fontweight="bold",
        )
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r['size']} B" for r in rows])
    ax.set_xlabel("UDP payload size")
    ax.set_ylabel(ylabel)
    ax.margins(y=0.12)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_udp.py RESULTS.csv OUT.png")
    src, out = sys.argv[1], sys.argv[2]
    rows = sorted(read_rows(src), key=lambda r: int(r["size"]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    panel(ax1, rows, "gbps", "Gbit/s (UDP payload)")
    panel(ax2, rows, "mpps", "million datagrams/s")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(SERIES), fontsize=9, frameon=False)
    datagrams = rows[0].get("datagrams", "?")
    fig.suptitle(
        f"UDP stream throughput, {datagrams} datagrams per run (median of runs); "
        "bold: nagare / Linux 1 thread",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.93))
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
