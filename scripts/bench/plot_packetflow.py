#!/usr/bin/env python3
"""Plot the PacketFlow figures of `nagare bench packetflow`.

Reads the CSV files `nagare bench packetflow --csv-dir CSV_DIR` wrote
(fig3.csv, fig4.csv, fig5.csv, fig6.csv, sweep.csv; those missing are
skipped) and writes OUT_DIR/packetflow_fig3.png and so on: grouped bars
per receiver (nice 0, 5, 10) per module set for Figures 3, 4 and 6, quiet
against flooded per module set for Figure 5, delivered against offered
load per module set for the sweep.

    python3 scripts/bench/plot_packetflow.py /tmp/packetflow docs/img

Needs matplotlib (pip install matplotlib).
"""

import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NICE_COLORS = {"0": "#d1495b", "5": "#edae49", "10": "#00798c"}


def read_rows(path):
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows or None


def number(s):
    """A CSV field as a float; an empty field (no figure) as None."""
    return float(s) if s not in ("", None) else None


def columns_of(rows):
    """The module sets in the order the bench measured them."""
    seen = []
    for r in rows:
        if r["column"] not in seen:
            seen.append(r["column"])
    return seen


def per_nice(rows, metric, ylabel, title, out, fmt):
    """Grouped bars: one group per module set, one bar per receiver."""
    columns = columns_of(rows)
    nices = sorted({r["nice"] for r in rows}, key=int)
    width = 0.8 / len(nices)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(columns) + 2), 4.5))
    for i, nice in enumerate(nices):
        values = []
        for c in columns:
            match = [r for r in rows if r["column"] == c and r["nice"] == nice]
            v = number(match[0][metric]) if match else None
            values.append(v if v is not None else 0.0)
        offset = (i - (len(nices) - 1) / 2) * width
        bars = ax.bar(
            [x + offset for x in range(len(columns))],
            values,
            width,
            label=f"nice {nice}",
            color=NICE_COLORS.get(nice, "#888888"),
        )
        ax.bar_label(bars, fmt=fmt, fontsize=7, padding=1)
    finish_bars(ax, columns, ylabel)
    ax.set_title(title, fontsize=10)
    save(fig, out)


def finish_bars(ax, columns, ylabel):
    """Axes, legend and grid of a bar chart with one group per column."""
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns)
    ax.set_xlabel("netd --packetflow (module set), or Linux")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.margins(y=0.12)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def save(fig, out):
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"wrote {out}")


def fig5(rows, out):
    columns = [r["column"] for r in rows]
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(columns) + 2), 4.5))
    for i, (key, label, color) in enumerate(
        (("quiet_seconds", "quiet", "#8fb8de"), ("flooded_seconds", "UDP flood at nice 10", "#d1495b"))
    ):
        values = [number(r[key]) or 0.0 for r in rows]
        bars = ax.bar([x + (i - 0.5) * width for x in range(len(columns))], values, width, label=label, color=color)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    for x, r in enumerate(rows):
        ratio = number(r["ratio"])
        if ratio is not None:
            ax.annotate(f"x{ratio:.2f}", xy=(x, 1.0), xycoords=("data", "axes fraction"), ha="center",
                        va="bottom", fontsize=8, fontweight="bold")
    finish_bars(ax, columns, "seconds for the transfer (receiver at nice 0)")
    ax.set_title("Figure 5: TCP at nice 0 beside a UDP flood; bold: flood / quiet", fontsize=10, pad=16)
    save(fig, out)


def sweep(rows, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c in columns_of(rows):
        points = sorted((float(r["load"]), number(r["delivered_per_s"]) or 0.0) for r in rows if r["column"] == c)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=c)
    ax.set_xscale("log", base=2)
    ax.set_xticks([0.5, 1, 2, 4])
    ax.set_xticklabels(["0.5x", "1x", "2x", "4x"])
    ax.set_xlabel("offered load (multiple of netd's saturation)")
    ax.set_ylabel("datagrams/s delivered (three receivers)")
    ax.set_title("Load sweep: delivered against offered load", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_packetflow.py CSV_DIR OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    done = 0
    for name, title in (
        ("fig3", "Figure 3: UDP receive rates under overload"),
        ("fig6", "Figure 6: the memory manager alone, UDP receive rates"),
    ):
        rows = read_rows(os.path.join(src, f"{name}.csv"))
        if rows:
            per_nice(rows, "received_per_s", "datagrams/s received", title,
                     os.path.join(out, f"packetflow_{name}.png"), "%.0f")
            done += 1
    rows = read_rows(os.path.join(src, "fig4.csv"))
    if rows:
        per_nice(rows, "seconds", "seconds for the transfer", "Figure 4: TCP, three receivers at once",
                 os.path.join(out, "packetflow_fig4.png"), "%.2f")
        done += 1
    rows = read_rows(os.path.join(src, "fig5.csv"))
    if rows:
        fig5(rows, os.path.join(out, "packetflow_fig5.png"))
        done += 1
    rows = read_rows(os.path.join(src, "sweep.csv"))
    if rows:
        sweep(rows, os.path.join(out, "packetflow_sweep.png"))
        done += 1
    if not done:
        sys.exit(f"{src}: no figure's CSV file")


if __name__ == "__main__":
    main()
