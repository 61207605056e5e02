"""One ranking of every finding, and coverage that says whether it is relevant.

`DeterministicSynthesizer` lists findings task by task (first subtopic's first source,
then the next) and calls an entry `covered` when its source returned anything. Here
the findings of all tasks are merged:

* each finding is scored against the whole question (`relevance.Scorer`), the same
  yardstick for every source and subtopic, plus `openings.ABOUT` times its document's
  closeness to the question (`openings`: what the document says it is about, by the
  sentence encoder), when there is an encoder; a finding that is not relevant to its
  own task's query is dropped (the online analysis may choose one, the web may return it);
* the same passage of the same document found by several subtopics is kept once, at
  its best place, naming the other subtopics in `also_topics` (it answers them too);
  the second and later passages of one document count a little less (`REPEAT`), and
  those of one section (the same id) much less (`SAME_SECTION`), so the first
  findings name several documents and sections;
* a `covered` entry with no relevant finding left becomes `empty`, with the reason
  "nothing relevant found" (and so does an entry the analysis already left empty);
* an entry stays `covered` only when one of its passages *answers*: its own section
  (name, heading, text) has the words that carry `ANSWERS` of the subtopic's weight
  and of the whole question's, and its name or heading has one of the question's
  key words, those of at least their mean weight (a passage is about what its heading
  says; a heading that says "Functions" is not about every question with "function").
  A relevant passage that does not is not enough to say so: the entry becomes
  `partial`, its reason naming the question's key words the passages do not have
  ("unsure: the passages found do not answer the question (they do not mention
  delimiter)").

Findings of failed attempts (preliminary) are ranked too, never dropped: they are what
the report keeps of a failure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from agentmesh import Report
from agentmesh.report import CoverageEntry, CoverageStatus, Finding

from .openings import ABOUT, OPENINGS, Openings
from .relevance import LOWEST, QUESTION_FLOOR, Scorer
from .sources import Passage

__all__ = [
    "AFTER_WORDS",
    "ANSWERS",
    "NOTHING_RELEVANT",
    "REPEAT",
    "SAME_SECTION",
    "UNSURE",
    "merge",
    "passages",
]

NOTHING_RELEVANT = "nothing relevant found"
# How the reason of an entry whose passages may not answer opens (status partial).
UNSURE = "unsure:"
REPEAT = 0.9
# A further passage of the same section (the same id) weighs this much less again.
SAME_SECTION = 0.5
# The share of the subtopic's and of the question's weight a passage must carry to
# answer (tuned on the development set only: `python -m examples.research_agent.eval`).
ANSWERS = 0.5
# The words' first findings keep their places; the openings route's documents come next
# (`_placed`; tuned on the development sets with `openings.NEAREST`).
AFTER_WORDS = 4


def merge(
    report: Report, scorer: Scorer, question: str, openings: Openings | None = None
) -> Report:
    """The report with its findings in one ranking and its coverage made honest; with
    `openings`, a passage whose document is about what is asked ranks higher (`ABOUT`)."""
    kept: list[tuple[int, Finding, str, Passage | None]] = []
    for position, finding in enumerate(report.findings):
        passage = _passage(finding)
        query = finding.attempted_query if isinstance(finding.attempted_query, str) else ""
        if (
            passage is None
            or finding.preliminary
            or finding.source == OPENINGS  # found by meaning: its words are not the point
            or _relevant(scorer, query, question, passage)
        ):
            kept.append((position, finding, query, passage))
    passages = [passage for *_, passage in kept if passage is not None]
    # All at once: the openings not encoded yet are encoded in one batch.
    about = iter(openings.closeness(question, passages) if openings else [0.0] * len(passages))
    ranked: list[tuple[float, int, Finding]] = []
    for position, finding, query, passage in kept:
        if passage is None:
            ranked.append((0.0, position, finding))
            continue
        # The whole question is the yardstick; the own query breaks ties; what the
        # document is about weighs as much as the passage's own words.
        score = scorer.relevance(question, passage) + 0.1 * scorer.relevance(query, passage)
        score += ABOUT * next(about)
        rescored = dataclasses.replace(finding, content={**passage, "relevance": round(score, 3)})
        ranked.append((score, position, rescored))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    by_words = [f for _, _, f in ranked if f.source != OPENINGS]
    # In the order the openings route read them: closest in meaning first.
    by_meaning = [f for _, _, f in sorted(ranked, key=lambda item: item[1]) if f.source == OPENINGS]
    findings = _placed(_diversified(_collapsed(by_words)), _collapsed(by_meaning))
    # Counted before duplicates collapse: a passage that two subtopics found answers
    # both, though the report lists it once (under the first, `also_topics` the others).
    relevant = {(f.topic, f.source) for _, _, f in ranked if not f.preliminary}
    answered = {
        (f.topic, f.source)
        for _, _, f in ranked
        if not f.preliminary and _answers(scorer, f, question)
    }
    coverage = tuple(
        _judged(_honest(entry, relevant), answered, scorer, question, ranked)
        for entry in report.coverage
    )
    return report.model_copy(update={"findings": tuple(findings), "coverage": coverage})


def passages(report: Report) -> list[Passage]:
    """The passages among a report's findings (a finding may hold something else)."""
    return [passage for finding in report.findings if (passage := _passage(finding))]


def _answers(scorer: Scorer, finding: Finding, question: str) -> bool:
    """Whether the passage's own section carries `ANSWERS` of its subtopic's key words
    and of the question's."""
    passage = _passage(finding)
    if passage is None:
        return False
    if passage["source"] == "web":
        return True  # a search result's page arrives encrypted: nothing here to judge
    query = finding.attempted_query if isinstance(finding.attempted_query, str) else ""
    own = scorer.share(query, passage) >= ANSWERS if query else True
    return own and scorer.share(question, passage) >= ANSWERS and scorer.named(question, passage)


