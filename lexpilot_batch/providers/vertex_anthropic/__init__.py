"""Claude on Vertex AI: batch prediction jobs of Anthropic's publisher models over Cloud Storage, and `rawPredict`."""
