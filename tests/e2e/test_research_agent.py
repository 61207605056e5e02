"""The research agent end to end: a real question over real local text, faults on demand.

Each scenario runs the example once (module-scoped fixtures) and several tests read it.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import QUESTION, Run, answered, run_agent

SOURCES = ("pydoc", "stdlib", "packages")


class TestAnswer:
    def test_exits_zero(self, markdown: Run) -> None:
        """A clean offline run succeeds (its wall time is measured by `python -m benchmarks`)."""
        run = markdown
        assert run.returncode == 0, run.stderr

    def test_markdown_cites_passages_from_two_sources(self, markdown: Run) -> None:
        """The report quotes the language reference and contextlib, each with its citation."""
        run = markdown
        report = run.stdout
        assert report.startswith(f"# {QUESTION}")
        assert "## Findings" in report
        citations = [line for line in report.splitlines() if line.startswith("> ")]
        assert any(
            c.startswith("> pydoc · The \"with\" statement (pydoc topic 'with')") for c in citations
        )
        assert any(c.startswith("> stdlib · contextlib · contextlib.") for c in citations)
        # Every citation names the query that found the passage.
        assert citations
        assert all(" · query `" in c for c in citations)
        assert "__exit__()" in report  # real text from the language reference

    def test_markdown_has_a_coverage_section(self, markdown: Run) -> None:
        """Per subtopic and source: status, reason, and whether a retry could help."""
        report = markdown.stdout
        section = report[report.index("## Coverage") :]
        assert "| subtopic | source | status | reason | retry could help |" in section
        for source in SOURCES:
            assert f"| with statement | {source} |" in section

    def test_progress_and_grid_on_stderr(self, markdown: Run) -> None:
        """Not a terminal: plain progress lines, then the coverage grid with its legend."""
        stderr = markdown.stderr
        assert "with statement × stdlib: running" in stderr
        assert "decision Accept" in stderr
        grid = stderr[stderr.index("Coverage") :]
        assert all(source in grid for source in SOURCES)
        assert "covered" in grid
        assert "needs a person" in grid  # the legend
        assert "\x1b[" not in stderr  # no colour codes in a pipe

    def test_json_coverage_lists_every_source(self, as_json: Run) -> None:
        """One coverage entry per (subtopic, source), with the fields the design names."""
        assert as_json.returncode == 0, as_json.stderr
        report = as_json.report
        topics = [step["topic"] for step in report["plan"]]
        assert 2 <= len(topics) <= 5
        assert {(e["topic"], e["source"]) for e in report["coverage"]} == {
            (t, s) for t in topics for s in SOURCES
        }
        for entry in report["coverage"]:
            assert {
                "topic",
                "source",
                "status",
                "reason",
                "attemptedQuery",
                "isRetryable",
            } <= set(entry)
        assert report["question"] == QUESTION
        # Nothing failed: each entry is answered (covered), unsure of its passages
        # (partial, saying why, with nothing left over from a failure) or empty.
        for entry in report["coverage"]:
            assert entry["status"] in ("covered", "partial", "empty"), entry
            if entry["status"] == "partial":
                assert entry["reason"].startswith("unsure:"), entry
                assert not entry.get("partial"), entry
        assert any(entry["status"] == "covered" for entry in report["coverage"])

    def test_json_findings_carry_provenance(self, as_json: Run) -> None:
        """Each finding says which source, document and query it came from."""
        findings = as_json.report["findings"]
        assert {f["content"]["source"] for f in findings} >= {"pydoc", "stdlib"}
        for finding in findings:
            assert finding["attemptedQuery"]
            assert finding["content"]["document"]
            assert finding["content"]["text"]


class TestPersistentTimeout:
    def test_report_still_written(self, outage: Run) -> None:
        """A source that never answers does not fail the run: exit 0 and a full report."""
        assert outage.returncode == 0, outage.stderr
        assert len(outage.report["coverage"]) == 3 * len(outage.report["plan"])

    def test_timed_out_entries_are_gaps(self, outage: Run) -> None:
        """Each stdlib entry is a retryable gap (or partial) that says it timed out."""
        for entry in outage.coverage("stdlib"):
            assert entry["status"] in ("gap", "partial")
            assert entry["isRetryable"] is True
            assert "timeout" in entry["reason"]
        for record in outage.records("stdlib"):
            assert record["steps"][-1]["outcome"]["attempts"] == 5  # retried locally first

    def test_other_sources_intact(self, outage: Run) -> None:
        """pydoc's findings survive the other sources' failures."""
        assert all(e["status"] == "covered" for e in outage.coverage("pydoc"))
        assert outage.findings("pydoc")


class TestPermission:
    def test_escalated_never_retried(self, outage: Run) -> None:
        """A permission error goes to a person: escalated, one attempt, no retry of any kind."""
        for entry in outage.coverage("packages"):
            assert entry["status"] == "escalated"
            assert entry["isRetryable"] is False
        for record in outage.records("packages"):
            assert len(record["steps"]) == 1
            assert record["steps"][0]["decision"] == "Escalate"
            assert record["steps"][0]["outcome"]["attempts"] == 1
        assert "packages: retrying" not in outage.stderr
        assert {e["source"] for e in outage.report["escalations"]} == {"packages"}


class TestRateLimitAndOutage:
    def test_rate_limit_is_a_retryable_gap(self, mixed: Run) -> None:
        """429-like answers are retried after the server's delay, then reported as a gap."""
        for record in mixed.records("stdlib"):
            outcome = record["steps"][-1]["outcome"]
            assert outcome["errorType"] == "rate_limited"
            assert outcome["retryAfter"] == 0.05
            assert outcome["attempts"] == 5
            assert record["status"] == "gap"

    def test_unavailable_is_a_retryable_gap(self, mixed: Run) -> None:
        """A refused connection is transient: retried locally, then a gap."""
        for entry in mixed.coverage("packages"):
            assert entry["status"] == "gap"
            assert entry["isRetryable"] is True
            assert "unavailable" in entry["reason"]