def _judged(
    entry: CoverageEntry,
    answered: set[tuple[str, str]],
    scorer: Scorer,
    question: str,
    ranked: list[tuple[float, int, Finding]],
) -> CoverageEntry:
    """A covered entry none of whose passages answers becomes `partial`, saying why."""
    key = (entry.topic, entry.source)
    if entry.status is not CoverageStatus.COVERED or key in answered:
        return entry
    found = [p for _, _, f in ranked if (f.topic, f.source) == key and (p := _passage(f))]
    missing = scorer.missing(question, found)
    unsure = f"{UNSURE} the passages found do not answer the question"
    if missing:
        unsure += f" (they do not mention {', '.join(missing)})"
    reason = f"{unsure}; {entry.reason}" if entry.reason else unsure
    return dataclasses.replace(entry, status=CoverageStatus.PARTIAL, reason=reason)


def _relevant(scorer: Scorer, query: str, question: str, passage: Passage) -> bool:
    """Relevant to the task's own query and, less strictly, to the whole question."""
    # The analysis may have lowered the floor for its query (`Scorer.floor`): not below this.
    own = scorer.relevant(query, passage, floor=LOWEST) if query else True
    return own and scorer.relevant(question, passage, floor=QUESTION_FLOOR)


def _placed(by_words: list[Finding], by_meaning: list[Finding]) -> list[Finding]:
    """The words' first `AFTER_WORDS` findings, then the openings route's (each document
    not among those already), then the rest of the words' ranking, each passage once.

    Interleaved, not scored together: a passage found by meaning shares few words with
    the question, so by one score it would rank below every passage that does, which is
    what the words' ranking already shows. A passage both found is listed at the route's
    place, naming the words' subtopics too, and as the search that did not fail found it
    (not preliminary) when one did."""
    first = by_words[:AFTER_WORDS]
    shown = {_key(f)[0] for f in first}
    placed = {_key(f): f for f in by_meaning if _key(f)[0] not in shown}
    rest = []
    for finding in by_words[AFTER_WORDS:]:
        key = _key(finding)
        if key not in placed:
            rest.append(finding)
            continue
        kept = placed[key]
        if kept.preliminary and not finding.preliminary:
            kept, finding = finding, kept
        topics = [finding.topic, *_content(finding).get("also_topics", ())]
        also = list(dict.fromkeys([*_content(kept).get("also_topics", ()), *topics]))
        also = [topic for topic in also if topic != kept.topic]
        placed[key] = (
            dataclasses.replace(kept, content={**_content(kept), "also_topics": also})
            if also
            else kept
        )
    return [*first, *placed.values(), *rest]


def _collapsed(findings: list[Finding]) -> list[Finding]:
    """Each passage once, at its best place; the other subtopics that found it are
    listed in its `also_topics`."""
    kept: dict[tuple[str, str], Finding] = {}
    others: dict[tuple[str, str], list[str]] = {}
    for finding in findings:
        key = _key(finding)
        if key not in kept:
            kept[key], others[key] = finding, []
        elif finding.topic != kept[key].topic and finding.topic not in others[key]:
            others[key].append(finding.topic)
    return [
        dataclasses.replace(f, content={**_content(f), "also_topics": others[key]})
        if others[key] and isinstance(f.content, dict)
        else f
        for key, f in kept.items()
    ]


def _diversified(findings: list[Finding]) -> list[Finding]:
    """Stable re-order: each further passage of a document weighs `REPEAT` times less."""
    seen: Counter[str] = Counter()
    sections: Counter[str] = Counter()
    keyed: list[tuple[float, int, Finding]] = []
    for position, finding in enumerate(findings):
        document = _key(finding)[0]
        section = str(_content(finding).get("id", document))
        relevance = float(_content(finding).get("relevance", 0.0))
        weight = REPEAT ** seen[document] * SAME_SECTION ** sections[section]
        keyed.append((relevance * weight, position, finding))
        seen[document] += 1
        sections[section] += 1
    keyed.sort(key=lambda item: (-item[0], item[1]))
    return [finding for _, _, finding in keyed]


def _honest(entry: CoverageEntry, answered: set[tuple[str, str]]) -> CoverageEntry:
    if entry.status is CoverageStatus.EMPTY or (
        entry.status is CoverageStatus.COVERED and (entry.topic, entry.source) not in answered
    ):
        reason = NOTHING_RELEVANT if not entry.reason else _replace_reason(entry.reason)
        return dataclasses.replace(entry, status=CoverageStatus.EMPTY, reason=reason)
    return entry


def _replace_reason(reason: str) -> str:
    # The coordinator's own words for an empty answer, said more precisely; any note it
    # added after them (policy rulings, retries) stays.
    generic = "searched, nothing found"
    if reason.startswith(generic):
        return NOTHING_RELEVANT + reason[len(generic) :]
    return f"{NOTHING_RELEVANT}; {reason}"


def _content(finding: Finding) -> dict[str, Any]:
    return finding.content if isinstance(finding.content, dict) else {}


def _passage(finding: Finding) -> Passage | None:
    content = _content(finding)
    if not {"source", "text", "section"} <= set(content):
        return None
    return content  # type: ignore[return-value]  # a Passage, read back as a dict


def _key(finding: Finding) -> tuple[str, str]:
    content = _content(finding)
    document = str(content.get("id") or content.get("document", ""))
    if document.startswith("stdlib:"):
        # One module is one document: its functions' passages are its passages.
        module = str(content.get("document", document))
        document = f"stdlib:{module}"
    elif document.startswith("docs:"):
        document = document.partition("#")[0]  # one page is one document
    return document, str(content.get("text", finding.content))
