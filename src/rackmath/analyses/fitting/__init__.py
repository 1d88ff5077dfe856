"""Fitting: predictions vs the validation records, calibration, the staged stack fit, the training fit, the
measured evidence beside a prediction, and ``rackmath measure``'s math."""
