"""Vertex AI batch prediction (`batchPredictionJobs`) of Gemini models, over Cloud Storage."""
