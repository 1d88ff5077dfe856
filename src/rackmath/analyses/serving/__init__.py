"""Serving: the steady-state model (``serve``), its step table, the discrete-event simulator, the planner and the
launch commands."""
