"""The repository describes the product, not the history of its making.

- No file of the checkout (docs, code, comments, tests, scripts, data) and no file or folder name speaks of the
  work periods the project was built in or of its tracker's numbered tickets: what a page, a comment or a script
  says must stay true for a reader who never saw either. Measurements are dated results instead
  (`docs/results/<date>-<topic>.md`), scripts are named by what they run, data folders by date and topic.
  Words that mean something in the product stay: a process session (`setsid`, "a session of its own"), a
  Proton session, the commit session (`CommitSession`), "issues" as problems, a cited upstream bug's URL.
- Every repository path a Markdown page names (`docs/...`, `scripts/...`, `examples/...`, ...) exists, so a
  renamed file or folder cannot leave a page pointing at nothing.

The files checked are those git tracks plus new ones it does not ignore; `.git`, `.venv`, `.before` and wheels
are never read. Each check lists every offending file and line.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
NEVER_READ = (".git/", ".venv/", ".before/")
NEVER_READ_SUFFIXES = (".whl",)

_SESSION = r"sessions?"
# (name, pattern), case-insensitive, matched per line; the unit tests at the end show what each one catches
HISTORY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE)) for name, pattern in (
        # a work period by its number, in prose or in a file name
        ("numbered session", rf"\b{_SESSION}[ _-]?\d+"),
        # a work period cited in parentheses (code's "(session, x)" and "(session.vcs" are not prose)
        ("session in parentheses", rf"\({_SESSION}\s"),
        # a work period by its place among the others
        ("session by its place", rf"\b(?:first|second|third|fourth|fifth|this|next|last|previous|earlier|later|same"
                                 rf"|another|work|working)\s+{_SESSION}\b"),
        # what a work period had: its device time, its last seconds
        ("possessive session", r"\bsession(?:')s\b"),
        # a tracker ticket by its number; never an upstream URL, whose number follows a slash
        ("numbered issue", r"\bissues?[ _#-]*\d+"),
        # the tracker's ticket without its number (what it asks, its target)
        ("the issue as a ticket", r"\b(?:the|this) issue(?:'s\b|\s+(?:asks|says|wants)\b)"),
        # a dated folder or file name carrying a work period's suffix
        ("dated name with a period suffix", r"\b\d{4}-\d{2}-\d{2}-s\d+\b"),
    ))
# a file or folder name ending in a period suffix ("...-s6", "..._s10.txt")
NAME_SUFFIX = re.compile(r"[-_]s\d+(?:\.[^/]*)?$", re.IGNORECASE)

# a repository path in a Markdown page; placeholders ({a,b}, *, <id>, $OUT, N, EXAMPLE) end the path there
PATH_ROOTS = ("docs", "scripts", "examples", "tests", "orchestrator", "sandbox_worker", "protocol", "skills")
PAGE_PATH = re.compile(rf"(?<![\w./$-])((?:{'|'.join(PATH_ROOTS)})/[A-Za-z0-9_./-]+)")
PLACEHOLDER_FOLLOWS = "{*<$"


def checked_files(root: Path) -> list[str]:
    """Tracked files and new files git does not ignore, minus what is never read."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                            capture_output=True, check=True).stdout.decode("utf-8").split("\0")
    return sorted(path for path in set(listed) if path and not path.startswith(NEVER_READ)
                  and not path.endswith(NEVER_READ_SUFFIXES) and (root / path).is_file())


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return  # binary: images, archives
    yield from enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1)


def history_words(text: str) -> list[str]:
    """The pattern names `text` trips, each with what it matched."""
    return [f"{name}: {match.group(0)!r}" for name, pattern in HISTORY_PATTERNS for match in pattern.finditer(text)]


def history_findings(root: Path, files: list[str]) -> list[str]:
    findings = []
    for relpath in files:
        for part in Path(relpath).parts:
            if NAME_SUFFIX.search(part):
                findings.append(f"{relpath}: name {part!r} ends in a period suffix")
        findings += [f"{relpath}: name: {word}" for word in history_words(relpath)]
        for number, line in text_lines(root / relpath):
            findings += [f"{relpath}:{number}: {word}" for word in history_words(line)]
    return findings


