"""The wave engine: where protocols (what to ask) meet providers (how to send it).

Compiling every due request into a wave's files, sending them, polling, recovering lost creates,
ingesting results, budgets, the tail policy, making failed threads due again, and the session that
wires a command's workspace to its providers. `loop` holds the commands' entry points.
"""
