"""Watching a job: ``ddpctl status`` and the ``ps`` progress column (:mod:`.status`, :mod:`.sources`) and
``ddpctl plot`` (:mod:`.plot`), from the job's output as :mod:`ddpctl.joboutput` reads it (its records, its kept
output); this package only reads.

The records are the JSON lines of ``ddp_train/progress.schema.json`` (ddpctl never imports ddp_train: they meet
only in the text, as the summary line does). Nothing here imports torch or docker at import time.
"""