def missing_paths(root: Path, files: list[str]) -> list[str]:
    findings = []
    for relpath in files:
        if not relpath.endswith(".md"):
            continue
        for number, line in text_lines(root / relpath):
            for match in PAGE_PATH.finditer(line):
                named = match.group(1).rstrip(".,:;")
                if line[match.end(1):match.end(1) + 1] in tuple(PLACEHOLDER_FOLLOWS) or re.search(
                        r"(?:^|[/_-])[A-Z]+$", named):
                    continue  # a pattern or a placeholder, not one path
                if not (root / named).exists():
                    findings.append(f"{relpath}:{number}: {named} does not exist")
    return findings


@pytest.fixture(scope="module")
def files() -> list[str]:
    return checked_files(PROJECT_ROOT)


def test_nothing_speaks_of_work_sessions_or_ticket_numbers(files):
    assert len(files) > 100 and "README.md" in files and "orchestrator/cli/main.py" in files
    findings = history_findings(PROJECT_ROOT, files)
    assert not findings, "say what the thing is or does, or date the measurement:\n" + "\n".join(findings)


def test_every_path_a_page_names_exists(files):
    findings = missing_paths(PROJECT_ROOT, files)
    assert not findings, "\n".join(findings)


SESSION, ISSUE, S = "session", "issue", "s"  # spelt apart so this file does not trip its own check
CAUGHT = [f"{SESSION.title()} 9", f"since {SESSION} 4;", f"H200 ({SESSION} 5)", f"{ISSUE} 12", f"{ISSUE}-13",
          f"{ISSUE.title()} 13's comparison", f"{ISSUE}s 3-6", f"{ISSUE} #5", f"the first {SESSION}",
          f"this {SESSION}'s H200 runs", f"a later {SESSION}", f"the {SESSION}'s device time", f"as the {ISSUE} asks",
          f"the {ISSUE}'s target", f"{SESSION}s 2-5", f"the {SESSION}-6 logs",
          f"docs/data/h200-search-2026-12-02-{S}10/", f"readme-example-10-runs-2026-12-01-{SESSION}4.txt"]
LEFT_ALONE = ["session = proton.start(str(base), hook='triton')", "proton.start returned no session",
              "a trio session ends with its nursery", "Start the fork server in a session of its own",
              "new session per worker; SIGTERM -> grace", "promote(session, winner)",
              "plan = session.plan_checkpoint(winner)", "The commit session (`CommitSession.reopen`)",
              "known issues with Proton on Hopper", "# https://github.com/triton-lang/triton/issues/4231: upstream",
              "`--no-session-persistence`", "their own sessions, ended by process group",
              "attached to an issue, or opened offline", "python -s -m sandbox_worker.forkserver"]


@pytest.mark.parametrize("text", CAUGHT)
def test_the_history_patterns_catch(text):
    assert history_words(text), text


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_the_history_patterns_leave_product_words_alone(text):
    assert history_words(text) == [], text


def test_a_dated_folder_with_a_period_suffix_and_a_missing_page_path_are_named(tmp_path):
    folder = f"h200-search-2026-12-02-{S}9"
    (tmp_path / "docs" / "data" / folder).mkdir(parents=True)
    (tmp_path / "docs" / "data" / folder / "log.txt").write_text("ok\n")
    (tmp_path / "docs" / "page.md").write_text("See `docs/data/gone.txt` and `docs/data/h200-{a,b}.json` and "
                                               "`docs/data/measurement-study-N`.\n")
    files = [f"docs/data/{folder}/log.txt", "docs/page.md"]
    findings = history_findings(tmp_path, files)
    assert findings == [f"docs/data/{folder}/log.txt: name {folder!r} ends in a period suffix",
                        f"docs/data/{folder}/log.txt: name: dated name with a period suffix: '2026-12-02-{S}9'"]
    assert missing_paths(tmp_path, files) == ["docs/page.md:1: docs/data/gone.txt does not exist"]
