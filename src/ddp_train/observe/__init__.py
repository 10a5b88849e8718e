"""What a run reports: interval logs, metrics, progress records, the summary line, TensorBoard, the profiler."""
