"""A memory result on the terminal (MLC's tables, or JSON) and in its files (``--json``, ``--csv``, ``--plot``)."""

from __future__ import annotations

import sys

from xferscope.memory.report import emit_result
from xferscope.memory.sweep import csv_text, result_json
from xferscope.output.files import Output, human_output, write_outputs


def emit_mem(result, fmt: str, json_out: str | None, csv_out: str | None, plot: str | None = None) -> int:
    """Print a memory result (MLC's table, or JSON), then write ``--json``/``--csv`` and ``--plot`` (its cache
    curve, or its loaded-latency curves); 4 when one could not be written (a line says which and why), else 0."""

    try:
        with human_output(json_out, csv_out, plot) as out:
            emit_result(result, fmt, out=out)
    except OSError:  # a closed terminal: the files still get the result
        pass
    outputs = [
        Output("JSON", "--json", json_out, lambda: result_json(result)),
        Output("CSV", "--csv", csv_out, lambda: csv_text(result.points)),
    ]
    if plot:
        from xferscope.sweep.plot import mem_result_chart, render_chart

        drawing = render_chart(plot, mem_result_chart(result))
        if drawing is None:
            sys.stderr.write(f"xferscope: nothing to draw in {plot}: no point was measured\n")
        else:
            outputs.append(Output("Plot", "--plot", plot, lambda: drawing))
    return write_outputs(outputs)
