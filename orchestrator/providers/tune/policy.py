"""The tuner's search policy: what the run's history taught about earlier moves, and which untried knob
move the measured bottleneck favours next.

It never repeats a configuration, never pushes further a knob direction that regressed or broke the
kernel, keeps going (with a stride) in directions that measured faster, and grows a block or tile together with
`num_warps` once growing it alone regressed (docs/tuner.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.providers.base import ProposalContext
from orchestrator.providers.tune.edits import EditError
from orchestrator.providers.tune.knobs import (
    DOWN,
    UP,
    Knob,
    apply_knob,
    apply_knobs,
    knob_configuration,
    next_value,
    tunable_knobs,
)
from orchestrator.source_digest import normalized_digest
from protocol.results import DecisionStatus, EvaluationStatus, ExperimentRecord

MOMENTUM_STRIDE = 2  # values skipped+1 along a direction that already measured faster

# ---------------------------------------------------------------------------------------------------------
# Evidence -> preference. Weights per bottleneck class for (kind, direction); unlisted pairs weigh 0.1.

_PREFERENCES: dict[str, dict[tuple[str, int], float]] = {
    "unknown": {("block", UP): 3, ("tile", UP): 2, ("warps", UP): 1, ("stages", UP): 1, ("group", UP): 0.5,
                ("block", DOWN): 0.6, ("tile", DOWN): 0.5, ("warps", DOWN): 0.5, ("stages", DOWN): 0.3},
    "launch": {("block", UP): 3, ("tile", UP): 2, ("warps", DOWN): 1.5, ("stages", DOWN): 1, ("warps", UP): 0.5},
    "memory": {("block", UP): 3, ("stages", UP): 2, ("buffers", UP): 2, ("warps", UP): 2, ("tile", UP): 1.5,
               ("group", UP): 1},
    "compute": {("tile", UP): 3, ("warps", UP): 2, ("stages", UP): 1.5, ("group", UP): 1, ("block", UP): 1},
    "occupancy": {("tile", DOWN): 3, ("block", DOWN): 2.5, ("stages", DOWN): 2, ("warps", UP): 1},
    "spill": {("tile", DOWN): 3, ("block", DOWN): 3, ("stages", DOWN): 2, ("warps", UP): 2},
    # Low SM and memory use: serialization or too little work in flight. Measured on the H200, that is what
    # vector_add with 64-element blocks looks like (SM 25 %, DRAM 25 %), and the cure was more work per
    # program, not more programs: BLOCK_SIZE 64 -> 32 ran at 0.505x, 64 -> 1024 at 3.1x.
    "synchronization": {("block", UP): 2.5, ("tile", UP): 2, ("stages", UP): 1.5, ("warps", UP): 1.5,
                        ("group", UP): 1, ("block", DOWN): 0.5, ("tile", DOWN): 0.5},
}


@dataclass
class Attempt:
    """A configuration the tuner proposed, and what the run later decided about it."""

    knob_key: str
    knob_name: str
    direction: int
    old: int
    new: int
    configuration: tuple[tuple[str, int], ...]
    round_index: int
    digests: frozenset[str]  # raw and normalized sha256 of the proposed source, to match history records
    paired: tuple[str, str, int, int] | None = None  # (warps knob key, name, old, new) moved with this knob
    incumbent_id: str = ""  # the incumbent the move was made from; a slot later in its round may be measured
    # against a newer one (its record's parent), and then its speedup is against that one
    text: str = ""  # the move in words, with a scaling step shown as such ("num_warps x1->x2")

    @property
    def side(self) -> tuple[str, int]:
        """What the run learns about: a knob direction, or the (knob + warps) pair going up together."""
        return (pair_key(self.knob_key, self.paired[0]) if self.paired else self.knob_key, self.direction)

    def label(self) -> str:
        if self.text:
            return self.text
        moved = f"{self.knob_name} {self.old}->{self.new}"
        return moved + (f" with {self.paired[1]} {self.paired[2]}->{self.paired[3]}" if self.paired else "")


@dataclass
class Lessons:
    """What `learn` read from the history: configurations tried, directions blocked or faster, notes."""

    tried: set[tuple[tuple[str, int], ...]] = field(default_factory=set)
    # (knob key, direction) -> first value that regressed or failed; values at or beyond it are off limits
    blocked: dict[tuple[str, int], int] = field(default_factory=dict)
    # (knob key, direction) -> best aggregate speedup seen going that way: promoted, or rejected above 1.0x
    # (faster, but not by enough to pass the gates); the direction is worth following either way
    faster: dict[tuple[str, int], float] = field(default_factory=dict)
    # one line per decided attempt, in the run's own words: "BLOCK_SIZE 64->128 rejected at 0.800x"
    notes: list[str] = field(default_factory=list)
    pending_knobs: set[str] = field(default_factory=set)


def pair_key(knob_key: str, warps_key: str) -> str:
    return f"{knob_key}&{warps_key}"


def source_digests(source: str) -> frozenset[str]:
    """Raw and normalized sha256 of a source: how history records and exclusions name it."""
    return frozenset({hashlib.sha256(source.encode("utf-8")).hexdigest(), normalized_digest(source)})


def _excluded(context: ProposalContext, source: str) -> bool:
    """The run (or a prior run) has already measured or excluded this exact or normalized source."""
    return bool(source_digests(source) & context.excluded_digests)


def _outcome(record: ExperimentRecord) -> str:
    """promoted | regressed | broken | neutral | unknown, from the run's own decision and numbers."""
    if record.decision is None:
        return "unknown"
    if record.decision.status is DecisionStatus.PROMOTED:
        return "promoted"
    candidate = record.candidate_evaluation
    if record.decision.status is DecisionStatus.FAILED or (
        candidate is not None and candidate.status is not EvaluationStatus.OK
    ):
        return "broken"
    if record.decision.status is DecisionStatus.DUPLICATE:
        return "neutral"
    speedup = record.aggregate_speedup
    if speedup is not None and speedup < 1.0:
        return "regressed"
    return "neutral"


