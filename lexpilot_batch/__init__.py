"""lexpilot-batch: the LexPilot legal-consultation benchmark, run through provider Batch APIs."""

__version__ = "0.1.0"
