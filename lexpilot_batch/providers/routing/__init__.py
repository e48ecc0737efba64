"""Where a request goes: the endpoint and key of a (role, model) (`endpoints`), its route — backend,
endpoint and limits, from its provider's declaration and the command's options (`routes`) — and
whether a wave's group of it may travel on its provider's flex tier (`flex`).
"""
