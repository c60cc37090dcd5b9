"""Generative engines: continuous batching of ``transformers`` causal LMs.

``engine.TorchGenerativeEngine`` (the ``GenerativeEngine`` contract) is built from
``scheduler`` (which sequences run each step, pure Python), ``kv`` (KV bytes per token,
the budget ledger), ``runner`` (the model's prefill and decode steps over a pool of KV
slots), ``sampling``, ``stops`` and ``metrics``. See docs/engine.md.
"""
