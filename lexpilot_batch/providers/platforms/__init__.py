"""The OpenAI-compatible platforms: one file each, holding its `PROVIDER` (`providers.spec.Provider`
over the `openai` API shape) and, where it keeps a dialect of its own, its rules
(`openai.platforms.Platform`). The registry finds every module here (`providers.registry`): adding a
platform is adding its file (docs/adding-a-provider.md).
"""
