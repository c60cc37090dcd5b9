"""Step 5, moderate: where the caller's tenant has a moderation policy for synchronous
calls (``inference.moderation``), its input is checked before anything is held
(``content_blocked``): a tensor call's texts (its BYTES tensors), a stream's prompt. A
stream's output check is made here too and runs on each chunk; a unary call's output is
checked by ``answer``, once it was billed as answered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from modelport.inference.call import Call, Mode
from modelport.inference.moderation import prompt_texts, texts_of
from modelport.moderation.types import Policy, Stage

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def moderate(env: Env, call: Call) -> None:
    moderation = env.moderation
    if moderation is None or not call.moderated:
        return
    policy = call.policy = await moderation.policy(call.caller)
    if policy is None:
        return
    ref = call.ref
    assert ref is not None
    if call.mode is Mode.STREAM:
        assert call.generate is not None
        texts = prompt_texts(call.generate)
        await moderation.check(policy, call.caller, Stage.INPUT, texts, ref.model, ref.version)
        call.check = moderation.stream_check(policy, call.caller, ref.model, ref.version)
        return
    assert call.request is not None
    await tensors(env, call, policy, Stage.INPUT, call.request.inputs, ref.model, ref.version)


async def tensors(
    env: Env,
    call: Call,
    policy: Policy,
    stage: Stage,
    arrays: Mapping[str, np.ndarray],
    model: str,
    version: str,
) -> None:
    """Moderate a tensor call's texts (its BYTES tensors) at ``stage``."""
    assert env.moderation is not None
    await env.moderation.check(policy, call.caller, stage, texts_of(arrays), model, version)
