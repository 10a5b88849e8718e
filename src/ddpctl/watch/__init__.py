"""Watching a job: progress records read back from its output (:mod:`.records`), ``ddpctl status`` and the
``ps`` progress column (:mod:`.status`, :mod:`.sources`), the live line of an attached ``up`` (:mod:`.live`),
the output kept after a job ends (:mod:`.history`) and ``ddpctl plot`` (:mod:`.plot`).

The records are the JSON lines of ``ddp_train/progress.schema.json`` (ddpctl never imports ddp_train: they meet
only in the text, as the summary line does). Nothing here imports torch or docker at import time.
"""
