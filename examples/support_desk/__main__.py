"""The command line: a first run, or a resume with a person's approval."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

from agentmesh import Coordinator, UsageError
from agentmesh.approvals import Approval, Approve, Reject
from agentmesh.checkpoints import SQLiteStore
from agentmesh.report import Report

from .desk import TICKETS, desk, refund_limit

# Which run an approval id belongs to: the person only has to give the id.
INDEX_RUN = "support-desk-index"
COMMAND = "python -m examples.support_desk"


def options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument(
        "--checkpoints",
        type=Path,
        default=Path(tempfile.gettempdir()) / "agentmesh-support-desk",
        help="directory of the checkpoint file (default: %(default)s)",
    )
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--approve", metavar="ID", help="approve the pending approval ID")
    answer.add_argument("--reject", nargs=2, metavar=("ID", "REASON"), help="reject it")
    answer.add_argument(
        "--go-on",
        metavar="ID",
        help="go on with the run of the answered approval ID, without answering it again "
        "(after an --approve or --reject that was interrupted)",
    )
    return parser.parse_args(argv)


async def main(argv: list[str]) -> int:
    args = options(argv)
    args.checkpoints.mkdir(parents=True, exist_ok=True)
    async with SQLiteStore(args.checkpoints / "checkpoints.sqlite") as store:
        coordinator = Coordinator([desk], policies=[refund_limit], store=store)
        if args.approve is None and args.reject is None and args.go_on is None:
            run_id = uuid.uuid4().hex[:12]
            report = await coordinator.run(TICKETS, run_id=run_id)
        else:
            approval_id, answer = _answer(args)
            known = await store.get(INDEX_RUN, "approvals", approval_id)
            if known is None:
                print(f"{COMMAND}: no pending approval {approval_id!r}", file=sys.stderr)
                return 2
            # An approval is answered once: going on gives no answer, the store has it.
            approvals = {} if answer is None else {approval_id: answer}
            try:
                report = await coordinator.resume(str(known.value), approvals=approvals)
            except UsageError as exc:
                print(f"{COMMAND}: {exc}", file=sys.stderr)
                return 2
        for pending in report.pending_approvals:
            await store.put(INDEX_RUN, "approvals", pending.id, report.run_id)
    show(report)
    return 0


def _answer(args: argparse.Namespace) -> tuple[str, Approval | None]:
    if args.go_on is not None:
        return args.go_on, None
    if args.approve is not None:
        return args.approve, Approve()
    approval_id, reason = args.reject
    return approval_id, Reject(reason)


def show(report: Report) -> None:
    print(f"run {report.run_id}")
    for entry in report.coverage:
        print(
            f"  {entry.topic}: {entry.status.value}" + (f" ({entry.reason})" * bool(entry.reason))
        )
    for finding in report.findings:
        if isinstance(finding.content, str):  # the refunds made (lookups are dicts)
            print(f"  {finding.content}")
    for pending in report.pending_approvals:
        arguments = ", ".join(f"{k}={v!r}" for k, v in (pending.arguments or {}).items())
        print(f"pending approval {pending.id}: {pending.tool}({arguments})")
        print(f"  why: {pending.reason} (policy {pending.policy})")
        print(f"  approve: {COMMAND} --approve {pending.id}")
        print(f'  reject:  {COMMAND} --reject {pending.id} "reason"')


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
