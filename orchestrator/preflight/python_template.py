"""Code templates that are real Python files, so the linter checks them and rendering cannot break them.

A template lives in a `templates/` directory of its package (shipped as package data, pyproject.toml) and
is a working module on its own: its generated parts are ordinary top-level assignments holding example
values. Rendering replaces the right-hand side of the named assignments with generated source, fills
`${name}` fields of the module docstring (`string.Template`), and drops the lines that start with
`# template:` (notes for whoever reads the template). Users: orchestrator/bundle/init_bundle.py (the
starter harness) and orchestrator/preflight/negative_variants.py (the perturbing block).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from importlib import resources
from string import Template

NOTE_PREFIX = "# template:"


def read_template(package: str, name: str) -> str:
    """The text of `templates/<name>` in `package` (e.g. "orchestrator.bundle")."""
    return resources.files(package).joinpath("templates").joinpath(name).read_text(encoding="utf-8")


def render_template(template: str, assignments: Mapping[str, str],
                    docstring_fields: Mapping[str, str] | None = None) -> str:
    """`template` with each named top-level `NAME = ...` set to `NAME = <source>`, the docstring's fields
    filled when `docstring_fields` is given, and the note lines dropped. Raises ValueError when an
    assignment is missing or repeated, or a field has no value: the template and its renderer disagree."""
    text = "".join(line for line in template.splitlines(keepends=True) if not line.lstrip().startswith(NOTE_PREFIX))
    tree = ast.parse(text)
    data = text.encode("utf-8")  # ast columns count UTF-8 bytes
    line_starts = [0]
    for line in data.split(b"\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)

    def offset(line: int, column: int) -> int:
        return line_starts[line - 1] + column

    spans: dict[str, tuple[int, int]] = {}  # name -> the whole statement; a trailing comment is not in it
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in assignments):
            continue
        name = node.targets[0].id
        if name in spans:
            raise ValueError(f"the template assigns {name} more than once")
        spans[name] = (offset(node.lineno, node.col_offset), offset(node.end_lineno or node.lineno,
                                                                    node.end_col_offset or 0))
    missing = sorted(set(assignments) - set(spans))
    if missing:
        raise ValueError(f"the template has no top-level assignment to {', '.join(missing)}")
    edits = [(start, end, f"{name} = {assignments[name]}") for name, (start, end) in spans.items()]
    if docstring_fields is not None:
        docstring = tree.body[0] if tree.body else None
        if not (isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
                and isinstance(docstring.value.value, str)):
            raise ValueError("the template has no module docstring to fill")
        start = offset(docstring.lineno, docstring.col_offset)
        end = offset(docstring.end_lineno or docstring.lineno, docstring.end_col_offset or 0)
        try:
            filled = Template(data[start:end].decode("utf-8")).substitute(docstring_fields)
        except KeyError as exc:
            raise ValueError(f"the template's docstring has the field {exc.args[0]!r}, which has no value") from None
        edits.append((start, end, filled))
    for start, end, replacement in sorted(edits, reverse=True):
        data = data[:start] + replacement.encode("utf-8") + data[end:]
    return data.decode("utf-8")
