"""Helpers with no knowledge of the benchmark or of providers: files written whole, terminal text,
bundled resources, redaction of secrets, the CSV writer.
"""
