"""Reading a report page back with html.parser: its tables as text, its tags and their attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class ParsedPage:
    tables: list[list[list[str]]] = field(default_factory=list)  # table -> rows (header first) -> cell text
    tags: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    text: str = ""  # the visible text outside <svg> and <style>

    def table_with(self, header: str) -> list[list[str]]:
        return next(table for table in self.tables if table and header in table[0])


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()
        self._hidden = 0
        self._cell: list[str] | None = None
        self._texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.append((tag, dict(attrs)))
        if tag in ("svg", "style"):
            self._hidden += 1
        elif tag == "table":
            self.page.tables.append([])
        elif tag == "tr":
            self.page.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("svg", "style"):
            self._hidden -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.page.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if self._cell is not None:
            self._cell.append(data)
        self._texts.append(data)


def parse_page(document: str) -> ParsedPage:
    parser = _Parser()
    parser.feed(document)
    parser.close()
    parser.page.text = " ".join(" ".join(parser._texts).split())
    return parser.page


def external_references(page: ParsedPage) -> list[str]:
    """Every way the page could reach outside itself: scripts, stylesheet links, and src/href attributes
    that are not an in-page anchor or a relative path."""
    found: list[str] = []
    for tag, attributes in page.tags:
        if tag in ("script", "link", "iframe", "object", "embed", "img"):
            found.append(f"<{tag} {attributes}>")
        for name, value in attributes.items():
            if name in ("src", "href", "xlink:href", "action", "data") and value is not None:
                if value.startswith("#"):
                    continue
                if ":" in value.split("/")[0] or value.startswith("//"):
                    found.append(f"{tag} {name}={value}")
    return found
