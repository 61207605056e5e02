"""A support desk where a refund over the limit waits for a person's approval.

python -m examples.support_desk                         # prints the pending approval
python -m examples.support_desk --approve ID            # resumes the run: refund made
python -m examples.support_desk --reject ID "reason"    # resumes the run: a gap
python -m examples.support_desk --go-on ID              # after an interrupted answer
"""
