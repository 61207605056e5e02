"""`Pipeline`: stages run in order, each output checkpointed, a failed run resumed.

An expensive stage (a long retrieval) is never redone because a later stage failed: its
output is saved before the next stage starts, and a run with the same run id continues
after the last stage that finished, in this process or another one.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pydantic_core

from agentmesh._codec import declared_output_type, decode, encode, read_as, revive
from agentmesh._engine._attempts import AttemptRules, attempt_call
from agentmesh._logging import get_logger
from agentmesh._signatures import kept_for_one_release
from agentmesh.checkpoints import CheckpointStore, SQLiteStore
from agentmesh.classify import Classifier, default_classifier
from agentmesh.envelope import ErrorEnvelope, Outcome, PartialResults, Success
from agentmesh.errors import CallFailed, UsageError
from agentmesh.retry import RetryPolicy

__all__ = ["Pipeline"]

_StageFn: TypeAlias = Callable[[Any], Awaitable[Any]]
"""`async def stage(previous_output) -> output`; the first stage gets the pipeline's input."""

_StageSpec: TypeAlias = tuple[str, _StageFn] | tuple[str, _StageFn, RetryPolicy]
"""`(name, stage)`, or `(name, stage, retry)` to give the stage its own retry policy."""

__getattr__ = kept_for_one_release(
    __name__,
    {
        "StageFn": ("is internal to agentmesh", lambda: _StageFn),
        "StageSpec": ("is internal to agentmesh", lambda: _StageSpec),
    },
)

_OUTPUT = "output"
_INPUT = "input"
_SHAPE = "shape"


@dataclass(frozen=True, slots=True)
class _Stage:
    name: str
    fn: _StageFn
    retry: RetryPolicy
    output_type: Any

    def revive(self, value: Any, run_id: str) -> Any:
        """The stage's output as the next stage sees it, the same fresh or resumed."""
        return revive(value, self.output_type, what=f"the output of stage {self.name!r} ({run_id})")


@dataclass(frozen=True, slots=True)
class _Input:
    """The pipeline's input as stored: a digest, never the value (it may hold secrets)."""

    sha256: str


@dataclass(frozen=True, slots=True)
class _Shape:
    """The stage names, in order, of the definition that checkpointed a run."""

    stages: tuple[str, ...]


