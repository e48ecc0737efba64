"""What several test modules share: builders, fakes, drivers and independent re-computations (none of them a test)."""
