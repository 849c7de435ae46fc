"""A Chart as a PNG through matplotlib (imported only here; ``check_plot_path`` says when it is missing)."""

from __future__ import annotations

import io
import math

from xferscope.sweep.chart import Chart, tick_text


def render_png(chart: Chart) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 1 if len(chart.panels) == 1 else 2
    rows = math.ceil(len(chart.panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(7.5 * columns, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(chart.panels) :]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, chart.panels):
        n = len(panel.series)
        for i, series in enumerate(panel.series):
            xs = [x for x, _, _ in series.points]
            ys = [y for _, y, _ in series.points]
            errs = [e if e == e else 0.0 for _, _, e in series.points]
            if panel.categories is not None:
                width = 0.8 / n
                ax.bar(
                    [x - 0.4 + (i + 0.5) * width for x in xs], ys, width * 0.95, yerr=errs, label=series.name, capsize=2
                )
            else:
                ax.errorbar(xs, ys, yerr=errs, marker="o", markersize=3, capsize=2, label=series.name)
        if panel.categories is not None:
            ax.set_xticks(range(len(panel.categories)), panel.categories)
        elif panel.x_log:
            ax.set_xscale("log", base=2)
            ticks = panel.x_ticks or sorted({x for s in panel.series for x, _, _ in s.points})
            ax.set_xticks(ticks, [tick_text(panel, t) for t in ticks])
        for x, label in panel.marks:
            ax.axvline(x, color="#888", linestyle="--", linewidth=0.8)
            ax.annotate(
                label,
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, -12),
                textcoords="offset points",
                fontsize=7,
                color="#555",
            )
        if panel.y_log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel(panel.x_label)
        ax.set_ylabel(panel.y_label)
        ax.set_title(panel.title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(chart.title)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out.getvalue()
