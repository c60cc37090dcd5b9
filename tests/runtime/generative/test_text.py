"""Stop strings held back until they are told apart, incremental detokenization, and
sampling parameters."""

from __future__ import annotations

import pytest
import torch

from modelport.errors import InvalidInput
from modelport.runtime.generative.sampling import SamplingParams, parse_sampling
from modelport.runtime.generative.stops import IncrementalDetokenizer, StopText, eos_token_ids
from modelport.runtime.generative.torch_sampling import make_generator, sample


def test_text_that_may_begin_a_stop_is_held_back() -> None:
    t = StopText(("END",))
    assert t.add("abc E") == "abc "
    assert t.add("N") == ""
    assert t.add("x") == "ENx"  # it was not the stop after all
    assert t.add("yE") == "y"
    assert t.add("ND and more") == ""
    assert t.stopped and t.text.startswith("abc ENxyEND")
    assert t.add("later") == "" and t.flush() == ""


def test_stop_inside_one_delta_and_the_earliest_of_several() -> None:
    t = StopText(("\n\n", "stop", "op"))
    assert t.add("one two stop three") == "one two "  # "stop" begins before "op"
    assert t.stopped
    assert StopText(("stop", "op")).add("a top") == "a t"
    held = StopText(("xyz",))
    assert held.add("abcxy") == "abc"
    assert held.flush() == "xy"  # the sequence ended: the held text was no stop


def test_no_stops_sends_everything() -> None:
    t = StopText()
    assert t.add("a") == "a" and t.add("b") == "b" and t.flush() == ""


def test_incremental_detokenizer_matches_a_full_decode(tokenizer) -> None:
    text = "Hello world! Numbers 0123 \u00e9\u00e8 \u2603 and a fox."
    ids = tokenizer(text)["input_ids"]
    detok = IncrementalDetokenizer(tokenizer, [])
    pieces = [detok.push(i) for i in ids]
    assert "".join(pieces) + detok.flush() == tokenizer.decode(ids, skip_special_tokens=True)
    assert "\ufffd" not in "".join(pieces)


def test_eos_ids_from_tokenizer_and_generation_config(tokenizer) -> None:
    class Config:
        eos_token_id = [7, 9]

    assert eos_token_ids(tokenizer, Config()) == {7, 9, tokenizer.eos_token_id}
    assert eos_token_ids(tokenizer) == {tokenizer.eos_token_id}


@pytest.mark.parametrize(
    "parameters",
    [
        {"temperature": -0.1},
        {"temperature": "hot"},
        {"temperature": float("nan")},
        {"top_p": 1.5},
        {"top_k": -1},
        {"top_k": 2.5},
        {"seed": 1.5},
        {"seed": True},
        {"logprobs": "yes"},
        {"stop": ""},
        {"stop": ["a"] * 9},
        {"stop": {"a": 1}},
    ],
)
def test_bad_parameters_are_refused(parameters: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_sampling(parameters)
    assert exc.value.code == "invalid_parameter"


def test_parameters_parsed() -> None:
    p = parse_sampling({"temperature": 0, "stop": "x", "seed": 3, "top_k": 5, "logprobs": True})
    assert p == SamplingParams(0.0, 1.0, 5, 3, True, ("x",)) and p.greedy
    assert parse_sampling({}) == SamplingParams()


def test_top_k_one_and_tiny_top_p_are_greedy() -> None:
    logits = torch.randn(3, 50, generator=make_generator(0))
    best = logits.argmax(-1).tolist()
    for params in (SamplingParams(temperature=1.0, top_k=1), SamplingParams(top_p=1e-6)):
        tokens, _ = sample(logits, [params] * 3, [make_generator(i) for i in range(3)])
        assert tokens == best


def test_a_rows_draws_depend_on_its_seed_alone() -> None:
    logits = torch.zeros(2, 1000)
    params = [SamplingParams(temperature=1.0)] * 2
    a, _ = sample(logits, params, [make_generator(5), make_generator(6)])
    b, _ = sample(logits[:1], params[:1], [make_generator(5)])
    assert a[0] == b[0]
    c, _ = sample(logits[1:], params[:1], [make_generator(6)])
    assert a[1] == c[0]
