"""`LLMSynthesizer`: the report's summary written by a model, checked in code.

Its one forced tool call (`write_summary`) goes through the helpers' model call (see
`_llm_helpers`). What a model may not decide is decided in code: the coverage, findings
and escalations are the deterministic ones, and the summary is refused when it cites
anything that is not a numbered finding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pydantic

from agentmesh._logging import get_logger
from agentmesh.classify import Classifier, default_classifier
from agentmesh.coordinator._helper_models import SYNTHESIZER, HelperModels, helper_context
from agentmesh.coordinator._llm_helpers import (
    WRITE_SUMMARY,
    _check_options,
    _failure,
    _forced_call,
    _short,
)
from agentmesh.coordinator._synthesis import DeterministicSynthesizer, Synthesizer
from agentmesh.envelope import ErrorEnvelope
from agentmesh.models import Model, resolve_model
from agentmesh.report import CoverageEntry, CoverageStatus, Finding, Report, TaskRecord
from agentmesh.retry import RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.task import Task

__all__ = ["LLMSynthesizer"]

# A finding's content is cut to this many characters in the prompt: a summary needs
# the gist, and one huge result must not crowd out the others.
_MAX_CONTENT_CHARS = 2000


_SUMMARY_TOOL: dict[str, Any] = {
    "name": WRITE_SUMMARY,
    "description": "Submit the report's summary.",
    "input_schema": {
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "description": "the summary, citing the numbered findings as [1] or [2, 3]",
            }
        },
        "required": ["summary"],
    },
}

_SYNTHESIZER_SYSTEM = """\
You write the summary at the top of a research report. You get the report's numbered \
findings, each with its topic and source, and the topics whose coverage is missing or \
incomplete.

Call write_summary with a few short paragraphs of plain prose.
- Use only the findings. Cite the findings behind every statement with their numbers \
in square brackets, such as [1] or [2, 3]. Use square brackets for nothing else.
- Cite no other source: no URL, name or document that is not in the findings.
- Findings marked preliminary come from partial results of attempts that failed: say \
that they are preliminary.
- Name the topics whose coverage is missing in one sentence; do not explain or guess \
what they would have found. The coverage table is appended to the report verbatim."""


class _Summary(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, defer_build=True)

    summary: str


# A bracketed marker that is not the text of a markdown link: "[3]", "[2, 3]", "[web]".
_MARKER = re.compile(r"\[([^\[\]\n]*)\](?!\()")
_NUMBERS = re.compile(r"\s*\d+(?:\s*,\s*\d+)*\s*")
_URL = re.compile(r"https?://[^\s<>\[\]()\"'`]+")


class LLMSynthesizer:
    """A `Synthesizer` whose report has a model-written summary, and nothing else from it.

    The model is made to call the tool `write_summary` with `{"summary": str}`
    (`WRITE_SUMMARY`; in tests, `ScriptedModel.write_summary(...)`).

    The report is built by `fallback` first (by default `DeterministicSynthesizer()`),
    so findings, coverage and escalations are computed in code and carried over
    verbatim; the model writes `Report.summary` only, from the numbered findings with
    their sources and the coverage problems.

    Citations: the summary cites findings as `[n]` or `[n, m]`, numbers of the list it
    was given. A summary is refused, not patched, when it cites a number that is not a
    finding, uses any other bracketed marker (`[wikipedia]`), names a URL that appears
    in no finding, or cites nothing at all although there are findings: stripping the
    bad marker would leave its claim standing without support. Source names in plain
    prose are not checked (the summary may say that a source failed).

    When the model call fails (after local retries), the model answers in text instead
    of calling `write_summary`, or the summary is refused, the fallback's report is
    returned with `Report.synthesis_note` saying why, which
    `to_markdown()` shows. A run without findings is summarised by no model at all:
    there is nothing to cite, and so nothing the model could say safely.

    Args:
        model: any `Model`, or a model string (see `resolve_model`).
        fallback: builds the report; default `DeterministicSynthesizer()`.
        retry: local retries of the model call (default `RetryPolicy()`); its
            `deadline` bounds the whole call, attempts in flight included.
        max_tokens: for the summary.
        classifier: turns the model call's exceptions into envelopes.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        fallback: Synthesizer | None = None,
        retry: RetryPolicy | None = None,
        max_tokens: int = 1024,
        classifier: Classifier | None = None,
    ) -> None:
        self.model = resolve_model(model)
        self.fallback: Synthesizer = fallback or DeterministicSynthesizer()
        self.retry = _check_options("LLMSynthesizer", max_tokens, retry)
        self.max_tokens = max_tokens
        self.classifier = classifier or default_classifier

    async def synthesize(
        self, records: Sequence[TaskRecord], *, run_id: str, min_coverage: float | None
    ) -> Report:
        """The report, with the model's summary when it is safe to use.

        Called by a coordinator, the model call is the run's: its usage limits admit
        it and the report counts it under "synthesizer". Called on its own, the call
        is made on its own, its usage not kept.
        """
        return await self._synthesize(records, run_id, min_coverage, None)

    async def _synthesize(
        self,
        records: Sequence[TaskRecord],
        run_id: str,
        min_coverage: float | None,
        helpers: HelperModels | None,
    ) -> Report:
        """`synthesize`, with the run's `helpers` when a coordinator calls (else None)."""
        report = await self.fallback.synthesize(records, run_id=run_id, min_coverage=min_coverage)
        if not report.findings:
            return report
        log = get_logger(run_id=run_id, helper=SYNTHESIZER, model=self.model.name)
        options: dict[str, Any] = {
            "task": Task(query=f"summarise run {run_id}"),
            "task_id": None,
            "retry": self.retry,
            "classifier": self.classifier,
            "log": log,
        }
        ctx = (
            helper_context(RunScope(run_id), SYNTHESIZER, **options)
            if helpers is None
            else helpers.context(SYNTHESIZER, **options)
        )
        answer = await _forced_call(
            ctx,
            self.model,
            tool=_SUMMARY_TOOL,
            system=_SYNTHESIZER_SYSTEM,
            prompt=_summary_prompt(report),
            max_tokens=self.max_tokens,
            attempted_query={"summarise": run_id},
        )
        problem: str | None
        if isinstance(answer, ErrorEnvelope):
            problem = _failure(answer)
        else:
            try:
                summary = _Summary.model_validate(answer).summary.strip()
            except pydantic.ValidationError:
                problem = "the model's answer had no summary text"
            else:
                problem = _citation_problem(summary, report.findings)
                if problem is None:
                    log.info("summary_written", chars=len(summary))
                    return report.model_copy(update={"summary": summary})
        log.warning("summary_unavailable", reason=problem)
        note = f"Summary unavailable: {problem} — deterministic synthesis used."
        return report.model_copy(update={"synthesis_note": note})

    def __repr__(self) -> str:
        return f"LLMSynthesizer({self.model.name!r})"


