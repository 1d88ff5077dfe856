"""Training: the step model (compute, time, memory, layout search) and ``train --explain``'s working."""
