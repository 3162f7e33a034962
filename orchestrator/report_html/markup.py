"""HTML building blocks of the report pages: escaping, tables, number formats and the page shell.

Everything that reaches the page goes through `escape` unless it is `Safe` (markup this package built from
escaped parts, or an SVG matplotlib drew). The shell carries its own stylesheet: no script, no remote link,
no remote image, so the file reads the same offline, attached to an issue, or years later.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence


class Safe(str):
    """Text that is already HTML (built here from escaped parts); `escape` passes it through."""


def escape(value: object) -> Safe:
    if isinstance(value, Safe):
        return value
    return Safe(html.escape("-" if value is None else str(value), quote=True))


def tag(name: str, content: object = "", **attributes: str) -> Safe:
    """`<name attr="...">content</name>`; `class_` is written as `class`."""
    rendered = "".join(f' {key.rstrip("_")}="{escape(value)}"' for key, value in attributes.items())
    return Safe(f"<{name}{rendered}>{escape(content)}</{name}>")


def join(parts: Iterable[object], separator: str = "\n") -> Safe:
    return Safe(separator.join(escape(part) for part in parts))


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], row_classes: Sequence[str] = ()) -> Safe:
    """A data table; `row_classes[i]` (a decision or job status) lets the stylesheet tint row i."""
    head = tag("tr", join((tag("th", header) for header in headers), ""))
    body = join(
        tag(
            "tr",
            join((tag("td", cell) for cell in row), ""),
            class_=row_classes[index] if index < len(row_classes) else "",
        )
        for index, row in enumerate(rows)
    )
    return tag("table", join([tag("thead", head), tag("tbody", body)]), class_="data")


def definitions(items: Iterable[tuple[str, object]]) -> Safe:
    return tag("dl", join(join([tag("dt", term), tag("dd", value)], "") for term, value in items))


def figure(svg: str | None, caption: str, missing: str) -> Safe:
    """The inline SVG with its caption, or a note saying why there is no plot."""
    if svg is None:
        return tag("p", missing, class_="note")
    return tag("figure", join([Safe(svg), tag("figcaption", caption)]))


def num(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1.5em; }
dt { font-weight: 600; } dd { margin: 0; }
table.data { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
table.data th, table.data td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left;
                               vertical-align: top; }
table.data th { background: #f4f4f4; }
tr.promoted td, tr.revalidated td, tr.improved td { background: #eef8ee; }
tr.failed td { background: #fbeeee; }
tr.slower td { background: #fbdada; color: #a01010; font-weight: 600; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
figcaption, p.note { color: #555; font-size: 0.9em; }
code { font-size: 0.95em; }
"""


def page(title: str, body: Iterable[object]) -> str:
    """A complete, self-contained HTML document."""
    head = join([Safe('<meta charset="utf-8">'), tag("title", title), tag("style", Safe(_STYLE))])
    return (
        "<!DOCTYPE html>\n"
        + tag("html", join([tag("head", head), tag("body", join(body))]), lang="en")
        + "\n"
    )
