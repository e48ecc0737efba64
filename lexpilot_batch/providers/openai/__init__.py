"""OpenAI's API shape: Files + Batches and Chat Completions, for OpenAI and every provider that
copies them (Azure, DashScope, vLLM, `openai-api/<service>/`).
"""