def _summary_prompt(report: Report) -> str:
    lines = ["Findings:"]
    for number, finding in enumerate(report.findings, start=1):
        mark = ", preliminary" if finding.preliminary else ""
        lines.append(f"[{number}] topic: {finding.topic}; source: {finding.source}{mark}")
        lines.append(f"    {_content(finding.content)}")
    problems = [e for e in report.coverage if e.status not in _ANSWERED]
    empty = [e for e in report.coverage if e.status is CoverageStatus.EMPTY]
    lines += ["", "Coverage missing or incomplete:"]
    lines += [_coverage_line(e) for e in problems] or ["- none"]
    if empty:
        lines += ["", "Searched, nothing found (an answer, not a gap):"]
        lines += [_coverage_line(e) for e in empty]
    return "\n".join(lines)


_ANSWERED = (CoverageStatus.COVERED, CoverageStatus.EMPTY)


def _coverage_line(entry: CoverageEntry) -> str:
    reason = f": {_short(entry.reason, 300)}" if entry.reason else ""
    return f"- topic: {entry.topic}; source: {entry.source}; {entry.status.value}{reason}"


def _content(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return _short(text, _MAX_CONTENT_CHARS)


# Findings are plain dataclasses; pydantic dumps them as a model would (snake_case keys).
_FINDINGS: pydantic.TypeAdapter[list[Finding]] = pydantic.TypeAdapter(
    list[Finding], config=pydantic.ConfigDict(defer_build=True)
)


def _citation_problem(summary: str, findings: Sequence[Finding]) -> str | None:
    """Why the summary cannot be used, or None when every citation is a finding."""
    if not summary:
        return "the model's summary was empty"
    count = len(findings)
    cited = False
    for match in _MARKER.finditer(summary):
        marker = match.group(0)
        if not _NUMBERS.fullmatch(match.group(1)):
            return f"the model's summary cited {marker}, which is not a numbered finding"
        for number in (int(n) for n in match.group(1).split(",")):
            if not 1 <= number <= count:
                return (
                    f"the model's summary cited [{number}], but there are only "
                    f"{count} numbered findings"
                )
        cited = True
    evidence = json.dumps(
        _FINDINGS.dump_python(list(findings), mode="json"), default=str, ensure_ascii=False
    )
    for url in _URL.findall(summary):
        url = url.rstrip(".,;:!?")
        if url not in evidence:
            return f"the model's summary names {url}, which is in none of the findings"
    if not cited:
        return "the model's summary cites none of the findings"
    return None
