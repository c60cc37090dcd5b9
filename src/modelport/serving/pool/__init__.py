"""A pool of model workers behind the gateways: workers announce themselves in Redis
under expiring leases (``registry``), the gateways place each deployed version on some
of them (``choose``, ``placements``, ``placement``), workers load what is placed on them
(``agent``), and a gateway calls a ready replica over the Open Inference Protocol on
gRPC (``backend``, ``replicas``). See docs/workers.md."""
