"""The ``transformers`` format: Hugging Face causal LMs and sentence encoders.

Two plugins serve it: ``TransformersGenerativeFormat`` (``generative``: chat and
completions through the continuous-batching engine) and ``TransformersEmbeddingFormat``
(``embedding``: encoders as tensor models, input ``text``, outputs ``embedding`` and
``tokens``). Both need the ``modelport[llm]`` extra (torch, transformers); this
package imports neither until a model is loaded, so the base install stays light.

What a package may hold, and what is refused before transformers reads a byte, is
in ``package``; loading (never package code, local files only) in ``loading``.
"""