@dataclass(frozen=True)
class Move:
    score: float
    order: int  # knob position in the source: the deterministic tie-breaker
    knob: Knob
    direction: int
    value: int
    source: str
    configuration: tuple[tuple[str, int], ...]
    paired: tuple[Knob, int] | None = None  # the warps knob and its new value, moved together with `knob`


def _attempt_for(attempts: Sequence[Attempt], record: ExperimentRecord) -> Attempt | None:
    digests = {record.normalized_sha256, record.source_sha256} - {""}
    return next((attempt for attempt in attempts if attempt.digests & digests), None)


def _note(attempt: Attempt, record: ExperimentRecord) -> str:
    """What became of an attempt, as the run recorded it: the decision, then the worker's failure or the
    measured speedup. A step the run rejected is never called an improvement, however fast it measured."""
    decision = record.decision.status.value if record.decision else "undecided"
    candidate = record.candidate_evaluation
    if candidate is not None and candidate.status is not EvaluationStatus.OK:
        return f"{attempt.label()} {decision} ({candidate.status.value})"
    speedup = record.aggregate_speedup
    if speedup is None:
        return f"{attempt.label()} {decision}"
    measured_against = record.parent_id if record.parent_id and record.parent_id != attempt.incumbent_id else ""
    return f"{attempt.label()} {decision} at {speedup:.3f}x" + (f" vs {measured_against}" if measured_against else "")


