"""What the generation benches share: the chat questions they ask and a burst's record."""

from __future__ import annotations

from dataclasses import dataclass

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in one sentence.",
    "List three prime numbers.",
    "What does a CPU do?",
    "Give me a tip for learning a new language.",
    "Why is the sky blue?",
    "Name a famous painting and its painter.",
]


@dataclass
class Run:
    """Generated tokens, the seconds they took, each stream's time to first token and the
    CPU time spent (steadier than the wall clock on a shared machine)."""

    tokens: int
    seconds: float
    ttft: list[float]
    cpu_seconds: float = 0.0

    @property
    def cpu_ms_per_token(self) -> float:
        return self.cpu_seconds * 1000 / max(1, self.tokens)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    def ttft_pct(self, q: float) -> float:
        ordered = sorted(self.ttft) or [float("nan")]
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
