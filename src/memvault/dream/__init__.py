"""Consolidation on a branch ("dreaming"): run it, review it, merge or discard it."""
