"""The scanning engine: one pass finds trigger words, then only the rules they wake look nearby.

Running ~150 regular expressions over a 100 KB note would cost tens of milliseconds. Instead every
rule names short lower-case *triggers* (``ghp_``, ``password``, ``-----begin``); one Aho-Corasick pass
(pyahocorasick, in C) finds them all in a lower-cased copy of the note; a rule may also require its
*anchor* pattern to match at the trigger (``password`` only where a value can follow); each hit runs
only its rules, and only on a bounded window around the hit. Every rule's pattern is built from
bounded repeats, so the cost stays linear in the note's length whatever the note holds. Without
pyahocorasick a regular expression built as a trie of the triggers does the first pass, slower.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

try:
    import ahocorasick  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - the trie regex below does the same, slower
    ahocorasick = None

# (text, hit start, hit end, floor) -> (offset of a secret found near the hit or None, next floor).
# The floor is where the rule's previous search left off: a rule woken many times in a row (a note
# of "password=" repeated) does not search the same characters again and again.
Locator = Callable[[str, int, int, int], "tuple[int | None, int]"]


# (text, floor) -> offsets of every secret the rule finds from the floor on: one linear pass.
Sweeper = Callable[[str, int], Iterator[int]]
# A rule woken more often than this in one note (hostile input, or a note of hundreds of "login")
# stops searching windows and sweeps the rest of the note once instead: either way each character is
# looked at a bounded number of times, and padding with triggers cannot hide a secret.
WINDOWED_WAKES = 16


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # what a refusal says was found: "a GitHub token", "a saved password"
    triggers: tuple[str, ...]
    locate: Locator = field(compare=False)
    sweep: Sweeper | None = field(default=None, compare=False)
    # A regular expression that must match (in the lower-cased note) where a trigger starts: a
    # keyword counts only where a value can follow it ("password:", "token is"), so prose about
    # passwords costs one C-level check per mention.
    anchor: str | None = None


def regex_rule(rule_id: str, kind: str, triggers: Iterable[str], pattern: str, *, back: int = 0,
               ahead: int = 300, longest: int | None = None, flags: int = 0,
               accept: Callable[[re.Match[str]], bool] | None = None, anchor: str | None = None) -> Rule:
    """A rule whose ``pattern`` is searched from ``back`` characters before a trigger to ``ahead`` after it.

    ``accept`` judges a match (a placeholder body, a value that is only a reference); a match it
    rejects does not count. ``longest`` bounds a match's length (``back + ahead`` unless given):
    the next search may start that far before this one's end.
    """
    compiled = re.compile(pattern, flags)
    overlap = back + ahead if longest is None else longest

    def locate(text: str, start: int, end: int, floor: int) -> tuple[int | None, int]:
        window_end = min(len(text), end + ahead)
        for match in compiled.finditer(text, max(0, start - back, floor), window_end):
            if accept is None or accept(match):
                return match.start(), window_end - overlap
        return None, window_end - overlap

    def sweep(text: str, floor: int) -> Iterator[int]:
        for match in compiled.finditer(text, max(0, floor)):
            if accept is None or accept(match):
                yield match.start()

    return Rule(rule_id, kind, tuple(t.lower() for t in triggers), locate, sweep, anchor)


_Trie = dict[str, "_Trie"]


def _trie_pattern(words: Iterable[str]) -> str:
    """An alternation of literal words as a trie (``p(?:ass|w)``): one branch per character, no backtracking."""
    root: _Trie = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: _Trie) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:
            return (body if len(branches) > 1 else "(?:" + body + ")") + "?"
        return body

    return build(root)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _lower_same_length(text: str) -> str:
    lowered = text.lower()
    # A few non-ASCII letters grow when lower-cased (İ -> i̇); offsets must stay those of the text.
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


# Per trigger: groups of rules it wakes, each with the anchor (if any) that must match there first.
_Plan = tuple[tuple["re.Pattern[str] | None", tuple[Rule, ...]], ...]


@dataclass(frozen=True)
class Hit:
    rule: Rule
    offset: int


class Scanner:
    """Finds where rules fire. Build once (compiling the trie), use from any thread."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        by_trigger: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for trigger in rule.triggers:
                by_trigger.setdefault(trigger, []).append(rule)
        # The trie regex reports the longest trigger at a position; a shorter trigger inside it
        # ("token" in "access_token$") must still wake its rules.
        compiled = {a: re.compile(a) for a in {rule.anchor for rule in self.rules if rule.anchor is not None}}
        self._plans: dict[str, tuple[int, _Plan]] = {}
        for trigger in by_trigger:
            woken = {r.id: r for t, rs in by_trigger.items() if t in trigger for r in rs}.values()
            groups: dict[str | None, list[Rule]] = {}
            for rule in woken:
                groups.setdefault(rule.anchor, []).append(rule)
            plan = tuple((None if a is None else compiled[a], tuple(rs)) for a, rs in groups.items())
            self._plans[trigger] = (len(trigger), plan)
        self._automaton = None
        self._triggers = None
        if ahocorasick is not None:
            self._automaton = ahocorasick.Automaton()
            for trigger, plan_of_trigger in self._plans.items():
                self._automaton.add_word(trigger, plan_of_trigger)
            self._automaton.make_automaton()
        else:
            self._triggers = re.compile(_trie_pattern(by_trigger))

    def _trigger_hits(self, lowered: str) -> Iterator[tuple[int, tuple[int, _Plan]]]:
        """(index of a trigger's last character, (its length, its plan)) for every trigger in the note."""
        if self._triggers is not None:
            for match in self._triggers.finditer(lowered):
                yield match.end() - 1, self._plans[match.group()]
        elif self._automaton is not None and self._plans:
            yield from self._automaton.iter(lowered)

    def hits(self, text: str) -> Iterator[Hit]:
        """Secrets found, in the order their triggers appear (a rule reports a given offset once)."""
        seen: set[tuple[str, int]] = set()
        floors: dict[str, int] = {}
        wakes: dict[str, int] = {}
        swept: set[str] = set()
        lowered = _lower_same_length(text)
        for last, (length, plan) in self._trigger_hits(lowered):
            start, end = last + 1 - length, last + 1
            for anchor, rules in plan:
                if anchor is not None and anchor.match(lowered, start) is None:
                    continue
                for rule in rules:
                    if rule.id in swept:
                        continue
                    wakes[rule.id] = wakes.get(rule.id, 0) + 1
                    if rule.sweep is not None and wakes[rule.id] > WINDOWED_WAKES:
                        swept.add(rule.id)
                        offsets: Iterable[int] = rule.sweep(text, floors.get(rule.id, 0))
                    else:
                        offset, floors[rule.id] = rule.locate(text, start, end, floors.get(rule.id, 0))
                        offsets = () if offset is None else (offset,)
                    for offset in offsets:
                        if (rule.id, offset) not in seen:
                            seen.add((rule.id, offset))
                            yield Hit(rule, offset)
