"""Gemini's API shape: Batch Mode and generateContent (the `google-genai` SDK, an optional extra)."""
