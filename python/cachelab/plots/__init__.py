"""Plots of measured and simulated latency distributions."""
