"""Destroying data for good: redact (crypto-shredding versions), retention (versions past
the retention period), expiry (files nobody used), destroy (a whole store)."""