class TestInvalidQuery:
    def test_retried_with_feedback(self, mixed: Run) -> None:
        """The source rejects quoted terms; the rewriter drops the quotes and the retry succeeds.

        The whole question's query has no quotes: the source takes it at once."""
        quoted = [r for r in mixed.records("pydoc") if '"' in r["steps"][0]["query"]]
        assert len(quoted) == len(mixed.records("pydoc")) - 1
        for record in quoted:
            first, second = record["steps"]
            assert first["outcome"]["errorCategory"] == "validation"
            assert first["decision"] == "RetryWithFeedback"
            assert '"' in first["query"]
            assert '"' not in second["query"]
            assert second["decision"] == "Accept"
            assert record["status"] == "covered"
        assert mixed.findings("pydoc")


class TestFlaky:
    def test_timeouts_recovered_locally(self, flaky: Run) -> None:
        """Half the calls time out; local retries recover most: answered entries after retries
        (covered, or partial and unsure of what they found, which is not a failure)."""
        assert flaky.returncode == 0, flaky.stderr
        done = [e for e in flaky.coverage("stdlib") if answered(e)]
        assert len(done) == 3
        recovered = [
            entry["topic"]
            for entry in done
            if any(
                f"{entry['topic']} × stdlib: {tool} #1 failed (timeout)" in flaky.stderr
                for tool in ("find_stdlib", "read_stdlib")
            )
        ]
        assert recovered

    def test_partial_keeps_what_was_read(self, flaky: Run) -> None:
        """A task that failed after reading some documents is partial, its passages kept."""
        (partial,) = [
            e for e in flaky.coverage("stdlib") if e["status"] == "partial" and e.get("partial")
        ]
        assert partial["partial"]["completed"]
        assert partial["partial"]["pending"]
        preliminary = flaky.findings("stdlib", preliminary=True)
        assert preliminary
        assert {f["topic"] for f in preliminary} == {partial["topic"]}

    def test_empty_is_an_answer_not_a_gap(self, flaky: Run) -> None:
        """An empty result is "searched, nothing found": status empty, never retried."""
        for entry in flaky.coverage("pydoc"):
            assert entry["status"] == "empty"
            assert entry["isRetryable"] is False
        for record in flaky.records("pydoc"):
            assert len(record["steps"]) == 1
            assert record["steps"][0]["decision"] == "AcceptEmpty"
        assert not flaky.findings("pydoc")


BAD_INPUT = {
    "empty question": ("",),
    "blank question": ("  ?  ",),
    "unknown source": (QUESTION, "--sources", "pydoc,web2"),
    "unknown fault kind": (QUESTION, "--inject", "stdlib=meltdown"),
    "probability outside 0..1": (QUESTION, "--inject", "stdlib=timeout@1.5"),
    "unknown option": (QUESTION, "--frobnicate"),
}


class TestBadInput:
    @pytest.mark.parametrize("args", BAD_INPUT.values(), ids=BAD_INPUT.keys())
    def test_one_line_exit_two(self, args: tuple[str, ...]) -> None:
        """Bad input is one clear line on stderr and exit code 2; no traceback, no report."""
        run = run_agent(*args)
        assert run.returncode == 2
        assert run.stdout == ""
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, run.stderr
        assert lines[0].startswith("python -m examples.research_agent: error: ")
        assert "Traceback" not in run.stderr
