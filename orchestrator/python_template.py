"""Code templates that are real Python files, so the linter checks them and rendering cannot break them.

A template lives in a `templates/` directory of its package (shipped as package data, pyproject.toml) and
is a working module on its own: its generated parts are ordinary top-level assignments holding example
values, and top-level functions that stand for a choice. Rendering replaces the right-hand side of the
named assignments with generated source, replaces named functions with other source, drops named
assignments or functions that the choice leaves unused, fills `${name}` fields of the module docstring
(`string.Template`), and drops the lines that start with `# template:` (notes for whoever reads the template).
Users: orchestrator/bundle/init_bundle.py (the starter harness) and orchestrator/preflight/negative_variants.py
(the perturbing block); the module sits below both packages, standard library only, so neither imports the other
for it.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from importlib import resources
from string import Template

NOTE_PREFIX = "# template:"
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def read_template(package: str, name: str) -> str:
    """The text of `templates/<name>` in `package` (e.g. "orchestrator.bundle")."""
    return resources.files(package).joinpath("templates").joinpath(name).read_text(encoding="utf-8")


def render_template(template: str, assignments: Mapping[str, str],
                    docstring_fields: Mapping[str, str] | None = None, *,
                    functions: Mapping[str, str] | None = None, drop: Collection[str] = ()) -> str:
    """`template` with each named top-level `NAME = ...` set to `NAME = <source>`, each function named in
    `functions` (decorators included) replaced by its source, each statement named in `drop` (an
    assignment or a function, with the blank lines after it) removed, the docstring's fields filled when
    `docstring_fields` is given, and the note lines dropped. Raises ValueError when a named statement is
    missing or repeated, or a field has no value: the template and its renderer disagree."""
    text = "".join(line for line in template.splitlines(keepends=True) if not line.lstrip().startswith(NOTE_PREFIX))
    tree = ast.parse(text)
    data = text.encode("utf-8")  # ast columns count UTF-8 bytes
    line_starts = [0]
    for line in data.split(b"\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)

    def offset(line: int, column: int) -> int:
        return line_starts[line - 1] + column

    functions = functions or {}
    twice = (set(assignments) & set(functions)) | ((set(assignments) | set(functions)) & set(drop))
    if twice:
        raise ValueError(f"{', '.join(sorted(twice))}: replace a statement or drop it, not both")
    spans: dict[str, tuple[int, int]] = {}  # name -> the whole statement; a trailing comment is not in it
    for node in tree.body:
        name = _statement_name(node)
        if name is None or not (name in drop or (name in functions) == isinstance(node, FUNCTIONS)
                                and name in {*assignments, *functions}):
            continue
        if name in spans:
            raise ValueError(f"the template assigns {name} more than once")
        first_line = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        spans[name] = (offset(first_line, 0 if first_line < node.lineno else node.col_offset),
                       offset(node.end_lineno or node.lineno, node.end_col_offset or 0))
    for what, names in (("assignment to", assignments), ("function", functions), ("statement", drop)):
        missing = sorted(set(names) - set(spans))
        if missing:
            raise ValueError(f"the template has no top-level {what} {', '.join(missing)}")
    edits = [(*spans[name], f"{name} = {assignments[name]}") for name in assignments]
    edits += [(*spans[name], functions[name].strip("\n")) for name in functions]
    for name in drop:  # whole lines: the blank lines before the statement, it, the rest of its last line
        start, end = spans[name]
        while data[start - 2:start] == b"\n\n":
            start -= 1
        edits.append((start, data.find(b"\n", end) + 1 or len(data), ""))
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


def _statement_name(node: ast.stmt) -> str | None:
    """The name a top-level statement defines: `NAME = ...`, `NAME: T = ...`, `def NAME`, `class NAME`."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    return None
