"""The inference pipeline's steps, one module each, in the order ``inference.pipeline``
runs them: resolve, authorize, read, admit, moderate, reserve, dispatch, record, settle,
release, answer. Every step is ``async def step(env, call) -> None``: it reads what
the steps before it left on the ``Call`` and writes its own part."""
