"""GGUF models on llama.cpp: kernels for the batching engine (``kernels``), the file's
tokenizer and chat template (``vocab``), JSON grammars (``grammar``) and the prefix
cache's bookkeeping (``prefix``)."""
