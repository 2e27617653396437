"""Drop-in replacements for other transfer libraries' Python APIs, on rdmad.

``rdmad.compat.mooncake.TransferEngine``: Mooncake Transfer Engine's
``mooncake.engine.TransferEngine``, as vLLM's Mooncake connector, SGLang and
LMCache call it.
"""