def learn(attempts: Sequence[Attempt], context: ProposalContext) -> Lessons:
    """What the run's history says about the tuner's earlier attempts (and others' sources)."""
    lessons = Lessons(tried={attempt.configuration for attempt in attempts})
    recorded: list[Attempt] = []
    for record in context.history:
        attempt = _attempt_for(attempts, record)
        if attempt is None:
            configuration = _configuration_from_file(record.source_path)
            if configuration:
                lessons.tried.add(configuration)
            continue
        recorded.append(attempt)
        side = attempt.side
        outcome = _outcome(record)
        speedup = record.aggregate_speedup
        if outcome in ("regressed", "broken"):
            previous = lessons.blocked.get(side, attempt.new)
            lessons.blocked[side] = min(previous, attempt.new) if attempt.direction == UP else max(previous, attempt.new)
            lessons.notes.append(_note(attempt, record))
        elif outcome == "promoted" or (speedup is not None and speedup > 1.0):
            lessons.faster[side] = max(lessons.faster.get(side, 0.0), speedup or 1.0)
            lessons.notes.append(_note(attempt, record))
    pending = [attempt for attempt in attempts
               if attempt.round_index == context.round_index and all(attempt is not done for done in recorded)]
    lessons.pending_knobs = {attempt.knob_key for attempt in pending} | {
        attempt.paired[0] for attempt in pending if attempt.paired}
    return lessons


def rank_moves(context: ProposalContext, knobs: list[Knob], lessons: Lessons, bottleneck: str) -> list[Move]:
    """For each knob and direction one untried, unblocked value; best score first.

    The nearest such value, except along a direction that already measured faster: there the tuner skips one
    value (a factor of four for powers of two), so a long climb (block 32 -> 2048) takes half the
    evaluations; when that stride overshoots and regresses, the skipped value is the next proposal.
    """
    preferences = _PREFERENCES.get(bottleneck, _PREFERENCES["unknown"])
    incumbent = dict(knob_configuration(knobs))
    moves = []
    for order, knob in enumerate(knobs):
        for direction in (UP, DOWN):
            side = (knob.key, direction)
            stride = MOMENTUM_STRIDE if side in lessons.faster else 1
            eligible = list(_eligible(context, knob, direction, incumbent, lessons, limit=stride))
            if not eligible:
                continue
            value, source, configuration = eligible[-1]
            score = preferences.get((knob.kind, direction), 0.1)
            score += 3.0 if side in lessons.faster else 0.0
            score -= 5.0 if knob.key in lessons.pending_knobs else 0.0  # another slot moves this knob now
            # prefer small steps; a stride earned by a faster step is not penalized
            distance = abs(knob.domain.index(value) - _nearest_index(knob))
            score -= 0.5 * max(0, distance - (stride - 1))
            moves.append(Move(score, order, knob, direction, value, source, configuration))
    moves.extend(_paired_moves(context, knobs, lessons, preferences, incumbent))
    return sorted(moves, key=lambda move: (-move.score, move.order, -move.direction))


def _paired_moves(context: ProposalContext, knobs: list[Knob], lessons: Lessons,
                  preferences: dict[tuple[str, int], float], incumbent: dict[str, int]) -> list[Move]:
    """A block or tile grown together with num_warps (x2 each), once growing it alone regressed or broke
    the kernel at its next value, or after such a pair measured faster: a bigger tile needs the warps to compute it."""
    warps = next((knob for knob in knobs if knob.kind == "warps"), None)
    more_warps = next_value(warps, UP, warps.value) if warps is not None else None
    if warps is None or more_warps is None or warps.key in lessons.pending_knobs:
        return []
    moves = []
    for order, knob in enumerate(knobs):
        value = next_value(knob, UP, knob.value) if knob.kind in ("block", "tile") else None
        if value is None or knob.key in lessons.pending_knobs:
            continue
        side = (pair_key(knob.key, warps.key), UP)
        alone_blocked = lessons.blocked.get((knob.key, UP))
        if side not in lessons.faster and (alone_blocked is None or alone_blocked > value):
            continue  # no evidence that this knob needs more warps to grow
        pair_blocked = lessons.blocked.get(side)
        if pair_blocked is not None and value >= pair_blocked:
            continue
        configuration = tuple(sorted({**incumbent, knob.key: value, warps.key: more_warps}.items()))
        if configuration in lessons.tried:
            continue
        try:
            source = apply_knobs(context.incumbent_source, {knob.key: value, warps.key: more_warps})
        except EditError:  # the pair breaks a relation the code states between knobs
            continue
        if _excluded(context, source):
            continue
        score = preferences.get((knob.kind, UP), 0.1) + 1.0 + (3.0 if side in lessons.faster else 0.0)
        moves.append(Move(score, order, knob, UP, value, source, configuration, paired=(warps, more_warps)))
    return moves