class Pipeline:
    """Stages that run one after another, each output checkpointed before the next starts.

    `await pipeline.run(data, run_id="...")` returns an Outcome. With a run id that has
    checkpoints, the run resumes after the last finished stage and does not call the
    earlier ones again; a new run id starts fresh. A failed stage gives an `ErrorEnvelope`
    (classified as usual, `source` "<pipeline>/<stage>") whose `partialResults` name the
    completed and pending stages, with the last completed output as the finding.

    Each stage's output is saved as JSON and the next stage gets it read back, typed by
    the stage's return annotation when it has one (`-> list[Doc]`), so a resumed run
    sees exactly what a fresh one does. A stage may also return an Outcome (e.g. a
    subagent's): a `Success` passes its data on, an `ErrorEnvelope` fails the stage as
    it is, without another retry.

    Args:
        stages: `(name, stage)` or `(name, stage, retry)`; names are unique.
        store: where checkpoints go; by default a `SQLiteStore` at
            `.agentmesh/checkpoints.sqlite`, opened and closed by each run.
        retry: local retries of a stage's transient failures (a stage may have its own).
        name: names the pipeline in `source`, logs and checkpoints.
        classifier: maps a stage's exception to an envelope.
    """

    def __init__(
        self,
        stages: Sequence[_StageSpec],
        *,
        store: CheckpointStore | None = None,
        retry: RetryPolicy | None = None,
        name: str = "pipeline",
        classifier: Classifier | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"Pipeline(name=) must be a non-empty string, got {name!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise UsageError(f"Pipeline(retry=) takes a RetryPolicy, got {retry!r}")
        # Not `isinstance(store, CheckpointStore)`: a store written before `claim` (which
        # a pipeline never needs) is still a store here.
        if store is not None and not all(callable(getattr(store, m, None)) for m in ("get", "put")):
            raise UsageError(f"Pipeline(store=) takes a CheckpointStore, got {store!r}")
        self.name = name
        self.store = store
        self.retry = retry or RetryPolicy()
        self.classifier = classifier or default_classifier
        self._stages = tuple(self._stage(index, spec) for index, spec in enumerate(stages))
        if not self._stages:
            raise UsageError("Pipeline() needs at least one (name, stage)")
        seen: set[str] = set()
        for stage in self._stages:
            if stage.name in seen:
                raise UsageError(f"Pipeline(): stage name {stage.name!r} is used twice")
            seen.add(stage.name)

    def _stage(self, index: int, spec: _StageSpec) -> _Stage:
        if not isinstance(spec, tuple) or len(spec) not in (2, 3):
            raise UsageError(
                f"Pipeline() stage {index} must be (name, stage) or (name, stage, retry), "
                f"got {spec!r}"
            )
        name, fn = spec[0], spec[1]
        retry = spec[2] if len(spec) == 3 else self.retry
        if not isinstance(name, str) or not name:
            raise UsageError(f"Pipeline() stage {index}: the name must be a non-empty string")
        if not _is_async_callable(fn):
            raise UsageError(
                f"Pipeline() stage {name!r} must be an async function "
                f"`async def stage(previous_output)`, got {fn!r}"
            )
        if not isinstance(retry, RetryPolicy):
            raise UsageError(f"Pipeline() stage {name!r}: retry takes a RetryPolicy, got {retry!r}")
        return _Stage(name=name, fn=fn, retry=retry, output_type=declared_output_type(fn))

    @property
    def stages(self) -> tuple[str, ...]:
        """The stage names, in order."""
        return tuple(stage.name for stage in self._stages)

    async def run(self, data: Any, *, run_id: str) -> Outcome:
        """Run the stages on `data`, resuming run `run_id` where its checkpoints end.

        Raises `UsageError` when `run_id` already has checkpoints from a different
        input or from another definition of the pipeline (its stage names, in order), and
        `CheckpointError` when the store cannot be read; a stage's failure is never
        raised, it is the returned envelope.
        """
        if not isinstance(run_id, str) or not run_id:
            raise UsageError(f"Pipeline.run(run_id=) must be a non-empty string, got {run_id!r}")
        if self.store is not None:
            return await self._run(self.store, data, run_id)
        async with SQLiteStore() as store:
            return await self._run(store, data, run_id)

    async def _run(self, store: CheckpointStore, data: Any, run_id: str) -> Outcome:
        log = get_logger(run_id=run_id, pipeline=self.name)
        await self._check_input(store, data, run_id)
        await self._check_shape(store, run_id, log)
        done: list[str] = []
        previous = data
        for stage in self._stages:
            saved = await store.get(run_id, self._address(stage), _OUTPUT)
            if saved is None:
                break
            what = f"the output of stage {stage.name!r}"
            previous = read_as(store, saved, stage.output_type, what=what)
            done.append(stage.name)
            log.info("stage_skipped", stage=stage.name, reason="checkpointed")
        attempts = 0
        restored = len(done)
        for index in range(restored, len(self._stages)):
            stage = self._stages[index]
            if restored and index == restored:
                log.info("stage_resumed", stage=stage.name, after=done[-1])
            outcome = await self._attempt(stage, previous, run_id, log)
            if isinstance(outcome, ErrorEnvelope):
                return self._failed(outcome, stage, index, done, previous, log)
            try:
                text = encode(outcome.data, what=f"the output of stage {stage.name!r}")
                await store.put(run_id, self._address(stage), _OUTPUT, outcome.data)
                previous = stage.revive(decode(text), run_id)
            except Exception as exc:
                envelope = self.classifier.classify(
                    exc,
                    source=self._address(stage),
                    attempted_query=self._query(stage, run_id),
                    attempts=outcome.attempts,
                )
                note = f"the output of stage {stage.name!r} could not be checkpointed"
                envelope = envelope.model_copy(
                    update={"details": "; ".join(filter(None, [note, envelope.details]))}
                )
                return self._failed(envelope, stage, index, done, previous, log)
            done.append(stage.name)
            attempts = outcome.attempts
            log.info("checkpoint_saved", stage=stage.name, attempts=attempts)
        log.info("pipeline_outcome", status="success", completed=len(done))
        return Success(
            data=previous,
            source=self.name,
            attempted_query={"pipeline": self.name, "run_id": run_id},
            attempts=attempts,
        )

    async def _attempt(
        self, stage: _Stage, previous: Any, run_id: str, log: Any
    ) -> Success[Any] | ErrorEnvelope:
        async def work(number: int) -> Any:
            log.debug("stage_attempt", stage=stage.name, attempt=number)
            output = await stage.fn(previous)
            if isinstance(output, ErrorEnvelope):
                raise CallFailed(output)  # it was retried where it happened: not again here
            return output.data if isinstance(output, Success) else output

        return await attempt_call(
            work,
            rules=AttemptRules(stage.retry, self.classifier),
            source=self._address(stage),
            attempted_query=self._query(stage, run_id),
            log=log.bind(stage=stage.name),
        )

    def _failed(
        self,
        envelope: ErrorEnvelope,
        stage: _Stage,
        index: int,
        done: Sequence[str],
        previous: Any,
        log: Any,
    ) -> ErrorEnvelope:
        """The stage's envelope, with the pipeline's progress as its partial results."""
        source = self._address(stage)
        inner = envelope.partial_results
        findings = (previous,) if done else ()
        update: dict[str, Any] = {
            "source": source,
            "partial_results": PartialResults(
                completed=tuple(done),
                pending=tuple(s.name for s in self._stages[index:]),
                findings=(*findings, *(inner.findings if inner else ())),
            ),
        }
        if envelope.source != source:
            note = f"reported by {envelope.source}"
            update["details"] = "; ".join(filter(None, [envelope.details, note]))
        envelope = envelope.model_copy(update=update)
        log.info(
            "stage_failed",
            stage=stage.name,
            category=envelope.error_category.value,
            error_type=envelope.error_type,
            retryable=envelope.is_retryable,
            attempts=envelope.attempts,
            completed=len(done),
        )
        return envelope

    async def _check_input(self, store: CheckpointStore, data: Any, run_id: str) -> None:
        """Refuse to resume a run with another input: its checkpoints would not fit it."""
        try:
            digest = hashlib.sha256(pydantic_core.to_json(data, by_alias=True)).hexdigest()
        except pydantic_core.PydanticSerializationError:
            return  # an input that is not JSON cannot be compared: trust the caller
        saved = await store.get(run_id, self.name, _INPUT)
        if saved is None:
            await store.put(run_id, self.name, _INPUT, {"sha256": digest})
        elif read_as(store, saved, _Input, expected="an input's digest").sha256 != digest:
            raise UsageError(
                f"Pipeline.run(run_id={run_id!r}): this run was started with a different "
                "input; use a new run id, or delete the run's checkpoints to start it over"
            )

    async def _check_shape(self, store: CheckpointStore, run_id: str, log: Any) -> None:
        """Refuse to resume a run that another definition of the pipeline checkpointed.

        Its saved outputs belong to stages in another order: one would be handed to a
        stage it was not made for, or returned as the result.
        """
        saved = await store.get(run_id, self.name, _SHAPE)
        if saved is None:
            if await store.get(run_id, self._address(self._stages[0]), _OUTPUT) is not None:
                # Checkpointed before shapes were recorded: resumed by stage name, as then.
                log.warning("pipeline_shape_unknown", stages=list(self.stages))
            await store.put(run_id, self.name, _SHAPE, {"stages": list(self.stages)})
            return
        stages = read_as(store, saved, _Shape, expected="a pipeline's shape").stages
        if stages != self.stages:
            raise UsageError(
                f"Pipeline.run(run_id={run_id!r}): this run was checkpointed by another "
                f"definition of pipeline {self.name!r}: {_difference(stages, self.stages)} "
                f"(then {' -> '.join(stages)}, now {' -> '.join(self.stages)}); use a new run "
                "id, or delete the run's checkpoints to start it over"
            )

    def _address(self, stage: _Stage) -> str:
        return f"{self.name}/{stage.name}"

    def _query(self, stage: _Stage, run_id: str) -> dict[str, Any]:
        return {"pipeline": self.name, "stage": stage.name, "run_id": run_id}

    def __repr__(self) -> str:
        return f"<Pipeline {self.name}: {' -> '.join(self.stages)}>"


def _difference(saved: Sequence[str], current: Sequence[str]) -> str:
    """What changed between two stage orders, said the way a person would look for it."""
    added = [name for name in current if name not in saved]
    removed = [name for name in saved if name not in current]
    if added and not removed:
        return f"{_stage_list(added)} added"
    if removed and not added:
        return f"{_stage_list(removed)} removed"
    # Reordered or renamed: neither order is a prefix of the other, so both have `index`.
    index = next(i for i, (old, new) in enumerate(zip(saved, current, strict=False)) if old != new)
    return f"stage {index + 1} was {saved[index]!r}, now {current[index]!r}"


def _stage_list(names: Sequence[str]) -> str:
    quoted = ", ".join(repr(name) for name in names)
    return f"stage {quoted}" if len(names) == 1 else f"stages {quoted}"


def _is_async_callable(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    return callable(fn) and inspect.iscoroutinefunction(type(fn).__call__)
