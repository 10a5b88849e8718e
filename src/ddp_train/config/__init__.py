"""The run's configuration: the command-line flags, the workload's defaults and the decisions made from them (step plan)."""