def _eligible(context: ProposalContext, knob: Knob, direction: int, incumbent: dict[str, int],
              lessons: Lessons, *, limit: int) -> Iterator[tuple[int, str, tuple[tuple[str, int], ...]]]:
    """Up to `limit` untried, unblocked, not excluded values beyond the knob's value, nearest first."""
    blocked_at = lessons.blocked.get((knob.key, direction))
    value, found = knob.value, 0
    while found < limit and (value := next_value(knob, direction, value)) is not None:
        if blocked_at is not None and (value >= blocked_at if direction == UP else value <= blocked_at):
            return  # this direction regressed or broke the kernel at `blocked_at`
        configuration = tuple(sorted({**incumbent, knob.key: value}.items()))
        if configuration in lessons.tried:
            continue
        try:
            source = apply_knob(context.incumbent_source, knob, value)
        except EditError:  # the value breaks a relation the code states between knobs
            continue
        if _excluded(context, source):
            continue
        found += 1
        yield value, source, configuration


def attempt_of(move: Move, round_index: int, incumbent_id: str = "") -> Attempt:
    """The record of a proposed move, matched later to its experiment by the source digests."""
    paired = move.paired
    return Attempt(
        knob_key=move.knob.key,
        knob_name=move.knob.name,
        direction=move.direction,
        old=move.knob.value,
        new=move.value,
        configuration=move.configuration,
        round_index=round_index,
        digests=source_digests(move.source),
        paired=(paired[0].key, paired[0].name, paired[0].value, paired[1]) if paired else None,
        incumbent_id=incumbent_id,
        text=_move_text(move),
    )


def _move_text(move: Move) -> str:
    knob, paired = move.knob, move.paired
    text = f"{knob.name} {knob.short(knob.value)}->{knob.short(move.value)}"
    return text + (f" with {paired[0].name} {paired[0].short(paired[0].value)}->{paired[0].short(paired[1])}"
                   if paired else "")


def _nearest_index(knob: Knob) -> int:
    """Index of the domain value closest to the knob's current value (for distance penalties)."""
    return min(range(len(knob.domain)), key=lambda index: abs(knob.domain[index] - knob.value))


def _configuration_from_file(path: str) -> tuple[tuple[str, int], ...]:
    """Knob values of an experiment this provider did not propose (e.g. a replayed one), if readable."""
    if not path:
        return ()
    try:
        candidate = Path(path)
        if not candidate.is_file() or candidate.stat().st_size > 4 * 1024 * 1024:
            return ()
        return knob_configuration(tunable_knobs(candidate.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return ()


def attempts_from_history(history: Sequence[ExperimentRecord]) -> list[Attempt]:
    """The single-knob attempts behind a run's records, re-derived from each source and its parent's: what a
    resumed tuner learns from (`TuneProvider.resume_from`). A record that moved several knobs (a screened
    configuration) or none stays out: `learn` still counts its configuration as tried."""
    by_id = {record.experiment_id: record for record in history}
    attempts = []
    for record in history:
        parent = by_id.get(record.parent_id or "")
        if record.round_index < 1 or parent is None or not record.source_path or not parent.source_path:
            continue
        try:
            source = Path(record.source_path).read_text(encoding="utf-8")
            before = {k.key: k for k in tunable_knobs(Path(parent.source_path).read_text(encoding="utf-8"))}
        except (OSError, UnicodeDecodeError):
            continue
        after = tunable_knobs(source)
        moved = [(before[k.key], k.value) for k in after if k.key in before and before[k.key].value != k.value]
        if len(moved) != 1:
            continue
        knob, new = moved[0]
        attempts.append(Attempt(knob_key=knob.key, knob_name=knob.name, direction=UP if new > knob.value else DOWN,
                                old=knob.value, new=new, configuration=knob_configuration(after),
                                round_index=record.round_index, digests=source_digests(source),
                                incumbent_id=parent.experiment_id))
    return attempts
