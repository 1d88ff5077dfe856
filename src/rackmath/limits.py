"""The two limits ``errors.check_positive`` needs, below ``errors`` and ``bounds`` so neither imports the other's
importer (no import cycle). ``rackmath.bounds`` re-exports them: read every limit there (docs/architecture.md)."""

MIN_MAGNITUDE = 1e-12
"""Smallest non-zero magnitude of any user number: denormals such as 1e-320 are typos that divide to inf."""

QUANTITY_MAX = {
    "bytes": 1e21,          # a zettabyte
    "bandwidth": 1e18,      # an exabyte per second, per chip
    "flops": 1e21,          # a zettaFLOP/s, per chip
    "usd_per_hour": 1e7,    # $ per chip-hour
    "count": 1e30,          # tokens, params, FLOPs of a training run, batch, context …
    "duration": 1e12,       # seconds (~30,000 years)
}
"""Largest value of each parsed quantity kind (units.parse_*); the smallest non-zero is :data:`MIN_MAGNITUDE`."""
