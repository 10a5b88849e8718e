"""The Python API: what ``import ddpctl`` offers (``ddpctl.up``, ``ddpctl.render``, ``ddpctl.run``, ...).

The command line (:mod:`ddpctl.cli`) is built on these functions: it parses flags into their arguments and prints
what they return. The top-level package re-exports the public names lazily, so ``import ddpctl`` imports none of
these modules until a name is used. The parts:

- :mod:`.spec_input`   keyword arguments (the job spec's keys), a spec mapping or a file -> one :class:`JobSpec`;
- :mod:`.manifests`    ``render`` (the text ``ddpctl render`` prints) and ``validate``;
- :mod:`.jobs`         ``up``, :class:`Job` (status, logs, wait, down), ``job`` and ``jobs``;
- :mod:`.job_start`    ``ddpctl up``'s steps: prepare, start, an attached run (``up`` and the CLI share them);
- :mod:`.job_output`   a job's status dict, log lines and removal (what ``Job`` and the CLI share);
- :mod:`.job_outcome`  how a job ended (:class:`Outcome`, the CLI's exit code), waiting for its nodes;
- :mod:`.job_status`   the typed form of ``ddpctl status --json``;
- :mod:`.function_run` ``run``: a Python function on every rank of a job, its return values back;
- :mod:`.remote_call`  the program ``run`` starts on every rank (standard library and cloudpickle only);
- :mod:`.benchmark`    ``bench``: ``ddpctl bench`` and its :class:`Report`.
"""
