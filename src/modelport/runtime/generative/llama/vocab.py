"""A GGUF file's own tokenizer and chat template, through llama.cpp.

``LlamaVocab`` tokenizes and detokenizes with the model's vocabulary (the engine's
incremental detokenizer calls ``decode`` as it does a ``transformers`` tokenizer's),
and renders chats with the template the file carries (``tokenizer.chat_template``) in
a sandboxed Jinja environment: a publisher's template cannot reach the process.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from modelport.errors import InvalidInput
from modelport.runtime.types import GenerationRequest


class LlamaVocab:
    def __init__(self, llama_cpp: Any, model: Any) -> None:
        self._lib = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.bos_text = self._special_text(llama_cpp.llama_vocab_bos(self._vocab))
        self.eos_text = self._special_text(llama_cpp.llama_vocab_eos(self._vocab))
        self.chat_template = _meta(llama_cpp, model, "tokenizer.chat_template")
        self._formatter: Any = None
        self._eog = [
            bool(llama_cpp.llama_vocab_is_eog(self._vocab, t)) for t in range(self.n_vocab)
        ]

    def is_end(self, token: int) -> bool:
        return 0 <= token < self.n_vocab and self._eog[token]

    # -- text <-> tokens -----------------------------------------------------------
    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        size = len(data) + 8
        while True:
            out = (self._lib.llama_token * size)()
            n = self._lib.llama_tokenize(
                self._vocab, data, len(data), out, size, add_special, parse_special
            )
            if n >= 0:
                return list(out[:n])
            size = -n

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of ``ids``; special tokens (end of turn, ...) render as nothing."""
        if not ids:
            return ""
        tokens = (self._lib.llama_token * len(ids))(*ids)
        size = 8 * len(ids) + 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_detokenize(
                self._vocab, tokens, len(ids), buf, size, False, not skip_special_tokens
            )
            if n >= 0:
                return buf.raw[:n].decode("utf-8", "replace")
            size = -n

    def _special_text(self, token: int) -> str:
        if token < 0:
            return ""
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self._vocab, token, buf, 64, 0, True)
        return buf.raw[: max(n, 0)].decode("utf-8", "replace")

    # -- prompts -------------------------------------------------------------------
    def encode(self, request: GenerationRequest) -> list[int]:
        """A chat rendered with the file's template and tokenized with its special
        tokens parsed; a prompt with the model's own leading special tokens."""
        if request.messages is None:
            return self.tokenize(request.prompt, add_special=True, parse_special=True)
        text = self.render(request)
        # A template that writes the BOS token itself must not get a second one.
        add = self.add_bos and not (self.bos_text and text.startswith(self.bos_text))
        return self.tokenize(text, add_special=add, parse_special=True)

    def render(self, request: GenerationRequest) -> str:
        if not self.chat_template:
            raise InvalidInput("this model has no chat template", code="no_chat_template")
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            self._formatter = Jinja2ChatFormatter(
                self.chat_template, eos_token=self.eos_text, bos_token=self.bos_text
            )
        messages = [m.as_template() for m in request.messages or ()]
        try:
            return str(self._formatter(messages=messages).prompt)
        except Exception as exc:  # a template error is the package's, told to the caller
            raise InvalidInput(
                f"the model's chat template failed on this chat: {exc}", code="chat_template_error"
            ) from None


def _meta(llama_cpp: Any, model: Any, key: str) -> str | None:
    size = 1 << 16
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, size)
        if n < 0:
            return None
        if n < size:
            return buf.value.decode("utf-8", "replace")
        size = n + 1
