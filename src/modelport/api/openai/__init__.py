"""The OpenAI-compatible surface (``/v1``): chat, completions, embeddings and the model
list, for the official ``openai`` SDK and any client of that API (see
``docs/openai.md``). It parses, calls ``InferenceService``, and encodes."""
