"""Tests of the agent skill (skills/tlx-kernel-optimization/), `tlx-agent skill install` and `tlx-agent report`.

Shared here: where the skill's documents are, and how their markdown is read: the front matter, fenced
code blocks, the `tlx-agent` commands in them with the exit code each one is annotated with (`# exit N`
on a comment line after the command), and inline code spans.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import PROJECT_ROOT

SKILL_DIR = PROJECT_ROOT / "skills" / "tlx-kernel-optimization"
SKILL_MD = SKILL_DIR / "SKILL.md"
INPUT_CONTRACT = SKILL_DIR / "references" / "input-contract.md"
PROTON_GUIDE = SKILL_DIR / "references" / "proton-profiling.md"
NCU_GUIDE = SKILL_DIR / "targets" / "nvidia" / "ncu-profiling.md"
DOCUMENTS = (SKILL_MD, INPUT_CONTRACT, PROTON_GUIDE, NCU_GUIDE)

_FENCE = re.compile(r"^```([\w-]*)\s*$")
_EXIT = re.compile(r"^#\s*exit (\d+)\b")
_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Block:
    language: str
    lines: tuple[str, ...]
    document: Path
    line: int  # 1-based line of the opening fence


@dataclass(frozen=True)
class Command:
    text: str  # one logical line: continuations joined
    expected_exit: int | None  # from the first `# exit N` comment after it in the same block
    document: Path
    line: int

    @property
    def argv(self) -> list[str]:
        """The words after `tlx-agent` (the subcommand first), without redirections and a trailing `&`."""
        words = shlex.split(self.text)
        start = words.index("tlx-agent") + 1
        return [w for w in words[start:] if w != "&" and not re.match(r"^\d?[<>]", w)]

    @property
    def subcommand(self) -> str:
        return self.argv[0]


def front_matter(text: str) -> tuple[list[str], str]:
    """The lines between the opening and closing `---`, and the body after them."""
    lines = text.split("\n")
    assert lines[0] == "---", "SKILL.md must start with a '---' line"
    end = lines.index("---", 1)
    return lines[1:end], "\n".join(lines[end + 1:])


def fenced_blocks(document: Path) -> list[Block]:
    blocks: list[Block] = []
    language, start, lines = None, 0, []
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), start=1):
        match = _FENCE.match(line)
        if match and language is None:
            language, start, lines = match.group(1), number, []
        elif line.strip() == "```" and language is not None:
            blocks.append(Block(language, tuple(lines), document, start))
            language = None
        elif language is not None:
            lines.append(line)
    assert language is None, f"{document}: unclosed code block at line {start}"
    return blocks


def _logical_lines(block: Block) -> list[tuple[int, str]]:
    joined: list[tuple[int, str]] = []
    pending, first = "", 0
    for offset, line in enumerate(block.lines, start=1):
        if not pending:
            first = block.line + offset
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        joined.append((first, (pending + line.strip()).strip()))
        pending = ""
    return joined


def commands(document: Path) -> list[Command]:
    """Every `tlx-agent ...` command in the document's bash blocks, in order."""
    found: list[Command] = []
    for block in fenced_blocks(document):
        if block.language != "bash":
            continue
        lines = _logical_lines(block)
        for index, (line_number, text) in enumerate(lines):
            words = text.split()
            if not words or "tlx-agent" not in words[:2] or (words[0] != "tlx-agent" and words[0] != "nohup"):
                continue
            expected = next((int(m.group(1)) for _, later in lines[index + 1:] if (m := _EXIT.match(later))), None)
            found.append(Command(text, expected, document, line_number))
    return found


def inline_spans(document: Path) -> list[str]:
    """Inline code spans outside fenced blocks."""
    spans: list[str] = []
    inside = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line) or (inside and line.strip() == "```"):
            inside = not inside
            continue
        if not inside:
            spans += _SPAN.findall(line)
    return spans
