"""Dynamic batching: pure merge/split (``requests``), the queue policy (``queue``) and
the asyncio loop that drives them (``batcher``)."""

from modelport.runtime.batching.batcher import Batcher
from modelport.runtime.batching.queue import PendingRequest, RequestQueue, RequestState

__all__ = ["Batcher", "PendingRequest", "RequestQueue", "RequestState"]
