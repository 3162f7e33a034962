"""Self-contained HTML reports of an optimize run or a batch (`tlx-agent report OUT --format html`).

Layers, each a module: `load` reads the records (the only I/O besides `write`), `data` shapes them into rows
(pure), `figures` draws them as inline SVG, `run_page` / `batch_page` lay out the HTML, `write` ties them
together. See docs/reports.md.
"""

from orchestrator.report_html.load import HtmlReportError, is_batch_dir
from orchestrator.report_html.write import (
    HtmlBatchDocument,
    HtmlRunDocument,
    write_batch_report,
    write_run_report,
)

__all__ = [
    "HtmlBatchDocument",
    "HtmlReportError",
    "HtmlRunDocument",
    "is_batch_dir",
    "write_batch_report",
    "write_run_report",
]
