"""The input: data sets, which samples each rank takes, where a run stands in its data, the batching pipelines."""
