"""GPU telemetry of the run's GPUs: utilisation, memory, PCIe RX/TX against the measured link ceiling."""

from __future__ import annotations

from rich.text import Text

from xferscope.app import figures
from xferscope.app.braille import bar
from xferscope.app.session import RunRecord
from xferscope.app.widgets.figures_line import FiguresText


def _mb_s(v) -> str:
    return figures.DASH if figures.missing(v) else f"{v / 1e3:.2f} GB/s" if v >= 1e3 else f"{v:.0f} MB/s"


def gpu_text(readings: tuple[dict, ...] | list[dict], width: int) -> Text:
    """One block a GPU, from ``xferscope.telemetry.gpu`` readings; only the figures it reported are shown.

    PCIe RX is what the GPU receives (host to device), TX what it sends; each is set against the
    copy ceiling measured for that direction (``link_ceiling_h2d_gb_s`` / ``_d2h_``) when there is one.
    """
    out = Text(no_wrap=True, overflow="crop")
    bar_w = max(width - 16, 4)
    for i, g in enumerate(readings):
        out.append(f"GPU{g.get('index', i)} {g.get('name', '')}".rstrip(), style="bold")
        if g.get("link_gen") and g.get("link_width"):
            out.append(f"  PCIe gen{g['link_gen']} x{g['link_width']}", style="dim")
        out.append("\n")
        util = g.get("util_pct")
        if util is not None:
            out.append(f" util {util:5.1f}% ")
            out.append(bar(util / 100, bar_w) + "\n", style="green")
        used, total = g.get("mem_used_mib"), g.get("mem_total_mib")
        if used is not None:
            out.append(f" mem  {used / 1024:.1f}" + (f" of {total / 1024:.0f}" if total else "") + " GiB\n")
        for key, word, ceiling_key in (
            ("pcie_rx_mb_s", "RX", "link_ceiling_h2d_gb_s"),
            ("pcie_tx_mb_s", "TX", "link_ceiling_d2h_gb_s"),
        ):
            v = g.get(key)
            if v is None:
                continue
            out.append(f" PCIe {word} {_mb_s(v)}")
            ceiling = g.get(ceiling_key)
            if ceiling:
                out.append(f" of {ceiling:.1f} GB/s ({100 * v / (ceiling * 1e3):.0f}%)")
            out.append("\n")
    return out


class GpuPanel(FiguresText):
    """Shown only for runs with GPU telemetry or on GPU paths (it says why it is empty)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.border_title = "GPU"

    def show(self, record: RunRecord | None) -> None:
        s = record.latest if record else None
        readings = s.gpu if s is not None else ()
        uses_gpu = record is not None and record.spec.uses_gpu
        self.display = bool(readings) or uses_gpu
        if not self.display:
            return
        if readings:
            super().show(gpu_text(readings, self.size.width or 30))
        elif s is None and record.active:  # preparing: nothing was read yet, so nothing is known to be missing
            super().show(Text(f"{record.state}: GPU telemetry comes with the first sample", style="dim"))
        else:
            super().show(Text("no GPU telemetry for this run (NVML not available)", style="dim"))
